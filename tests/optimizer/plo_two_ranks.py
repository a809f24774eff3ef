"""Run under torch.distributed.run (2 ranks, gloo): every rank must set the same limits.

Each rank drives one simulated GPU that follows its own column of a 4-GPU A40 profile, with noise
seeded differently per rank, through the training protocol (with an epoch boundary in the middle
of profiling). Then a second job reuses the profile file rank 0 wrote. A third job groups steps
into samples of ``min_sample_s=0.42`` s on GPUs whose steps take ~0.206 s on rank 0 and ~0.214 s on
rank 1: alone, rank 0 would often cut samples of 3 steps and rank 1 of 2; every all-reduce call
(operation, length) is recorded to show that both ranks make the same calls.

Usage: plo_two_ranks.py OUT_DIR PROFILE_CSV; writes OUT_DIR/rank<r>.json.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch.distributed as dist

from zeus_core import _distributed as distributed
from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.optimizer.power_limit import Done, Energy, GlobalPowerLimitOptimizer, ZeusCost
from zeus_core.testing import MeasuredProfile, SimulatedGPU, VirtualClock

out_dir, csv = Path(sys.argv[1]), Path(sys.argv[2])
dist.init_process_group("gloo")
rank = dist.get_rank()
behavior = MeasuredProfile.from_zeus_csv(csv, gpu=rank)
profile_path = out_dir / "profile.json"


def gpu_for_rank() -> SimulatedGPU:
    return SimulatedGPU(behavior, index=rank, clock=VirtualClock(), noise=0.03, seed=11 + 17 * rank)


gpu = gpu_for_rank()
gpu.set_power_limit(290)
plo = GlobalPowerLimitOptimizer(
    ZeusMonitor(gpus=[gpu], cpu_indices=[]), ZeusCost(0.5), profile_path=profile_path
)
plo.on_train_begin()
plo.on_epoch_begin()
limits = []
for step in range(700):
    plo.on_step_begin()
    limits.append(gpu.get_power_limit())
    gpu.run_steps(1)
    plo.on_step_end()
    if step == 40:  # an epoch boundary while a limit is being profiled
        plo.on_epoch_end()
        plo.on_epoch_begin()
plo.on_epoch_end()
decided = plo.optimal_power_limit_w
plo.on_train_end()
restored = gpu.get_power_limit()
dist.barrier()  # rank 0 has written the profile

gpu2 = gpu_for_rank()
plo2 = GlobalPowerLimitOptimizer(
    ZeusMonitor(gpus=[gpu2], cpu_indices=[]), ZeusCost(0.5), profile_path=profile_path
)
plo2.on_train_begin()
reused = {"done": isinstance(plo2.state, Done), "limit": gpu2.get_power_limit()}
plo2.on_train_end()

# Job 3: multi-step samples whose size the ranks agree on.
calls: list[tuple[str, int, list[float]]] = []
real_all_reduce = distributed.all_reduce


def recording_all_reduce(values, op):
    calls.append((op, len(values), [float(v) for v in values]))
    return real_all_reduce(values, op)


distributed.all_reduce = recording_all_reduce
slower = MeasuredProfile(
    points=[(w, t * (1.0 + 0.04 * rank), p) for w, t, p in behavior.points],
    gpu_name=behavior.gpu_name,
    constraints=behavior.constraints,
)
gpu3 = SimulatedGPU(slower, index=rank, clock=VirtualClock(), noise=0.03, seed=5 + 17 * rank)
plo3 = GlobalPowerLimitOptimizer(ZeusMonitor(gpus=[gpu3], cpu_indices=[]), Energy(), min_sample_s=0.42)
plo3.on_train_begin()
plo3.on_epoch_begin()
limits3 = []
for _ in range(800):
    plo3.on_step_begin()
    limits3.append(gpu3.get_power_limit())
    gpu3.run_steps(1)
    plo3.on_step_end()
plo3.on_epoch_end()
plo3.on_train_end()
distributed.all_reduce = real_all_reduce

(out_dir / f"rank{rank}.json").write_text(
    json.dumps(
        {
            "limits": limits,
            "decided": decided,
            "restored": restored,
            "measurements": [m.to_dict() for m in plo.measurements],
            "reused": reused,
            "sampled": {
                "limits": limits3,
                "decided": plo3.optimal_power_limit_w,
                "measurements": [m.to_dict() for m in plo3.measurements],
                "calls": [(op, n) for op, n, _ in calls],
                # What this rank's own clock said where the ranks agree on sample lengths (max over ranks).
                "own_clock_s": [v[0] for op, n, v in calls if op == "max" and n == 1],
            },
        }
    )
)
dist.barrier()  # no rank tears gloo down while another still reads the last collective
dist.destroy_process_group()
# Leave without interpreter finalisation, where gloo's threads can abort (pytorch/pytorch#179291).
sys.stdout.flush()
os._exit(0)
