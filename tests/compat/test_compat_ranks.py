"""The compat power-limit optimizer under ``torch.distributed`` (Zeus's set-ups; see compat_plo_ranks.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import torchrun_command

SCRIPT = Path(__file__).with_name("compat_plo_ranks.py")


@pytest.mark.slow
def test_rank_local_shared_and_per_rank_optimizers(tmp_path: Path) -> None:
    proc = subprocess.run(
        torchrun_command(SCRIPT, str(tmp_path)), capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    alone = r0["alone"]
    assert alone["collectives"] == [], "rank 0's optimizer waited for rank 1, which built none"
    assert len(alone["limits"]) > 3 and max(alone["limits"]) == 300.0, "rank 0 alone profiled limits"
    assert alone["limits"] == r0["own"]["limits"] == r1["own"]["limits"], "the same profile in every set-up"
    # The same GPUs and selector (ZeusCost(0.5)) decide the same limit in each set-up.
    assert (
        alone["optimal"] == r0["shared"]["optimal"] == r0["own"]["optimal"] == r1["own"]["optimal"] == 250.0
    )
    assert r1["shared"] == {"limits": [290.0], "optimal": None}, "rank 1 set the limit of rank 0's GPU"
    assert "ranks share GPU(s) SIM-NVIDIA-A40-0" in proc.stdout + proc.stderr
    assert "2 GPUs monitored under torch.distributed" in proc.stdout + proc.stderr
