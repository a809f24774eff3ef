"""``examples/accelerate_loop.py`` in its tiny mode (simulated GPU, power-limit optimizer on)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("accelerate")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "accelerate_loop.py"
_ABOUT_ENERGY = re.compile(r"\bJ\b|energy|\d\s*W\b", re.IGNORECASE)


@pytest.mark.slow
def test_tiny_accelerate_loop_prints_a_simulated_energy_table() -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--tiny", "--simulate", "--optimize", "--grad-accum", "2"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    lines = proc.stdout.splitlines()
    energy_lines = [line for line in lines if _ABOUT_ENERGY.search(line)]
    assert len(energy_lines) >= 3  # title, header, per-step line (+ the optimizer's lines)
    assert [line for line in energy_lines if "simulated" not in line.lower()] == []
    rows = [line for line in lines if re.match(r"^│\s+(\d+|Total)\s+│", line)]
    assert [row.split("│")[1].strip() for row in rows] == ["1", "2", "Total"]
    assert all(float(row.split("│")[3]) > 0 and "simulated" in row for row in rows)
    # 2 epochs of 8 micro-batches, 2 per optimizer step.
    assert any(line.startswith("8 optimizer steps of 2 micro-batches") for line in lines)
    assert any(line.startswith("Power-limit optimizer") for line in lines)
