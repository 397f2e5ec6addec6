"""What the model calls cost, in US dollars (design §11 "Observability and cost").

Every call is counted per model (``runner.Usage.by_model``) and priced when its stage is
recorded, from the price table of the settings (``Settings.price_table``: USD per million
input and output tokens). A model answered in process (the offline rules, the local and
hashing embedders) costs nothing and says so, ``offline``; a model missing from the table is
``unpriced``: its tokens are kept and its cost is unknown, never 0.

Sums (a run's totals, ``memoryctl cost``) add the priced dollars and list the unpriced models
beside them, so a partial sum is never shown as a whole one.

Rows are keyed by the model that was asked for, the name the price table knows. The version
the provider reports (OpenAI's dated snapshot ``gpt-6-luna-2026-09-22``, Gemini's
``modelVersion``) is kept beside it in the row's ``snapshots``; it never decides the price.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: providers that answer in process: no bill
OFFLINE_PROVIDERS = frozenset({"offline", "local", "hashing"})

PRICED, OFFLINE, UNPRICED = "priced", "offline", "unpriced"


def price_call(
    model: str, provider: str, input_tokens: int, output_tokens: int, prices: Mapping[str, Mapping[str, float]],
) -> tuple[float | None, str]:
    """(USD, status) of ``input_tokens`` and ``output_tokens`` of ``model``; None when unpriced."""
    if provider in OFFLINE_PROVIDERS:
        return 0.0, OFFLINE
    price = prices.get(model)
    if price is None:
        return None, UNPRICED
    usd = (input_tokens * price["input"] + output_tokens * price["output"]) / 1_000_000
    return round(usd, 9), PRICED


def price_models(by_model: Mapping[str, Mapping[str, Any]], prices: Mapping[str, Mapping[str, float]]) -> dict:
    """``by_model`` rows with their ``usd`` and ``price`` (status) added."""
    out = {}
    for model, row in by_model.items():
        usd, status = price_call(model, row["provider"], row["input_tokens"], row["output_tokens"], prices)
        out[model] = {**row, "usd": usd, "price": status}
    return out


def add_rows(into: dict[str, dict], by_model: Mapping[str, Mapping[str, Any]]) -> dict[str, dict]:
    """Add priced per-model rows (as ``price_models`` makes them) into ``into``."""
    for model, row in by_model.items():
        kept = into.setdefault(model, {"kind": row.get("kind", "llm"), "provider": row.get("provider", ""),
                                       "calls": 0, "input_tokens": 0, "output_tokens": 0, "usd": 0.0,
                                       "price": row.get("price", UNPRICED)})
        for key in ("calls", "input_tokens", "output_tokens"):
            kept[key] += row.get(key, 0)
        for snapshot in row.get("snapshots", ()):
            if snapshot not in kept.setdefault("snapshots", []):
                kept["snapshots"].append(snapshot)
        if row.get("usd") is None or kept["usd"] is None:
            kept["usd"], kept["price"] = None, UNPRICED
        else:
            kept["usd"] = round(kept["usd"] + row["usd"], 9)
    return into


def summary(rows: Iterable[Mapping[str, Mapping[str, Any]]]) -> dict:
    """``{"usd", "unpriced", "by_model"}`` of several per-model row sets: ``usd`` sums what is
    priced, ``unpriced`` names the models whose cost is unknown."""
    by_model: dict[str, dict] = {}
    for row_set in rows:
        add_rows(by_model, row_set)
    usd = round(sum(r["usd"] for r in by_model.values() if r["usd"] is not None), 9)
    unpriced = sorted(m for m, r in by_model.items() if r["usd"] is None)
    return {"usd": usd, "unpriced": unpriced, "by_model": by_model}


def describe(total: Mapping[str, Any]) -> str:
    """``$0.001234``, ``$0.0012 + unpriced (gpt-x)`` or ``offline ($0)`` for one summary."""
    rows = total.get("by_model", {})
    if not rows:
        return "$0"
    if all(r.get("price") == OFFLINE for r in rows.values()):
        return "offline ($0)"
    text = f"${total.get('usd', 0):.6f}"
    if total.get("unpriced"):
        text += f" + unpriced ({', '.join(total['unpriced'])})"
    return text


def answered_by(total: Mapping[str, Any]) -> str:
    """``gpt-6-luna as gpt-6-luna-2026-09-22`` for each model of a ``summary`` whose provider
    reported another version than the name asked for; "" when none did."""
    parts = [f"{model} as {', '.join(sorted(row['snapshots']))}"
             for model, row in sorted(total.get("by_model", {}).items()) if row.get("snapshots")]
    return "; ".join(parts)


def tokens_of(total: Mapping[str, Any]) -> dict[str, int]:
    """LLM input and output tokens and embedding tokens of a ``summary``."""
    rows = total.get("by_model", {}).values()
    return {
        "input": sum(r["input_tokens"] for r in rows if r.get("kind") != "embedding"),
        "output": sum(r["output_tokens"] for r in rows if r.get("kind") != "embedding"),
        "embedding": sum(r["input_tokens"] for r in rows if r.get("kind") == "embedding"),
    }


def of_runs(runs: Iterable[Any], records: Iterable[Any] = ()) -> dict:
    """The ``summary`` of every stage of ``runs`` and of usage ``records``."""
    rows = [record.usage.by_model for run in runs for record in run.stages.values()]
    rows += [record.by_model for record in records]
    return summary(rows)
