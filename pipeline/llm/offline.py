"""The offline LLM provider (design §8): deterministic rules, no key, no network.

It reads the structured ``inputs`` a prompt builder put on the request (never the prose) and
answers through the same schema validation as a real model. Where its output shows:

- every response says ``provider="offline"`` and ``model="offline-rules-v1"``, which the run
  records for each stage, beside estimated token usage (characters / 4);
- every consolidated blob it writes ends with a ``[SOURCE]`` section, "Formed by the offline
  rules provider (offline-rules-v1), not by a language model.", so whoever reads the memory
  context sees that no model wrote it;
- fact and reflection texts are left as plain statements (a marker inside them would pollute
  search and exact-duplicate hashes); their run records the provider.

The rules, one module per operation, live in ``pipeline.llm.offline_rules``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from pipeline.errors import InvalidLLMAnswer, PermanentError
from pipeline.llm.answers import estimate_usage_tokens
from pipeline.llm.offline_rules import consolidation, dedup, facts, reflections
from pipeline.llm.port import LLM, LLMRequest, LLMResponse
from schemas.settings import Settings

T = TypeVar("T", bound=BaseModel)

PROVIDER = "offline"
MODEL = "offline-rules-v1"


class OfflineLLM(LLM):
    """Answers the four formation operations by rule. Thread-safe: it holds no state."""

    provider = PROVIDER

    def __init__(self, settings: Settings | None = None) -> None:
        self._settings = settings or Settings()
        self._rules: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "extract_facts": lambda i: facts.extract(i, word_limit=self._settings.fact_word_limit),
            "decide_facts": dedup.decide,
            "extract_reflections": lambda i: reflections.extract(i, word_limit=self._settings.reflection_word_limit),
            "consolidate": consolidation.consolidate,
        }

    def complete(self, request: LLMRequest[T]) -> LLMResponse[T]:
        rule = self._rules.get(request.operation)
        if rule is None:
            raise PermanentError(
                f"the offline provider has no rule for operation {request.operation!r} "
                f"(it knows {', '.join(sorted(self._rules))})"
            )
        try:
            answer = rule(dict(request.inputs))
        except (KeyError, TypeError, ValueError) as exc:
            raise PermanentError(
                f"offline {request.operation}: the request's inputs are not what its prompt builder "
                f"writes ({type(exc).__name__}: {exc})"
            ) from exc
        raw = json.dumps(answer, ensure_ascii=False, sort_keys=True)
        try:
            parsed = request.response_model.model_validate_json(raw)
        except ValidationError as exc:  # a rule bug must surface, never read as "nothing"
            raise InvalidLLMAnswer(
                f"offline {request.operation} produced an answer outside {request.response_model.__name__}: {exc}"
            ) from exc
        return LLMResponse(
            parsed=parsed,
            model=MODEL,
            provider=PROVIDER,
            input_tokens=estimate_usage_tokens(request.system) + estimate_usage_tokens(request.prompt),
            output_tokens=estimate_usage_tokens(raw),
            raw=raw,
        )
