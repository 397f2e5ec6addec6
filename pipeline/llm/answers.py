"""The one path from a provider's raw text to a validated answer model.

Every adapter (OpenAI, Gemini, scripted) ends here, so an answer that does not parse or
does not match its schema always surfaces as ``InvalidLLMAnswer`` and is asked again; it is
never read as "nothing extracted".
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError

from pipeline.errors import InvalidLLMAnswer

T = TypeVar("T", bound=BaseModel)

_EXCERPT = 200


def parse_answer(raw: str | None, response_model: type[T], *, provider: str, model: str) -> T:
    """Validate ``raw`` JSON against ``response_model``; raise ``InvalidLLMAnswer`` saying where.

    The answer itself stays out of the error's message: it holds conversation text, and the
    message reaches logs above DEBUG (Celery logs each retry's reason at INFO). Its beginning
    is kept on the error as ``excerpt`` for whoever debugs it deliberately."""
    if raw is None or not raw.strip():
        raise InvalidLLMAnswer(f"{provider} model {model} returned an empty answer for {response_model.__name__}")
    try:
        return response_model.model_validate_json(_strip_fence(raw))
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


def _strip_fence(raw: str) -> str:
    # Some OpenAI-compatible servers wrap JSON in a Markdown fence even in JSON mode.
    text = raw.strip()
    if text.startswith("```") and text.endswith("```"):
        text = text[3:-3]
        if text.lower().startswith("json"):
            text = text[4:]
    return text


def describe_validation_error(exc: ValidationError) -> str:
    """The first few schema errors, as 'field: message' parts."""
    errors = exc.errors()
    parts = [f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in errors[:3]]
    more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
    return "; ".join(parts) + more
