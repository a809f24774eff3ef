"""The pipeline as the ranks saw it: what each rank reports, and the schedule rank 0 builds from it.

Plain, picklable data, so the runtime's collectives carry nothing else.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Sequence

from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.pipeline_frequency._frequency_plan import FrequencyPlan
from zeus_core.optimizer.pipeline_frequency._schedule import (
    FULL_BACKWARD,
    SCHEDULES,
    SPLIT_BACKWARD,
    Instruction,
    InstructionKind,
    PipelineSchedule,
    interleaved_1f1b,
    make_schedule,
)
from zeus_core.optimizer.pipeline_frequency.runtime._controller import ControlMode

__all__ = [
    "RankInfo",
    "RankProfile",
    "FRAMEWORK_HINTS",
    "schedule_of",
    "gpu_names",
    "supported_clocks",
    "check_clocks",
]

logger = logging.getLogger(__name__)

#: How to make every stage run its backward instructions, per framework hook.
FRAMEWORK_HINTS: dict[str, str] = {
    "torch": "With torch.distributed.pipelining, build the schedule with loss_fn on every rank "
    "(backward only runs where it is set) and call schedule.step() for training, not only for evaluation.",
    "deepspeed": "With DeepSpeed, train with engine.train_batch() (eval_batch runs forwards only) and attach "
    "the hook after deepspeed.initialize, before the first train_batch.",
    "megatron": "With Megatron-core, call the forward-backward function with forward_only=False, after "
    "zeus_integrations.pipeline.megatron.attach() and get_forward_backward_func().",
    "": "Report every backward instruction with begin_instruction('backward', ...) / end_instruction(...) "
    "inside begin_iteration() / end_iteration().",
}


@dataclass(frozen=True)
class RankInfo:
    """What one rank tells rank 0 after discovery.

    Attributes:
        rank: Global rank.
        stage: Pipeline stage it runs.
        num_stages: Pipeline stages.
        schedule: The framework's schedule name (``"1f1b"``, ``"observed"``, ...).
        gpu_name: Its GPU's product name.
        simulated: Whether that GPU is simulated.
        supported_mhz: The GPU's supported SM clocks, MHz.
        order: ``(kind, microbatch, virtual stage)`` of every instruction of its discovery
            iteration, in order (``(kind, microbatch)``: the stage itself).
        sweep_error: Why its clocks cannot be profiled, if so.
        mode: ``"control"`` or ``"measure"``.
        idle_power_w: The GPU's idle power where known (simulated GPUs), W.
        framework: The framework hook in use (``"torch"``, ``"deepspeed"``, ``"megatron"``, ``""``).
    """

    rank: int
    stage: int
    num_stages: int
    schedule: str
    gpu_name: str
    simulated: bool
    supported_mhz: tuple[int, ...]
    order: tuple[tuple[str, int] | tuple[str, int, int], ...]
    sweep_error: str | None = None
    mode: str = ControlMode.CONTROL.value
    idle_power_w: float | None = None
    framework: str = ""


@dataclass(frozen=True)
class RankProfile:
    """One rank's profiling result: profile CSV rows and measured blocking power (W or ``None``)."""

    stage: int
    rows: list[tuple[int, str, int, float, float]]
    blocking_power_w: float | None


def _by_stage(infos: Sequence[RankInfo]) -> dict[int, list[RankInfo]]:
    sizes = sorted({i.num_stages for i in infos})
    if len(sizes) != 1:
        raise ZeusConfigError(f"Ranks disagree on the number of pipeline stages: {sizes}.")
    groups: dict[int, list[RankInfo]] = {}
    for info in infos:
        groups.setdefault(info.stage, []).append(info)
    missing = sorted(set(range(sizes[0])) - set(groups))
    if missing:
        raise ZeusConfigError(
            f"No rank runs pipeline stage(s) {missing} of {sizes[0]}; attach a PerseusRuntime on every rank."
        )
    return groups


def _stage_instructions(stage: int, order: Sequence[tuple]) -> tuple[list[Instruction], tuple[int, ...]]:
    """One stage's observed ``(kind, microbatch[, virtual stage])`` entries as instructions.

    Also returns the stage's virtual stages; chunk ``c`` of the stage runs the ``c``-th smallest.
    """
    entries = [(InstructionKind(e[0]), int(e[1]), int(e[2]) if len(e) > 2 else stage) for e in order]
    virtual = tuple(sorted({v for _, _, v in entries}))
    chunk = {v: c for c, v in enumerate(virtual)}
    return [Instruction(stage, k, m, chunk[v]) for k, m, v in entries], virtual


def _observed_orders(
    infos: Sequence[RankInfo],
) -> tuple[list[tuple[Instruction, ...]], list[tuple[int, ...]]]:
    """Per stage, its instruction order and virtual stages (ranks of one stage must agree)."""
    groups = _by_stage(infos)
    orders, virtual = [], []
    for stage in sorted(groups):
        seen = {g.order for g in groups[stage]}
        if len(seen) > 1:
            raise ZeusConfigError(
                f"Ranks of pipeline stage {stage} ran different instruction orders: {sorted(seen)}."
            )
        insts, vs = _stage_instructions(stage, groups[stage][0].order)
        orders.append(tuple(insts))
        virtual.append(vs)
    return orders, virtual


def schedule_of(infos: Sequence[RankInfo]) -> PipelineSchedule:
    """The pipeline schedule the ranks actually ran in their discovery iteration.

    Interleaved stages report each instruction's virtual stage; a stage's chunks are its virtual
    stages in ascending order. A split backward (input and weight instructions) makes a
    zero-bubble schedule.

    Raises:
        ZeusConfigError: Ranks of one stage ran different orders, a stage ran no backward (the
            message says how to fix that with the framework in use), stages hold different
            numbers of chunks, or the orders do not form a pipeline iteration (an instruction
            missing or repeated).
    """
    orders, virtual = _observed_orders(infos)
    no_backward = [s for s, o in enumerate(orders) if all(i.kind is InstructionKind.FORWARD for i in o)]
    if no_backward:
        raise ZeusConfigError(
            f"Pipeline stage(s) {no_backward} ran no backward instruction in the first training iteration. "
            + FRAMEWORK_HINTS.get(infos[0].framework, FRAMEWORK_HINTS[""])
        )
    chunks = {len(v) for v in virtual}
    if len(chunks) > 1:
        raise ZeusConfigError(f"Pipeline stages hold different numbers of model chunks: {virtual}.")
    num_chunks = chunks.pop()
    kinds = {i.kind for o in orders for i in o}
    split = SPLIT_BACKWARD if InstructionKind.BACKWARD_WEIGHT in kinds else FULL_BACKWARD
    num_mb = sum(1 for i in orders[0] if i.kind is InstructionKind.FORWARD and i.chunk == 0)
    default = tuple(tuple(c * len(orders) + s for c in range(num_chunks)) for s in range(len(orders)))
    name = infos[0].schedule
    try:
        schedule = PipelineSchedule(
            name,
            len(orders),
            num_mb,
            tuple(orders),
            num_chunks,
            split,
            None if tuple(virtual) == default else tuple(virtual),
        )
    except ZeusConfigError as exc:
        text = "\n".join(f"stage {s}: " + " ".join(i.short_name for i in o) for s, o in enumerate(orders))
        raise ZeusConfigError(
            f"The instructions seen in the first iteration do not form one pipeline iteration "
            f"({exc}):\n{text}\nAttach the hook before the first training step, on every rank."
        ) from exc
    _compare_with_textbook(schedule)
    return schedule


def _textbook(schedule: PipelineSchedule) -> PipelineSchedule:
    """The registered schedule of the observed one's name and sizes.

    Raises:
        ZeusConfigError: The sizes do not fit that schedule.
    """
    S, M, C = schedule.num_stages, schedule.num_microbatches, schedule.num_chunks
    if schedule.name == "interleaved-1f1b" and C > 1:
        # Megatron-core's microbatch_group_size_per_vp_stage N shows in the last stage: (C - 1)·N
        # warm-up forwards, then the first forward of the steady state; where that gives no valid
        # group size, compare with the default N = S.
        last = schedule.stage_orders[-1]
        forwards = next(
            (i for i, inst in enumerate(last) if inst.kind is not InstructionKind.FORWARD), len(last)
        )
        try:
            return interleaved_1f1b(S, M, C, (forwards - 1) // (C - 1))
        except ZeusConfigError:
            pass
    return make_schedule(schedule.name, S, M, C)


def _compare_with_textbook(schedule: PipelineSchedule) -> None:
    if schedule.name not in SCHEDULES:
        return
    try:
        textbook = _textbook(schedule)
    except ZeusConfigError:
        return
    if textbook.stage_orders != schedule.stage_orders:
        logger.warning(
            "The observed order differs from textbook %s; planning for the observed order:\n%s",
            schedule.name,
            schedule.to_text(),
        )


def gpu_names(infos: Sequence[RankInfo]) -> dict[str, str]:
    """GPU product per stage (``{"0": name, ...}``).

    Raises:
        ZeusConfigError: One stage runs on different GPU models.
    """
    names: dict[str, str] = {}
    for stage, group in sorted(_by_stage(infos).items()):
        kinds = sorted({g.gpu_name for g in group})
        if len(kinds) > 1:
            raise ZeusConfigError(
                f"Pipeline stage {stage} runs on different GPU models {kinds}; one plan cannot fit both."
            )
        names[str(stage)] = kinds[0]
    return names


def supported_clocks(infos: Sequence[RankInfo]) -> dict[int, set[int]]:
    """Per stage, the SM clocks every GPU of that stage supports, MHz."""
    out: dict[int, set[int]] = {}
    for info in infos:
        clocks = set(info.supported_mhz)
        out[info.stage] = out[info.stage] & clocks if info.stage in out else clocks
    return out


def check_clocks(plan: FrequencyPlan, infos: Sequence[RankInfo]) -> None:
    """Check a plan's clocks against the GPUs of each stage.

    Raises:
        ZeusProfileError: A clock is not supported (the plan is printed with the cells marked).
    """
    supported = supported_clocks(infos)
    plan.validate({(s, k): clocks for s, clocks in supported.items() for k in InstructionKind})
