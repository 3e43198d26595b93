"""Identity resolution: tenant from the key, user and project from headers or body, the mode."""

from __future__ import annotations

import pytest

from gateway.errors import InvalidIdentity
from gateway.identity import ANONYMOUS_TENANT, resolve, tenant_for_key


def test_tenant_is_a_truncated_hash_of_the_key_and_keys_never_share() -> None:
    a = resolve({"authorization": "Bearer sk-a"})
    b = resolve({"authorization": "Bearer sk-b"})
    assert a.tenant != b.tenant
    assert a.tenant == tenant_for_key("sk-a")
    assert "sk-a" not in a.tenant and len(a.tenant) == 24
    assert resolve({}).tenant == ANONYMOUS_TENANT


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
    ident = resolve({"x-memory-mode": "DRY-RUN", "x-project-id": "proj_1.a"})
    assert (ident.mode, ident.project_id) == ("dry-run", "proj_1.a")
    assert resolve({}).mode == "on" and resolve({}).project_id is None


def test_admin_may_act_for_another_tenant_others_may_not() -> None:
    headers = {"authorization": "Bearer admin-tok", "x-memory-tenant": "t123"}
    assert resolve(headers, admin_token="admin-tok").tenant == "t123"
    assert resolve(headers, admin_token="admin-tok").is_admin
    other = resolve(
        {"authorization": "Bearer sk-x", "x-memory-tenant": "t123"}, admin_token="admin-tok"
    )
    assert other.tenant == tenant_for_key("sk-x") and not other.is_admin


@pytest.mark.parametrize("value", ["", " ", "a b", "a|b", "*", "}", "x" * 129, "用户"])
def test_bad_user_header_rejected(value: str) -> None:
    with pytest.raises(InvalidIdentity):
        resolve({"x-memory-user": value})
