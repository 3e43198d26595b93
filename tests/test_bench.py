"""``memgate bench proxy`` runs end to end with tiny numbers and prints every row.

No timing assertions: speed is read from the printed figures, never asserted in tests.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from benchmarks import bench


@pytest.mark.long
def test_bench_proxy_smoke() -> None:
    # The bench starts its own stub and gateway; it uses MEMGATE_REDIS_URL when set (passed on
    # in the environment), else the embedded Redis in a temporary data dir.
    args = ["bench", "proxy", "--rounds", "5", "--warmup", "2"]
    args += ["--concurrency", "4", "--seconds", "0.2"]
    done = subprocess.run(
        [sys.executable, "-m", "gateway.cli", *args],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=90,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "Concurrency 1: 5 rounds" in out
    assert "Concurrency 4: 0.2 s per target" in out
    assert "share this machine's" in out
    number = r"\d+\.\d\d"
    for kind in ("plain", "streamed"):
        assert re.search(rf"^\s+{kind}\s+direct\s+{number}\s+{number}\s", out, re.M), out
        for mode in ("off", "on"):
            # Sequential row: p50, p99, added p50, added p99 are figures.
            row = rf"^\s+{kind}\s+memgate, memory {mode}\s+{number}\s+-?{number}\s+"
            assert re.search(row + rf"-?{number}\s+-?{number}\s", out, re.M), out
            # Load row: req/s, ratio to direct, p50, p99, no errors.
            load = rf"^\s+{kind}\s+memgate, memory {mode}\s+\d+\s+{number}x\s+{number}\s+"
            assert re.search(load + rf"{number}\s+0$", out, re.M), out
    streamed_off = next(
        line for line in out.splitlines() if re.match(r"\s+streamed\s+memgate, memory off", line)
    )
    assert streamed_off.split()[8:11] != ["-", "-", "-"]  # TTFB p50 and added TTFB are filled
    assert re.search(r"^verdict: memgate \(memory off\) adds -?\d+\.\d\d ms p50", out, re.M)
    assert "FAILED" not in out


@pytest.mark.unit
def test_percentile_interpolates() -> None:
    assert bench.percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert bench.percentile([1.0, 2.0], 0.5) == pytest.approx(1.5)
    assert bench.percentile([5.0], 0.99) == 5.0


@pytest.mark.unit
def test_bad_arguments_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.run_proxy_bench(rounds=0) == 2
    assert "rounds >= 1" in capsys.readouterr().out
