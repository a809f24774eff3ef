"""Perseus on Megatron-core's pipeline schedules (1F1B, interleaved): profile, plan, apply, measure.

Runs on the CPU with a plain ``python examples/perseus_megatron.py``: it starts its own 2 ranks
(gloo), one pipeline stage each, on **simulated** A40 GPUs whose work slows down as the SM clock
drops (``SimulatedPipelineGPU``). Stage 1 does twice the work of stage 0. Megatron-core's
schedules assume CUDA; ``megatron_on_cpu()`` (``examples/_support/cpu_shims.py``) maps its CUDA
buffers and syncs to the CPU (it does nothing where CUDA is available).

1. ``--iterations`` calls of ``get_forward_backward_func()`` at the highest clocks: the baseline.
2. ``PerseusRuntime`` attached with ``zeus_integrations.pipeline.megatron.attach(runtime)``
   discovers, profiles a few clocks (at most 10 iterations), plans on rank 0 and applies the plan.
3. ``--iterations`` iterations with the plan; rank 0 prints the plan, predicted and measured time
   and energy, and one line ``perseus: plan zero-slowdown: time ... energy ... vs max clocks [simulated]``.

With ``--virtual-stages 2`` each rank holds 2 model chunks (``virtual_pipeline_model_parallel_size=2``,
each chunk half of the rank's work) and Megatron-core runs its interleaved 1F1B schedule; Perseus
plans a clock per chunk, microbatch and pass.

Run::

    python examples/perseus_megatron.py                      # about 40 s
    python examples/perseus_megatron.py --virtual-stages 2   # interleaved schedule
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["main"]

COMPUTE_S = (0.010, 0.020)  # forward work per stage at the highest clock, s; backward is twice
MEMORY_S = (0.002, 0.004)
HIDDEN, SEQ, MICRO = 16, 4, 2


def _stage_module(config: Any, work: Any, first: bool, vp_stage: int | None = None) -> Any:
    """One model chunk in Megatron's module contract (set_input_tensor, model_type, config, vp_stage)."""
    import torch
    from megatron.core.enums import ModelType

    class Stage(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.config, self.model_type = config, ModelType.encoder_or_decoder
            self.vp_stage = vp_stage
            self.linear = torch.nn.Linear(HIDDEN, HIDDEN)
            self.work = work
            self.input_tensor: Any = None

        def set_input_tensor(self, tensor: Any) -> None:
            self.input_tensor = tensor[0] if isinstance(tensor, (list, tuple)) else tensor

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.work(self.linear(x if first else self.input_tensor))

    return Stage()


def rank_main(rank: int, args: argparse.Namespace) -> None:
    """One pipeline stage: baseline, then Perseus, then the report (rank 0)."""
    from _support import cpu_shims

    cpu_shims.megatron_on_cpu()
    import torch
    from _support.emulation import GpuWork, compare_with_max_clocks
    from megatron.core import parallel_state
    from megatron.core.model_parallel_config import ModelParallelConfig
    from megatron.core.pipeline_parallel import schedules

    from zeus_core.optimizer.pipeline_frequency import PerseusRuntime
    from zeus_core.testing import InstructionWork, SimulatedPipelineGPU
    from zeus_integrations.pipeline import megatron as zeus_megatron

    torch.distributed.init_process_group("gloo")
    chunks = args.virtual_stages
    vpp = chunks if chunks > 1 else None  # None: the 1F1B schedule
    parallel_state.initialize_model_parallel(
        tensor_model_parallel_size=1, pipeline_model_parallel_size=2, virtual_pipeline_model_parallel_size=vpp
    )
    gpu = SimulatedPipelineGPU("a40", index=0, seed=rank)
    config = ModelParallelConfig(
        pipeline_model_parallel_size=2, virtual_pipeline_model_parallel_size=vpp, pipeline_dtype=torch.float32
    )
    config.hidden_size = HIDDEN
    config.fine_grained_activation_offloading = False
    torch.manual_seed(rank)
    chunk_work = InstructionWork(COMPUTE_S[rank] / chunks, MEMORY_S[rank] / chunks)  # the rank's work, split
    model = [
        _stage_module(config, GpuWork(gpu, chunk_work), rank == 0 and c == 0, c if vpp else None)
        for c in range(chunks)
    ]
    optimizer = torch.optim.SGD([p for m in model for p in m.parameters()], lr=0.01)
    data = [(torch.randn(SEQ, MICRO, HIDDEN), torch.randn(SEQ, MICRO, HIDDEN))] * args.microbatches

    def forward_step_func(data_iterator: Any, module: Any) -> tuple[torch.Tensor, Any]:
        x, y = next(data_iterator)
        out = module(x)
        return out, lambda output: (torch.nn.functional.mse_loss(output, y), {})

    def step() -> None:
        iterators = [iter(data) for _ in model]  # interleaved: one per model chunk
        schedules.get_forward_backward_func()(
            forward_step_func=forward_step_func,
            data_iterator=iterators if vpp else iterators[0],
            model=model,
            num_microbatches=args.microbatches,
            seq_length=SEQ,
            micro_batch_size=MICRO,
        )
        optimizer.step()
        optimizer.zero_grad()

    runtime = PerseusRuntime(gpu, save_dir=args.save_dir)
    result = compare_with_max_clocks(
        step, gpu, runtime, lambda: zeus_megatron.attach(runtime), args.iterations
    )
    if rank == 0:
        print(result.report(), flush=True)
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


def main(argv: list[str] | None = None) -> None:
    """Start 2 local ranks and run :func:`rank_main` on each."""
    from _support.emulation import run_example

    def add_options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--virtual-stages",
            type=int,
            default=1,
            help="model chunks per rank; 2 or more runs the interleaved schedule (default 1: 1F1B)",
        )

    run_example(rank_main, __doc__.split("\n\n")[0], argv, add_options)


if __name__ == "__main__":
    main()
