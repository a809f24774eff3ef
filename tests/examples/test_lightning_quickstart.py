"""``examples/lightning_quickstart.py`` (``make demo``) in its tiny mode, with the power-limit optimizer."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lightning")
pytest.importorskip("matplotlib")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "lightning_quickstart.py"
_ABOUT_ENERGY = re.compile(r"\bJ\b|energy|power|\d\s*W\b", re.IGNORECASE)


@pytest.mark.slow
def test_tiny_run_reports_simulated_energy_table_plot_and_optimizer(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--tiny", "--optimize", "--simulate", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    lines = (proc.stdout + proc.stderr).splitlines()
    energy_lines = [line for line in lines if _ABOUT_ENERGY.search(line)]
    assert len(energy_lines) >= 6
    assert [line for line in energy_lines if "simulated" not in line.lower()] == []

    rows = [line for line in lines if re.match(r"^│\s+(\d+|Total)\s+│", line)]
    assert [row.split("│")[1].strip() for row in rows] == ["1", "2", "Total"]
    assert all("simulated" in row for row in rows)
    epoch_j = [float(row.split("│")[3]) for row in rows]
    # The fit's total also holds the moments between epochs (validation is excluded from both).
    assert epoch_j[0] > 0 and epoch_j[0] + epoch_j[1] - 0.2 <= epoch_j[2] <= 1.15 * (epoch_j[0] + epoch_j[1])
    assert any("Power-limit optimizer:" in line for line in lines)
    assert any("Profiled 300 W" in line for line in lines)  # the optimizer really profiled

    png = tmp_path / "lightning_quickstart_power.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (metrics,) = tmp_path.glob("lightning_quickstart/version_*/metrics.csv")
    with metrics.open(newline="") as f:
        logged = list(csv.DictReader(f))
    logged_epochs = [float(r["energy/epoch_j"]) for r in logged if r.get("energy/epoch_j")]
    assert logged_epochs == pytest.approx(epoch_j[:2], abs=0.06)  # the table shows what Lightning logged
    # Epochs and the fit (validation runs log their own energy/val/... rows, also marked simulated).
    assert [
        float(r["simulated"]) for r in logged if r.get("simulated") and not r.get("energy/val/total_j")
    ] == [
        1.0,
        1.0,
        1.0,
    ]
    assert all(float(r["simulated"]) == 1.0 for r in logged if r.get("energy/val/total_j"))


def _table_and_decision(output: str) -> tuple[list[str], list[str]]:
    lines = output.splitlines()
    rows = [line for line in lines if re.match(r"^│\s+(\d+|Total)\s+│", line)]
    decision = [line for line in lines if line.startswith("Power-limit optimizer:")]
    return rows, decision


@pytest.mark.slow
def test_optimize_demo_prints_the_same_decision_on_two_consecutive_runs(tmp_path: Path) -> None:
    """The simulated demo runs on virtual time, so a loaded machine cannot change its output."""
    outputs = []
    for run in range(2):
        proc = subprocess.run(
            [sys.executable, str(EXAMPLE), "--optimize", "--simulate", "--out", str(tmp_path / str(run))],
            capture_output=True,
            text=True,
            timeout=400,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
        outputs.append(_table_and_decision(proc.stdout))
    (rows, decision), again = outputs
    assert again == (rows, decision)  # the same table, to the joule, and the same decision
    assert decision == [
        "Power-limit optimizer: kept 275 W after profiling (simulated); the original limits were restored "
        "when training ended."
    ]
    limits = [row.split("│")[5].strip() for row in rows]
    assert limits[0].startswith("300–") and limits[-2] == "275"  # the limits in force, profiling included
