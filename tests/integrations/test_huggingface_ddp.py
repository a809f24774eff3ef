"""A torchrun-launched Trainer (2 gloo processes): the logged job energy is the sum of both ranks'."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None,
    reason="needs the hf extra: pip install 'zeus-suite[hf]'",
)

SCRIPT = Path(__file__).parent / "scripts" / "hf_ddp.py"
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_torchrun_trainer_logs_the_sum_over_ranks(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    # --standalone: torchrun picks a free port (accelerate's env:// rendezvous hangs with --master-port 0).
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        str(SCRIPT),
        str(tmp_path),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world_size"] for r in reports] == [2, 2]
    r0, r1 = (r["first"] for r in reports)
    # 16 samples over 2 ranks: 4 micro-batches per rank per epoch, accumulation 2 -> 2 steps per epoch.
    assert r0["micro_batches"] == r1["micro_batches"] == 8 and r0["global_step"] == 4

    for r in (r0, r1):  # every rank logs the job's figures
        epochs = [log for log in r["logged"] if "energy/epoch_j" in log]
        assert len(epochs) == 2
        for i, log in enumerate(epochs):
            both = r0["measured"]["epoch"][i] + r1["measured"]["epoch"][i]
            assert log["energy/epoch_j"] == pytest.approx(both)
            assert log["energy/epoch_rank0_gpu0_j"] == pytest.approx(r0["measured"]["epoch"][i])
            assert log["energy/epoch_rank1_gpu0_j"] == pytest.approx(r1["measured"]["epoch"][i])
        job = r0["measured"]["train"][0] + r1["measured"]["train"][0]
        assert r["metrics"]["energy/train_j"] == pytest.approx(job)
        longest = max(r0["measured"]["train_s"] + r1["measured"]["train_s"])
        assert r["metrics"]["time/train_s"] == pytest.approx(longest)
        logged_total = [log for log in r["logged"] if "energy/train_j" in log][-1]
        assert logged_total["energy/train_j"] == pytest.approx(job)
    # Rank 1 runs under a 150 W limit: the ranks really differ, so a sum of one rank twice would fail.
    p0 = r0["measured"]["train"][0] / r0["measured"]["train_s"][0]
    p1 = r1["measured"]["train"][0] / r1["measured"]["train_s"][0]
    assert p1 <= 150.0 + 1e-6 < p0

    # The step-2 checkpoint holds both ranks' totals (gathered at the save); resuming continues them.
    state = json.loads((tmp_path / "trainer" / "checkpoint-2" / "trainer_state.json").read_text())
    tracker = state["stateful_callbacks"]["ZeusTrainerCallback"]["attributes"]["_resume_state"]["tracker"]
    ranks = tracker["ranks"]
    assert tracker["steps_done"] == 2 and len(ranks) == 2
    saved = [r["energy_j"]["gpu0"] for r in ranks]
    assert 0 < saved[1] < saved[0] < r0["measured"]["train"][0]
    s0, s1 = (r["resumed"] for r in reports)
    assert s0["micro_batches"] == s1["micro_batches"] == 4  # only epoch 2 ran again
    resumed_job = sum(saved) + s0["measured"]["train"][0] + s1["measured"]["train"][0]
    assert s0["metrics"]["energy/train_j"] == pytest.approx(resumed_job)
    assert s1["metrics"]["energy/train_j"] == pytest.approx(resumed_job)
