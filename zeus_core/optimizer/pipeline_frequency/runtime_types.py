"""The runtime's plain data: its phases, what it records, and the protocol the pipeline hooks drive.

Phases are small frozen dataclasses; :class:`~.runtime.PerseusRuntime` changes phase in one place
(after an iteration, on every rank together)::

    Discovering(n) -> Discovering(n - 1) -> ... -> Discovering(1)
    Discovering(1) -> Applying(plan)            a plan is given, saved, or planned from a saved profile
                   -> Profiling(0, 0)           otherwise
    Profiling(i, k) -> Profiling(i, k + 1)      more iterations at clock i
                    -> Profiling(i + 1, 0)      next clock (some rank still improves)
                    -> Applying(plan)           every rank is done; rank 0 planned
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Union, runtime_checkable

from zeus_core.optimizer.pipeline_frequency.plan import FrequencyPlan
from zeus_core.optimizer.pipeline_frequency.schedule import InstructionKind

__all__ = [
    "Discovering",
    "Profiling",
    "Applying",
    "RuntimePhase",
    "InstructionListener",
    "InstructionRecord",
    "IterationRecord",
]


@dataclass(frozen=True)
class Discovering:
    """Warm-up iterations, run untouched; the last one records the stage's instruction order.

    Next: :class:`Profiling`, or :class:`Applying` when a plan is given, saved or made from a saved profile.
    """

    remaining: int
    name: str = field(default="discovering", init=False)


@dataclass(frozen=True)
class Profiling:
    """Sweeping clocks: iteration ``iteration`` at clock number ``index`` of this rank's sweep.

    ``measuring`` is ``False`` once this rank's own sweep is over while other ranks continue.
    Next: the next clock, or :class:`Applying` when every rank is done.
    """

    index: int
    iteration: int
    measuring: bool = True
    name: str = field(default="profiling", init=False)


@dataclass(frozen=True)
class Applying:
    """Running the plan (final)."""

    plan: FrequencyPlan
    name: str = field(default="applying", init=False)


RuntimePhase = Union[Discovering, Profiling, Applying]


@runtime_checkable
class InstructionListener(Protocol):
    """What a pipeline hook (:mod:`zeus_integrations.pipeline`) drives; :class:`PerseusRuntime` is one.

    A hook calls :meth:`set_pipeline` when it attaches, brackets each training iteration with
    :meth:`begin_iteration` / :meth:`end_iteration`, and each forward or backward instruction with
    :meth:`begin_instruction` / :meth:`end_instruction` (after the instruction's inputs arrived).
    Instructions outside an iteration (evaluation) are ignored by the listener.
    """

    def set_pipeline(
        self, stage: int, num_stages: int, schedule: str | None = None, framework: str | None = None
    ) -> None:
        """This process runs pipeline ``stage`` of ``num_stages`` under the named schedule and framework."""

    def begin_iteration(self) -> None:
        """A training iteration (optimizer step) starts."""

    def end_iteration(self, failed: bool = False) -> None:
        """The iteration ended (``failed``: it raised)."""

    def begin_instruction(
        self, kind: InstructionKind | str, microbatch: int | None = None, virtual_stage: int | None = None
    ) -> None:
        """An instruction of ``microbatch`` starts (``None``: the listener counts) on ``virtual_stage``."""

    def end_instruction(
        self, kind: InstructionKind | str, microbatch: int | None = None, failed: bool = False
    ) -> None:
        """The instruction begun last ended (``failed``: it raised)."""


@dataclass(frozen=True)
class InstructionRecord:
    """One instruction as this rank saw it.

    Attributes:
        kind: Forward, backward, or a split backward's input / weight part.
        microbatch: Microbatch index.
        frequency_mhz: Clock requested for it, MHz (``None`` during discovery: not controlled).
        virtual_stage: The model chunk's virtual stage (this stage, unless interleaved).
    """

    kind: InstructionKind
    microbatch: int
    frequency_mhz: int | None
    virtual_stage: int = 0

    @property
    def short_name(self) -> str:
        """``F3`` / ``B3`` / ``I3`` / ``W3``."""
        return f"{self.kind.letter}{self.microbatch}"


@dataclass(frozen=True)
class IterationRecord:
    """One training iteration on this rank.

    Attributes:
        index: Iteration number since the runtime started, from 0.
        phase: ``"discovering"``, ``"profiling"`` or ``"applying"``.
        instructions: The instructions in the order they ran.
        time_s: Duration, s (0 if it failed).
        energy_j: This rank's GPU energy, J.
        simulated: Whether the GPU is simulated.
    """

    index: int
    phase: str
    instructions: tuple[InstructionRecord, ...]
    time_s: float
    energy_j: float
    simulated: bool
