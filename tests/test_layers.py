"""The package layout is the architecture: the layers' import rules hold.

``gateway.http`` is the HTTP surface, ``gateway.memory`` the memory rules, ``gateway.storage``
the only package that talks to Redis, ``gateway.observability`` metrics and logs. Checked on
the source (every import statement, including those inside functions), without importing it.
"""

from __future__ import annotations

import ast
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


def test_the_http_surface_does_not_import_storage() -> None:
    offenders = {
        module: sorted(n for n in names if n.startswith("gateway.storage"))
        for module, names in MODULES.items()
        if _layer(module) == "http"
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
