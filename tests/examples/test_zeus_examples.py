"""Zeus's published examples, ported with only imports changed, run as a user runs them.

Each runs in a subprocess on the fake NVML of ``tests/fakes`` (one NVIDIA A40), since the Zeus
loops ask for ``ZeusMonitor(gpu_indices=[0])`` and CI has no GPU.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).parent / "zeus_on_fake_gpu.py"


def run(example: str, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, str(RUNNER), str(REPO / "examples" / example), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc


def test_only_the_imports_differ_from_zeus() -> None:
    for example in ("zeus_power_limit_optimizer.py", "zeus_energy_monitoring.py", "zeus_huggingface_clm.py"):
        lines = (REPO / "examples" / example).read_text().splitlines()
        code = [line.strip() for line in lines if not line.strip().startswith("#")]
        assert not [line for line in code if line.startswith(("import zeus", "from zeus.", "from zeus "))]
        assert any(line.startswith("# ZEUS: was `from zeus.") for line in lines)  # names what it replaced
        assert any(line.startswith("from zeus_core import") for line in code)


@pytest.mark.slow
def test_energy_monitoring_example_measures_windows() -> None:
    proc = run("zeus_energy_monitoring.py", "--epochs", "2", "--samples", "256")
    epochs = re.findall(r"Epoch (\d) consumed ([\d.]+) s and ([\d.]+) J", proc.stdout)
    assert [e[0] for e in epochs] == ["0", "1"] and all(float(e[2]) > 0 for e in epochs)
    total = re.search(r"Entire training: ([\d.]+) s, ([\d.]+) J", proc.stdout)
    assert total is not None
    assert float(total.group(2)) >= sum(float(e[2]) for e in epochs) * 0.99  # epochs nest in the run
    assert "GPU energy: {0: " in proc.stdout


@pytest.mark.slow
def test_power_limit_optimizer_example_profiles_and_decides() -> None:
    proc = run(
        "zeus_power_limit_optimizer.py",
        "--epochs",
        "6",
        "--samples",
        "256",
        "--warmup_steps",
        "1",
        "--profile_steps",
        "2",
        "--pl_step",
        "50",
    )
    assert len(re.findall(r"Top-1 accuracy: [\d.]+", proc.stdout)) == 6
    assert "outside training" not in proc.stderr  # Zeus's loop (no on_train_begin) drives the optimizer
    limit = float(re.search(r"Power limit at the end: (\d+) W", proc.stdout).group(1))  # type: ignore[union-attr]
    assert 100 <= limit <= 300  # an A40 limit the optimizer chose
    assert "[zeus-suite]" in proc.stderr  # its decision reaches the console


@pytest.mark.slow
def test_power_limit_optimizer_example_runs_zeus_loop_to_the_end() -> None:
    proc = run("zeus_power_limit_optimizer.py", "--epochs", "2", "--samples", "128")
    assert len(re.findall(r"Top-1 accuracy: [\d.]+", proc.stdout)) == 2
    assert "Power limit at the end:" in proc.stdout


@pytest.mark.slow
def test_huggingface_example_profiles_decides_and_logs_the_limit() -> None:
    proc = run(
        "zeus_huggingface_clm.py",
        "--max_steps",
        "40",
        "--warmup_steps",
        "1",
        "--profile_steps",
        "2",
        "--pl_step",
        "50",
        "--output_dir",
        "out/test_zeus_huggingface_clm",
    )
    limit = float(re.search(r"Power limit chosen: (\d+) W", proc.stdout).group(1))  # type: ignore[union-attr]
    assert 100 <= limit <= 300  # an A40 limit chosen through the Trainer callback
    energy = float(re.search(r"Entire training: [\d.]+ s, ([\d.]+) J", proc.stdout).group(1))  # type: ignore[union-attr]
    assert energy > 0
    logged = re.search(r"Power limits logged: \[(.*)\]", proc.stdout).group(1)  # type: ignore[union-attr]
    assert logged and all(100 <= float(w) <= 300 for w in logged.split(","))  # power/limit_w in log_history
    assert "[zeus-suite] Power limit" in proc.stderr  # the decision reaches the console
