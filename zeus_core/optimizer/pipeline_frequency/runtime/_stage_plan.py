"""One stage's part of a plan: the clock of each of its instructions, and whether the pipeline fits it."""

from __future__ import annotations

import logging
from typing import Sequence

from zeus_core import console
from zeus_core.optimizer.pipeline_frequency._frequency_plan import FrequencyPlan
from zeus_core.optimizer.pipeline_frequency._schedule import InstructionKind, PipelineSchedule
from zeus_core.optimizer.pipeline_frequency.runtime._records import InstructionRecord

__all__ = ["StagePlan"]

logger = logging.getLogger(__name__)

#: What identifies an instruction while it runs: (kind, microbatch, virtual stage).
Key = tuple[InstructionKind, int, int]


class StagePlan:
    """The clocks ``PerseusRuntime`` applies on one stage, in program order.

    An instruction the plan lacks runs at the highest clock, and the iteration's end then reports
    that the pipeline no longer fits the plan (the microbatch count changed), so the runtime plans
    again. Each kind of warning is given once per runtime (``warned`` is shared by its plans).

    Args:
        plan: The pipeline's plan.
        schedule: The schedule as observed (gives each chunk's virtual stage).
        stage: This process's pipeline stage.
        warned: The warnings already given (``"order"``, ``"shape"``); updated in place.

    Raises:
        ZeusProfileError: The plan was made for another schedule shape.
    """

    def __init__(self, plan: FrequencyPlan, schedule: PipelineSchedule, stage: int, warned: set[str]) -> None:
        self.stage = stage
        # Per instruction in program order: (kind, microbatch, virtual stage, MHz).
        self.program: list[tuple[InstructionKind, int, int, int]] = [
            (inst.kind, inst.microbatch, schedule.virtual_stage(stage, inst.chunk), mhz)
            for inst, mhz in plan.stage_program(schedule, stage)
        ]
        self._lookup: dict[Key, int] = {(k, m, v): f for k, m, v, f in self.program}
        self._warned = warned
        self._off_plan = False

    def first_mhz(self) -> int | None:
        """The clock of the iteration's first instruction, MHz (``None``: the stage runs none)."""
        return self.program[0][3] if self.program else None

    def clock(self, position: int, key: Key) -> int | None:
        """The planned clock of the instruction starting at ``position`` of the iteration, MHz.

        Returns:
            ``None`` when the plan lacks the instruction (then :meth:`ran_as_planned` is ``False``).
        """
        expected = self.program[position][:3] if position < len(self.program) else None
        if expected != key and "order" not in self._warned:
            self._warned.add("order")
            logger.warning(
                "Stage %s ran %s%d as instruction %d of the iteration, but the plan expected %s; clocks are "
                "still looked up per instruction.",
                self.stage,
                key[0].value,
                key[1],
                position,
                expected,
            )
        mhz = self._lookup.get(key)
        if mhz is None:
            self._off_plan = True
        return mhz

    def next_mhz(self, position: int) -> int | None:
        """The clock to request once the instruction before ``position`` ended (prefetch), MHz."""
        return self.program[position][3] if position < len(self.program) else None

    def ran_as_planned(self, ran: Sequence[InstructionRecord]) -> bool:
        """Whether an iteration ran exactly the planned instructions; if not, the user is told (once)."""
        done = sorted((r.kind.value, r.microbatch, r.virtual_stage) for r in ran)
        planned = sorted((k.value, m, v) for k, m, v, _ in self.program)
        if not self._off_plan and done == planned:
            return True
        if "shape" not in self._warned:
            self._warned.add("shape")
            console.warn(
                f"Perseus: the pipeline ran {len(done)} instructions per iteration on stage {self.stage} "
                f"where the plan has {len(planned)} (the microbatch count changed?); running at the highest "
                "clocks and planning again for the new shape."
            )
        return False
