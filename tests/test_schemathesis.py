"""Schemathesis over the gateway's own OpenAPI document: generated requests, valid and not,
on every documented operation, never get a 5xx nor an answer outside the documented shape.

A short, fixed run (examples per operation and seed are pinned, the example database is off);
the longer run is a documented command (README, "Fuzzing the API"). The test drives the
schemathesis CLI itself, exactly as that command does, against a gateway started by the
fixtures (real Redis, the loopback upstream stub).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Gateway

# What an answer must satisfy: no server error, a documented status code, content type and
# body shape. Left out on purpose: any bearer key is a valid client key (its hash is the
# tenant), so "ignored_auth" does not apply; "positive_data_acceptance" judges how precisely
# the document states what the handlers refuse, not what they answer.
CHECKS = (
    "not_a_server_error,status_code_conformance,content_type_conformance,"
    "response_schema_conformance"
)


def schemathesis_command(url: str, *, examples: int, seed: int, report: Path) -> list[str]:
    return [
        str(Path(sys.executable).with_name("schemathesis")),
        "run",
        f"{url}/schema/openapi.json",
        "--header",
        "Authorization: Bearer sk-schemathesis",
        "--checks",
        CHECKS,
        "--max-examples",
        str(examples),
        "--seed",
        str(seed),
        "--workers",
        "1",
        "--generation-database",
        "none",
        "--no-color",
        "--report",
        "junit",
        "--report-dir",
        str(report),
    ]


@pytest.mark.long
def test_generated_requests_get_no_5xx_and_documented_answers(
    fresh_gateway: Gateway, tmp_path: Path
) -> None:
    # A gateway of its own: generated requests send wrong admin tokens, which lock the
    # loopback address out of admin sign-in for a while.
    cmd = schemathesis_command(fresh_gateway.url, examples=8, seed=14, report=tmp_path)
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path, check=False
    )
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-2000:]
