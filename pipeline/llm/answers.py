"""The one path from a provider's raw text to a validated answer model.

Every adapter (OpenAI, Gemini, scripted) ends here, so an answer that does not parse or
does not match its schema always surfaces as ``InvalidLLMAnswer`` and is asked again; it is
never read as "nothing extracted".
"""

from __future__ import annotations

import json
import re
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from pipeline.errors import InvalidLLMAnswer
from pipeline.llm.port import LLMRequest, LLMResponse

T = TypeVar("T", bound=BaseModel)

_EXCERPT = 200
# Reasoning models put their thinking inline before the answer. Served without a reasoning
# parser (DeepSeek-R1 distills, Qwen3 thinking models on vLLM, llama.cpp or Ollama), the opening
# tag is often part of the chat template, so only the closing one reaches us:
# "...reasoning...</think>{answer}". Everything up to the last closing tag is reasoning, paired
# or not; JSON inside it (a draft answer) is never the answer.
_CLOSING_REASONING = re.compile(r"</(?:think|thinking|reasoning)\s*>", re.IGNORECASE)
# a reasoning block that never closed (the answer was cut off while thinking): no answer at all
_UNCLOSED_REASONING = re.compile(r"^\s*<(think|thinking|reasoning)\s*>.*", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()


def parse_answer(raw: str | None, response_model: type[T], *, provider: str, model: str) -> T:
    """The answer in ``raw`` as ``response_model``; ``InvalidLLMAnswer`` saying where it failed.

    Text up to the last closing reasoning tag is dropped; of the JSON objects left (the whole
    text, fenced blocks, objects cut from prose), the last one that validates is the answer.

    The answer itself stays out of the error's message: it holds conversation text, and the
    message reaches logs above DEBUG (Celery logs each retry's reason at INFO). Its beginning
    is kept on the error as ``excerpt`` for whoever debugs it deliberately."""
    if raw is None or not raw.strip():
        raise InvalidLLMAnswer(f"{provider} model {model} returned an empty answer for {response_model.__name__}")
    text = answer_text(raw)
    if not text:
        raise InvalidLLMAnswer(f"{provider} model {model} gave only reasoning, no answer, for "
                               f"{response_model.__name__} ({len(raw)} characters)")
    failure: ValidationError | None = None
    for candidate in reversed(json_candidates(text)):
        try:
            return response_model.model_validate_json(candidate)
        except ValidationError as exc:
            failure = failure or exc   # the last candidate's reason is the one reported
    if failure is None:                # no JSON at all: validating the text says so
        try:
            return response_model.model_validate_json(text)
        except ValidationError as exc:
            failure = exc
    error = InvalidLLMAnswer(
        f"{provider} model {model} answered outside the {response_model.__name__} schema: "
        f"{describe_validation_error(failure)} ({len(raw)} characters)"
    )
    error.excerpt = raw[:_EXCERPT]
    raise error from failure


def estimate_usage_tokens(text: str) -> int:
    """The tokens a usage record carries for ``text`` when the provider reports none: about 4
    characters a token, rounded up to a whole token as providers count them.

    Not ``pipeline.trigger.estimate_tokens`` (characters / 4.5, fractional): that one paces
    formation and budgets the context (design §4, §6); this one only fills usage and cost records,
    whose recorded figures must not move when the trigger's pacing is tuned."""
    return (len(text) + 3) // 4


def answered(request: LLMRequest[T], raw: str, *, provider: str, mode: str, snapshot: str | None,
             usage: tuple[int, int] | None) -> LLMResponse[T]:
    """The response of a network provider: ``raw`` parsed against the request's schema (or
    ``InvalidLLMAnswer``), with the provider's (input, output) token ``usage``. Some compatible
    servers report none: the tokens are then estimated rather than recorded as zero."""
    parsed = parse_answer(raw, request.response_model, provider=provider, model=request.model)
    if usage is None:
        usage = estimate_usage_tokens(request.system + request.prompt), estimate_usage_tokens(raw)
    return LLMResponse(
        parsed=parsed, model=request.model, provider=provider,
        input_tokens=usage[0], output_tokens=usage[1], raw=raw, structured_output=mode,
        snapshot=snapshot or "",
    )


def answer_text(raw: str) -> str:
    """``raw`` after its last closing reasoning tag (``</think>``, ``</thinking>``,
    ``</reasoning>``, paired or not), or "" when a reasoning block opened and never closed."""
    closings = list(_CLOSING_REASONING.finditer(raw))
    text = raw[closings[-1].end():] if closings else _UNCLOSED_REASONING.sub("", raw)
    return text.strip()


def json_candidates(text: str) -> list[str]:
    """The JSON objects in ``text``, in order: the whole text when it is one, else each
    Markdown-fenced block that parses, else each top-level object cut from the prose (an
    object nested in another is part of it, never a candidate of its own; every answer model
    is an object, so a "[1]" in the prose is never one)."""
    if _parses(text):
        return [text]
    fenced = [inner for match in _FENCE.finditer(text) if _parses(inner := match.group(1).strip())]
    if fenced:
        return fenced
    found: list[str] = []
    start = text.find("{")
    while start != -1:
        try:
            _, end = _DECODER.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        found.append(text[start:end])
        start = text.find("{", end)
    return found


def _parses(text: str) -> bool:
    if not text or text[0] not in "{[":
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def describe_validation_error(exc: ValidationError) -> str:
    """The first few schema errors, as 'field: message' parts."""
    errors = exc.errors()
    parts = [f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in errors[:3]]
    more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
    return "; ".join(parts) + more
