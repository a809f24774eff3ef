"""`zeus-suite power` through real subprocesses: live lines, summary, Ctrl-C/SIGTERM, CSV."""

from __future__ import annotations

import csv
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ZEUS = [sys.executable, "-m", "zeus_core._cli", "power"]
SIM = ["--simulate", "--cpu-indices"]  # simulated A40s, no CPU: same output on every machine


def zeus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ZEUS, *args], capture_output=True, text=True, timeout=60)


def summary_energy(out: str, gpu: int = 0) -> tuple[float, float]:
    elapsed = float(re.search(r"^Time: ([\d.]+) s", out, re.M).group(1))
    energy = float(re.search(rf"^GPU {gpu}: NVIDIA A40 \(simulated\)\s+([\d.]+)", out, re.M).group(1))
    return elapsed, energy


def test_duration_live_lines_summary_and_csv(tmp_path: Path) -> None:
    out_csv = tmp_path / "power.csv"
    r = zeus(
        *SIM, "--duration", "1.0", "--interval", "0.05", "--display-interval", "0.25", "--csv", str(out_csv)
    )
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    assert all("simulated" in line for line in lines), lines
    live = [line for line in lines if re.match(r"^\s+[\d.]+ s  GPU 0: 300\.0 W \[simulated\]$", line)]
    assert 2 <= len(live) <= 5
    elapsed, energy = summary_energy(r.stdout)
    assert elapsed == pytest.approx(1.0, abs=0.3)
    assert energy == pytest.approx(300.0 * elapsed, rel=0.02, abs=2.0)  # Time is shown to 0.01 s
    assert f"Power timeline written to {out_csv} [simulated]" in r.stdout

    with out_csv.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert {row["device"] for row in rows} == {"gpu0"}
    assert all(row["simulated"] == "1" and float(row["power_w"]) == 300.0 for row in rows)
    times = [float(row["time_s"]) for row in rows]
    assert times == sorted(times) and 10 <= len(rows) <= 30  # ~21 samples at 50 ms over 1 s


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_ends_the_live_view_and_prints_the_summary(sig: signal.Signals) -> None:
    proc = subprocess.Popen(
        [*ZEUS, *SIM, "--gpu-indices", "0", "1", "--display-interval", "0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()  # the live view is running
    assert "GPU 0: 300.0 W  GPU 1: 300.0 W [simulated]" in first
    proc.send_signal(sig)
    rest, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "zeus-suite power: 2 GPU(s), 0 CPU package(s) [simulated]" in rest
    for gpu in (0, 1):
        elapsed, energy = summary_energy(rest, gpu)
        assert energy == pytest.approx(300.0 * elapsed, rel=0.02, abs=2.0)  # Time is shown to 0.01 s


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--interval", "0"],
            "argument --interval: '0' is out of range: give a value within [0.001, 3600] s",
        ),
        (["--display-interval", "-1"], "argument --display-interval: '-1' is out of range"),
        (["--duration", "-2"], "argument --duration: '-2' is out of range: give a value within [0, 1e+07] s"),
        (["--cpu-indices", "9"], "there is no CPU 9"),
    ],
)
def test_bad_options_are_usage_errors(args: list[str], message: str) -> None:
    r = zeus("--simulate", *args)
    assert r.returncode == 2 and message in r.stderr
