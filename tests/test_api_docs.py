"""The API docs: a complete OpenAPI document, and a /schema page that renders in a real
headless Chromium with every request outside the gateway refused."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
from playwright.sync_api import Browser, Route

from tests.conftest import Gateway

KEY = "sk-test-docs"


def spec(gateway: Gateway) -> dict[str, Any]:
    resp = httpx.get(f"{gateway.url}/schema/openapi.json")
    assert resp.status_code == 200
    return resp.json()


def resolve(document: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if not ref:
        return node
    assert ref.startswith("#/components/schemas/"), ref
    return document["components"]["schemas"][ref.rsplit("/", 1)[1]]


def walk(node: Any) -> Iterator[Any]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


def test_every_reference_resolves(gateway: Gateway) -> None:
    document = spec(gateway)
    schemas = document["components"]["schemas"]
    refs = [n["$ref"] for n in walk(document) if isinstance(n.get("$ref"), str)]
    assert refs
    for ref in refs:
        assert ref.rsplit("/", 1)[1] in schemas, ref


def test_memory_api_bodies_and_responses_are_described(gateway: Gateway) -> None:
    document = spec(gateway)
    create = document["paths"]["/v1/memories"]["post"]
    body = resolve(document, create["requestBody"]["content"]["application/json"]["schema"])
    assert set(body["required"]) == {"content", "type"}
    assert {"scope", "project_id", "expires_at", "source", "slot"} <= set(body["properties"])
    assert create["requestBody"]["required"] is True
    patch = document["paths"]["/v1/memories/{memory_id}"]["patch"]
    patch_body = resolve(document, patch["requestBody"]["content"]["application/json"]["schema"])
    assert "content" in patch_body["properties"] and not patch_body.get("required")
    settings = document["paths"]["/v1/memory/settings"]["patch"]
    settings_body = resolve(
        document, settings["requestBody"]["content"]["application/json"]["schema"]
    )
    assert settings_body["required"] == ["recall_paused"]
    listed = document["paths"]["/v1/memories"]["get"]["responses"]["200"]
    list_schema = resolve(document, listed["content"]["application/json"]["schema"])
    assert list_schema["properties"]["data"]["items"]["$ref"].endswith("/Memory")
    error = create["responses"]["400"]["content"]["application/json"]["schema"]
    assert set(resolve(document, error)["properties"]["error"]["required"]) == {
        "message",
        "type",
        "param",
        "code",
    }


def test_the_memory_schema_matches_what_the_api_returns(gateway: Gateway) -> None:
    headers = {"Authorization": f"Bearer {KEY}", "X-Memory-User": "docs-user"}
    created = httpx.post(
        f"{gateway.base_url}/memories",
        json={"content": "I like tea", "type": "preference"},
        headers=headers,
    )
    assert created.status_code == 201, created.text
    memory = httpx.get(f"{gateway.base_url}/memories/{created.json()['id']}", headers=headers)
    schema = spec(gateway)["components"]["schemas"]["Memory"]
    assert set(schema["properties"]) == set(memory.json())
    assert set(schema["required"]) == set(memory.json())


def test_header_parameters_and_security_scheme(gateway: Gateway) -> None:
    document = spec(gateway)
    scheme = document["components"]["securitySchemes"]["bearerAuth"]
    assert scheme == {**scheme, "type": "http", "scheme": "bearer"}
    assert document["security"] == [{"bearerAuth": []}]

    def headers(path: str, method: str) -> dict[str, dict[str, Any]]:
        params = document["paths"][path][method]["parameters"]
        return {p["name"]: p for p in params if p["in"] == "header"}

    chat = headers("/v1/chat/completions", "post")
    assert {"X-Memory-User", "X-Project-Id", "X-Memory-Task", "X-Memory-Mode"} <= set(chat)
    assert chat["X-Memory-Mode"]["schema"]["enum"] == ["on", "off", "dry-run"]
    assert chat["X-Memory-User"]["schema"]["pattern"].startswith("^")
    memory_api = headers("/v1/memories/{memory_id}", "get")
    assert {"X-Memory-User", "X-Project-Id", "X-Memory-Tenant"} <= set(memory_api)
    for path, item in document["paths"].items():
        for method, operation in item.items():
            names = [p["name"].lower() for p in operation.get("parameters", [])]
            assert len(names) == len(set(names)), (path, method, names)


def test_only_what_a_caller_sends_is_a_parameter(gateway: Gateway) -> None:
    # What handlers get injected (``services``) never shows up as a query parameter.
    document = spec(gateway)
    filters = {
        ("get", "/v1/memories"): {"project_id", "status", "type"},
        ("delete", "/v1/memories"): {"project_id", "all"},
    }
    for path, item in document["paths"].items():
        for method, operation in item.items():
            params = operation.get("parameters", [])
            in_path = {p["name"] for p in params if p["in"] == "path"}
            in_query = {p["name"] for p in params if p["in"] == "query"}
            assert {f"{{{name}}}" for name in in_path} == set(re.findall(r"{\w+}", path))
            assert in_query == filters.get((method, path), set()), (method, path)
            assert {p["in"] for p in params} <= {"path", "query", "header"}


def test_schema_page_renders_with_no_network(gateway: Gateway, browser: Browser) -> None:
    own = urlsplit(gateway.url).netloc
    refused: list[str] = []
    failed: list[str] = []

    def only_the_gateway(route: Route) -> None:
        if urlsplit(route.request.url).netloc == own:
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort("internetdisconnected")

    context = browser.new_context(offline=False)
    context.route("**/*", only_the_gateway)
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.on("requestfailed", lambda request: failed.append(request.url))
    try:
        page.goto(f"{gateway.url}/schema")
        page.wait_for_selector(".swagger-ui .info .title")
        assert "memgate" in page.inner_text(".swagger-ui .info .title")
        # the operations are listed, with their header parameters once opened
        page.get_by_text("Store a memory the caller states").click()
        page.get_by_text("X-Memory-User").first.wait_for()
        styled = page.evaluate(
            "getComputedStyle(document.querySelector('.swagger-ui .info .title')).fontSize"
        )
        assert styled and styled != "16px", styled  # the packaged stylesheet applied
    finally:
        context.close()
    assert refused == [], refused
    assert failed == [], failed
