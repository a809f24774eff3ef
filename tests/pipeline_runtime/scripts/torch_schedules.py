"""2-rank torch.distributed.pipelining runs of multi-stage schedules driving PerseusRuntime (simulated A40s).

Phases (each rank writes ``<phase>-rank<r>.json``):

* ``interleaved``: ScheduleInterleaved1F1B, 2 model chunks per rank (virtual stages r and r + 2);
* ``zbv``: ScheduleZBVZeroBubble, a V of 2 chunks per rank (virtual stages r and 3 - r), with the
  backward split into input (I) and weight (W) instructions (skipped on torch < 2.6, which lacks it);
* ``interleaved-zb``: ScheduleInterleavedZeroBubble, 2 looped chunks per rank (virtual stages r and
  r + 2), backward split as in ``zbv`` (skipped on torch < 2.5).

Each: 1 discovery + 2 profiling iterations (2 clocks) + 2 iterations applying the zero-slowdown plan.
Usage: python -m torch.distributed.run --nproc-per-node 2 torch_schedules.py OUT_DIR
"""

from __future__ import annotations

import faulthandler
import os
import sys

import torch
import torch.distributed as dist
from _emulation import dump, make_gpu, runtime_report, work
from torch.distributed.pipelining import PipelineStage, ScheduleInterleaved1F1B

from zeus_core.exceptions import ZeusNotSupportedError
from zeus_core.optimizer.pipeline_frequency import FrequencySweep
from zeus_core.optimizer.pipeline_frequency.runtime import PerseusRuntime
from zeus_integrations.pipeline import torch_pipelining

MICROBATCHES = 4
FORWARD_S = {0: 0.004, 1: 0.008, 2: 0.004, 3: 0.008}  # per virtual stage, s at the highest clock


def run(phase: str, out: str, rank: int, gpu, schedule_cls, virtual: list[int]) -> None:
    torch.manual_seed(rank)
    modules = [torch.nn.Sequential(torch.nn.Linear(16, 16), work(gpu, FORWARD_S[v])) for v in virtual]
    stages = [PipelineStage(m, v, 4, torch.device("cpu")) for m, v in zip(modules, virtual)]
    schedule = schedule_cls(stages, n_microbatches=MICROBATCHES, loss_fn=torch.nn.MSELoss())
    optimizer = torch.optim.SGD([p for m in modules for p in m.parameters()], lr=0.01)
    x, y = torch.randn(8, 16), torch.randn(8, 16)
    runtime = PerseusRuntime(
        gpu, sweep=FrequencySweep(frequencies_mhz=(1740, 1140), iterations_per_frequency=1, patience=0)
    )
    with runtime, torch_pipelining.attach(runtime, stages, schedule) as attachment:
        for _ in range(5):
            kwargs = {}
            if 0 in virtual:
                kwargs["x"] = x
            if 3 in virtual:
                kwargs["target"] = y
            schedule.step(kwargs.pop("x", None), **kwargs) if 0 in virtual else schedule.step(**kwargs)
            optimizer.step()
            optimizer.zero_grad()
    assert not attachment.attached and all("forward_one_chunk" not in vars(s) for s in stages)
    report = runtime_report(runtime)
    report["work_clocks"] = [m[1].clocks for m in modules]
    dump(out, phase, report)


def main(out: str) -> None:
    faulthandler.dump_traceback_later(150, exit=True)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    gpu = make_gpu(rank)
    run("interleaved", out, rank, gpu, ScheduleInterleaved1F1B, [rank, rank + 2])
    for phase, name, virtual in (
        ("zbv", "zbv", [rank, 3 - rank]),
        ("interleaved-zb", "interleaved-zero-bubble", [rank, rank + 2]),
    ):
        try:
            schedule = torch_pipelining.schedule_class(name)
        except ZeusNotSupportedError as exc:  # an older torch: the test skips the phase
            print(exc)
        else:
            run(phase, out, rank, gpu, schedule, virtual)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
    sys.stdout.flush()
    os._exit(0)
