"""What a pipeline hook reports to the runtime, and what the runtime records of each iteration."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from zeus_core.optimizer.pipeline_frequency._schedule import InstructionKind

__all__ = ["InstructionListener", "InstructionRecord", "IterationRecord"]


@runtime_checkable
class InstructionListener(Protocol):
    """What a pipeline hook (:mod:`zeus_integrations.pipeline`) drives; ``PerseusRuntime`` is one.

    A hook calls :meth:`set_pipeline` when it attaches, brackets each training iteration with
    :meth:`begin_iteration` / :meth:`end_iteration`, and each instruction with
    :meth:`begin_instruction` / :meth:`end_instruction` (after the instruction's inputs arrived).
    Instructions outside an iteration (evaluation) are ignored.

    Example:
        >>> from zeus_core.optimizer.pipeline_frequency.runtime import PerseusRuntime
        >>> isinstance(PerseusRuntime(mode="measure"), InstructionListener)
        True
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

    Example:
        >>> InstructionRecord(InstructionKind.BACKWARD, 3, 1410).short_name
        'B3'
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

    Example:
        >>> record = IterationRecord(0, "discovering", (), 0.31, 95.0, simulated=True)
        >>> record.energy_j / record.time_s > 300  # average power, W
        True
    """

    index: int
    phase: str
    instructions: tuple[InstructionRecord, ...]
    time_s: float
    energy_j: float
    simulated: bool
