"""False positives of the secret screen: how many ordinary facts and sentences it would drop.

    python -m bench.screening --data ../shared/data/locomo/dev.json --json

The screen (``pipeline.formation.secrets.SecretGuard``, the built-in kinds, no operator
patterns) reads three sets that hold no secret, so every text it flags is a fact memory
would lose:

- ``locomo_observations``: LoCoMo's ``observation`` items, one fact each: the fact set of
  ``bench.locomo_formation`` (observation replay) and ``bench.small_store``;
- ``locomo_turns``: every dialogue turn of the same conversations, as people said them;
- ``locomo_summaries``: every sentence of their session summaries (dates, times such as
  "1:56 pm", places, people);
- ``demo_messages``: every message of the demo conversation (``ops/demo_data``); its one
  email address is contact data, not a secret.

Reported per set: texts, texts flagged, flagged by kind, and up to 10 flagged texts (to read
why). The last line printed is one JSON object, with the load average and the seconds taken.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from bench.locomo_retrieval import data_arguments, read_conversations
from bench.output import print_result
from pipeline.formation.secrets import SecretGuard

DEMO = Path(__file__).resolve().parent.parent / "ops" / "demo_data" / "launch_planning.jsonl"
SHOWN = 10


def observations(conversations: list[dict]) -> Iterator[str]:
    for sample in conversations:
        for items in (sample.get("observation") or {}).values():
            for speaker_items in (items or {}).values():
                for item in speaker_items or []:
                    text = item[0] if isinstance(item, list) else item
                    if isinstance(text, str) and text.strip():
                        yield text


def turns(conversations: list[dict]) -> Iterator[str]:
    for sample in conversations:
        conversation = sample.get("conversation") or {}
        for key, session in conversation.items():
            if key.startswith("session_") and isinstance(session, list):
                yield from (t["text"] for t in session if isinstance(t, dict) and t.get("text"))


def summary_sentences(conversations: list[dict]) -> Iterator[str]:
    for sample in conversations:
        for summary in (sample.get("session_summary") or {}).values():
            if isinstance(summary, str):
                yield from (s.strip() for s in re.split(r"(?<=[.!?])\s+", summary) if s.strip())


def demo_messages() -> Iterator[str]:
    for line in DEMO.read_text().splitlines():
        content = (json.loads(line).get("message") or {}).get("content")
        if content:
            yield content


def screen(texts: Iterable[str], guard: SecretGuard) -> dict:
    texts = list(texts)
    flagged = [(text, kind) for text in texts if (kind := guard.kind(text)) is not None]
    return {"texts": len(texts), "flagged": len(flagged),
            "by_kind": dict(Counter(kind for _, kind in flagged)),
            "examples": [f"{kind}: {text}" for text, kind in flagged[:SHOWN]]}


def main(argv: list[str] | None = None) -> int:
    args = data_arguments(__doc__).parse_args(argv)
    conversations = read_conversations("bench.screening", args.data)
    if conversations is None:
        return 2
    started, guard = time.perf_counter(), SecretGuard()
    sets = {"locomo_observations": screen(observations(conversations), guard),
            "locomo_turns": screen(turns(conversations), guard),
            "locomo_summaries": screen(summary_sentences(conversations), guard),
            "demo_messages": screen(demo_messages(), guard)}
    result = {"bench": "screening", "sets": sets, "flagged_total": sum(s["flagged"] for s in sets.values()),
              "seconds": round(time.perf_counter() - started, 2), "load": os.getloadavg()[0]}

    def lines():
        for name, s in sets.items():
            yield f"{name}: {s['flagged']} of {s['texts']} flagged {s['by_kind']}"
            yield from (f"  {example}" for example in s["examples"])

    return print_result(result, lines(), json_only=args.json)


if __name__ == "__main__":
    sys.exit(main())
