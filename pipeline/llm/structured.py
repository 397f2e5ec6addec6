"""Structured output: how an answer is held to its JSON schema, and the schema in each form.

Modes (``MEMORY_OPENAI_STRUCTURED_OUTPUT`` / ``MEMORY_GEMINI_STRUCTURED_OUTPUT``):

- ``json_schema``: the server constrains the answer to the schema (OpenAI ``response_format``
  ``json_schema`` with ``strict``; Gemini ``responseJsonSchema``);
- ``json_object``: the server only guarantees JSON; the schema goes in the system prompt;
- ``prompt``: nothing is asked of the server; the schema goes in the system prompt;
- ``auto``: ``json_schema``, and after a 400 that names the response format (a server without
  schema support: older llama.cpp, some vLLM and Ollama builds) ``json_object`` from then on,
  remembered for the process per (base URL, model).

Whatever the mode, the answer is parsed and validated locally (``pipeline.llm.answers``).
"""

from __future__ import annotations

import copy
import json
import threading
from typing import Any

from pydantic import BaseModel

MODES = ("json_schema", "json_object", "prompt", "auto")
# words that show a 400 is about the structured-output request, in either API's spelling
_FORMAT_WORDS = ("response_format", "json_schema", "responsejsonschema", "response_json_schema",
                 "responsemimetype", "response_mime_type")


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
    return setting == "auto" and mode == "json_schema" and names_response_format(status or 0, detail)


def names_response_format(status: int, detail: str) -> bool:
    """True for a 400 that refuses the structured-output request itself."""
    lowered = detail.lower().replace(" ", "")
    return status == 400 and any(word in lowered for word in _FORMAT_WORDS)


_NEXT_MODES = {"json_schema": "auto or json_object", "json_object": "prompt"}


def with_mode_hint(error: Exception, status: int | None, mode: str, setting: str) -> Exception:
    """A permanent 400 that refuses ``mode`` itself, with the setting that gets past it."""
    from pipeline.errors import PermanentError

    if isinstance(error, PermanentError) and mode in _NEXT_MODES and names_response_format(status or 0, str(error)):
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
