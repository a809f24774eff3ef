"""`zeus-suite measure` through real subprocesses (exit codes, signals, CSV), and its report."""

from __future__ import annotations

import csv
import io
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from zeus_core.device._base import CPU, CpuEnergy
from zeus_core.monitor._cli_measure import render_report
from zeus_core.monitor._measurement import Measurement
from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock

ZEUS = [sys.executable, "-m", "zeus_core._cli"]
SIM = ["measure", "--simulate", "--cpu-indices"]  # a simulated A40, no CPU: same result on every machine


def zeus(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ZEUS, *args], capture_output=True, text=True, timeout=timeout)


def child(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def report_lines(stderr: str) -> list[str]:
    """The report: from its title line to the end of stderr."""
    lines = stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("zeus-suite measure: `"))
    return [line for line in lines[start:] if line.strip()]


def elapsed_and_gpu_energy(stderr: str, gpu: int = 0) -> tuple[float, float]:
    elapsed = float(re.search(r"^Time: ([\d.]+) s", stderr, re.M).group(1))
    energy = float(re.search(rf"^GPU {gpu}: NVIDIA A40 \(simulated\)\s+([\d.]+)", stderr, re.M).group(1))
    return elapsed, energy


def followed_cpu_s(stderr: str) -> float:
    """The command's CPU seconds, from the note on what the simulated GPU followed."""
    return float(re.search(r"used the CPU: ([\d.]+) CPU-s in", stderr).group(1))


def assert_follows_the_command(stderr: str, gpu: int = 0) -> None:
    """A simulated A40 draws 30 W idle and 300 W while the command uses the CPU (shown to 0.01 s)."""
    elapsed, energy = elapsed_and_gpu_energy(stderr, gpu)
    busy = min(followed_cpu_s(stderr), elapsed)
    assert energy == pytest.approx(30.0 * elapsed + 270.0 * busy, rel=0.02, abs=4.0)


def test_exit_code_output_and_simulated_report() -> None:
    r = zeus(*SIM, "--", *child("import sys, time; time.sleep(0.3); print('hello from child'); sys.exit(3)"))
    assert r.returncode == 3
    assert r.stdout == "hello from child\n"  # the command's output is untouched; the report is on stderr
    lines = report_lines(r.stderr)
    assert "exited with code 3" in lines[0]
    assert all("simulated" in line for line in lines), lines
    assert any(line.startswith("Total") for line in lines)
    elapsed, energy = elapsed_and_gpu_energy(r.stderr)
    assert elapsed >= 0.3
    assert_follows_the_command(r.stderr)
    assert energy < 0.8 * 300.0 * elapsed  # mostly asleep: far below a GPU busy throughout


def test_simulated_gpu_is_busy_while_the_command_computes() -> None:
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\ntime.sleep(0.6)"
    r = zeus(*SIM, "--", *child(spin))
    assert r.returncode == 0, r.stderr
    assert followed_cpu_s(r.stderr) >= 0.6
    assert_follows_the_command(r.stderr)
    elapsed, energy = elapsed_and_gpu_energy(r.stderr)
    assert energy > 30.0 * elapsed + 270.0 * 0.55  # at least the 0.6 CPU-s of spinning at busy power


def test_death_by_signal_gives_128_plus_n_and_still_reports() -> None:
    r = zeus(*SIM, "--", *child("import os, signal; os.kill(os.getpid(), signal.SIGKILL)"))
    assert r.returncode == 128 + signal.SIGKILL
    assert "exited with code 137" in r.stderr and "Total" in r.stderr


def start_measured(code: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [*ZEUS, *SIM, "--", *child(code)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"  # the child runs
    return proc


def test_ctrl_c_is_forwarded_and_the_report_printed() -> None:
    proc = start_measured("import time; print('ready', flush=True); time.sleep(30)")
    proc.send_signal(signal.SIGINT)  # to zeus-suite only, as `kill -INT` would
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGINT  # the child died of KeyboardInterrupt
    assert "KeyboardInterrupt" in err  # ... raised in the child: the signal reached it
    lines = report_lines(err)
    assert "exited with code 130 after SIGINT" in lines[0]
    assert all("simulated" in line for line in lines)
    elapsed, energy = elapsed_and_gpu_energy(err)
    assert 0 < elapsed < 30 and energy > 0


def test_sigterm_is_forwarded_to_a_child_that_handles_it() -> None:
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: (print('child got SIGTERM', flush=True), sys.exit(7)))\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n"
    )
    proc = start_measured(code)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert out == "child got SIGTERM\n"
    assert proc.returncode == 7
    assert "exited with code 7 after SIGTERM" in err


def test_command_not_found_exits_127_with_a_clear_error() -> None:
    r = zeus(*SIM, "--", "zeus-no-such-command-xyz", "--flag")
    assert r.returncode == 127
    assert "cannot run 'zeus-no-such-command-xyz'" in r.stderr and "command not found" in r.stderr
    assert "Total" not in r.stderr


def test_missing_command_is_a_usage_error() -> None:
    r = zeus(*SIM)
    assert r.returncode == 2 and "give the command to run" in r.stderr


def test_unknown_cpu_index_is_a_usage_error_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    r = zeus("measure", "--simulate", "--cpu-indices", "7", "--", *child(f"open({str(marker)!r}, 'w')"))
    assert r.returncode == 2 and "there is no CPU 7" in r.stderr
    assert not marker.exists()


def test_csv_rows_appended_and_other_columns_refused(tmp_path: Path) -> None:
    out = tmp_path / "runs.csv"
    for code in (0, 4):
        code_line = f"import sys, time; time.sleep(0.2); sys.exit({code})"
        r = zeus(*SIM, "--csv", str(out), "--", *child(code_line))
        assert r.returncode == code
    with out.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == [
        "start_time",
        "command",
        "exit_code",
        "elapsed_time",
        "gpu0_energy",
        "total_energy",
        "estimated_gpus",
        "simulated",
    ]
    assert [row["exit_code"] for row in rows] == ["0", "4"]
    for row in rows:
        assert row["simulated"] == "1" and row["estimated_gpus"] == ""
        assert row["command"].startswith(sys.executable) and "time.sleep(0.2)" in row["command"]
        elapsed, energy = float(row["elapsed_time"]), float(row["gpu0_energy"])
        assert elapsed >= 0.2 and 30.0 * elapsed * 0.98 <= energy <= 300.0 * elapsed
        assert float(row["total_energy"]) == pytest.approx(energy)

    marker = tmp_path / "ran"
    r = zeus(
        "measure",
        "--simulate",
        "--gpu-indices",
        "0",
        "1",
        "--cpu-indices",
        "--csv",
        str(out),
        "--",
        *child(f"open({str(marker)!r}, 'w')"),
    )
    assert r.returncode == 2 and "Use a new file for a different set of devices" in r.stderr
    assert not marker.exists()  # refused before the command ran
    assert len(out.read_text().splitlines()) == 3


def test_default_devices_with_two_simulated_gpus() -> None:
    """No --cpu-indices: CPUs are discovered (RAPL where readable, else a note); GPUs 0 and 1 simulated."""
    r = zeus("measure", "--simulate", "--gpu-indices", "0", "1", "--", *child("import time; time.sleep(0.2)"))
    assert r.returncode == 0
    lines = report_lines(r.stderr)
    assert all("simulated" in line for line in lines)
    for gpu in (0, 1):
        assert_follows_the_command(r.stderr, gpu)


class _Package(CPU):
    def __init__(self, index: int, dram: bool) -> None:
        super().__init__(index)
        self._dram = dram

    @property
    def name(self) -> str:
        return f"package-{self.index}"

    @property
    def has_dram(self) -> bool:
        return self._dram

    def get_energy(self) -> CpuEnergy:
        return CpuEnergy(0.0, 0.0 if self._dram else None)


def render(title: str, m: Measurement, gpus: list, cpus: list) -> list[str]:
    console = Console(record=True, width=200, file=io.StringIO())
    console.print(render_report(title, m, gpus, cpus))
    return [line.rstrip() for line in console.export_text().splitlines() if line.strip()]


def test_report_names_each_source() -> None:
    clock = VirtualClock()
    gpus = [SimulatedGPU(PhysicalModel.a40(), index=i, clock=clock) for i in (0, 1)]
    m = Measurement(10.0, {0: 1000.0, 1: 500.0}, {0: 200.0, 1: 100.0}, {0: 50.0}, frozenset({1}))
    lines = render("zeus-suite measure: `train`", m, gpus, [_Package(0, True), _Package(1, False)])
    assert lines[0] == "zeus-suite measure: `train`" and lines[1] == "Time: 10.00 s"
    rows = {line.split("  ")[0]: re.split(r"\s{2,}", line) for line in lines[3:]}
    # Devices that are simulated say so even inside a report that is not.
    assert rows["GPU 0: NVIDIA A40 (simulated)"][1:] == ["1000.0", "100.0", "simulated"]
    assert rows["CPU 0: package-0 + DRAM"][1:] == ["200.0", "20.0", "RAPL counter"]
    assert rows["CPU 1: package-1"][1:] == ["100.0", "10.0", "RAPL counter"]
    assert rows["DRAM 0"][1:] == ["50.0", "5.0", "RAPL counter"]
    assert rows["Total"][1:] == ["1850.0", "185.0", "all devices above (includes estimates)"]
    assert "DRAM 1" not in rows

    sim = Measurement(2.0, {0: 600.0}, {0: 10.0}, {}, frozenset(), simulated=True)
    lines = render("zeus-suite measure: `x`", sim, gpus[:1], [_Package(0, False)])
    assert all("simulated" in line for line in lines), lines
    assert any("RAPL counter; simulated run" in line for line in lines)
