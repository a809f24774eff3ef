"""Cross-rank aggregation with 2 gloo processes: logged job energy = sum of the ranks' measurements."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import torchrun_command
from zeus_core import _distributed as distributed
from zeus_core.monitor._measurement import Measurement

SCRIPT = Path(__file__).parent / "scripts" / "ddp_tracker.py"


def test_single_process_is_a_no_op() -> None:
    m = Measurement(2.0, {0: 10.0}, {0: 4.0}, {0: 1.0})
    job = distributed.reduce_measurement(m)
    assert (job.time, job.gpu_energy, job.cpu_energy, job.dram_energy, job.num_ranks) == (
        2.0,
        10.0,
        4.0,
        1.0,
        1,
    )
    assert job.total_energy == 15.0
    assert distributed.all_reduce([1.0, 2.0], "max") == [1.0, 2.0]
    assert distributed.broadcast_object({"a": 1}) == {"a": 1}
    assert distributed.rank() == 0 and distributed.world_size() == 1 and distributed.is_rank_zero()


@pytest.mark.slow
def test_two_ranks_sum_energy_and_take_the_longest_time(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = torchrun_command(SCRIPT, str(tmp_path))
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    p1 = r1["epoch"]["energy/epoch_rank1_gpu0_j"] / 3.0  # rank 1's GPU power under its 150 W limit
    assert p1 <= 150.0
    assert r0["epoch"]["energy/epoch_rank0_gpu0_j"] == pytest.approx(2.0 * 300.0)
    for r in (r0, r1):  # every rank sees the same job totals
        assert r["epoch"]["energy/epoch_j"] == pytest.approx(2.0 * 300.0 + 3.0 * p1)
        assert r["epoch"]["time/epoch_s"] == pytest.approx(3.0)
        assert r["train"]["energy/train_j"] == pytest.approx(2.0 * 300.0 + 3.0 * p1)
    # The job window: 1 s on each rank; energy is the sum of both ranks' GPUs.
    assert r0["job_energy"] == pytest.approx(300.0 + p1) == r1["job_energy"]
    assert r0["num_ranks"] == 2 and r0["job_time"] == pytest.approx(1.0)
