"""Two processes on gloo, each with its own noisy simulated GPU, agree on every limit they set."""

from __future__ import annotations

import csv
import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import torchrun_command

SCRIPT = Path(__file__).parent / "plo_two_ranks.py"


@pytest.mark.slow
def test_two_ranks_set_the_same_limits_from_aggregated_measurements(
    tmp_path: Path, shared_data: Path
) -> None:
    profile_csv = shared_data / "power_limit_profiles" / "A40_resnet50_4gpu.csv"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        torchrun_command(SCRIPT, str(tmp_path), str(profile_csv)),
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))

    # Every step ran under the same limit on both ranks, and both chose the same optimum.
    assert r0["limits"] == r1["limits"]
    assert len(set(r0["limits"])) > 3  # several limits were really profiled
    assert r0["decided"] == r1["decided"] is not None
    assert r0["limits"][-1] == r0["decided"]
    assert r0["measurements"] == r1["measurements"]  # the same aggregated numbers on both ranks
    assert r0["restored"] == r1["restored"] == 290

    # Aggregation: energy summed over both ranks' GPUs, for the whole job.
    with profile_csv.open() as f:
        row = next(r for r in csv.DictReader(f) if r["window_name"].endswith("_300"))
    both_gpus_j = (float(row["gpu0_energy"]) + float(row["gpu1_energy"])) / 40  # J per step at 300 W
    first = r0["measurements"][0]
    assert first["power_limit"] == 300 and first["num_gpus"] == 2
    assert first["energy"] == pytest.approx(both_gpus_j, rel=0.06)

    # Rank 0 wrote the profile; a restarted 2-rank job reuses it on both ranks without profiling.
    saved = json.loads((tmp_path / "profile.json").read_text())
    assert saved["hardware"]["world_size"] == 2 and len(saved["hardware"]["gpu_uuids"]) == 2
    assert saved["optimal_power_limit_w"] == r0["decided"]
    assert r0["reused"] == r1["reused"] == {"done": True, "limit": r0["decided"]}

    # Samples of several steps: each rank alone would have cut them differently (its own clock runs
    # 4 % apart), but the lengths come from all-reduces, so both ranks made the same all-reduce calls
    # and ended with the same limits and measurements.
    s0, s1 = r0["sampled"], r1["sampled"]
    assert len(s0["own_clock_s"]) == len(s1["own_clock_s"]) >= 3 and s0["own_clock_s"] != s1["own_clock_s"]
    assert s0["calls"] == s1["calls"]
    assert s0["limits"] == s1["limits"] and s0["decided"] == s1["decided"] is not None
    assert s0["measurements"] == s1["measurements"]
    assert all(1 < m["samples"] < m["steps"] for m in s0["measurements"])  # several steps per sample
