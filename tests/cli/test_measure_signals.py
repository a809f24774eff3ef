"""Issue 30: `zeus-suite measure` keeps its report (and CSV row) on SIGHUP, SIGQUIT and SIGUSR1.

Before, only SIGINT and SIGTERM were passed on: a closed terminal (SIGHUP), Ctrl-backslash (SIGQUIT) or
Slurm's ``--signal=USR1@...`` killed `zeus-suite measure` itself, without a report, while the
command might run on unmeasured.
"""

from __future__ import annotations

import csv
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ZEUS = [sys.executable, "-m", "zeus_core._cli", "measure", "--simulate", "--cpu-indices"]


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1])
def test_the_report_survives_the_signal(tmp_path: Path, signum: signal.Signals) -> None:
    out_csv = tmp_path / "runs.csv"
    code = "import time; print('ready', flush=True); time.sleep(30)"
    proc = subprocess.Popen(
        [*ZEUS, "--csv", str(out_csv), "--", sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signum  # the command died of the signal passed on to it
    assert f"exited with code {128 + signum} after {signum.name}" in err and "Total" in err
    with out_csv.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1 and rows[0]["exit_code"] == str(128 + signum)


def test_power_stops_with_its_summary_on_sighup() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "zeus_core._cli",
            "power",
            "--simulate",
            "--cpu-indices",
            "--display-interval",
            "0.1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # it measures
    proc.send_signal(signal.SIGHUP)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode in (0, 128 + signal.SIGHUP), err
    assert "Total" in out + err or "J" in out + err


@pytest.mark.parametrize(
    ("command", "flag", "value", "problem"),
    [
        ("plan", "--deadline", "nan", "is not a finite number of s"),
        ("plan", "--deadline", "inf", "is not a finite number of s"),
        ("plan", "--deadline", "-1", "out of range"),
        ("plan", "--microbatches", "1e9", "is not an integer"),
        ("plan", "--microbatches", "1000000000", "out of range"),
        ("plan", "--unit-time", "1e-300", "out of range"),
        ("plan", "--blocking-power", "1e308", "out of range"),
        ("power", "--duration", "nan", "is not a finite number of s"),
        ("power", "--interval", "inf", "is not a finite number of s"),
        ("power", "--interval", "0", "out of range"),
        ("power", "--display-interval", "1e308", "out of range"),
    ],
)
def test_absurd_flag_values_are_refused_with_a_clear_message(
    tmp_path: Path, command: str, flag: str, value: str, problem: str
) -> None:
    args = [command, flag, value]
    if command == "plan":
        args += ["--profile", str(tmp_path / "p.csv"), "--out", str(tmp_path / "out")]
        if flag != "--microbatches":
            args += ["--microbatches", "4"]
    else:
        args += ["--simulate", "--cpu-indices"]
    done = subprocess.run(
        [sys.executable, "-m", "zeus_core._cli", *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert f"argument {flag}: {value!r} {problem}" in done.stderr or (
        f"argument {flag}: {value!r}" in done.stderr and problem in done.stderr
    )
    assert "Traceback" not in done.stderr
