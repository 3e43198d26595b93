"""The package layout is the architecture: the layers' import rules hold.

``gateway.http`` is the HTTP surface, ``gateway.memory`` the memory rules, ``gateway.storage``
the only package that talks to Redis (the only one that imports redis, reaches a client, sends
a command or names a key), ``gateway.observability`` metrics and logs. Checked on the source
(every statement, including those inside functions), without importing it.
"""

from __future__ import annotations

import ast
import re
from itertools import combinations
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gateway"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Absolute names of the modules ``path`` imports (``from x import y`` counts x and x.y)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


MODULES = {_module_name(path): _imports(path) for path in sorted(PACKAGE.rglob("*.py"))}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else "top"


def test_the_layers_exist_and_are_at_most_two_levels_deep() -> None:
    assert {_layer(m) for m in MODULES} == {"top", "http", "memory", "storage", "observability"}
    assert max(len(m.split(".")) for m in MODULES) == 3


def test_only_storage_imports_redis() -> None:
    offenders = {
        module: sorted(n for n in names if n.split(".")[0] in ("redis", "redisvl"))
        for module, names in MODULES.items()
        if _layer(module) != "storage"
    }
    assert {m: n for m, n in offenders.items() if n} == {}


# What only storage may do: hold or reach a Redis client, send a command, build a key.
_CLIENT_ATTRIBUTES = {"redis", "execute_command", "pipeline", "register_script", "scan_iter"}
_KEY_HELPERS = {"memory_key", "user_key", "_key"}
_KEY_NAME = re.compile(r"^(KEY_ROOT|STREAM|GROUP)$|_keys?$")
_KEY_STRING = re.compile(r"^memgate:[a-z]")


def _redis_uses(path: Path) -> list[str]:
    """Where ``path`` reaches a Redis client, a store's private helper, or a Redis key."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        where = f"{path.name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Attribute):
            owner = node.value
            owner_name = (
                owner.id
                if isinstance(owner, ast.Name)
                else owner.attr
                if isinstance(owner, ast.Attribute)
                else ""
            )
            if node.attr in _CLIENT_ATTRIBUTES or node.attr in _KEY_HELPERS:
                found.append(f"{where} .{node.attr}")
            elif node.attr.startswith("_") and owner_name.lower().endswith(("store", "storage")):
                found.append(f"{where} {owner_name}.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gateway.storage"):
            found += [f"{where} imports {a.name}" for a in node.names if _KEY_NAME.search(a.name)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _KEY_STRING.match(node.value):
                found.append(f"{where} {node.value!r}")
    return found


def test_only_storage_reaches_a_redis_client_or_builds_a_key() -> None:
    """Outside ``gateway.storage`` no code holds the store's client (``.redis``), sends a
    command, uses a store's private helpers, or names a Redis key; it calls storage's
    typed methods."""
    offenders = {
        _module_name(path): uses
        for path in sorted(PACKAGE.rglob("*.py"))
        if _layer(_module_name(path)) != "storage" and (uses := _redis_uses(path))
    }
    assert offenders == {}


def test_the_redis_check_finds_what_it_forbids(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from gateway.storage.candidates import STREAM, candidate_keys\n"
        "from gateway.storage.store import KEY_ROOT, Store\n"
        "async def f(store, self):\n"
        "    await store.redis.get(self.store._key('cand', 't', 'u'))\n"
        "    await self.storage._redis.set('memgate:mine', 1)\n"
        "    async with client.pipeline() as pipe: pipe.execute_command('PING')\n"
        "    return store.memory_key('t', 'u', 'm'), 'memgate: not a key'\n",
        encoding="utf-8",
    )
    found = " ".join(_redis_uses(sample))
    for use in (
        "imports STREAM",
        "imports candidate_keys",
        "imports KEY_ROOT",
        ".redis",
        "._key",
        "storage._redis",
        "'memgate:mine'",
        ".pipeline",
        ".execute_command",
        ".memory_key",
    ):
        assert use in found, use
    assert "imports Store" not in found and "not a key" not in found


def test_the_http_surface_does_not_import_storage() -> None:
    offenders = {
        module: sorted(n for n in names if n.startswith("gateway.storage"))
        for module, names in MODULES.items()
        if _layer(module) == "http"
    }
    assert {m: n for m, n in offenders.items() if n} == {}


def test_observability_imports_no_other_layer() -> None:
    # Metrics and logs sit beneath the layers that report to them; their label values are
    # their own (recall's drop reasons included).
    offenders = {
        module: sorted(
            n for n in names if n.startswith(("gateway.memory", "gateway.http", "gateway.storage"))
        )
        for module, names in MODULES.items()
        if _layer(module) == "observability"
    }
    assert {m: n for m, n in offenders.items() if n} == {}


def test_no_two_modules_import_each_other() -> None:
    def imports(a: str, b: str) -> bool:
        return b in MODULES[a] and b != a

    mutual = [(a, b) for a, b in combinations(MODULES, 2) if imports(a, b) and imports(b, a)]
    assert mutual == []


def test_the_package_does_not_import_the_benchmarks() -> None:
    # Only the CLI reaches them, from a repository checkout (they are not in the wheel).
    offenders = [
        module
        for module, names in MODULES.items()
        if module != "gateway.cli" and any(n.split(".")[0] == "benchmarks" for n in names)
    ]
    assert offenders == []


def test_collaborators_are_injected_not_read_from_app_state() -> None:
    # Handlers declare ``services: NamedDependency[Services]`` (typed, checked by mypy); the
    # app's ``State`` holds nothing of memgate's, so neither it nor ``app.state`` is used.
    users_of_state = [m for m, names in MODULES.items() if "litestar.datastructures.State" in names]
    reads = [
        f"{_module_name(path)}:{node.lineno}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute)
        and node.attr == "state"
        and (
            (isinstance(node.value, ast.Name) and node.value.id == "app")
            or (isinstance(node.value, ast.Attribute) and node.value.attr == "app")
        )
    ]
    assert (users_of_state, reads) == ([], [])
