"""Google Gemini through the ``google-genai`` SDK, with a JSON response schema.

The answer model's JSON Schema goes out as ``response_json_schema`` with
``response_mime_type="application/json"``: that field takes ``$defs``, ``anyOf`` and
``additionalProperties: false`` as pydantic writes them, where the older OpenAPI-style
``response_schema`` conversion would rewrite them. The SDK's own retries stay off (its
default when no ``retry_options`` are given): Celery owns retries.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import BaseModel

from pipeline.errors import ConfigurationError, InvalidLLMAnswer, PipelineError, TransientError
from pipeline.llm.answers import parse_answer
from pipeline.llm.http import error_for_status, retry_after_seconds
from pipeline.llm.port import LLM, LLMRequest, LLMResponse
from schemas.settings import Settings

T = TypeVar("T", bound=BaseModel)

INSTALL_HINT = "pip install 'memory-pipeline[gemini]'"
_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")
# finish reasons after which the text is not a whole answer
_CUT = {"MAX_TOKENS": "cut off at the output token limit", "SAFETY": "withheld by the safety filter",
        "RECITATION": "withheld for recitation", "PROHIBITED_CONTENT": "withheld as prohibited content",
        "BLOCKLIST": "withheld by the blocklist", "SPII": "withheld for personal data"}


def import_sdk() -> tuple[Any, Any]:
    """``(genai, types)``, or a ConfigurationError that says how to install them."""
    try:
        from google import genai
        from google.genai import types
    except ImportError as exc:
        raise ConfigurationError(f"the Gemini provider needs the google-genai SDK: {INSTALL_HINT}") from exc
    return genai, types


def answer_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema of an answer model, without ``default`` keywords Gemini does not take."""
    return _without_defaults(model.model_json_schema())


class GeminiLLM(LLM):
    provider = "gemini"

    def __init__(self, client: Any) -> None:
        self.client = client

    @classmethod
    def from_settings(cls, settings: Settings, http_client: Any = None) -> GeminiLLM:
        """One SDK client per process; ``http_client`` (an httpx client) lets tests mock HTTP."""
        genai, types = import_sdk()
        if not settings.gemini_api_key:
            raise ConfigurationError("the Gemini provider needs GEMINI_API_KEY (or GOOGLE_API_KEY)")
        options = types.HttpOptions(timeout=int(settings.llm_timeout_s * 1000), httpx_client=http_client)
        return cls(genai.Client(api_key=settings.gemini_api_key, http_options=options))

    def complete(self, request: LLMRequest[T]) -> LLMResponse[T]:
        _, types = import_sdk()
        where = f"gemini {request.operation} ({request.model})"
        config = types.GenerateContentConfig(
            system_instruction=request.system,
            response_mime_type="application/json",
            response_json_schema=answer_schema(request.response_model),
            http_options=types.HttpOptions(timeout=int(request.timeout_s * 1000)),
        )
        try:
            response = self.client.models.generate_content(
                model=request.model, contents=request.prompt, config=config,
            )
        except Exception as exc:  # mapped by type below; anything else propagates unchanged
            mapped = map_error(exc, where)
            if mapped is None:
                raise
            raise mapped from exc
        return self._response(response, request, where)

    def _response(self, response: Any, request: LLMRequest[T], where: str) -> LLMResponse[T]:
        candidates = response.candidates or []
        if not candidates:
            feedback = getattr(response, "prompt_feedback", None)
            reason = getattr(feedback, "block_reason", None)
            raise InvalidLLMAnswer(f"{where}: no answer" + (f" (prompt blocked: {reason})" if reason else ""))
        finish = getattr(candidates[0].finish_reason, "value", candidates[0].finish_reason)
        if finish in _CUT:
            raise InvalidLLMAnswer(f"{where}: the answer was {_CUT[finish]}")
        raw = _text(candidates[0])
        parsed = parse_answer(raw, request.response_model, provider=self.provider, model=request.model)
        usage = response.usage_metadata
        output = ((usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)) if usage else 0
        return LLMResponse(
            parsed=parsed, model=response.model_version or request.model, provider=self.provider,
            input_tokens=(usage.prompt_token_count or 0) if usage else 0, output_tokens=output, raw=raw,
        )


def map_error(exc: Exception, where: str) -> PipelineError | None:
    """The pipeline error for a google-genai or httpx exception, or None if it is neither."""
    from google.genai import errors

    if isinstance(exc, errors.APIError):
        detail = exc.message or exc.status or str(exc)
        return error_for_status(int(exc.code or 0), str(detail), where=where, retry_after=_retry_after(exc))
    timeouts, transport = _httpx_errors()
    if isinstance(exc, timeouts):
        return TransientError(f"{where}: request timed out")
    if isinstance(exc, transport):
        return TransientError(f"{where}: connection failed: {exc}")
    return None


def _retry_after(exc: Any) -> float | None:
    response = getattr(exc, "response", None)
    seconds = retry_after_seconds(getattr(response, "headers", None))
    if seconds is not None:
        return seconds
    # Gemini states the wait in the error body: details[] RetryInfo {"retryDelay": "37s"}
    details = exc.details.get("error", exc.details) if isinstance(exc.details, dict) else {}
    for item in details.get("details") or []:
        if isinstance(item, dict) and item.get("@type") == _RETRY_INFO:
            match = _DURATION.match(str(item.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None


def _httpx_errors() -> tuple[tuple[type[Exception], ...], tuple[type[Exception], ...]]:
    timeouts: list[type[Exception]] = []
    transport: list[type[Exception]] = []
    for name in ("httpx", "httpx2"):
        try:
            module = __import__(name)
        except ImportError:
            continue
        timeouts.append(module.TimeoutException)
        transport.append(module.TransportError)
    return tuple(timeouts), tuple(transport)


def _text(candidate: Any) -> str:
    parts = getattr(candidate.content, "parts", None) or []
    return "".join(p.text for p in parts if getattr(p, "text", None) and not getattr(p, "thought", False))


def _without_defaults(node: Any, in_properties: bool = False) -> Any:
    if isinstance(node, dict):
        return {
            key: _without_defaults(value, in_properties=(key == "properties" and not in_properties))
            for key, value in node.items()
            if in_properties or key != "default"
        }
    if isinstance(node, list):
        return [_without_defaults(item) for item in node]
    return node
