"""examples/hf_trainer.py in its tiny mode, as a user runs it (a subprocess, offline, CPU)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.examples.hf_example import run_tiny

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None,
    reason="needs the hf extra: pip install 'zeus-suite[hf]'",
)


@pytest.mark.slow
def test_tiny_run_reports_simulated_energy_per_epoch(tmp_path: Path) -> None:
    proc, data = run_tiny("hf_trainer.py", tmp_path)
    # 48 samples, micro-batches of 8 -> 6 per epoch; 2 per optimizer step -> 3 steps; 2 epochs.
    assert (data["global_step"], data["micro_batches"]) == (6, 12)
    assert len(data["epochs"]) == 2
    train = data["train"]
    assert train["simulated"] == 1.0 and train["energy/train_j"] > 0
    assert data["train_output_metrics"]["energy/train_j"] == train["energy/train_j"]
    assert sum(e["energy/epoch_j"] for e in data["epochs"]) <= train["energy/train_j"] * (1 + 1e-9)
    assert train["power/train_avg_w"] == pytest.approx(
        300.0, rel=0.01
    )  # the simulated A40 at its default limit
    rows = [line for line in proc.stdout.splitlines() if "│" in line and any(c.isdigit() for c in line)]
    assert len(rows) == 3  # two epochs and the total
    assert all("simulated" in row for row in rows)
    assert "Energy on NVIDIA A40 (simulated)" in proc.stdout
    assert "6 optimizer steps (12 micro-batches)" in proc.stdout
