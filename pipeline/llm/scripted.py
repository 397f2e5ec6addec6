"""A scripted LLM for tests and benchmarks: given inputs map to given outputs, faults on demand.

    llm = ScriptedLLM()
    llm.on("extract_facts", FactsAnswer(facts=[...]))
    llm.on("decide_facts", {"decisions": [...]}, when=lambda inputs: "Berlin" in str(inputs))
    llm.on("consolidate", Fault("rate_limit", retry_after=2.0), times=1)   # first call only
    llm = ScriptedLLM(fault_rates={"transient": 0.3, "invalid": 0.1}, seed=7)  # random faults

Rules are tried in the order given; the first whose operation matches, whose ``when`` accepts
``request.inputs`` and which has uses left answers. An answer is a model instance, a dict, a
raw string, a ``Fault`` or a callable ``(request) -> any of those``. Every answer goes through
the same validation as the real adapters (raw JSON -> ``model_validate_json``), so a raw
string that is not valid JSON or not in the schema raises ``InvalidLLMAnswer``.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from pipeline.errors import PermanentError, RateLimited, TransientError
from pipeline.llm.answers import estimate_usage_tokens, parse_answer
from pipeline.llm.port import DEFAULT_TIMEOUT_S, LLM, LLMRequest, LLMResponse

T = TypeVar("T", bound=BaseModel)

FaultKind = Literal["timeout", "rate_limit", "server_error", "invalid_json", "schema_violation", "permanent"]
_TRANSIENT: tuple[FaultKind, ...] = ("timeout", "rate_limit", "server_error")
_INVALID: tuple[FaultKind, ...] = ("invalid_json", "schema_violation")


@dataclass(frozen=True)
class Fault:
    """A failure the scripted provider produces instead of an answer, as a real one would."""

    kind: FaultKind
    retry_after: float | None = None   # for rate_limit


Answer = BaseModel | Mapping[str, Any] | str | Fault
AnswerSource = Answer | Callable[[LLMRequest], Answer]


class UnscriptedCall(LookupError):
    """No rule answers this call: the test did not script it. Never retried."""


@dataclass
class Rule:
    operation: str
    answer: AnswerSource
    when: Callable[[dict[str, Any]], bool] | None = None
    times: int | None = None           # None: every matching call
    used: int = 0

    def matches(self, request: LLMRequest) -> bool:
        if self.operation not in (request.operation, "*"):
            return False
        if self.times is not None and self.used >= self.times:
            return False
        return self.when is None or bool(self.when(request.inputs))


@dataclass(frozen=True)
class ScriptedCall:
    operation: str
    model: str
    inputs: dict[str, Any]
    fault: FaultKind | None = None


@dataclass
class ScriptedLLM(LLM):
    rules: list[Rule] = field(default_factory=list)
    #: probabilities per fault kind, or "transient" (timeout/429/5xx) and "invalid" (bad JSON/schema)
    fault_rates: Mapping[str, float] = field(default_factory=dict)
    seed: int = 0
    latency_s: float = 0.0
    provider: str = "scripted"
    calls: list[ScriptedCall] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        unknown = set(self.fault_rates) - {*_TRANSIENT, *_INVALID, "permanent", "transient", "invalid"}
        if unknown:
            raise ValueError(f"fault_rates: unknown fault kinds {sorted(unknown)}")
        if sum(self.fault_rates.values()) > 1.0:
            raise ValueError("fault_rates: probabilities add up to more than 1")
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()

    def on(
        self, operation: str, answer: AnswerSource, *,
        when: Callable[[dict[str, Any]], bool] | None = None, times: int | None = None,
    ) -> ScriptedLLM:
        """Add a rule (``operation`` "*" matches every operation); returns self for chaining."""
        with self._lock:
            self.rules.append(Rule(operation, answer, when, times))
        return self

    @property
    def call_count(self) -> int:
        return len(self.calls)

    def count(self, operation: str | None = None) -> int:
        """Calls made, of one operation or of all."""
        return self.call_count if operation is None else self.counts()[operation]

    def counts(self) -> Counter[str]:
        return Counter(c.operation for c in self.calls)

    def complete(self, request: LLMRequest[T]) -> LLMResponse[T]:
        with self._lock:
            fault = self._random_fault()
            answer: AnswerSource | None = Fault(fault) if fault else None
            if answer is None:
                rule = next((r for r in self.rules if r.matches(request)), None)
                if rule is None:
                    self.calls.append(ScriptedCall(request.operation, request.model, dict(request.inputs)))
                    raise UnscriptedCall(f"no scripted answer for {request.operation} with inputs {request.inputs!r}")
                rule.used += 1
                answer = rule.answer
            if callable(answer) and not isinstance(answer, (BaseModel, Fault)):
                answer = answer(request)
            fault_kind = answer.kind if isinstance(answer, Fault) else None
            self.calls.append(ScriptedCall(request.operation, request.model, dict(request.inputs), fault_kind))
        if self.latency_s > 0:
            time.sleep(self.latency_s)
        raw = self._raw(answer, request)
        parsed = parse_answer(raw, request.response_model, provider=self.provider, model=request.model)
        return LLMResponse(
            parsed=parsed, model=request.model, provider=self.provider,
            input_tokens=estimate_usage_tokens(request.system + request.prompt),
            output_tokens=estimate_usage_tokens(raw), raw=raw,
        )

    def _random_fault(self) -> FaultKind | None:
        if not self.fault_rates:
            return None
        draw = self._rng.random()
        for kind, rate in self.fault_rates.items():
            if draw < rate:
                if kind == "transient":
                    return self._rng.choice(_TRANSIENT)
                if kind == "invalid":
                    return self._rng.choice(_INVALID)
                return kind  # type: ignore[return-value]
            draw -= rate
        return None

    def _raw(self, answer: Answer, request: LLMRequest) -> str:
        if isinstance(answer, Fault):
            return _raise_or_raw(answer, request)
        if isinstance(answer, BaseModel):
            return answer.model_dump_json()
        if isinstance(answer, str):
            return answer
        return json.dumps(answer)


def _raise_or_raw(fault: Fault, request: LLMRequest) -> str:
    where = f"scripted {request.operation} ({request.model})"
    if fault.kind == "timeout":
        raise TransientError(f"{where}: request timed out after {DEFAULT_TIMEOUT_S if request.timeout_s is None else request.timeout_s:g}s")
    if fault.kind == "rate_limit":
        raise RateLimited(f"{where}: HTTP 429 rate limited", retry_after=fault.retry_after)
    if fault.kind == "server_error":
        raise TransientError(f"{where}: HTTP 503 service unavailable")
    if fault.kind == "permanent":
        raise PermanentError(f"{where}: HTTP 401 invalid API key")
    if fault.kind == "invalid_json":
        return '{"facts": [ this is not json'
    return '{"unexpected": "an answer outside the schema"}'
