"""Identity resolution: tenant from the key, user and project from headers or body, the mode."""

from __future__ import annotations

import pytest

from gateway.errors import InvalidIdentity
from gateway.memory.identity import Access, client_access, client_key, resolve, tenant_for_key

pytestmark = pytest.mark.unit  # no Redis, servers or browsers


def test_tenant_is_a_truncated_hash_of_the_key_and_keys_never_share() -> None:
    a = resolve({"authorization": "Bearer sk-a"})
    b = resolve({"authorization": "Bearer sk-b"})
    assert a.tenant != b.tenant
    assert a.tenant == tenant_for_key("sk-a")
    assert "sk-a" not in a.tenant and len(a.tenant) == 24


def test_azure_api_key_decides_the_tenant_like_a_bearer_key() -> None:
    one = resolve({"api-key": "azure-key-one"})
    two = resolve({"api-key": "azure-key-two"})
    assert one.tenant == tenant_for_key("azure-key-one") != two.tenant
    assert client_key({"authorization": "Bearer sk-b", "api-key": "az"}) == "sk-b"


@pytest.mark.parametrize(
    "headers",
    [{}, {"authorization": "Basic dXNlcjpwYXNz"}, {"authorization": "Bearer "}, {"api-key": " "}],
)
def test_no_key_means_no_tenant_and_no_memory(headers: dict[str, str]) -> None:
    assert client_access(headers).tenant is None
    ident = resolve({**headers, "x-memory-mode": "on"})
    assert ident.tenant == "" and ident.mode == "off"


def test_user_precedence_header_then_safety_identifier_then_user_then_default() -> None:
    body = {"safety_identifier": "sid-1", "user": "u-1"}
    assert resolve({"x-memory-user": "alice"}, body).user == "alice"
    assert resolve({}, body).user == "sid-1"
    assert resolve({}, {"user": "u-1"}).user == "u-1"
    assert resolve({}, {}).user == "default"


def test_body_user_outside_charset_maps_to_a_stable_hash() -> None:
    one = resolve({}, {"user": "张三 <zhang@example.com>"}).user
    assert one.startswith("h-") and one == resolve({}, {"user": "张三 <zhang@example.com>"}).user


def test_mode_and_project() -> None:
    key = {"authorization": "Bearer sk-a"}
    ident = resolve({**key, "x-memory-mode": "DRY-RUN", "x-project-id": "proj_1.a"})
    assert (ident.mode, ident.project_id) == ("dry-run", "proj_1.a")
    assert resolve(key).mode == "on" and resolve(key).project_id is None


def test_access_decides_tenant_admin_and_key_id() -> None:
    access = Access(tenant="t123", is_admin=True, key_id=None)
    ident = resolve({"authorization": "Bearer whatever"}, access=access)
    assert (ident.tenant, ident.is_admin, ident.actor) == ("t123", True, "admin")
    keyed = resolve({}, access=Access(tenant="t-9", key_id="key_0123456789abcdef"))
    assert (keyed.tenant, keyed.key_id, keyed.actor) == ("t-9", "key_0123456789abcdef", "user")


@pytest.mark.parametrize("value", ["", " ", "a b", "a|b", "*", "}", "x" * 129, "用户"])
def test_bad_user_header_rejected(value: str) -> None:
    with pytest.raises(InvalidIdentity):
        resolve({"x-memory-user": value})
