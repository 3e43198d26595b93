"""The README documents every setting the gateway reads, and CI runs the README's command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gateway.config import env_var_names

pytestmark = pytest.mark.unit  # no Redis, servers or browsers

ROOT = Path(__file__).resolve().parent.parent


def test_every_env_var_is_in_the_readme_table() -> None:
    readme = (ROOT / "README.md").read_text()
    documented = set(re.findall(r"^\| `(MEMGATE_[A-Z_]+)` \|", readme, flags=re.M))
    assert documented == set(env_var_names())


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "./scripts/test" in readme and "./scripts/serve" in readme
    assert "./scripts/test" in (ROOT / ".ci" / "run").read_text()
