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
import tempfile

__all__ = ["main"]

# Forward work of each stage (s at the highest clock); backward is twice the forward.
COMPUTE_S = (0.010, 0.020)
MEMORY_S = (0.002, 0.004)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--microbatches", type=int, default=4, help="microbatches per iteration (default 4)")
    parser.add_argument("--iterations", type=int, default=6, help="iterations measured per run (default 6)")
    parser.add_argument(
        "--save-dir", default=None, help="Perseus profile and plan folder (default: temporary)"
    )
    return parser.parse_args(argv)


def rank_main(rank: int, args: argparse.Namespace) -> None:
    """One pipeline stage: baseline, then Perseus, then the report (rank 0)."""
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    from zeus_core.optimizer.pipeline_frequency import PerseusRuntime
    from zeus_core.optimizer.pipeline_frequency.simulated_gpu import InstructionWork, SimulatedPipelineGPU
    from zeus_integrations.pipeline import torch_pipelining
    from zeus_integrations.pipeline.emulation import GpuWork, RunComparison, measure_iterations

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

    baseline = measure_iterations(step, gpu, args.iterations, "max-clocks")
    runtime = PerseusRuntime(gpu, save_dir=args.save_dir)
    with runtime, torch_pipelining.attach(runtime, stage, schedule):
        while runtime.plan is None:  # discovery and profiling
            step()
        to_plan = len(runtime.iterations)
        planned = measure_iterations(step, gpu, args.iterations, "plan")
        plan = runtime.plan
    if rank == 0:
        print(RunComparison(plan, baseline, planned, to_plan).report(), flush=True)
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> None:
    """Start 2 local ranks and run :func:`rank_main` on each."""
    from zeus_integrations.pipeline.emulation import spawn_local_ranks

    args = _parse(argv)
    with tempfile.TemporaryDirectory(prefix="perseus-") as tmp:
        args.save_dir = args.save_dir or tmp
        spawn_local_ranks(rank_main, 2, (args,))


if __name__ == "__main__":
    main()
