"""Pipeline schedules as data: which instructions each stage runs, in which order.

Dependencies between stages follow from the instructions, so a schedule lists only its per-stage
orders; see docs/optimizers/perseus.md ("Schedules").
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Callable, Iterator

from zeus_core.exceptions import ZeusConfigError

__all__ = [
    "InstructionKind",
    "Instruction",
    "PipelineSchedule",
    "synchronous_1f1b",
    "gpipe",
    "interleaved_1f1b",
    "zero_bubble_1f1b",
    "FULL_BACKWARD",
    "SPLIT_BACKWARD",
    "SCHEDULES",
    "make_schedule",
]


class InstructionKind(str, enum.Enum):
    """Type of a pipeline instruction; the value is the profile CSV's ``instruction`` column.

    Example:
        >>> InstructionKind.parse("backward_input").letter
        'I'
    """

    FORWARD = "forward"
    BACKWARD = "backward"
    BACKWARD_INPUT = "backward_input"
    BACKWARD_WEIGHT = "backward_weight"

    @property
    def letter(self) -> str:
        """``F``, ``B``, ``I`` (input gradient) or ``W`` (weight gradient), as in schedule diagrams."""
        return _LETTERS[self]

    @classmethod
    def parse(cls, value: "str | InstructionKind") -> "InstructionKind":
        """Accept a kind's value (``"forward"``, ``"backward"``, ``"backward_input"``, ``"backward_weight"``).

        Raises:
            ZeusConfigError: ``value`` names no instruction kind.
        """
        if isinstance(value, InstructionKind):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            raise ZeusConfigError(
                f"Unknown instruction kind {value!r}; use one of {[k.value for k in cls]}."
            ) from None


_LETTERS = {
    InstructionKind.FORWARD: "F",
    InstructionKind.BACKWARD: "B",
    InstructionKind.BACKWARD_INPUT: "I",
    InstructionKind.BACKWARD_WEIGHT: "W",
}
#: The kinds of a schedule with a full backward, and of a zero-bubble one (split backward).
FULL_BACKWARD: tuple[InstructionKind, ...] = (InstructionKind.FORWARD, InstructionKind.BACKWARD)
SPLIT_BACKWARD: tuple[InstructionKind, ...] = (
    InstructionKind.FORWARD,
    InstructionKind.BACKWARD_INPUT,
    InstructionKind.BACKWARD_WEIGHT,
)


@dataclass(frozen=True, order=True)
class Instruction:
    """One forward or backward pass of one microbatch on one pipeline stage.

    Attributes:
        stage: Pipeline stage (rank within the pipeline), from 0.
        kind: Forward, backward, or (zero-bubble schedules) backward for inputs / for weights.
        microbatch: Microbatch index, from 0.
        chunk: Model chunk on this stage (interleaved schedules), from 0.

    Example:
        >>> str(Instruction(1, InstructionKind.BACKWARD, 3))
        'stage1:B3'
    """

    stage: int
    kind: InstructionKind
    microbatch: int
    chunk: int = 0

    @property
    def short_name(self) -> str:
        """``F3`` / ``B3`` / ``I3`` / ``W3`` (``F3c1`` for chunk 1), as in schedule diagrams."""
        suffix = f"c{self.chunk}" if self.chunk else ""
        return f"{self.kind.letter}{self.microbatch}{suffix}"

    def __str__(self) -> str:
        return f"stage{self.stage}:{self.short_name}"


@dataclass(frozen=True)
class PipelineSchedule:
    """The per-stage program order of one training iteration of a pipeline.

    Args:
        name: Schedule name, e.g. ``"1f1b"``.
        num_stages: Number of pipeline stages ``S``.
        num_microbatches: Number of microbatches ``M`` per iteration.
        stage_orders: For each stage, its instructions in the order it runs them.
        num_chunks: Model chunks per stage (1 unless interleaved).
        kinds: Instruction kinds every (stage, chunk, microbatch) runs: :data:`FULL_BACKWARD`
            or, for zero-bubble schedules, :data:`SPLIT_BACKWARD`.
        virtual_stages: Per stage, the virtual stage of each of its chunks (``None``:
            Megatron's interleaving, chunk ``c`` of stage ``s`` is ``c·S + s``; a V-shaped
            schedule such as ZBV has stage ``s`` run ``s`` and ``2S − 1 − s``).

    Raises:
        ZeusConfigError: A stage's list holds another stage's instruction, an instruction is
            missing or repeated, or a size is not positive.

    Example:
        >>> sched = synchronous_1f1b(num_stages=2, num_microbatches=3)
        >>> " ".join(i.short_name for i in sched.stage_orders[0])
        'F0 F1 B0 F2 B1 B2'
        >>> len(sched.data_dependencies())
        9
    """

    name: str
    num_stages: int
    num_microbatches: int
    stage_orders: tuple[tuple[Instruction, ...], ...]
    num_chunks: int = 1
    kinds: tuple[InstructionKind, ...] = FULL_BACKWARD
    virtual_stages: tuple[tuple[int, ...], ...] | None = None
    _index: dict[Instruction, tuple[int, int]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        s, m, c = self.num_stages, self.num_microbatches, self.num_chunks
        if s < 1 or m < 1 or c < 1:
            raise ZeusConfigError(
                f"PipelineSchedule {self.name!r}: stages={s}, microbatches={m}, chunks={c}; all must be >= 1."
            )
        orders = tuple(tuple(stage) for stage in self.stage_orders)
        object.__setattr__(self, "stage_orders", orders)
        if len(orders) != s:
            raise ZeusConfigError(
                f"PipelineSchedule {self.name!r}: {len(orders)} stage orders given for {s} stages."
            )
        index: dict[Instruction, tuple[int, int]] = {}
        for stage, order in enumerate(orders):
            for pos, inst in enumerate(order):
                if inst.stage != stage:
                    raise ZeusConfigError(
                        f"PipelineSchedule {self.name!r}: {inst} is listed in stage {stage}'s order."
                    )
                if not (0 <= inst.microbatch < m and 0 <= inst.chunk < c):
                    raise ZeusConfigError(
                        f"PipelineSchedule {self.name!r}: {inst} is outside microbatches 0..{m - 1} / "
                        f"chunks 0..{c - 1}."
                    )
                if inst in index:
                    raise ZeusConfigError(f"PipelineSchedule {self.name!r}: {inst} is listed twice.")
                index[inst] = (stage, pos)
        expected = len(self.kinds) * s * m * c
        if len(index) != expected or any(i.kind not in self.kinds for i in index):
            missing = [i for i in self._all_instructions() if i not in index][:5]
            raise ZeusConfigError(
                f"PipelineSchedule {self.name!r}: {len(index)} instructions, expected {expected} "
                f"({'/'.join(k.value for k in self.kinds)} of every microbatch and chunk on every stage); "
                f"missing e.g. {[str(i) for i in missing]}."
            )
        object.__setattr__(self, "_index", index)
        self._check_virtual_stages()

    def _check_virtual_stages(self) -> None:
        if self.virtual_stages is None:
            return
        vs = tuple(tuple(int(v) for v in row) for row in self.virtual_stages)
        flat = sorted(v for row in vs for v in row)
        if (
            len(vs) != self.num_stages
            or any(len(r) != self.num_chunks for r in vs)
            or flat != list(range(self.num_stages * self.num_chunks))
        ):
            raise ZeusConfigError(
                f"PipelineSchedule {self.name!r}: virtual_stages {vs} must give each of the "
                f"{self.num_stages} stages {self.num_chunks} distinct virtual stages covering "
                f"0..{self.num_stages * self.num_chunks - 1}."
            )
        object.__setattr__(self, "virtual_stages", vs)

    def virtual_stage(self, stage: int, chunk: int) -> int:
        """The virtual stage that chunk ``chunk`` of ``stage`` runs (its place in the model)."""
        if self.virtual_stages is None:
            return chunk * self.num_stages + stage
        return self.virtual_stages[stage][chunk]

    def _all_instructions(self) -> Iterator[Instruction]:
        for stage in range(self.num_stages):
            for chunk in range(self.num_chunks):
                for mb in range(self.num_microbatches):
                    for kind in self.kinds:
                        yield Instruction(stage, kind, mb, chunk)

    @property
    def num_instructions(self) -> int:
        """Instructions in one iteration, ``K·S·M·C`` for ``K`` instruction kinds."""
        return len(self._index)

    def instructions(self) -> list[Instruction]:
        """All instructions, stage by stage, each stage in program order."""
        return [inst for order in self.stage_orders for inst in order]

    def position(self, inst: Instruction) -> int:
        """Position of ``inst`` in its stage's program order.

        Raises:
            ZeusConfigError: ``inst`` is not part of this schedule.
        """
        try:
            return self._index[inst][1]
        except KeyError:
            raise ZeusConfigError(f"{inst} is not in schedule {self.name!r}.") from None

    def data_dependencies(self) -> list[tuple[Instruction, Instruction]]:
        """Cross-instruction data dependencies ``(producer, consumer)``.

        With ``G`` the gradient instruction (backward, or backward for inputs when the backward
        is split): forward of virtual stage ``v`` feeds forward of ``v+1``; ``G`` of ``v+1``
        feeds ``G`` of ``v``; on the last virtual stage, forward feeds ``G``; a split backward's
        weight instruction follows its input instruction. Program order within a stage is not
        included (see :meth:`program_order_edges`).
        """
        s, c = self.num_stages, self.num_chunks
        where = {self.virtual_stage(st, ch): (st, ch) for st in range(s) for ch in range(c)}
        last = s * c - 1
        fwd = InstructionKind.FORWARD
        grad = (
            InstructionKind.BACKWARD_INPUT
            if InstructionKind.BACKWARD_INPUT in self.kinds
            else InstructionKind.BACKWARD
        )
        split = InstructionKind.BACKWARD_WEIGHT in self.kinds
        deps: list[tuple[Instruction, Instruction]] = []
        for mb in range(self.num_microbatches):
            for v in range(last + 1):
                st, ch = where[v]
                here_f, here_g = Instruction(st, fwd, mb, ch), Instruction(st, grad, mb, ch)
                if v < last:
                    nst, nch = where[v + 1]
                    deps.append((here_f, Instruction(nst, fwd, mb, nch)))
                    deps.append((Instruction(nst, grad, mb, nch), here_g))
                else:
                    deps.append((here_f, here_g))
                if split:
                    deps.append((here_g, Instruction(st, InstructionKind.BACKWARD_WEIGHT, mb, ch)))
        return deps

    def program_order_edges(self) -> list[tuple[Instruction, Instruction]]:
        """Consecutive instructions of each stage, ``(earlier, later)``."""
        return [(order[i], order[i + 1]) for order in self.stage_orders for i in range(len(order) - 1)]

    def to_text(self) -> str:
        """One line per stage, e.g. ``stage 0: F0 F1 B0 F2 B1 B2``."""
        return "\n".join(
            f"stage {s}: " + " ".join(i.short_name for i in order)
            for s, order in enumerate(self.stage_orders)
        )


def synchronous_1f1b(num_stages: int, num_microbatches: int) -> PipelineSchedule:
    """Synchronous 1F1B (PipeDream-flush; DeepSpeed ``TrainSchedule``, torch ``Schedule1F1B``).

    Stage ``s`` runs ``min(S - s - 1, M)`` warm-up forwards, then alternates forward/backward, then
    drains the remaining backwards.

    Args:
        num_stages: Pipeline stages ``S``.
        num_microbatches: Microbatches ``M``.

    Raises:
        ZeusConfigError: A size is not a positive integer.

    Example:
        >>> print(synchronous_1f1b(2, 2).to_text())
        stage 0: F0 F1 B0 B1
        stage 1: F0 B0 F1 B1
    """
    _check_sizes("synchronous_1f1b", num_stages, num_microbatches)
    fwd, bwd = InstructionKind.FORWARD, InstructionKind.BACKWARD
    orders = []
    for s in range(num_stages):
        warmup = min(num_stages - s - 1, num_microbatches)
        order = [Instruction(s, fwd, j) for j in range(warmup)]
        for i in range(num_microbatches - warmup):
            order.append(Instruction(s, fwd, warmup + i))
            order.append(Instruction(s, bwd, i))
        order += [Instruction(s, bwd, j) for j in range(num_microbatches - warmup, num_microbatches)]
        orders.append(tuple(order))
    return PipelineSchedule("1f1b", num_stages, num_microbatches, tuple(orders))


def gpipe(num_stages: int, num_microbatches: int) -> PipelineSchedule:
    """GPipe (torch ``ScheduleGPipe``): every forward, then every backward, both in microbatch order.

    Args:
        num_stages: Pipeline stages ``S``.
        num_microbatches: Microbatches ``M``.

    Raises:
        ZeusConfigError: A size is not a positive integer.

    Example:
        >>> print(gpipe(2, 2).to_text())
        stage 0: F0 F1 B0 B1
        stage 1: F0 F1 B0 B1
    """
    _check_sizes("gpipe", num_stages, num_microbatches)
    fwd, bwd = InstructionKind.FORWARD, InstructionKind.BACKWARD
    orders = [
        tuple(Instruction(s, fwd, j) for j in range(num_microbatches))
        + tuple(Instruction(s, bwd, j) for j in range(num_microbatches))
        for s in range(num_stages)
    ]
    return PipelineSchedule("gpipe", num_stages, num_microbatches, tuple(orders))


def interleaved_1f1b(
    num_stages: int, num_microbatches: int, num_chunks: int = 2, microbatch_group_size: int | None = None
) -> PipelineSchedule:
    """Interleaved 1F1B (Megatron-core virtual pipeline; torch ``ScheduleInterleaved1F1B``).

    Each stage holds ``C`` model chunks; chunk ``c`` of stage ``s`` is virtual stage ``c·S + s``.
    The order is Megatron-core's ``forward_backward_pipelining_with_interleaving``, described in
    docs/optimizers/perseus.md ("Schedules").

    Args:
        num_stages: Pipeline stages ``S`` (ranks).
        num_microbatches: Microbatches ``M``.
        num_chunks: Model chunks per stage ``C`` (``virtual_pipeline_model_parallel_size``).
        microbatch_group_size: ``N``, between ``S`` and ``M`` (default ``S``).

    Raises:
        ZeusConfigError: Bad sizes, or sizes Megatron-core rejects: ``N`` outside ``[S, M]``, or
            ``M mod N`` between 1 and ``S − 1`` (with the default ``N``: ``M`` not a multiple of ``S``).

    Example:
        >>> print(interleaved_1f1b(2, 2, num_chunks=2).to_text())
        stage 0: F0 F1 F0c1 F1c1 B0c1 B1c1 B0 B1
        stage 1: F0 F1 F0c1 B0c1 F1c1 B1c1 B0 B1
    """
    _check_sizes("interleaved_1f1b", num_stages, num_microbatches)
    S, M, C = num_stages, num_microbatches, num_chunks
    N = S if microbatch_group_size is None else int(microbatch_group_size)
    if C < 1 or not S <= N <= M or 0 < M % N < S:
        raise ZeusConfigError(
            f"interleaved_1f1b({S}, {M}, num_chunks={C}, microbatch_group_size={N}): need num_chunks >= 1, "
            "stages <= group size <= microbatches, and microbatches a multiple of the group size or a "
            "remainder of at least the stages (by default: microbatches a multiple of the stages), as "
            "Megatron-core's interleaved schedule requires."
        )
    # (microbatch, chunk) of each virtual microbatch k, as Megatron-core's get_schedule_table.
    table = [(mb, c) for g in range(0, M, N) for c in range(C) for mb in range(g, min(g + N, M))]
    total = M * C
    fwd, bwd = InstructionKind.FORWARD, InstructionKind.BACKWARD

    def inst(s: int, kind: InstructionKind, k: int) -> Instruction:
        # Backward k runs chunk C-1-c; each chunk's backwards follow its forwards in microbatch order.
        mb, c = table[k]
        return Instruction(s, kind, mb, c if kind is fwd else C - 1 - c)

    orders = []
    for s in range(S):
        warmup = min((S - s - 1) * 2 + (C - 1) * N, total)
        order = [inst(s, fwd, k) for k in range(warmup)]
        for i in range(total - warmup):
            order += [inst(s, fwd, warmup + i), inst(s, bwd, i)]
        order += [inst(s, bwd, k) for k in range(total - warmup, total)]
        orders.append(tuple(order))
    return PipelineSchedule("interleaved-1f1b", S, M, tuple(orders), C)


def zero_bubble_1f1b(num_stages: int, num_microbatches: int) -> PipelineSchedule:
    """1F1B with the backward split as in zero-bubble pipelines (Qi et al., ICLR 2024).

    The backward becomes ``I`` (input gradient, which the previous stage waits for) and ``W``
    (weight gradient, which nobody waits for), so the iteration is never longer than 1F1B's.

    Args:
        num_stages: Pipeline stages ``S``.
        num_microbatches: Microbatches ``M``.

    Raises:
        ZeusConfigError: A size is not a positive integer.

    Example:
        >>> print(zero_bubble_1f1b(2, 2).to_text())
        stage 0: F0 F1 I0 I1 W0 W1
        stage 1: F0 I0 W0 F1 I1 W1
    """
    _check_sizes("zero_bubble_1f1b", num_stages, num_microbatches)
    fwd, inp, wgt = SPLIT_BACKWARD
    orders = []
    for s in range(num_stages):
        warmup = min(num_stages - s - 1, num_microbatches)
        order = [Instruction(s, fwd, j) for j in range(warmup)]
        pending: list[int] = []
        for i in range(num_microbatches - warmup):
            order += [Instruction(s, fwd, warmup + i), Instruction(s, inp, i)]
            pending.append(i)
            if len(pending) > warmup:
                order.append(Instruction(s, wgt, pending.pop(0)))
        for j in range(num_microbatches - warmup, num_microbatches):
            order.append(Instruction(s, inp, j))
            pending.append(j)
            order.append(Instruction(s, wgt, pending.pop(0)))
        order += [Instruction(s, wgt, j) for j in pending]
        orders.append(tuple(order))
    return PipelineSchedule("zb-1f1b", num_stages, num_microbatches, tuple(orders), kinds=SPLIT_BACKWARD)


def _check_sizes(call: str, num_stages: int, num_microbatches: int) -> None:
    if int(num_stages) != num_stages or int(num_microbatches) != num_microbatches:
        raise ZeusConfigError(f"{call}({num_stages}, {num_microbatches}): sizes must be integers.")
    if num_stages < 1 or num_microbatches < 1:
        raise ZeusConfigError(
            f"{call}(num_stages={num_stages}, num_microbatches={num_microbatches}): both must be >= 1."
        )


SCHEDULES: dict[str, Callable[..., PipelineSchedule]] = {
    "1f1b": synchronous_1f1b,
    "gpipe": gpipe,
    "interleaved-1f1b": interleaved_1f1b,
    "zb-1f1b": zero_bubble_1f1b,
}
"""The registered pipeline schedules: name -> builder ``(num_stages, num_microbatches, ...)``.

Example:
    >>> from zeus_core.optimizer.pipeline_frequency import SCHEDULES
    >>> sorted(SCHEDULES)
    ['1f1b', 'gpipe', 'interleaved-1f1b', 'zb-1f1b']
    >>> SCHEDULES["1f1b"](2, 4).num_stages
    2
"""
_CHUNKED = {"interleaved-1f1b"}


def make_schedule(name: str, num_stages: int, num_microbatches: int, num_chunks: int = 1) -> PipelineSchedule:
    """Build a registered schedule by name (``"1f1b"``, ``"gpipe"``, ``"interleaved-1f1b"``, ``"zb-1f1b"``).

    Args:
        name: Schedule name (a key of :data:`SCHEDULES`).
        num_stages: Pipeline stages.
        num_microbatches: Microbatches per iteration.
        num_chunks: Model chunks per stage (interleaved schedules only).

    Raises:
        ZeusConfigError: ``name`` is not registered, or chunks given for a schedule without them.

    Example:
        >>> make_schedule("interleaved-1f1b", 2, 4, num_chunks=2).num_instructions
        32
    """
    key = name.lower()
    try:
        builder = SCHEDULES[key]
    except KeyError:
        raise ZeusConfigError(
            f"Unknown pipeline schedule {name!r}; choose one of {sorted(SCHEDULES)} or register a "
            "builder in zeus_core.optimizer.pipeline_frequency.SCHEDULES."
        ) from None
    if key in _CHUNKED:
        return builder(num_stages, num_microbatches, num_chunks)
    if num_chunks != 1:
        raise ZeusConfigError(
            f"Schedule {name!r} runs one model chunk per stage; num_chunks={num_chunks} needs one of "
            f"{sorted(_CHUNKED)}."
        )
    return builder(num_stages, num_microbatches)
