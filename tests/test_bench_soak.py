"""``memgate bench soak`` end to end, short: zero errors, zero answers without their memory,
zero mining jobs lost, every log line JSON. No timing assertions: figures are printed only."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest


@pytest.mark.long
def test_short_soak_loses_nothing() -> None:
    args = ["bench", "soak", "--seconds", "1", "--concurrency", "12", "--users", "4"]
    done = subprocess.run(
        [sys.executable, "-m", "gateway.cli", *args],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    requests = int(re.search(r"^requests:\s+(\d+)$", out, re.M).group(1))  # type: ignore[union-attr]
    assert requests > 0
    for label in (
        "errors",
        "answers missing their memory",
        "mining jobs lost",
        "background writes lost",
    ):
        assert re.search(rf"^{label}:\s+0$", out, re.M), out
    assert re.search(r"^log lines: [1-9]\d*, not JSON: 0$", out, re.M), out
    assert "verdict: ok" in out
