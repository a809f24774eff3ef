"""2-rank torch.distributed.pipelining run (gloo, CPU) driving PerseusRuntime on simulated A40s.

Phases (each rank writes ``<phase>-rank<r>.json`` into the output folder):

* ``e2e``: Schedule1F1B, 4 microbatches: discover, profile 3 clocks, plan (zero slowdown), apply;
* ``restart``: a new runtime on the same ``save_dir`` reuses the saved plan without profiling;
* ``gpipe``: ScheduleGPipe with a given plan (a distinct clock per instruction);
* ``deadline``: a deadline no plan meets: rank 0's planning error is raised on every rank.

Stage 1 does twice the work of stage 0, so stage 0 has slack to slow down.
Usage: python -m torch.distributed.run --nproc-per-node 2 torch_pipeline.py OUT_DIR
"""

from __future__ import annotations

import faulthandler
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from _emulation import dump, make_gpu, runtime_report, work
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

from zeus_core.exceptions import ZeusProfileError
from zeus_core.optimizer.pipeline_frequency import FrequencyPlan, FrequencySweep, gpipe
from zeus_core.optimizer.pipeline_frequency.runtime import PerseusRuntime, PlanSettings
from zeus_integrations.pipeline import torch_pipelining

FORWARD_S = (0.008, 0.016)  # stage 0 is the light one
MICROBATCHES = 4


def build(rank: int, gpu, schedule_cls):
    torch.manual_seed(rank)
    module = torch.nn.Sequential(torch.nn.Linear(16, 16), work(gpu, FORWARD_S[rank]))
    stage = PipelineStage(module, rank, 2, torch.device("cpu"))
    # Every rank passes loss_fn: torch runs backward only on ranks whose schedule has one.
    schedule = schedule_cls(stage, n_microbatches=MICROBATCHES, loss_fn=torch.nn.MSELoss())
    optimizer = torch.optim.SGD(module.parameters(), lr=0.01)
    return module, stage, schedule, optimizer


def train(rank: int, runtime: PerseusRuntime, stage, schedule, optimizer, iterations: int) -> None:
    x, y = torch.randn(8, 16), torch.randn(8, 16)
    with runtime, torch_pipelining.attach(runtime, stage, schedule) as attachment:
        for _ in range(iterations):
            if rank == 0:
                schedule.step(x)
            else:
                schedule.step(target=y)
            optimizer.step()
            optimizer.zero_grad()
    assert not attachment.attached and "forward_one_chunk" not in vars(stage) and "step" not in vars(schedule)


def main(out: str) -> None:
    faulthandler.dump_traceback_later(150, exit=True)  # a hang prints every thread's stack
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    gpu = make_gpu(rank)
    save_dir = Path(out) / "perseus"

    # e2e: 1 discovery + 3 profiling + 3 applying iterations.
    module, stage, schedule, optimizer = build(rank, gpu, Schedule1F1B)
    runtime = PerseusRuntime(
        gpu,
        sweep=FrequencySweep(frequencies_mhz=(1740, 1320, 900), iterations_per_frequency=1, patience=0),
        planning=PlanSettings(),  # default time quantum: 1 ms or 1/20 of the shortest instruction
        save_dir=save_dir,
    )
    train(rank, runtime, stage, schedule, optimizer, 7)
    report = runtime_report(runtime)
    report["work_clocks"] = module[1].clocks
    dump(out, "e2e", report)

    # restart: same save_dir -> the plan is reused after the discovery iteration.
    module, stage, schedule, optimizer = build(rank, gpu, Schedule1F1B)
    runtime = PerseusRuntime(gpu, save_dir=save_dir)
    train(rank, runtime, stage, schedule, optimizer, 3)
    dump(out, "restart", runtime_report(runtime))

    # gpipe with a given plan: a distinct supported clock per instruction.
    clocks = gpu.supported_sm_frequencies()
    sched = gpipe(2, MICROBATCHES)
    plan = FrequencyPlan(
        "gpipe",
        2,
        MICROBATCHES,
        {
            inst: clocks[3 * (inst.stage * 8 + (inst.kind.value == "backward") * 4 + inst.microbatch)]
            for inst in sched.instructions()
        },
        label="test",
    )
    module, stage, schedule, optimizer = build(rank, gpu, ScheduleGPipe)
    runtime = PerseusRuntime(gpu, plan=plan)
    train(rank, runtime, stage, schedule, optimizer, 3)
    report = runtime_report(runtime)
    report["given_plan"] = plan.to_dict()
    dump(out, "gpipe", report)

    # deadline too short: rank 0 fails to plan from the saved profile; every rank raises, clocks restored.
    module, stage, schedule, optimizer = build(rank, gpu, Schedule1F1B)
    runtime = PerseusRuntime(gpu, save_dir=save_dir, planning=PlanSettings(deadline_s=1e-4))
    try:
        train(rank, runtime, stage, schedule, optimizer, 2)
        error = None
    except ZeusProfileError as exc:
        error = str(exc)
    dump(
        out,
        "deadline",
        {
            "error": error,
            "active": runtime.controller.active,
            "locked_after_close": gpu.locked_sm_frequency,
            "phase": runtime.phase.name,
        },
    )
    dist.barrier()  # no rank tears gloo down while another still reads the last collective
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
    # Leave without interpreter finalisation, where gloo's threads can abort (pytorch/pytorch#179291).
    sys.stdout.flush()
    os._exit(0)
