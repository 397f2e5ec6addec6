"""OpenAI (or any OpenAI-compatible server) through the ``openai`` SDK.

One ``client.chat.completions.create`` per call, in the structured-output mode of
``MEMORY_OPENAI_STRUCTURED_OUTPUT`` (``pipeline.llm.structured``). The answer is parsed and
validated here, never by the SDK: OpenAI-compatible servers (Ollama, vLLM, LM Studio,
llama.cpp) wrap JSON in fences or prose and put ``<think>`` blocks before it, which
``chat.completions.parse`` would refuse before our extraction ran. The SDK client never retries
(``max_retries=0``): Celery owns retries, so they are not multiplied.
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar

from pydantic import BaseModel

from pipeline.errors import ConfigurationError, InvalidLLMAnswer, PipelineError, TransientError
from pipeline.llm.answers import answered
from pipeline.llm.deadline import bounded_transport, within
from pipeline.llm.http import error_for_status, retry_after_seconds, transport_error
from pipeline.llm.models import tier_timeouts, timeout_for_model
from pipeline.llm.port import LLM, LLMRequest, LLMResponse
from pipeline.llm.structured import (
    FALLBACKS, falls_back, resolve_mode, schema_instruction, strict_schema, with_mode_hint,
)
from schemas.settings import Settings

T = TypeVar("T", bound=BaseModel)

INSTALL_HINT = "pip install 'memory-pipeline[openai]'"
log = logging.getLogger(__name__)


def import_sdk() -> Any:
    """The ``openai`` module, or a ConfigurationError that says how to install it."""
    try:
        import openai
    except ImportError as exc:
        raise ConfigurationError(f"the OpenAI provider needs the openai SDK: {INSTALL_HINT}") from exc
    return openai


def make_client(
    *, api_key: str | None, base_url: str | None, timeout_s: float, http_client: Any = None,
    what: str = "the OpenAI provider",
) -> Any:
    """One SDK client per process; ``http_client`` lets callers pass their own httpx client."""
    openai = import_sdk()
    if not api_key:
        if not base_url:
            raise ConfigurationError(
                f"{what} needs OPENAI_API_KEY (or a base URL for a keyless OpenAI-compatible server)")
        api_key = "unused"  # OpenAI-compatible servers without auth
    if http_client is None:
        # the SDK's own client and limits, reading answers under the call's hard bound
        http_client = openai.DefaultHttpxClient(
            transport=bounded_transport(_httpx_of(openai), limits=openai.DEFAULT_CONNECTION_LIMITS))
    return openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0,
                         http_client=http_client)


def _httpx_of(openai: Any) -> Any:
    """The httpx module the SDK's client is built on (httpx, or its httpx2 fork)."""
    import importlib

    base = next(c for c in openai.DefaultHttpxClient.__mro__ if c.__name__ == "Client")
    return importlib.import_module(base.__module__.split(".")[0])


def map_error(exc: Exception, where: str, timeout_s: float | None = None) -> PipelineError | None:
    """The pipeline error for an ``openai`` SDK exception, or None if it is not one."""
    openai = import_sdk()
    if isinstance(exc, openai.APIConnectionError):  # APITimeoutError is one of these
        return transport_error(where, exc, timeout_s)
    if isinstance(exc, openai.APIStatusError):
        headers = exc.response.headers if exc.response is not None else None
        return error_for_status(
            exc.status_code, _detail(exc), where=where, retry_after=retry_after_seconds(headers), code=_code(exc),
        )
    if isinstance(exc, openai.APIResponseValidationError):
        return TransientError(f"{where}: the response did not have the shape of the API: {exc}")
    return None


class OpenAILLM(LLM):
    provider = "openai"

    def __init__(self, client: Any, *, mode: str = "json_schema", timeouts: dict[str, float] | None = None,
                 default_timeout_s: float = 60.0) -> None:
        self.client = client
        self.mode = mode
        self.timeouts = timeouts or {}
        self.default_timeout_s = default_timeout_s
        self.server = str(client.base_url)

    @classmethod
    def from_settings(cls, settings: Settings, http_client: Any = None) -> OpenAILLM:
        timeouts = tier_timeouts(settings, "openai")
        longest = timeout_for_model(timeouts, "", settings)
        client = make_client(api_key=settings.openai_api_key, base_url=settings.openai_base_url,
                             timeout_s=longest, http_client=http_client)
        return cls(client, mode=settings.openai_structured_output, timeouts=timeouts, default_timeout_s=longest)

    def timeout_for(self, request: LLMRequest[Any]) -> float:
        if request.timeout_s is not None:
            return request.timeout_s
        return self.timeouts.get(request.model, self.default_timeout_s)

    def complete(self, request: LLMRequest[T]) -> LLMResponse[T]:
        openai = import_sdk()
        where = f"openai {request.operation} ({request.model})"
        timeout = self.timeout_for(request)
        mode = resolve_mode(self.mode, self.server, request.model)
        try:
            completion = self._create(request, mode, timeout, where)
        except openai.APIStatusError as exc:  # a 400 (or llama.cpp's 500) may refuse the mode itself
            if not falls_back(self.mode, mode, exc.status_code, _detail(exc)):
                raise _mapped(exc, where, timeout, mode) from exc
            FALLBACKS.remember(self.server, request.model)
            log.warning("%s: the server refused a json_schema response_format (%s); using json_object "
                        "with the schema in the prompt from now on", where, _detail(exc))
            mode = "json_object"
            try:
                completion = self._create(request, mode, timeout, where)
            except openai.OpenAIError as again:
                raise _mapped(again, where, timeout, mode) from again
        except openai.OpenAIError as exc:
            raise _mapped(exc, where, timeout, mode) from exc
        return self._response(completion, request, where, mode)

    def _create(self, request: LLMRequest[Any], mode: str, timeout: float, where: str) -> Any:
        # the SDK's timeout bounds each read; ``within`` bounds the whole call (a trickled answer)
        body = self._body(request, mode)
        return within(timeout, lambda: self.client.chat.completions.create(**body, timeout=timeout), where=where)

    def _body(self, request: LLMRequest[Any], mode: str) -> dict[str, Any]:
        system = request.system
        body: dict[str, Any] = {"model": request.model}
        if mode == "json_schema":
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": request.response_model.__name__, "strict": True,
                "schema": strict_schema(request.response_model),
            }}
        else:
            system += schema_instruction(request.response_model)
            if mode == "json_object":
                body["response_format"] = {"type": "json_object"}
        body["messages"] = [{"role": "system", "content": system}, {"role": "user", "content": request.prompt}]
        return body

    def _response(self, completion: Any, request: LLMRequest[T], where: str, mode: str) -> LLMResponse[T]:
        if not completion.choices:
            raise InvalidLLMAnswer(f"{where}: the response held no choices")
        choice = completion.choices[0]
        if choice.finish_reason == "length":
            raise InvalidLLMAnswer(f"{where}: the answer was cut off at the output token limit")
        if choice.finish_reason == "content_filter":
            raise InvalidLLMAnswer(f"{where}: the answer was withheld by the content filter")
        message = choice.message
        if getattr(message, "refusal", None):
            raise InvalidLLMAnswer(f"{where}: the model refused: {message.refusal}")
        usage = completion.usage
        return answered(request, message.content or "", provider=self.provider, mode=mode, snapshot=completion.model,
                        usage=None if usage is None else (usage.prompt_tokens or 0, usage.completion_tokens or 0))


def _mapped(exc: Exception, where: str, timeout_s: float, mode: str) -> Exception:
    status = getattr(exc, "status_code", None) or getattr(exc, "code", None)
    return with_mode_hint(map_error(exc, where, timeout_s) or exc, status if isinstance(status, int) else None,
                          mode, "MEMORY_OPENAI_STRUCTURED_OUTPUT")


def _error_body(exc: Any) -> dict[str, Any]:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            return error
    return {}


def _code(exc: Any) -> str | None:
    code = _error_body(exc).get("code") or getattr(exc, "code", None)
    return str(code) if code else None


def _detail(exc: Any) -> str:
    message = _error_body(exc).get("message")
    if message:
        return str(message)
    return str(getattr(exc, "message", "") or exc)
