"""The request rules and answer shapes of the provider APIs the test server speaks.

Each ``check_*`` returns ``None`` for a request the real API accepts, or the ``(status, body)``
the real API answers when it refuses it, with the rule's source cited beside it. The answer
builders write the documented response objects.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import numpy as np

Refusal = tuple[int, dict[str, Any]]

# --- OpenAI ------------------------------------------------------------------------------------
# https://platform.openai.com/docs/api-reference/chat/create (roles of `messages`)
OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
# https://platform.openai.com/docs/api-reference/chat/create#chat-create-response_format
# (json_schema.name: "a-z, A-Z, 0-9, or contain underscores and dashes, with a maximum length of 64")
_SCHEMA_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# https://platform.openai.com/docs/api-reference/embeddings/create: native sizes of OpenAI's
# models; `dimensions` "Only supported in text-embedding-3 and later models".
OPENAI_EMBEDDING_SIZES = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}
OPENAI_MAX_INPUTS = 2048


def openai_error(status: int, message: str, *, type_: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None) -> Refusal:
    """OpenAI's error body: {"error": {"message", "type", "param", "code"}}
    (https://platform.openai.com/docs/guides/error-codes/api-errors)."""
    return status, {"error": {"message": message, "type": type_, "param": param, "code": code}}


def check_chat(body: Any) -> Refusal | None:
    if not isinstance(body, dict):
        return openai_error(400, "We could not parse the JSON body of your request.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        return openai_error(400, "you must provide a model parameter")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return openai_error(400, "[] is too short - 'messages'", param="messages")
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in OPENAI_ROLES:
            return openai_error(400, f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', "
                                "'user', 'function', 'tool', and 'developer'.",
                                param=f"messages[{i}].role", code="invalid_value")
        if role != "assistant" and not isinstance(message.get("content"), (str, list)):
            return openai_error(400, f"Missing required parameter: 'messages[{i}].content'.",
                                param=f"messages[{i}].content", code="missing_required_parameter")
    return _check_response_format(body.get("response_format"), messages)


def _check_response_format(fmt: Any, messages: list[dict[str, Any]]) -> Refusal | None:
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind not in ("text", "json_object", "json_schema"):
        return openai_error(400, f"Invalid value: '{kind}'. Supported values are: 'json_object', 'json_schema', "
                            "and 'text'.", param="response_format.type", code="invalid_value")
    if kind == "json_object":
        # https://platform.openai.com/docs/guides/structured-outputs#json-mode: "the API will throw
        # an error if the string "JSON" does not appear somewhere in the context"
        if not any("json" in str(m.get("content", "")).lower() for m in messages):
            return openai_error(400, "'messages' must contain the word 'json' in some form, to use "
                                "'response_format' of type 'json_object'.", param="messages")
    if kind != "json_schema":
        return None
    spec = fmt.get("json_schema")
    if not isinstance(spec, dict) or "name" not in spec:
        return openai_error(400, "Missing required parameter: 'response_format.json_schema.name'.",
                            param="response_format.json_schema.name", code="missing_required_parameter")
    if not _SCHEMA_NAME.match(str(spec["name"])):
        return openai_error(400, f"Invalid 'response_format.json_schema.name': string does not match pattern. "
                            f"Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
                            param="response_format.json_schema.name", code="invalid_value")
    if spec.get("strict") is True:
        problem = strict_schema_problem(spec.get("schema") or {}, ())
        if problem:
            return openai_error(400, f"Invalid schema for response_format '{spec['name']}': {problem}",
                                param="response_format", code="invalid_json_schema")
    return None


def strict_schema_problem(node: Any, context: tuple[str, ...]) -> str | None:
    """The first breach of strict mode's rules
    (https://platform.openai.com/docs/guides/structured-outputs#supported-schemas): every object
    sets ``additionalProperties: false`` and lists every property in ``required``; a ``$ref``
    stands alone."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            problem = strict_schema_problem(item, (*context, str(i)))
            if problem:
                return problem
        return None
    if not isinstance(node, dict):
        return None
    if "$ref" in node and len(node) > 1:
        return f"In context={context}, $ref cannot have keywords {sorted(set(node) - {'$ref'})}."
    if node.get("type") == "object" or "properties" in node:
        if node.get("additionalProperties") is not False:
            return f"In context={context}, 'additionalProperties' is required to be supplied and to be false."
        missing = [key for key in node.get("properties", {}) if key not in node.get("required", [])]
        if missing:
            return (f"In context={context}, 'required' is required to be supplied and to be an array "
                    f"including every key in properties. Missing '{missing[0]}'.")
    for key, value in node.items():
        if key == "properties" and isinstance(value, dict):
            for name, sub in value.items():
                problem = strict_schema_problem(sub, (*context, "properties", name))
                if problem:
                    return problem
        elif key in ("$defs", "definitions") and isinstance(value, dict):
            for name, sub in value.items():
                problem = strict_schema_problem(sub, (*context, key, name))
                if problem:
                    return problem
        elif key in ("items", "anyOf", "allOf"):
            problem = strict_schema_problem(value, (*context, key))
            if problem:
                return problem
    return None


def check_embeddings(body: Any, native_size: int | None) -> Refusal | None:
    """https://platform.openai.com/docs/api-reference/embeddings/create: `input` is a string or
    an array of at most 2048 strings, none of them empty; `dimensions` only for
    text-embedding-3 and later."""
    if not isinstance(body, dict) or not isinstance(body.get("model"), str) or not body["model"]:
        return openai_error(400, "you must provide a model parameter")
    inputs = body.get("input")
    items = [inputs] if isinstance(inputs, str) else inputs
    if not isinstance(items, list) or not items or not all(isinstance(t, str) and t for t in items):
        return openai_error(400, "'$.input' is invalid. Please check the API reference: "
                            "https://platform.openai.com/docs/api-reference.")
    if len(items) > OPENAI_MAX_INPUTS:
        return openai_error(400, f"'$.input' is invalid: at most {OPENAI_MAX_INPUTS} inputs are allowed.")
    if "dimensions" in body and body["model"] == "text-embedding-ada-002":
        return openai_error(400, "This model does not support specifying dimensions.")
    if body.get("encoding_format", "float") not in ("float", "base64"):
        return openai_error(400, "Invalid value for 'encoding_format'.", param="encoding_format")
    return None


# Servers without json_schema support, each refusing it the way its source does (the same
# sources as pipeline.llm.structured._REFUSES_MODE).
def refuses_json_schema(server: str, body: dict[str, Any]) -> Refusal | None:
    """The refusal of a ``json_schema`` response_format by ``server``: ``llama.cpp`` (400),
    ``llama.cpp-500`` (builds that answer it as a server error), ``vllm`` (before its
    json_schema support), ``openai-model`` (an OpenAI model without Structured Outputs)."""
    fmt = body.get("response_format") or {}
    kind = fmt.get("type", "") if isinstance(fmt, dict) else ""
    if not kind or kind in ("text", "json_object"):
        return None
    if server in ("llama.cpp", "llama.cpp-500"):
        # examples/server/utils.hpp, oaicompat_completion_params_parse; the body is
        # format_error_response(..., ERROR_TYPE_INVALID_REQUEST), or ERROR_TYPE_SERVER (500)
        message = f'response_format type must be one of "text" or "json_object", but got: {kind}'
        if server == "llama.cpp-500":
            return 500, {"error": {"code": 500, "message": message, "type": "server_error"}}
        return 400, {"error": {"code": 400, "message": message, "type": "invalid_request_error"}}
    if server == "vllm":
        # vllm/entrypoints/openai/api_server.py: validation_exception_handler answers 400 with
        # create_error_response(message=str(exc)), an ErrorResponse at the top level of the body
        # (protocol.py: object "error", message, type "BadRequestError", param, code 400)
        errors = [{"type": "literal_error", "loc": ("body", "response_format", "type"),
                   "msg": "Input should be 'text' or 'json_object'", "input": kind,
                   "ctx": {"expected": "'text' or 'json_object'"}}]
        return 400, {"object": "error", "message": str(errors), "type": "BadRequestError", "param": None,
                     "code": 400}
    if server == "openai-model":
        return openai_error(400, f"Invalid parameter: 'response_format' of type '{kind}' is not supported with "
                            "this model. Learn more about supported models at the Structured Outputs guide: "
                            "https://platform.openai.com/docs/guides/structured-outputs",
                            param="response_format")
    raise ValueError(f"no such server without json_schema: {server!r}")


def chat_completion(text: str, *, model: str, finish_reason: str, usage: tuple[int, int] | None) -> dict[str, Any]:
    """https://platform.openai.com/docs/api-reference/chat/object"""
    answer: dict[str, Any] = {
        "id": "chatcmpl-test", "object": "chat.completion", "created": 1_780_000_000, "model": model,
        "choices": [{"index": 0, "finish_reason": finish_reason,
                     "message": {"role": "assistant", "content": text, "refusal": None}}],
    }
    if usage is not None:
        answer["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
    return answer


def vector(text: str, size: int) -> list[float]:
    """A deterministic vector per text (not unit length: the adapters normalise)."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).standard_normal(size).round(6).tolist()


# --- Gemini ------------------------------------------------------------------------------------

def gemini_error(code: int, status: str, message: str, details: list[dict[str, Any]] | None = None) -> Refusal:
    """Google's error body (https://ai.google.dev/gemini-api/docs/troubleshooting#error-codes;
    https://cloud.google.com/apis/design/errors#error_model)."""
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        error["details"] = details
    return code, {"error": error}


def gemini_bad_key() -> Refusal:
    """What generativelanguage.googleapis.com answers for a key that is not valid."""
    message = "API key not valid. Please pass a valid API key."
    return gemini_error(400, "INVALID_ARGUMENT", message, [
        {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
         "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}},
        {"@type": "type.googleapis.com/google.rpc.LocalizedMessage", "locale": "en-US", "message": message},
    ])


def check_generate(body: Any) -> Refusal | None:
    """https://ai.google.dev/api/generate-content#method:-models.generatecontent and
    #generationconfig: `contents` is required; a content's role is user or model; a response
    schema needs responseMimeType application/json, and responseSchema and responseJsonSchema
    exclude each other."""
    if not isinstance(body, dict):
        return gemini_error(400, "INVALID_ARGUMENT", "Invalid JSON payload received.")
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return gemini_error(400, "INVALID_ARGUMENT", "* GenerateContentRequest.contents: contents is not specified\n")
    for i, content in enumerate(contents):
        if not isinstance(content, dict) or content.get("role", "user") not in ("user", "model"):
            return gemini_error(400, "INVALID_ARGUMENT", f"* GenerateContentRequest.contents[{i}].role: "
                                "Please use a valid role: user, model.\n")
        if not content.get("parts"):
            return gemini_error(400, "INVALID_ARGUMENT", f"* GenerateContentRequest.contents[{i}].parts: "
                                "contents.parts must not be empty.\n")
    config = body.get("generationConfig") or {}
    mime = config.get("responseMimeType", "text/plain")
    if mime not in ("text/plain", "application/json", "text/x.enum"):
        return gemini_error(400, "INVALID_ARGUMENT", "* GenerateContentRequest.generation_config.response_mime_type: "
                            "allowed mimetypes are `text/plain`, `application/json`, and `text/x.enum`.\n")
    if "responseSchema" in config and "responseJsonSchema" in config:
        return gemini_error(400, "INVALID_ARGUMENT", "response_schema and response_json_schema cannot both be set.")
    if ("responseSchema" in config or "responseJsonSchema" in config) and mime != "application/json":
        return gemini_error(400, "INVALID_ARGUMENT", "* GenerateContentRequest.generation_config.response_mime_type: "
                            "must be application/json when a response schema is set.\n")
    return None


def check_batch_embed(body: Any, model: str) -> Refusal | None:
    """https://ai.google.dev/api/embeddings#method:-models.batchembedcontents: "The model in each
    of these requests must match the model specified BatchEmbedContentsRequest.model"; at most
    100 requests in one batch."""
    requests = body.get("requests") if isinstance(body, dict) else None
    if not isinstance(requests, list) or not requests:
        return gemini_error(400, "INVALID_ARGUMENT", "* BatchEmbedContentsRequest.requests: requests is not specified\n")
    if len(requests) > 100:
        return gemini_error(400, "INVALID_ARGUMENT", "* BatchEmbedContentsRequest.requests: at most 100 requests "
                            "can be in one batch\n")
    for i, request in enumerate(requests):
        if request.get("model") != f"models/{model}":
            return gemini_error(400, "INVALID_ARGUMENT", f"* BatchEmbedContentsRequest.requests[{i}].model: "
                                "the model in the request must match the model in the URL.\n")
        parts = (request.get("content") or {}).get("parts") or []
        if not any(p.get("text") for p in parts):
            return gemini_error(400, "INVALID_ARGUMENT", f"* BatchEmbedContentsRequest.requests[{i}].content: "
                                "contents must not be empty\n")
    return None


def gemini_answer(text: str, *, model: str, finish_reason: str, usage: tuple[int, int] | None,
                  thoughts: int = 0) -> dict[str, Any]:
    """https://ai.google.dev/api/generate-content#generatecontentresponse"""
    answer: dict[str, Any] = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": finish_reason,
                        "index": 0}],
        "modelVersion": model,
    }
    if usage is not None:
        answer["usageMetadata"] = {"promptTokenCount": usage[0], "candidatesTokenCount": usage[1],
                                   "totalTokenCount": sum(usage) + thoughts}
        if thoughts:
            answer["usageMetadata"]["thoughtsTokenCount"] = thoughts
    return answer
