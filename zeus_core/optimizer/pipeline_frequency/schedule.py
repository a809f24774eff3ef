"""Pipeline schedules as data: which instructions each stage runs, in which order.

A :class:`PipelineSchedule` lists, per pipeline stage, the :class:`Instruction` s that stage runs
in program order. Data dependencies between stages follow from the instructions themselves
(:meth:`PipelineSchedule.data_dependencies`), so a new schedule (interleaved 1F1B, a custom
order) only has to list its per-stage orders; the DAG builder needs nothing else.

Model chunks (interleaved schedules): instruction ``(stage s, chunk c)`` runs *virtual stage*
``v = c·S + s`` of a pipeline of ``S·C`` virtual stages (Megatron-core's numbering). Forward
activations flow ``v → v+1``, gradients ``v+1 → v``, and the last virtual stage runs
``backward(j)`` after ``forward(j)``.

Example:
    >>> sched = synchronous_1f1b(num_stages=2, num_microbatches=3)
    >>> " ".join(i.short_name for i in sched.stage_orders[0])
    'F0 F1 B0 F2 B1 B2'
    >>> len(sched.data_dependencies())
    9
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
    "SCHEDULES",
    "make_schedule",
]


class InstructionKind(str, enum.Enum):
    """Type of a pipeline instruction; the value is the profile CSV's ``instruction`` column."""

    FORWARD = "forward"
    BACKWARD = "backward"

    @classmethod
    def parse(cls, value: "str | InstructionKind") -> "InstructionKind":
        """Accept ``"forward"``/``"backward"`` (any case) or an :class:`InstructionKind`.

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


@dataclass(frozen=True, order=True)
class Instruction:
    """One forward or backward pass of one microbatch on one pipeline stage.

    Attributes:
        stage: Pipeline stage (rank within the pipeline), from 0.
        kind: Forward or backward.
        microbatch: Microbatch index, from 0.
        chunk: Model chunk on this stage (interleaved schedules), from 0.
    """

    stage: int
    kind: InstructionKind
    microbatch: int
    chunk: int = 0

    @property
    def short_name(self) -> str:
        """``F3`` / ``B3`` (``F3c1`` for chunk 1), as in schedule diagrams."""
        letter = "F" if self.kind is InstructionKind.FORWARD else "B"
        suffix = f"c{self.chunk}" if self.chunk else ""
        return f"{letter}{self.microbatch}{suffix}"

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

    Raises:
        ZeusConfigError: A stage's list holds another stage's instruction, an instruction is
            missing or repeated, or a size is not positive.
    """

    name: str
    num_stages: int
    num_microbatches: int
    stage_orders: tuple[tuple[Instruction, ...], ...]
    num_chunks: int = 1
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
        expected = 2 * s * m * c
        if len(index) != expected:
            missing = [i for i in self._all_instructions() if i not in index][:5]
            raise ZeusConfigError(
                f"PipelineSchedule {self.name!r}: {len(index)} instructions, expected {expected} "
                f"(forward and backward of every microbatch and chunk on every stage); missing e.g. "
                f"{[str(i) for i in missing]}."
            )
        object.__setattr__(self, "_index", index)

    def _all_instructions(self) -> Iterator[Instruction]:
        for stage in range(self.num_stages):
            for chunk in range(self.num_chunks):
                for mb in range(self.num_microbatches):
                    for kind in InstructionKind:
                        yield Instruction(stage, kind, mb, chunk)

    @property
    def num_instructions(self) -> int:
        """Instructions in one iteration, ``2·S·M·C``."""
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

        Forward of virtual stage ``v`` feeds forward of ``v+1``; backward of ``v+1`` feeds
        backward of ``v``; on the last virtual stage, forward feeds backward. Program order
        within a stage is not included (see :meth:`program_order_edges`).
        """
        s, c = self.num_stages, self.num_chunks
        last = s * c - 1
        fwd, bwd = InstructionKind.FORWARD, InstructionKind.BACKWARD
        deps: list[tuple[Instruction, Instruction]] = []
        for mb in range(self.num_microbatches):
            for v in range(last + 1):
                here_f = Instruction(v % s, fwd, mb, v // s)
                here_b = Instruction(v % s, bwd, mb, v // s)
                if v < last:
                    deps.append((here_f, Instruction((v + 1) % s, fwd, mb, (v + 1) // s)))
                    deps.append((Instruction((v + 1) % s, bwd, mb, (v + 1) // s), here_b))
                else:
                    deps.append((here_f, here_b))
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
    """
    _check_sizes("gpipe", num_stages, num_microbatches)
    fwd, bwd = InstructionKind.FORWARD, InstructionKind.BACKWARD
    orders = [
        tuple(Instruction(s, fwd, j) for j in range(num_microbatches))
        + tuple(Instruction(s, bwd, j) for j in range(num_microbatches))
        for s in range(num_stages)
    ]
    return PipelineSchedule("gpipe", num_stages, num_microbatches, tuple(orders))


def _check_sizes(call: str, num_stages: int, num_microbatches: int) -> None:
    if int(num_stages) != num_stages or int(num_microbatches) != num_microbatches:
        raise ZeusConfigError(f"{call}({num_stages}, {num_microbatches}): sizes must be integers.")
    if num_stages < 1 or num_microbatches < 1:
        raise ZeusConfigError(
            f"{call}(num_stages={num_stages}, num_microbatches={num_microbatches}): both must be >= 1."
        )


#: Schedule name (as on the command line) -> builder ``(num_stages, num_microbatches) -> schedule``.
SCHEDULES: dict[str, Callable[[int, int], PipelineSchedule]] = {
    "1f1b": synchronous_1f1b,
    "gpipe": gpipe,
}


def make_schedule(name: str, num_stages: int, num_microbatches: int) -> PipelineSchedule:
    """Build a registered schedule by name (``"1f1b"``, ``"gpipe"``).

    Raises:
        ZeusConfigError: ``name`` is not registered in :data:`SCHEDULES`.
    """
    try:
        builder = SCHEDULES[name.lower()]
    except KeyError:
        raise ZeusConfigError(
            f"Unknown pipeline schedule {name!r}; choose one of {sorted(SCHEDULES)} or register a "
            "builder in zeus_core.optimizer.pipeline_frequency.schedule.SCHEDULES."
        ) from None
    return builder(num_stages, num_microbatches)
