"""The API docs page at ``/schema``: assets served from a package, and the OpenAPI document
completed with what the handlers cannot declare themselves.

The memory API and the proxy read their bodies and identity headers by hand (so every error
has OpenAI's shape), which leaves litestar's generated document without request bodies,
header parameters or a security scheme. ``complete`` adds them to the generated document once,
from the same types the handlers decode with, so the two cannot drift apart.

The page's scripts, stylesheet and icon come from the ``swagger-ui-bundle-v2`` package (Swagger
UI 5, which reads OpenAPI 3.1; kept current by the connexion maintainers) and are served by
memgate itself: the page renders with no network access.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
from litestar import Litestar
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.router import Router
from litestar.static_files import create_static_files_router

from gateway.http.memory_api import MemoryIn, MemoryPatch, SettingsPatch
from gateway.memory import identity
from gateway.memory.records import INTERNAL_FIELDS, Memory

ASSETS_PATH = "/schema-assets"
SECURITY_SCHEME = "bearerAuth"
_REF = "#/components/schemas/{name}"


def _assets_dir() -> Path:
    import swagger_ui_bundle  # type: ignore[import-untyped]

    return Path(swagger_ui_bundle.swagger_ui_path)


def render_plugin() -> SwaggerRenderPlugin:
    """Swagger UI at ``/schema``, loading only memgate's own URLs."""
    return SwaggerRenderPlugin(
        path="/",
        js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
        css_url=f"{ASSETS_PATH}/swagger-ui.css",
        standalone_preset_js_url=f"{ASSETS_PATH}/swagger-ui-standalone-preset.js",
        favicon=f"<link rel='icon' type='image/png' href='{ASSETS_PATH}/favicon-32x32.png'>",
    )


def assets_router() -> Router:
    return create_static_files_router(
        path=ASSETS_PATH,
        directories=[_assets_dir()],
        include_in_schema=False,
        send_as_attachment=False,
    )


# --- the document ----------------------------------------------------------------------------


def _header(name: str, pattern: str | None, description: str) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    if pattern:
        schema["pattern"] = f"^{pattern}$"
    return {
        "name": name,
        "in": "header",
        "required": False,
        "description": description,
        "schema": schema,
    }


_USER = _header(
    "X-Memory-User",
    identity._USER_RE.pattern,
    "The end user whose memories apply. Else the body's safety_identifier or user, else 'default'.",
)
_PROJECT = _header("X-Project-Id", identity._PROJECT_RE.pattern, "Optional project scope.")
_TASK = _header(
    "X-Memory-Task",
    identity._TASK_RE.pattern,
    "Optional task kind: memories scoped task:<kind> apply only to requests that name it.",
)
_MODE = {
    **_header("X-Memory-Mode", None, "on (default), off (plain proxy) or dry-run."),
    "schema": {"type": "string", "enum": list(identity.MODES), "default": "on"},
}
_TENANT = _header(
    "X-Memory-Tenant",
    identity._TENANT_RE.pattern,
    "With the admin token only: act for this tenant.",
)
PROXY_HEADERS = [_USER, _PROJECT, _TASK, _MODE]
MEMORY_API_HEADERS = [_USER, _PROJECT, _TENANT]

_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "param", "code"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {"type": ["string", "null"]},
            },
            "additionalProperties": True,
        }
    },
}
_CHAT_REQUEST = {
    "type": "object",
    "description": "OpenAI's chat completion request; fields memgate does not know pass "
    "through untouched.",
    "required": ["model", "messages"],
    "properties": {
        "model": {"type": "string"},
        "messages": {"type": "array", "items": {"type": "object"}},
        "stream": {"type": "boolean"},
    },
    "additionalProperties": True,
}
_RESPONSES_REQUEST = {
    "type": "object",
    "description": "OpenAI's Responses API request; memories are added to 'instructions', "
    "fields memgate does not know pass through untouched.",
    "required": ["model"],
    "properties": {
        "model": {"type": "string"},
        "input": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]},
        "instructions": {"type": ["string", "null"]},
        "previous_response_id": {"type": ["string", "null"]},
        "stream": {"type": "boolean"},
    },
    "additionalProperties": True,
}


def _memory_schema() -> dict[str, Any]:
    """A memory as the API returns it (``Memory.to_api``), from the record's own fields."""
    _, components = msgspec.json.schema_components([Memory], ref_template=_REF)
    schema = components["Memory"]
    props = schema["properties"]
    props.pop("evidence_trace", None)
    props.pop("evidence_excerpt", None)
    for name in INTERNAL_FIELDS:
        props.pop(name, None)
    props["object"] = {"type": "string", "const": "memory"}
    props["evidence"] = {
        "type": "object",
        "properties": {
            "trace_id": {"type": ["string", "null"]},
            "excerpt": {"type": ["string", "null"]},
        },
    }
    for name in ("created_at", "updated_at", "confirmed_at", "expires_at", "last_injected_at"):
        props[name] = {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}]}
    schema["required"] = sorted(props)
    schema["description"] = "A memory."
    return schema


def schemas() -> dict[str, Any]:
    """Every named schema the document refers to."""
    _, bodies = msgspec.json.schema_components(
        [MemoryIn, MemoryPatch, SettingsPatch], ref_template=_REF
    )
    memory = _memory_schema()
    written = {
        "allOf": [
            {"$ref": _REF.format(name="Memory")},
            {
                "type": "object",
                "properties": {
                    "deduplicated": {"type": "boolean"},
                    "superseded": {"type": "array", "items": {"type": "string"}},
                },
            },
        ]
    }
    return {
        **bodies,
        "Memory": memory,
        "MemoryWritten": written,
        "MemoryList": {
            "type": "object",
            "required": ["object", "data"],
            "properties": {
                "object": {"type": "string", "const": "list"},
                "data": {"type": "array", "items": {"$ref": _REF.format(name="Memory")}},
            },
        },
        "MemorySettings": {
            "type": "object",
            "properties": {"recall_paused": {"type": "boolean"}},
            "additionalProperties": True,
        },
        "ChatCompletionRequest": _CHAT_REQUEST,
        "ResponsesRequest": _RESPONSES_REQUEST,
        "Error": _ERROR,
        "RelayedError": {
            "description": "memgate's error (see Error) or the upstream's, relayed as sent.",
            "type": "object",
            "required": ["error"],
            "properties": {"error": {"type": "object"}},
        },
    }


def _json(name: str, description: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {
        "content": {"application/json": {"schema": {"$ref": _REF.format(name=name)}}}
    }
    if description:
        out["description"] = description
    return out


# (method, path) -> (request body schema or None, {status: response schema name})
_OPERATIONS: dict[tuple[str, str], tuple[str | None, dict[str, str]]] = {
    ("post", "/v1/memories"): ("MemoryIn", {"201": "MemoryWritten", "200": "MemoryWritten"}),
    ("get", "/v1/memories"): (None, {"200": "MemoryList"}),
    ("get", "/v1/memories/{memory_id}"): (None, {"200": "Memory"}),
    ("patch", "/v1/memories/{memory_id}"): ("MemoryPatch", {"200": "MemoryWritten"}),
    ("get", "/v1/memory/settings"): (None, {"200": "MemorySettings"}),
    ("patch", "/v1/memory/settings"): ("SettingsPatch", {"200": "MemorySettings"}),
    ("post", "/v1/memory/candidates/{candidate_id}/confirm"): (
        "MemoryPatch",
        {"201": "MemoryWritten", "200": "MemoryWritten"},
    ),
    ("post", "/v1/chat/completions"): ("ChatCompletionRequest", {}),
    ("post", "/chat/completions"): ("ChatCompletionRequest", {}),
    ("post", "/v1/responses"): ("ResponsesRequest", {}),
    ("post", "/responses"): ("ResponsesRequest", {}),
}
_OPTIONAL_BODY = {("post", "/v1/memory/candidates/{candidate_id}/confirm")}
_CHAT_PATHS = {"/v1/chat/completions", "/chat/completions", "/v1/responses", "/responses"}


_UPSTREAM_ANSWER = {
    "description": "The upstream's answer, relayed: a JSON object, or with 'stream': true "
    "server-sent events.",
    "content": {
        "application/json": {"schema": {"type": "object"}},
        "text/event-stream": {"schema": {}},
    },
}
_ERRORS_EVERYWHERE = (
    ("401", "Missing or wrong key."),
    ("404", "Not found."),
    ("429", "Too many wrong admin tokens from this address: wait 'retry_after' seconds."),
)
_WRITE_ERRORS = (
    ("409", "The memory or candidate changed meanwhile (for example, decided already)."),
    ("422", "The write gate refused the memory (a secret, a sensitive category, ...)."),
)


def complete(document: dict[str, Any]) -> dict[str, Any]:
    """Add bodies, header parameters, error responses and the bearer scheme (in place)."""
    components = document.setdefault("components", {})
    components.setdefault("schemas", {}).update(schemas())
    components.setdefault("securitySchemes", {})[SECURITY_SCHEME] = {
        "type": "http",
        "scheme": "bearer",
        "description": "The client's API key (forwarded upstream; its hash decides the "
        "tenant), or MEMGATE_ADMIN_TOKEN to act for any tenant and user.",
    }
    document["security"] = [{SECURITY_SCHEME: []}]
    for path, item in document.get("paths", {}).items():
        for method, operation in item.items():
            if not isinstance(operation, dict) or method not in {"get", "post", "patch", "delete"}:
                continue
            headers = PROXY_HEADERS if path in _CHAT_PATHS else MEMORY_API_HEADERS
            known = {p.get("name", "").lower() for p in operation.get("parameters", [])}
            operation.setdefault("parameters", []).extend(
                h for h in headers if h["name"].lower() not in known
            )
            body, responses = _OPERATIONS.get((method, path), (None, {}))
            if body:
                operation["requestBody"] = {
                    **_json(body),
                    "required": (method, path) not in _OPTIONAL_BODY,
                }
            out = operation.setdefault("responses", {})
            for status, name in responses.items():
                out[status] = _json(name, out.get(status, {}).get("description", "OK"))
            # Every error memgate answers has OpenAI's shape, including bad parameters that
            # the framework would otherwise describe with its own validation body. Chat and
            # responses also relay the upstream's own answers, errors included, as sent.
            error = "Error"
            if path in _CHAT_PATHS:
                out["200"] = _UPSTREAM_ANSWER
                error = "RelayedError"
            out["400"] = _json(error, "Bad request (invalid body, header or parameter).")
            for status, text in _ERRORS_EVERYWHERE:
                out.setdefault(status, _json(error, text))
            if body:
                out.setdefault("413", _json(error, "The request body is too large."))
            if path.startswith("/v1/memor"):
                out.setdefault(
                    "503", _json("Error", "The memory backend is unavailable; retry later.")
                )
                if method in {"post", "patch"}:
                    for status, text in _WRITE_ERRORS:
                        out.setdefault(status, _json("Error", text))
    return document


def install(app: Litestar) -> None:
    """Complete the app's generated document (built once, then served from cache)."""
    plugin: Any = app.plugins.get("OpenAPIPlugin")
    complete(plugin.provide_openapi_schema())
