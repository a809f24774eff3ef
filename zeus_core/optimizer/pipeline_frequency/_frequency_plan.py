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

from zeus_core._files import checked_number, read_text, write_atomic
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

#: Largest plan, in instructions (stages × chunks × instruction types × microbatches): far above
#: any real pipeline (1,024 stages × 1,024 microbatches × 3 types), and small enough to hold.
MAX_PLAN_CELLS = 4_000_000

#: Largest SM clock a plan may hold, MHz (GPUs run below 3 GHz).
MAX_CLOCK_MHZ = 10_000

# A plan with more cells than this is not printed in error messages (the grid would be huge).
_MAX_PRINTED_CELLS = 4096


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
        where = f"FrequencyPlan {self.label!r}"
        for name in ("num_stages", "num_microbatches", "num_chunks"):
            checked_number(getattr(self, name), where, name, integer=True, minimum=1, maximum=MAX_PLAN_CELLS)
        cells = self.num_stages * self.num_chunks * len(self.kinds) * self.num_microbatches
        shape = (
            f"{self.num_stages} stages x {self.num_chunks} chunks x {len(self.kinds)} instruction types x "
            f"{self.num_microbatches} microbatches = {cells} instructions"
        )
        # Checked before any cell is listed: a few bytes declaring a huge shape must not make the
        # loader build (or print) millions of cells.
        if cells > MAX_PLAN_CELLS:
            raise ZeusProfileError(
                f"{where}: the shape ({shape}) is above the {MAX_PLAN_CELLS} a plan may have."
            )
        if cells > len(self.frequencies) and cells > _MAX_PRINTED_CELLS:  # smaller: the grid below
            raise ZeusProfileError(
                f"{where}: {cells - len(self.frequencies)} instruction(s) have no clock: the shape ({shape}) "
                f"needs {cells} clocks, {len(self.frequencies)} are given."
            )
        self.frequencies = {
            inst: checked_number(
                f, where, f"clock of {inst}", integer=True, maximum=MAX_CLOCK_MHZ, unit="MHz"
            )
            for inst, f in self.frequencies.items()
        }
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
            grid = self.to_text(mark=set(bad) | set(missing)) if cells <= _MAX_PRINTED_CELLS else ""
            raise ZeusProfileError(f"{where}: {what}.\n{grid}".rstrip())

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
            shape = {
                name: checked_number(data[name] if name != "num_chunks" else data.get(name, 1), source, name,
                                     integer=True, minimum=1, maximum=MAX_PLAN_CELLS)
                for name in ("num_stages", "num_microbatches", "num_chunks")
            }  # fmt: skip
            stages, mbs, chunks = shape["num_stages"], shape["num_microbatches"], shape["num_chunks"]
            rows = data["frequencies_mhz"]
            if not isinstance(rows, list):
                raise ZeusProfileError(
                    f"{source}: field 'frequencies_mhz': a list of rows, not {type(rows).__name__}."
                )
            freqs: dict[Instruction, int] = {}
            for i, row in enumerate(rows):
                s = checked_number(
                    row["stage"], source, f"frequencies_mhz[{i}].stage", integer=True, minimum=0
                )
                c = checked_number(
                    row.get("chunk", 0), source, f"frequencies_mhz[{i}].chunk", integer=True, minimum=0
                )
                for k in [k for k in InstructionKind if k.value in row] or FULL_BACKWARD:
                    values = row[k.value]
                    if not isinstance(values, list) or len(values) != mbs:
                        count = len(values) if isinstance(values, list) else type(values).__name__
                        raise ZeusProfileError(
                            f"{source}: field 'frequencies_mhz[{i}].{k.value}': stage {s} lists {count} "
                            f"clocks for {mbs} microbatches."
                        )
                    for m, f in enumerate(values):
                        field_name = f"frequencies_mhz[{i}].{k.value}[{m}]"
                        freqs[Instruction(s, k, m, c)] = checked_number(
                            f, source, field_name, integer=True, minimum=1, maximum=MAX_CLOCK_MHZ, unit="MHz"
                        )
            args = (
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
            try:
                return cls(*args)
            except ZeusProfileError as exc:  # name the file as well as the plan
                raise ZeusProfileError(f"{source}: {exc}") from None
        except KeyError as exc:
            raise ZeusProfileError(
                f"{source}: plan lacks the key {exc}; was it written by FrequencyPlan.save?"
            ) from exc
        except (TypeError, ValueError, AttributeError, OverflowError, RecursionError) as exc:
            if isinstance(exc, ZeusProfileError):
                raise
            raise ZeusProfileError(f"{source}: malformed plan: {type(exc).__name__}: {exc}") from exc

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
        except (json.JSONDecodeError, RecursionError) as exc:
            raise ZeusProfileError(f"{source}: not valid JSON ({type(exc).__name__}: {exc}).") from exc
        return cls.from_dict(data, source)

    def save(self, path: str | Path) -> None:
        """Write the plan as JSON (parent folders are created)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> "FrequencyPlan":
        """Read a plan written by :meth:`save`.

        Raises:
            ZeusProfileError: The file cannot be read or is not a plan.
        """
        path = Path(path)
        return cls.from_json(read_text(path, what="plan"), source=str(path))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FrequencyPlan):
            return NotImplemented
        return self.to_dict() == other.to_dict()


def _opt_float(value: Any) -> float | None:
    if value is None:
        return None
    x = float(value)
    return x if math.isfinite(x) else None
