"""Run under torch.distributed.run (2 ranks, gloo): Zeus's three ways of using the optimizer with ranks.

1. Only rank 0 builds ``GlobalPowerLimitOptimizer`` over both GPUs (Zeus's batch-size MNIST
   example): it must start no collective (rank 1 never joins one) and still decide.
2. Both ranks monitor the same GPU (Zeus's FSDP example under torchrun, ``--local-rank`` 0 on
   every rank): rank 0 optimizes it, rank 1 leaves its limit alone.
3. One GPU per rank (Zeus's documented set-up): job-wide decisions, the same limit on both ranks.

Usage: compat_plo_ranks.py OUT_DIR; writes OUT_DIR/rank<r>.json.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path

import torch.distributed as dist

from zeus_core.compat.monitor import ZeusMonitor
from zeus_core.compat.optimizer.power_limit import GlobalPowerLimitOptimizer
from zeus_core.device._base import PowerLimitConstraints
from zeus_core.testing import MeasuredProfile, SimulatedGPU, VirtualClock, simulate_steps

dist.init_process_group("gloo", timeout=timedelta(seconds=60))
rank = dist.get_rank()
# Energy per step (J): 300 W: 60, 250 W: 50, 200 W: 45, 150 W: 54, 100 W: 80.
behavior = MeasuredProfile(
    points=[
        (300, 0.20, 300.0),
        (250, 0.20, 250.0),
        (200, 0.225, 200.0),
        (150, 0.36, 150.0),
        (100, 0.80, 100.0),
    ],
    gpu_name="NVIDIA A40",
    constraints=PowerLimitConstraints(100.0, 300.0, 300.0),
)
collectives: list[str] = []
for name in ("all_reduce", "all_gather_object", "broadcast_object_list", "all_gather"):
    real = getattr(dist, name)
    setattr(
        dist, name, lambda *a, _real=real, _name=name, **k: (collectives.append(_name), _real(*a, **k))[1]
    )


def train(plo: GlobalPowerLimitOptimizer, gpus: list[SimulatedGPU], steps: int = 400) -> list[float]:
    limits = []
    for epoch in range(2):
        plo.on_epoch_begin()
        for _ in range(steps // 2):
            plo.on_step_begin()
            limits.append(gpus[0].get_power_limit())
            simulate_steps(gpus, 1)
            plo.on_step_end()
        plo.on_epoch_end()
    return limits


out: dict[str, object] = {}
clock = VirtualClock()
gpus = [SimulatedGPU(behavior, index=i, clock=clock) for i in range(2)]
if rank == 0:  # 1. rank 0 alone, over both GPUs
    plo = GlobalPowerLimitOptimizer(ZeusMonitor(gpus=gpus, cpu_indices=[]), warmup_steps=2, profile_steps=5)
    limits = train(plo, gpus)
    out["alone"] = {
        "collectives": list(collectives),
        "limits": sorted(set(limits)),
        "optimal": plo.optimal_power_limit_w,
    }
    plo.close()
dist.barrier()

for case, index in (("shared", 0), ("own", rank)):  # 2. both ranks on GPU 0; 3. one GPU per rank
    gpu = SimulatedGPU(behavior, index=index, clock=VirtualClock())
    gpu.set_power_limit(290)
    plo = GlobalPowerLimitOptimizer(ZeusMonitor(gpus=[gpu], cpu_indices=[]), warmup_steps=2, profile_steps=5)
    limits = train(plo, [gpu])
    out[case] = {"limits": sorted(set(limits)), "optimal": plo.optimal_power_limit_w}
    plo.close()
    dist.barrier()

Path(sys.argv[1], f"rank{rank}.json").write_text(json.dumps(out))
dist.destroy_process_group()
