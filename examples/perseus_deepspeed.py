"""Perseus on a DeepSpeed ``PipelineEngine`` (1F1B): profile, plan, apply, and measure the saving.

Runs on the CPU with a plain ``python examples/perseus_deepspeed.py``: it starts its own 2 ranks
(gloo), one pipeline stage each, on **simulated** A40 GPUs whose work slows down as the SM clock
drops (``SimulatedPipelineGPU``). Stage 1 does twice the work of stage 0. DeepSpeed needs one CPU
shim, ``deepspeed_on_cpu()`` from ``examples/_support/cpu_shims.py`` (CPU accelerator, no JIT
build of its shared-memory op); it does nothing where CUDA is available.

1. ``--iterations`` ``engine.train_batch`` calls at the highest clocks (no Perseus): the baseline.
2. ``PerseusRuntime`` attached with ``zeus_integrations.pipeline.deepspeed.attach(runtime, engine)``
   discovers, profiles a few clocks (at most 10 iterations), plans on rank 0 and applies the plan.
3. ``--iterations`` iterations with the plan; rank 0 prints the plan, predicted and measured time
   and energy, and one line ``perseus: plan zero-slowdown: time ... energy ... vs max clocks [simulated]``.

Run::

    python examples/perseus_deepspeed.py                # about 40 s
"""

from __future__ import annotations

import argparse

__all__ = ["main"]

COMPUTE_S = (0.010, 0.020)  # forward work per stage at the highest clock, s; backward is twice
MEMORY_S = (0.002, 0.004)


def rank_main(rank: int, args: argparse.Namespace) -> None:
    """One pipeline stage: baseline, then Perseus, then the report (rank 0)."""
    from _support import cpu_shims

    cpu_shims.deepspeed_on_cpu()
    import deepspeed
    import torch
    from _support.emulation import GpuWork, compare_with_max_clocks
    from deepspeed.pipe import PipelineModule

    from zeus_core.optimizer.pipeline_frequency import PerseusRuntime
    from zeus_core.testing import InstructionWork, SimulatedPipelineGPU
    from zeus_integrations.pipeline import deepspeed as zeus_ds

    deepspeed.init_distributed(dist_backend="gloo")
    gpu = SimulatedPipelineGPU("a40", index=0, seed=rank)
    torch.manual_seed(0)
    # Every rank builds the whole layer list; PipelineModule keeps this rank's stage. Each GpuWork
    # runs on the simulated GPU of the process that owns it.
    layers = [
        torch.nn.Linear(16, 16),
        GpuWork(gpu, InstructionWork(COMPUTE_S[0], MEMORY_S[0])),
        torch.nn.Linear(16, 16),
        GpuWork(gpu, InstructionWork(COMPUTE_S[1], MEMORY_S[1])),
    ]
    model = PipelineModule(
        layers=layers, num_stages=2, loss_fn=torch.nn.MSELoss(), partition_method="uniform"
    )
    config = {
        "train_batch_size": 2 * args.microbatches,
        "train_micro_batch_size_per_gpu": 2,
        "gradient_accumulation_steps": args.microbatches,
        "steps_per_print": 10**9,
        "optimizer": {"type": "SGD", "params": {"lr": 0.01}},
    }
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    data = [(torch.randn(2, 16), torch.randn(2, 16))] * args.microbatches

    def step() -> None:
        engine.train_batch(iter(data))

    runtime = PerseusRuntime(gpu, save_dir=args.save_dir)
    result = compare_with_max_clocks(
        step, gpu, runtime, lambda: zeus_ds.attach(runtime, engine), args.iterations
    )
    if rank == 0:
        print(result.report(), flush=True)
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


def main(argv: list[str] | None = None) -> None:
    """Start 2 local ranks and run :func:`rank_main` on each."""
    from _support.emulation import run_example

    run_example(rank_main, __doc__.split("\n\n")[0], argv)


if __name__ == "__main__":
    main()
