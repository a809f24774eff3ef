"""Perseus on a ``torch.distributed.pipelining`` 1F1B pipeline: profile, plan, apply, and measure the saving.

Runs on the CPU with a plain ``python examples/perseus_torch.py``: it starts its own 2 ranks
(gloo), one pipeline stage each, on **simulated** A40 GPUs whose work slows down as the SM clock
drops (``SimulatedPipelineGPU``: compute-bound share ∝ 1/f, memory-bound share constant; power
follows clock and utilization). Stage 1 does twice the work of stage 0, so stage 0 has slack that
Perseus fills by lowering its clock.

1. Runs ``--iterations`` iterations at the highest clocks (no Perseus): the baseline.
2. Attaches ``PerseusRuntime`` (``torch_pipelining.attach``); it discovers the schedule, profiles
   a few clocks (at most 10 iterations), plans on rank 0 (zero slowdown) and applies the plan.
3. Runs ``--iterations`` iterations with the plan, then prints the plan, predicted and measured
   time and energy per iteration for both runs, and one line such as
   ``perseus: plan zero-slowdown: time +0.2 % energy -8.1 % vs max clocks [simulated]``.

On GPU machines the same code runs with ``PerseusRuntime()`` (the GPU of ``LOCAL_RANK``) and the
stage's real layers instead of ``GpuWork``, under ``torchrun --nproc-per-node 2``.

Run::

    python examples/perseus_torch.py                    # about 30 s
    python examples/perseus_torch.py --microbatches 8 --iterations 8
"""

from __future__ import annotations

import argparse

__all__ = ["main"]

# Forward work of each stage (s at the highest clock); backward is twice the forward.
COMPUTE_S = (0.010, 0.020)
MEMORY_S = (0.002, 0.004)


def rank_main(rank: int, args: argparse.Namespace) -> None:
    """One pipeline stage: baseline, then Perseus, then the report (rank 0)."""
    import torch
    import torch.distributed as dist
    from _support.emulation import GpuWork, compare_with_max_clocks
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    from zeus_core.optimizer.pipeline_frequency import PerseusRuntime
    from zeus_core.testing import InstructionWork, SimulatedPipelineGPU
    from zeus_integrations.pipeline import torch_pipelining

    dist.init_process_group("gloo")
    gpu = SimulatedPipelineGPU("a40", index=0, seed=rank)
    torch.manual_seed(rank)
    module = torch.nn.Sequential(
        torch.nn.Linear(16, 16), GpuWork(gpu, InstructionWork(COMPUTE_S[rank], MEMORY_S[rank]))
    )
    stage = PipelineStage(module, rank, 2, torch.device("cpu"))
    schedule = Schedule1F1B(stage, n_microbatches=args.microbatches, loss_fn=torch.nn.MSELoss())
    optimizer = torch.optim.SGD(module.parameters(), lr=0.01)
    x, y = torch.randn(2 * args.microbatches, 16), torch.randn(2 * args.microbatches, 16)

    def step() -> None:
        if rank == 0:
            schedule.step(x)
        else:
            schedule.step(target=y)
        optimizer.step()
        optimizer.zero_grad()

    runtime = PerseusRuntime(gpu, save_dir=args.save_dir)
    result = compare_with_max_clocks(
        step, gpu, runtime, lambda: torch_pipelining.attach(runtime, stage, schedule), args.iterations
    )
    if rank == 0:
        print(result.report(), flush=True)
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> None:
    """Start 2 local ranks and run :func:`rank_main` on each."""
    from _support.emulation import run_example

    run_example(rank_main, __doc__.split("\n\n")[0], argv)


if __name__ == "__main__":
    main()
