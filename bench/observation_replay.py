"""The observation replay LLM of ``bench.locomo_formation``: a benchmark stand-in, never a
product provider.

It answers ``extract_facts`` with LoCoMo's own ``observation`` items (facts an LLM wrote from
each session, each with the turn it was written from) instead of a model's answer: the
items written from the turns of the claimed messages, as a good extraction model would
answer for those messages. Every other operation (dedup decisions, reflections,
consolidation) goes to the offline rules provider.

The turn ids select the items for a run only; the facts leave here as text and scope, like
any model's answer, and the chain maps each to its source message by provenance
(``pipeline.formation.provenance``), so evidence ids reach nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from pipeline.llm.answers import estimate_usage_tokens
from pipeline.llm.offline import OfflineLLM
from pipeline.llm.port import LLM, LLMRequest, LLMResponse

T = TypeVar("T", bound=BaseModel)

PROVIDER = "observation-replay"
MODEL = "locomo-observations"


class ObservationReplayLLM(LLM):
    """``facts_by_message``: message id -> the observation texts written from that message."""

    provider = PROVIDER

    def __init__(self, facts_by_message: Mapping[str, Sequence[str]], fallback: OfflineLLM | None = None) -> None:
        self._facts = {key: list(texts) for key, texts in facts_by_message.items()}
        self._fallback = fallback or OfflineLLM()

    def complete(self, request: LLMRequest[T]) -> LLMResponse[T]:
        if request.operation != "extract_facts":
            return self._fallback.complete(request)
        scopes = list(request.inputs.get("scopes") or ())
        # a one-to-one chat's facts are about its user; a group chat's are shared (agent)
        scope = "user" if "user" in scopes and not request.inputs.get("group_chat") else "agent"
        facts: list[dict[str, Any]] = []
        if scope in scopes:
            seen: set[str] = set()
            for message in request.inputs.get("messages") or ():
                for text in self._facts.get(message["message_id"], ()):
                    if text not in seen:
                        seen.add(text)
                        facts.append({"text": text, "scope": scope})
        raw = json.dumps({"facts": facts}, ensure_ascii=False)
        return LLMResponse(
            parsed=request.response_model.model_validate_json(raw), model=MODEL, provider=PROVIDER,
            input_tokens=estimate_usage_tokens(request.system) + estimate_usage_tokens(request.prompt), output_tokens=estimate_usage_tokens(raw), raw=raw,
        )
