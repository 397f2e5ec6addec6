"""OpenAI (or any OpenAI-compatible server) through the ``openai`` SDK, with structured outputs.

The answer model's JSON schema goes out as a strict ``response_format`` through
``client.chat.completions.parse``, the SDK's documented structured-output call, which also
works against OpenAI-compatible base URLs. The SDK client never retries (``max_retries=0``):
Celery owns retries, so they are not multiplied.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from pipeline.errors import ConfigurationError, InvalidLLMAnswer, PipelineError, TransientError
from pipeline.llm.answers import describe_validation_error, parse_answer
from pipeline.llm.http import error_for_status, retry_after_seconds
from pipeline.llm.port import LLM, LLMRequest, LLMResponse
from schemas.settings import Settings

T = TypeVar("T", bound=BaseModel)

INSTALL_HINT = "pip install 'memory-pipeline[openai]'"


def import_sdk() -> Any:
    """The ``openai`` module, or a ConfigurationError that says how to install it."""
    try:
        import openai
    except ImportError as exc:
        raise ConfigurationError(f"the OpenAI provider needs the openai SDK: {INSTALL_HINT}") from exc
    return openai


def make_client(settings: Settings, http_client: Any = None) -> Any:
    """One SDK client per process; ``http_client`` lets tests pass a mock transport."""
    openai = import_sdk()
    api_key = settings.openai_api_key
    if not api_key:
        if not settings.openai_base_url:
            raise ConfigurationError("the OpenAI provider needs OPENAI_API_KEY (or MEMORY_OPENAI_BASE_URL for a keyless server)")
        api_key = "unused"  # OpenAI-compatible servers without auth
    return openai.OpenAI(
        api_key=api_key, base_url=settings.openai_base_url, timeout=settings.llm_timeout_s,
        max_retries=0, http_client=http_client,
    )


def map_error(exc: Exception, where: str) -> PipelineError | None:
    """The pipeline error for an ``openai`` SDK exception, or None if it is not one."""
    openai = import_sdk()
    if isinstance(exc, openai.APITimeoutError):
        return TransientError(f"{where}: request timed out")
    if isinstance(exc, openai.APIConnectionError):
        return TransientError(f"{where}: connection failed: {exc}")
    if isinstance(exc, openai.APIStatusError):
        headers = exc.response.headers if exc.response is not None else None
        return error_for_status(
            exc.status_code, _detail(exc), where=where, retry_after=retry_after_seconds(headers),
        )
    if isinstance(exc, openai.APIResponseValidationError):
        return TransientError(f"{where}: the response did not have the shape of the API: {exc}")
    return None


class OpenAILLM(LLM):
    provider = "openai"

    def __init__(self, client: Any) -> None:
        self.client = client

    @classmethod
    def from_settings(cls, settings: Settings, http_client: Any = None) -> OpenAILLM:
        return cls(make_client(settings, http_client))

    def complete(self, request: LLMRequest[T]) -> LLMResponse[T]:
        openai = import_sdk()
        where = f"openai {request.operation} ({request.model})"
        try:
            completion = self.client.chat.completions.parse(
                model=request.model,
                messages=[
                    {"role": "system", "content": request.system},
                    {"role": "user", "content": request.prompt},
                ],
                response_format=request.response_model,
                timeout=request.timeout_s,
            )
        except ValidationError as exc:
            raise InvalidLLMAnswer(
                f"{where}: answer outside the {request.response_model.__name__} schema: "
                f"{describe_validation_error(exc)}"
            ) from exc
        except openai.LengthFinishReasonError as exc:
            raise InvalidLLMAnswer(f"{where}: the answer was cut off at the output token limit") from exc
        except openai.ContentFilterFinishReasonError as exc:
            raise InvalidLLMAnswer(f"{where}: the answer was withheld by the content filter") from exc
        except openai.OpenAIError as exc:
            mapped = map_error(exc, where)
            if mapped is None:
                raise
            raise mapped from exc
        return self._response(completion, request, where)

    def _response(self, completion: Any, request: LLMRequest[T], where: str) -> LLMResponse[T]:
        if not completion.choices:
            raise InvalidLLMAnswer(f"{where}: the response held no choices")
        message = completion.choices[0].message
        if message.refusal:
            raise InvalidLLMAnswer(f"{where}: the model refused: {message.refusal}")
        raw = message.content or ""
        parsed = message.parsed
        if not isinstance(parsed, request.response_model):
            parsed = parse_answer(raw, request.response_model, provider=self.provider, model=request.model)
        usage = completion.usage
        return LLMResponse(
            parsed=parsed, model=completion.model or request.model, provider=self.provider,
            input_tokens=(usage.prompt_tokens or 0) if usage else 0,
            output_tokens=(usage.completion_tokens or 0) if usage else 0,
            raw=raw,
        )


def _detail(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return str(getattr(exc, "message", "") or exc)
