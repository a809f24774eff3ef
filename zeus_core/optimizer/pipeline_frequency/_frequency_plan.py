"""Frequency plans: the SM clock of every instruction of one pipeline iteration, as plain data.

Plans round-trip through JSON (the layout: docs/optimizers/perseus.md, "Plans"), so the planner,
the runtime and the command line exchange them as files.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Mapping

from zeus_core.exceptions import ZeusProfileError
from zeus_core.optimizer.pipeline_frequency._schedule import (
    FULL_BACKWARD,
    Instruction,
    InstructionKind,
    PipelineSchedule,
)

__all__ = ["PLAN_FORMAT_VERSION", "FrequencyPlan"]

#: Version of the JSON layout written by :meth:`FrequencyPlan.to_dict`.
PLAN_FORMAT_VERSION = 1


@dataclass
class FrequencyPlan:
    """SM clock (MHz) per instruction of one pipeline iteration.

    Args:
        schedule: Name of the schedule the plan is for (e.g. ``"1f1b"``).
        num_stages: Pipeline stages.
        num_microbatches: Microbatches per iteration.
        frequencies: Clock per instruction, MHz; must cover every instruction.
        num_chunks: Model chunks per stage.
        label: What the plan is (``"zero-slowdown"``, ``"deadline"``, ...).
        iteration_time_s: Predicted iteration time under the plan, s (``None`` if unknown).
        energy_j: Predicted GPU energy of the iteration (all stages, including time blocked on
            communication), J.
        simulated: ``True`` when the prediction comes from a simulated/modelled profile.
        metadata: Free-form JSON-safe details (planner settings, baseline numbers).

    Raises:
        ZeusProfileError: An instruction is missing or out of range, or a clock is not positive.

    Example:
        >>> from zeus_core.optimizer.pipeline_frequency import synchronous_1f1b
        >>> plan = FrequencyPlan.uniform(synchronous_1f1b(2, 2), 1410, label="max")
        >>> plan.frequency(1, "backward", 0)
        1410
        >>> FrequencyPlan.from_json(plan.to_json()) == plan
        True
    """

    schedule: str
    num_stages: int
    num_microbatches: int
    frequencies: dict[Instruction, int]
    num_chunks: int = 1
    label: str = ""
    iteration_time_s: float | None = None
    energy_j: float | None = None
    simulated: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.frequencies = {inst: int(f) for inst, f in self.frequencies.items()}
        bad = [i for i, f in self.frequencies.items() if f <= 0]
        out = [
            i
            for i in self.frequencies
            if not (
                0 <= i.stage < self.num_stages
                and 0 <= i.microbatch < self.num_microbatches
                and 0 <= i.chunk < self.num_chunks
            )
        ]
        missing = [i for i in self._cells() if i not in self.frequencies]
        if bad or out or missing:
            what = (
                f"clocks must be positive MHz ({len(bad)} bad)"
                if bad
                else f"instruction {out[0]} is outside the plan's shape"
                if out
                else f"{len(missing)} instruction(s) have no clock, e.g. {missing[0]}"
            )
            raise ZeusProfileError(
                f"FrequencyPlan {self.label!r}: {what}.\n{self.to_text(mark=set(bad) | set(missing))}"
            )

    @classmethod
    def uniform(cls, schedule: PipelineSchedule, frequency_mhz: int, label: str = "") -> "FrequencyPlan":
        """Every instruction at ``frequency_mhz``."""
        return cls(
            schedule.name,
            schedule.num_stages,
            schedule.num_microbatches,
            {i: frequency_mhz for i in schedule.instructions()},
            schedule.num_chunks,
            label,
        )

    @property
    def kinds(self) -> tuple[InstructionKind, ...]:
        """Instruction kinds the plan covers (forward/backward, or forward/input/weight for zero bubble)."""
        present = {i.kind for i in self.frequencies}
        kinds = tuple(k for k in InstructionKind if k in present)
        return kinds or FULL_BACKWARD

    def _cells(self) -> list[Instruction]:
        return [
            Instruction(s, k, m, c)
            for s in range(self.num_stages)
            for c in range(self.num_chunks)
            for k in self.kinds
            for m in range(self.num_microbatches)
        ]

    def frequency(self, stage: int, kind: InstructionKind | str, microbatch: int, chunk: int = 0) -> int:
        """Clock of one instruction, MHz.

        Raises:
            ZeusProfileError: The plan has no such instruction.
        """
        inst = Instruction(int(stage), InstructionKind.parse(kind), int(microbatch), int(chunk))
        try:
            return self.frequencies[inst]
        except KeyError:
            raise ZeusProfileError(
                f"FrequencyPlan {self.label!r} ({self.num_stages} stages x {self.num_microbatches} "
                f"microbatches) has no instruction {inst}."
            ) from None

    def stage_program(self, schedule: PipelineSchedule, stage: int) -> list[tuple[Instruction, int]]:
        """``(instruction, MHz)`` of one stage in the schedule's program order.

        Raises:
            ZeusProfileError: The plan was made for a different schedule shape.
        """
        self.check_matches(schedule)
        return [(inst, self.frequencies[inst]) for inst in schedule.stage_orders[stage]]

    def check_matches(self, schedule: PipelineSchedule) -> None:
        """Check that the plan has the schedule's shape.

        Raises:
            ZeusProfileError: Naming both shapes.
        """
        mine = (
            self.num_stages,
            self.num_microbatches,
            self.num_chunks,
            "/".join(k.letter for k in self.kinds),
        )
        theirs = (
            schedule.num_stages,
            schedule.num_microbatches,
            schedule.num_chunks,
            "/".join(k.letter for k in schedule.kinds),
        )
        if mine != theirs:
            raise ZeusProfileError(
                f"FrequencyPlan {self.label!r} is for (stages, microbatches, chunks, kinds)={mine}, but the "
                f"schedule {schedule.name!r} has {theirs}. Plan again for this pipeline."
            )

    def validate(self, allowed_mhz: Mapping[tuple[int, InstructionKind], Collection[int]]) -> None:
        """Check every clock against the clocks allowed for its (stage, instruction type).

        Args:
            allowed_mhz: ``{(stage, kind): clocks}``, e.g. the profiled clocks or the GPU's
                supported clocks, MHz.

        Raises:
            ZeusProfileError: With the plan printed and every failing cell marked ``>…<``.
        """
        failing = {
            i
            for i, f in self.frequencies.items()
            if (i.stage, i.kind) not in allowed_mhz or f not in allowed_mhz[(i.stage, i.kind)]
        }
        if failing:
            first = min(failing)
            raise ZeusProfileError(
                f"FrequencyPlan {self.label!r}: {len(failing)} clock(s) not allowed, e.g. {first} at "
                f"{self.frequencies[first]} MHz "
                f"(allowed: {sorted(allowed_mhz.get((first.stage, first.kind), []))}).\n"
                + self.to_text(mark=failing)
            )

    def prediction(self) -> tuple[float, float]:
        """Predicted iteration time (s) and energy (J).

        Raises:
            ZeusProfileError: The plan carries no prediction (e.g. a hand-made uniform plan).
        """
        if self.iteration_time_s is None or self.energy_j is None:
            raise ZeusProfileError(
                f"FrequencyPlan {self.label!r} has no predicted time and energy; replay it with "
                "Frontier.replay_plan(plan) for one."
            )
        return self.iteration_time_s, self.energy_j

    def to_text(self, mark: Collection[Instruction] = ()) -> str:
        """A grid: one row per (stage, instruction type), one column per microbatch; ``>f<`` marks cells."""
        marked = set(mark)
        lines = [f"plan {self.label or '(unnamed)'}: {self.schedule}, clocks in MHz"]
        lines.append("stage/type     " + " ".join(f"{m:>7}" for m in range(self.num_microbatches)))
        for s in range(self.num_stages):
            for c in range(self.num_chunks):
                for k in self.kinds:
                    name = f"{s}{'.' + str(c) if self.num_chunks > 1 else ''} {k.value}"
                    cells = []
                    for m in range(self.num_microbatches):
                        inst = Instruction(s, k, m, c)
                        f = self.frequencies.get(inst)
                        text = "?" if f is None else str(f)
                        cells.append(f"{('>' + text + '<') if inst in marked else text:>7}")
                    lines.append(f"{name:<14} " + " ".join(cells))
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (the layout: docs/optimizers/perseus.md, "Plans")."""
        rows = []
        for s in range(self.num_stages):
            for c in range(self.num_chunks):
                row: dict[str, Any] = {"stage": s, "chunk": c}
                for k in self.kinds:
                    row[k.value] = [
                        self.frequencies[Instruction(s, k, m, c)] for m in range(self.num_microbatches)
                    ]
                rows.append(row)
        return {
            "version": PLAN_FORMAT_VERSION,
            "schedule": self.schedule,
            "num_stages": self.num_stages,
            "num_microbatches": self.num_microbatches,
            "num_chunks": self.num_chunks,
            "label": self.label,
            "iteration_time_s": self.iteration_time_s,
            "energy_j": self.energy_j,
            "simulated": self.simulated,
            "metadata": self.metadata,
            "frequencies_mhz": rows,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "plan") -> "FrequencyPlan":
        """Inverse of :meth:`to_dict`.

        Raises:
            ZeusProfileError: A key is missing, the version is newer than this library, or a list
                has the wrong length.
        """
        if not isinstance(data, Mapping):
            raise ZeusProfileError(f"{source}: a plan is a JSON object, not {type(data).__name__}.")
        try:
            version = int(data.get("version", 1))
            if version > PLAN_FORMAT_VERSION:
                raise ZeusProfileError(
                    f"{source}: plan format version {version} is newer than this library's "
                    f"{PLAN_FORMAT_VERSION}; upgrade zeus-suite."
                )
            stages, mbs = int(data["num_stages"]), int(data["num_microbatches"])
            chunks = int(data.get("num_chunks", 1))
            freqs: dict[Instruction, int] = {}
            for row in data["frequencies_mhz"]:
                s, c = int(row["stage"]), int(row.get("chunk", 0))
                for k in [k for k in InstructionKind if k.value in row] or FULL_BACKWARD:
                    values = row[k.value]
                    if len(values) != mbs:
                        raise ZeusProfileError(
                            f"{source}: stage {s} {k.value} lists {len(values)} clocks "
                            f"for {mbs} microbatches."
                        )
                    for m, f in enumerate(values):
                        freqs[Instruction(s, k, m, c)] = int(f)
            return cls(
                str(data["schedule"]),
                stages,
                mbs,
                freqs,
                chunks,
                str(data.get("label", "")),
                _opt_float(data.get("iteration_time_s")),
                _opt_float(data.get("energy_j")),
                bool(data.get("simulated", False)),
                dict(data.get("metadata", {})),
            )
        except KeyError as exc:
            raise ZeusProfileError(
                f"{source}: plan lacks the key {exc}; was it written by FrequencyPlan.save?"
            ) from exc
        except (TypeError, ValueError, AttributeError, OverflowError) as exc:
            if isinstance(exc, ZeusProfileError):
                raise
            raise ZeusProfileError(f"{source}: malformed plan: {exc}") from exc

    def to_json(self) -> str:
        """The plan as a JSON string."""
        return json.dumps(self.to_dict(), indent=1)

    @classmethod
    def from_json(cls, text: str, source: str = "plan") -> "FrequencyPlan":
        """Parse :meth:`to_json` output.

        Raises:
            ZeusProfileError: The text is not valid JSON or not a plan.
        """
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ZeusProfileError(f"{source}: not valid JSON ({exc}).") from exc
        return cls.from_dict(data, source)

    def save(self, path: str | Path) -> None:
        """Write the plan as JSON (parent folders are created)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> "FrequencyPlan":
        """Read a plan written by :meth:`save`.

        Raises:
            ZeusProfileError: The file cannot be read or is not a plan.
        """
        path = Path(path)
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise ZeusProfileError(f"Cannot read plan {path}: {exc}.") from exc
        return cls.from_json(text, source=str(path))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FrequencyPlan):
            return NotImplemented
        return self.to_dict() == other.to_dict()


def _opt_float(value: Any) -> float | None:
    if value is None:
        return None
    x = float(value)
    return x if math.isfinite(x) else None
