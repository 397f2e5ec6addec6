"""Structured output: how an answer is held to its JSON schema, and the schema in each form.

Modes (``MEMORY_OPENAI_STRUCTURED_OUTPUT`` / ``MEMORY_GEMINI_STRUCTURED_OUTPUT``):

- ``json_schema``: the server constrains the answer to the schema (OpenAI ``response_format``
  ``json_schema`` with ``strict``; Gemini ``responseJsonSchema``);
- ``json_object``: the server only guarantees JSON; the schema goes in the system prompt;
- ``prompt``: nothing is asked of the server; the schema goes in the system prompt;
- ``auto``: ``json_schema``, and after an error that says the server does not take that mode
  at all (``refuses_schema_mode``: a model without structured outputs on OpenAI, llama.cpp and
  vLLM builds from before their json_schema support, a Gemini gateway on an older API version)
  ``json_object`` from then on, remembered for the process per (base URL, model). Any other
  refusal that names the response format, above all a schema the server finds invalid
  ("Invalid schema for response_format ..."), is our own bug: it fails the call as a
  permanent error with the server's reason, and the mode is kept.

Whatever the mode, the answer is parsed and validated locally (``pipeline.llm.answers``).
"""

from __future__ import annotations

import copy
import json
import threading
from typing import Any

from pydantic import BaseModel

MODES = ("json_schema", "json_object", "prompt", "auto")

# The errors by which a server says it does not take a structured-output mode at all, per
# server, from their own sources. Only these downgrade ``auto``; each is (statuses, text).
_REFUSES_MODE = (
    # OpenAI, for a model without Structured Outputs: 400 "Invalid parameter: 'response_format'
    # of type 'json_schema' is not supported with this model." (the text langchain-openai
    # matches in langchain_openai/chat_models/base.py, _handle_openai_bad_request); the same
    # sentence names 'json_object' for a model without JSON mode.
    ((400,), "of type '{mode}' is not supported"),
    # llama.cpp's server before json_schema support: examples/server/utils.hpp,
    # oaicompat_completion_params_parse, throws 'response_format type must be one of "text" or
    # "json_object", but got: json_schema'; answered 400 (ERROR_TYPE_INVALID_REQUEST), or 500
    # by builds that map it to a server error (ik_llama.cpp issue #778 quotes the 500 body).
    ((400, 500), 'response_format type must be one of "text" or "json_object"'),
    # vLLM before json_schema support: vllm/entrypoints/openai/protocol.py declared
    # ResponseFormat.type as Literal["text", "json_object"], and api_server.py answers a
    # RequestValidationError with 400 and str(exc): pydantic 2 says "Input should be 'text' or
    # 'json_object'", pydantic 1 "unexpected value; permitted: 'text', 'json_object'".
    ((400,), "input should be 'text' or 'json_object'"),
    ((400,), "permitted: 'text', 'json_object'"),
    # The Gemini API (or a gateway on an older API version) for a field it does not know:
    # 400 INVALID_ARGUMENT 'Invalid JSON payload received. Unknown name "responseJsonSchema" at
    # 'generation_config': Cannot find field.' (Google's JSON-to-proto error for unknown fields)
    ((400,), 'unknown name "responsejsonschema"'),
    ((400,), 'unknown name "response_json_schema"'),
)
# Ollama never refuses: before 0.5.0 (commit 630e7dc6f, openai/openai.go) it ignored a
# json_schema response_format and took only "json_object"; since, it passes the schema on and
# refuses only a schema it cannot read ('invalid format: ...; expected "json" or a valid JSON
# Schema object', llm/llama_server.go), which is a schema error and surfaces as one.


def strict_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The answer model's JSON Schema in OpenAI's strict form: every object closed
    (``additionalProperties: false``) with every property required, no ``$ref`` beside other
    keys, no null defaults. https://platform.openai.com/docs/guides/structured-outputs#supported-schemas
    """
    schema = copy.deepcopy(model.model_json_schema())
    return _strict(schema, schema)


def schema_instruction(model: type[BaseModel]) -> str:
    """The system-prompt paragraph that states the schema, for ``json_object`` and ``prompt``."""
    schema = json.dumps(model.model_json_schema(), separators=(",", ":"), sort_keys=True)
    return (
        "\n\nAnswer with exactly one JSON object and nothing else (no Markdown fence, no prose), "
        f"valid against this JSON Schema:\n{schema}"
    )


def resolve_mode(setting: str, server: str, model: str) -> str:
    """The mode a call to ``model`` on ``server`` uses: the setting, with ``auto`` resolved."""
    if setting != "auto":
        return setting
    return "json_object" if FALLBACKS.refused(server, model) else "json_schema"


def falls_back(setting: str, mode: str, status: int | None, detail: str) -> bool:
    """True when ``auto`` should retry a refused ``json_schema`` call as ``json_object``."""
    return setting == "auto" and mode == "json_schema" and refuses_schema_mode(status or 0, detail, mode)


def refuses_schema_mode(status: int, detail: str, mode: str = "json_schema") -> bool:
    """True for an error by which the server says it does not take ``mode`` at all (see
    ``_REFUSES_MODE``); False for every other error, an invalid schema among them."""
    lowered = detail.lower()
    return any(status in statuses and text.format(mode=mode) in lowered for statuses, text in _REFUSES_MODE)


_NEXT_MODES = {"json_schema": "auto or json_object", "json_object": "prompt"}


def with_mode_hint(error: Exception, status: int | None, mode: str, setting: str) -> Exception:
    """A permanent error that refuses ``mode`` itself, with the setting that gets past it. A
    schema the server finds invalid gets no hint: it is the schema to fix, not the mode."""
    from pipeline.errors import PermanentError

    # permanent whatever the status: llama.cpp builds answer the refusal with a 500, and no retry helps
    if mode in _NEXT_MODES and refuses_schema_mode(status or 0, str(error), mode):
        return PermanentError(f"{error} (the server does not take the {mode} structured-output mode: "
                              f"set {setting} to {_NEXT_MODES[mode]})")
    return error


class FallbackMemory:
    """Which (server, model) pairs refused ``json_schema`` in this process (for ``auto``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._refused: set[tuple[str, str]] = set()

    def refused(self, server: str, model: str) -> bool:
        with self._lock:
            return (server, model) in self._refused

    def remember(self, server: str, model: str) -> None:
        with self._lock:
            self._refused.add((server, model))

    def forget(self) -> None:
        with self._lock:
            self._refused.clear()


#: one per process, shared by every adapter instance
FALLBACKS = FallbackMemory()


def _strict(node: Any, root: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_strict(item, root) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and len(node) > 1:
        # strict mode refuses $ref beside other keys: inline the definition
        resolved = _resolve(root, ref)
        node = {**resolved, **{k: v for k, v in node.items() if k != "$ref"}}
    out = {key: _strict(value, root) if key not in ("properties",) else value for key, value in node.items()}
    if isinstance(out.get("properties"), dict):
        out["properties"] = {key: _strict(value, root) for key, value in out["properties"].items()}
        out["required"] = list(out["properties"])
    if out.get("type") == "object" and "additionalProperties" not in out:
        out["additionalProperties"] = False
    if "default" in out and out["default"] is None:
        del out["default"]
    return out


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    node: Any = root
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return copy.deepcopy(node)
