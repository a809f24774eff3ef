"""2-rank Megatron-core runs (gloo, CPU via examples/_support/cpu_shims.py) driving PerseusRuntime.

Phases (each rank writes ``<phase>-rank<r>.json``):

* ``megatron``: the 1F1B schedule, one model chunk per rank;
* ``megatron-interleaved``: the interleaved schedule (``virtual_pipeline_model_parallel_size=2``),
  model chunks 0 and 1 of rank r being virtual stages r and r + 2; 1 and 3 do twice the work.

Each profiles two clocks, plans, and applies (1 discovery + 2 profiling + 2 applying iterations),
then makes one forward-only call (evaluation, ignored). Then ``megatron-grouped`` records the
instruction order of one interleaved iteration of 5 microbatches in groups of 3
(``microbatch_group_size_per_vp_stage=3``), Megatron-core's tunable order; a megatron-core without
that knob (0.9) runs its fixed groups (one microbatch per stage) with 4 microbatches instead.
Usage: python -m torch.distributed.run --nproc-per-node 2 megatron_pipeline.py OUT_DIR
"""

from __future__ import annotations

import dataclasses
import faulthandler
import os
import sys
from typing import Any

import torch
from _emulation import dump, make_gpu, runtime_report, work
from _support import cpu_shims

from zeus_core.optimizer.pipeline_frequency import FrequencySweep
from zeus_core.optimizer.pipeline_frequency.runtime import PerseusRuntime, PlanSettings
from zeus_integrations.pipeline import megatron as zeus_megatron

HIDDEN, SEQ, MICRO, MICROBATCHES = 16, 4, 2, 4
FORWARD_S = {0: 0.004, 1: 0.008, 2: 0.004, 3: 0.008}  # per virtual stage, s at the highest clock


class Stage(torch.nn.Module):
    """One model chunk in Megatron's module contract (set_input_tensor, model_type, config, vp_stage)."""

    def __init__(self, config: Any, work: Any, first: bool, vp_stage: int | None) -> None:
        super().__init__()
        from megatron.core.enums import ModelType

        self.config, self.model_type, self.first = config, ModelType.encoder_or_decoder, first
        self.vp_stage = vp_stage  # Megatron checks it against the schedule's vp_stage
        self.linear = torch.nn.Linear(HIDDEN, HIDDEN)
        self.work = work
        self.input_tensor: torch.Tensor | None = None

    def set_input_tensor(self, tensor: Any) -> None:  # noqa: D102
        self.input_tensor = tensor[0] if isinstance(tensor, (list, tuple)) else tensor

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        h = x if self.first else self.input_tensor
        return self.work(self.linear(h))


def forward_step_func(data_iterator: Any, module: Stage) -> tuple[torch.Tensor, Any]:
    """Megatron's forward step: the chunk's output and its loss function."""
    x, y = next(data_iterator)
    out = module(x)

    def loss_func(output: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        loss = torch.nn.functional.mse_loss(output, y)
        return loss, {"loss": loss.detach()}

    return out, loss_func


class OrderRecorder:
    """An InstructionListener that records ``(kind, microbatch, virtual stage)`` of each instruction."""

    def __init__(self) -> None:
        self.order: list[tuple[str, int | None, int | None]] = []
        self.schedule: str | None = None

    def set_pipeline(self, stage: int, num_stages: int, schedule: str | None = None, **kwargs: Any) -> None:
        self.schedule = schedule

    def begin_iteration(self) -> None:
        self.order.clear()

    def end_iteration(self, failed: bool = False) -> None:
        pass

    def begin_instruction(
        self, kind: Any, microbatch: int | None = None, virtual_stage: int | None = None
    ) -> None:
        self.order.append((str(getattr(kind, "value", kind)), microbatch, virtual_stage))

    def end_instruction(self, kind: Any, microbatch: int | None = None, failed: bool = False) -> None:
        pass


def run(
    phase: str, out: str, chunks: int, microbatches: int = MICROBATCHES, group: int | None = None
) -> None:
    from megatron.core import parallel_state
    from megatron.core.model_parallel_config import ModelParallelConfig
    from megatron.core.pipeline_parallel import schedules

    vpp = chunks if chunks > 1 else None
    parallel_state.initialize_model_parallel(
        tensor_model_parallel_size=1, pipeline_model_parallel_size=2, virtual_pipeline_model_parallel_size=vpp
    )
    rank = torch.distributed.get_rank()
    gpu = make_gpu(rank)
    config = ModelParallelConfig(
        pipeline_model_parallel_size=2, virtual_pipeline_model_parallel_size=vpp, pipeline_dtype=torch.float32
    )
    config.hidden_size = HIDDEN
    config.fine_grained_activation_offloading = False
    if group is not None:
        config.microbatch_group_size_per_vp_stage = group
    torch.manual_seed(rank)
    model = [
        Stage(config, work(gpu, FORWARD_S[c * 2 + rank]), rank == 0 and c == 0, c if vpp else None)
        for c in range(chunks)
    ]
    optimizer = torch.optim.SGD([p for m in model for p in m.parameters()], lr=0.01)
    data = [(torch.randn(SEQ, MICRO, HIDDEN), torch.randn(SEQ, MICRO, HIDDEN)) for _ in range(microbatches)]

    def call(forward_only: bool = False) -> None:
        iterators = [iter(data) for _ in model]
        schedules.get_forward_backward_func()(
            forward_step_func=forward_step_func,
            data_iterator=iterators if vpp else iterators[0],
            model=model,
            num_microbatches=microbatches,
            seq_length=SEQ,
            micro_batch_size=MICRO,
            forward_only=forward_only,
        )

    if group is not None:  # one iteration, its order only
        recorder = OrderRecorder()
        with zeus_megatron.attach(recorder):
            call()
        seen = {"schedule": recorder.schedule, "order": recorder.order}
        dump(out, phase, {**seen, "microbatches": microbatches, "group": group})
        parallel_state.destroy_model_parallel()
        return
    original = (schedules.forward_step, schedules.backward_step, schedules.get_forward_backward_func())
    runtime = PerseusRuntime(
        gpu,
        sweep=FrequencySweep(frequencies_mhz=(1740, 1140), iterations_per_frequency=1, patience=0),
        planning=PlanSettings(unit_time_s=5e-4),
    )
    with runtime, zeus_megatron.attach(runtime):
        for _ in range(5):
            call()
            optimizer.step()
            optimizer.zero_grad()
        with torch.no_grad():
            call(forward_only=True)
    assert (
        schedules.forward_step,
        schedules.backward_step,
        schedules.get_forward_backward_func(),
    ) == original
    report = runtime_report(runtime)
    report["work_clocks"] = [m.work.clocks for m in model] if vpp else model[0].work.clocks
    dump(out, phase, report)
    torch.distributed.barrier()
    parallel_state.destroy_model_parallel()


def _tunable_groups() -> bool:
    """Whether this megatron-core has ``microbatch_group_size_per_vp_stage`` (0.9 has not)."""
    from megatron.core.model_parallel_config import ModelParallelConfig

    return "microbatch_group_size_per_vp_stage" in {f.name for f in dataclasses.fields(ModelParallelConfig)}


def main(out: str) -> None:
    faulthandler.dump_traceback_later(150, exit=True)
    cpu_shims.megatron_on_cpu()
    torch.distributed.init_process_group("gloo")
    run("megatron", out, chunks=1)
    run("megatron-interleaved", out, chunks=2)
    if _tunable_groups():
        run("megatron-grouped", out, chunks=2, microbatches=5, group=3)
    else:  # an older megatron-core (e.g. 0.9): its fixed groups of one microbatch per stage
        run("megatron-grouped", out, chunks=2, microbatches=4, group=2)
    torch.distributed.barrier()  # no rank tears gloo down while another still reads the last collective
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
    # Leave without interpreter finalisation, where gloo's threads can abort (pytorch/pytorch#179291).
    sys.stdout.flush()
    os._exit(0)
