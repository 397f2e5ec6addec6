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

T = TypeVar("T", bound=BaseModel)

_EXCERPT = 200
# reasoning models served through OpenAI-compatible servers (DeepSeek-R1, Qwen3 on Ollama or
# vLLM without a reasoning parser) put their thinking inline before the answer
_THINK = re.compile(r"<(think|thinking)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_UNCLOSED_THINK = re.compile(r"^\s*<(think|thinking)>.*", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()


def parse_answer(raw: str | None, response_model: type[T], *, provider: str, model: str) -> T:
    """Validate ``raw`` JSON against ``response_model``; raise ``InvalidLLMAnswer`` saying where.

    The answer itself stays out of the error's message: it holds conversation text, and the
    message reaches logs above DEBUG (Celery logs each retry's reason at INFO). Its beginning
    is kept on the error as ``excerpt`` for whoever debugs it deliberately."""
    if raw is None or not raw.strip():
        raise InvalidLLMAnswer(f"{provider} model {model} returned an empty answer for {response_model.__name__}")
    try:
        return response_model.model_validate_json(extract_json(raw))
    except ValidationError as exc:
        error = InvalidLLMAnswer(
            f"{provider} model {model} answered outside the {response_model.__name__} schema: "
            f"{describe_validation_error(exc)} ({len(raw)} characters)"
        )
        error.excerpt = raw[:_EXCERPT]
        raise error from exc


def estimate_tokens(text: str) -> int:
    """A rough token count (about 4 characters a token) for providers that report none."""
    return (len(text) + 3) // 4


def extract_json(raw: str) -> str:
    """The JSON value inside a model's text: without ``<think>`` blocks, out of a Markdown
    fence, or cut from the prose around it. Text holding no JSON comes back as it is (and then
    fails validation with a clear message)."""
    text = _UNCLOSED_THINK.sub("", _THINK.sub("", raw)).strip()
    if _parses(text):
        return text
    for match in _FENCE.finditer(text):
        inner = match.group(1).strip()
        if _parses(inner):
            return inner
    # prose around the JSON: the first '{' from which a whole JSON object decodes (every
    # answer model is an object, so a "[1]" in the prose is never taken for the answer)
    for start, char in enumerate(text):
        if char == "{":
            try:
                _, end = _DECODER.raw_decode(text, start)
            except ValueError:
                continue
            return text[start:end]
    return text


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
