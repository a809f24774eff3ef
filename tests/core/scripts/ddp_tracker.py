"""Run under torchrun (2 ranks, gloo): each rank measures its own simulated GPU; totals are the job's."""

import json
import os
import sys

import torch.distributed as dist

from zeus_core import PhysicalModel, SimulatedGPU, VirtualClock, ZeusMonitor, reduce_measurement
from zeus_core.training._tracker import TrainingTracker

dist.init_process_group("gloo")
rank = dist.get_rank()
clock = VirtualClock()
gpu = SimulatedGPU(PhysicalModel.a40(), index=0, clock=clock, busy=True)
if rank == 1:
    gpu.set_power_limit(150)  # rank 1 draws less
monitor = ZeusMonitor(gpus=[gpu], cpu_indices=[])
tracker = TrainingTracker(monitor)
tracker.on_train_begin()
tracker.on_epoch_begin()
clock.advance(2.0 + rank)  # rank 1 runs longer
tracker.on_epoch_end()
tracker.on_train_end()
monitor.begin_window("w")
clock.advance(1.0)
job = reduce_measurement(monitor.end_window("w"))
local = gpu.get_total_energy()
result = {
    "rank": rank,
    "local_energy": local,
    "epoch": tracker.epoch_metrics,
    "train": tracker.train_metrics,
    "job_energy": job.gpu_energy,
    "job_time": job.time,
    "num_ranks": job.num_ranks,
}
with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as f:
    json.dump(result, f)
dist.barrier()  # no rank tears gloo down while another still reads the last collective
dist.destroy_process_group()
# Leave without interpreter finalisation, where gloo's threads can abort (pytorch/pytorch#179291).
sys.stdout.flush()
os._exit(0)
