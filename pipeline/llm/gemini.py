"""Google Gemini through the ``google-genai`` SDK, with a JSON response schema.

In the ``json_schema`` mode (``MEMORY_GEMINI_STRUCTURED_OUTPUT``, the default) the answer
model's JSON Schema goes out as ``response_json_schema`` with
``response_mime_type="application/json"``: that field takes ``$defs``, ``anyOf`` and
``additionalProperties: false`` as pydantic writes them, where the older OpenAPI-style
``response_schema`` conversion would rewrite them. ``json_object`` asks only for JSON and puts
the schema in the system instruction; ``prompt`` asks nothing of the server. The answer is
parsed and validated locally either way. The SDK's own retries stay off (its default when no
``retry_options`` are given): Celery owns retries.
"""

from __future__ import annotations

import logging
import re
from typing import Any, TypeVar

from pydantic import BaseModel

from pipeline.errors import ConfigurationError, InvalidLLMAnswer, PipelineError
from pipeline.llm.answers import answered
from pipeline.llm.deadline import bounded_transport, within
from pipeline.llm.http import error_for_status, retry_after_seconds, transport_error
from pipeline.llm.models import tier_timeouts, timeout_for_model
from pipeline.llm.port import LLM, LLMRequest, LLMResponse
from pipeline.llm.structured import FALLBACKS, falls_back, resolve_mode, schema_instruction, with_mode_hint
from schemas.settings import Settings

T = TypeVar("T", bound=BaseModel)

INSTALL_HINT = "pip install 'memory-pipeline[gemini]'"
log = logging.getLogger(__name__)
_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
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


def make_client(
    api_key: str | None, base_url: str | None, timeout_s: float, http_client: Any = None,
    what: str = "the Gemini provider",
) -> Any:
    """One SDK client per process; ``http_client`` (an httpx client) lets callers pass their own;
    ``base_url`` (``MEMORY_GEMINI_BASE_URL``: a proxy, a test server) replaces the API's address."""
    genai, types = import_sdk()
    if not api_key:
        raise ConfigurationError(f"{what} needs GEMINI_API_KEY (or GOOGLE_API_KEY)")
    if http_client is None:
        import httpx

        # answers are read under the call's hard bound (pipeline.llm.deadline)
        http_client = httpx.Client(transport=bounded_transport(httpx), timeout=timeout_s)
    options = types.HttpOptions(timeout=int(timeout_s * 1000), httpx_client=http_client, base_url=base_url)
    return genai.Client(api_key=api_key, http_options=options)


class GeminiLLM(LLM):
    provider = "gemini"

    def __init__(self, client: Any, *, mode: str = "json_schema", timeouts: dict[str, float] | None = None,
                 default_timeout_s: float = 60.0, server: str = "gemini") -> None:
        self.client = client
        self.mode = mode
        self.timeouts = timeouts or {}
        self.default_timeout_s = default_timeout_s
        self.server = server

    @classmethod
    def from_settings(cls, settings: Settings, http_client: Any = None) -> GeminiLLM:
        timeouts = tier_timeouts(settings, "gemini")
        longest = timeout_for_model(timeouts, "", settings)
        client = make_client(settings.gemini_api_key, settings.gemini_base_url, longest, http_client)
        return cls(client, mode=settings.gemini_structured_output, timeouts=timeouts, default_timeout_s=longest,
                   server=settings.gemini_base_url or "gemini")

    def timeout_for(self, request: LLMRequest[Any]) -> float:
        if request.timeout_s is not None:
            return request.timeout_s
        return self.timeouts.get(request.model, self.default_timeout_s)

    def complete(self, request: LLMRequest[T]) -> LLMResponse[T]:
        from google.genai import errors

        where = f"gemini {request.operation} ({request.model})"
        timeout = self.timeout_for(request)
        mode = resolve_mode(self.mode, self.server, request.model)
        try:
            response = self._call(request, mode, timeout)
        except errors.APIError as exc:
            if not falls_back(self.mode, mode, exc.code, str(exc.message)):
                raise _mapped(exc, where, timeout, mode) from exc
            FALLBACKS.remember(self.server, request.model)
            log.warning("%s: the server refused responseJsonSchema (%s); using JSON mode with the schema in "
                        "the system instruction from now on", where, exc.message)
            mode = "json_object"
            try:
                response = self._call(request, mode, timeout)
            except Exception as again:  # mapped by type; anything else propagates unchanged
                raise _mapped(again, where, timeout, mode) from again
        except Exception as exc:  # mapped by type below; anything else propagates unchanged
            raise _mapped(exc, where, timeout, mode) from exc
        return self._response(response, request, where, mode)

    def _call(self, request: LLMRequest[Any], mode: str, timeout: float) -> Any:
        _, types = import_sdk()
        options: dict[str, Any] = {"system_instruction": request.system,
                                   "http_options": types.HttpOptions(timeout=int(timeout * 1000))}
        if mode == "json_schema":
            options.update(response_mime_type="application/json",
                           response_json_schema=answer_schema(request.response_model))
        else:
            options["system_instruction"] = request.system + schema_instruction(request.response_model)
            if mode == "json_object":
                options["response_mime_type"] = "application/json"
        config = types.GenerateContentConfig(**options)
        # the SDK's timeout bounds each read; ``within`` bounds the whole call (a trickled answer)
        return within(timeout, lambda: self.client.models.generate_content(
            model=request.model, contents=request.prompt, config=config,
        ), where=f"gemini {request.operation} ({request.model})")

    def _response(self, response: Any, request: LLMRequest[T], where: str, mode: str) -> LLMResponse[T]:
        candidates = response.candidates or []
        if not candidates:
            feedback = getattr(response, "prompt_feedback", None)
            reason = getattr(feedback, "block_reason", None)
            raise InvalidLLMAnswer(f"{where}: no answer" + (f" (prompt blocked: {reason})" if reason else ""))
        finish = getattr(candidates[0].finish_reason, "value", candidates[0].finish_reason)
        if finish in _CUT:
            raise InvalidLLMAnswer(f"{where}: the answer was {_CUT[finish]}")
        usage = response.usage_metadata
        counts = None if usage is None else (
            usage.prompt_token_count or 0, (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0))
        return answered(request, _text(candidates[0]), provider=self.provider, mode=mode,
                        snapshot=response.model_version, usage=counts)


def _mapped(exc: Exception, where: str, timeout_s: float, mode: str) -> Exception:
    status = getattr(exc, "status_code", None) or getattr(exc, "code", None)
    return with_mode_hint(map_error(exc, where, timeout_s) or exc, status if isinstance(status, int) else None,
                          mode, "MEMORY_GEMINI_STRUCTURED_OUTPUT")


def map_error(exc: Exception, where: str, timeout_s: float | None = None) -> PipelineError | None:
    """The pipeline error for a google-genai or httpx exception, or None if it is neither."""
    from google.genai import errors

    if isinstance(exc, errors.APIError):
        detail = exc.message or exc.status or str(exc)
        return error_for_status(exc.code or None, str(detail), where=where, retry_after=_retry_after(exc),
                                code=_reason(exc))
    timeouts, transport = _httpx_errors()
    if isinstance(exc, (*timeouts, *transport)):
        return transport_error(where, exc, timeout_s)
    return None


def _reason(exc: Any) -> str | None:
    """The ErrorInfo reason of a Google error (API_KEY_INVALID, ...), if it has one."""
    details = exc.details.get("error", exc.details) if isinstance(exc.details, dict) else {}
    for item in details.get("details") or []:
        if isinstance(item, dict) and item.get("@type") == _ERROR_INFO and item.get("reason"):
            return str(item["reason"])
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
