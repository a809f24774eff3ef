"""examples/gemma_qlora_sft.py in its tiny mode: TRL SFTTrainer + QLoRA on a tiny Gemma, offline, CPU."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.examples.hf_example import run_tiny

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("trl", "peft")),
    reason="needs the hf extra: pip install 'zeus-suite[hf]'",
)


@pytest.mark.slow
def test_tiny_qlora_sft_run_reports_simulated_energy(tmp_path: Path) -> None:
    proc, data = run_tiny("gemma_qlora_sft.py", tmp_path)
    if importlib.util.find_spec("bitsandbytes") is not None:  # bitsandbytes >= 0.48 quantises on the CPU
        assert data["quantized"] and "4-bit NF4" in proc.stdout
    assert 0 < data["trainable_params"] < data["total_params"]  # only the LoRA adapters train
    # 16 samples, micro-batches of 4 -> 4 per epoch; 2 per optimizer step -> 2 steps; 2 epochs.
    assert data["global_step"] == 4 and len(data["epochs"]) == 2
    train = data["train"]
    assert train["simulated"] == 1.0 and train["energy/train_j"] > 0
    assert data["train_output_metrics"]["energy/train_j"] == train["energy/train_j"]
    assert sum(e["energy/epoch_j"] for e in data["epochs"]) <= train["energy/train_j"] * (1 + 1e-9)
    rows = [line for line in proc.stdout.splitlines() if "│" in line and any(c.isdigit() for c in line)]
    assert len(rows) == 3 and all("simulated" in row for row in rows)
    assert "QLoRA SFT energy on NVIDIA A40 (simulated)" in proc.stdout
