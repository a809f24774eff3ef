"""Instruction profiles: time and energy of each (stage, instruction type) per GPU SM clock.

The CSV form (header ``stage,instruction,frequency,time,energy``; MHz, s, J; repeated rows
averaged) and its metadata file are described in docs/optimizers/perseus.md ("Profiles").
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from zeus_core._files import write_atomic
from zeus_core.exceptions import ZeusProfileError
from zeus_core.optimizer.pipeline_frequency._schedule import InstructionKind, PipelineSchedule

__all__ = ["ProfileMeasurement", "InstructionProfile", "PROFILE_CSV_HEADER"]

logger = logging.getLogger(__name__)

#: Column names of the profile CSV, in order.
PROFILE_CSV_HEADER: tuple[str, ...] = ("stage", "instruction", "frequency", "time", "energy")


@dataclass(frozen=True)
class ProfileMeasurement:
    """One instruction run at one SM clock.

    Attributes:
        frequency_mhz: Locked SM clock, MHz.
        time_s: Duration of the instruction, s.
        energy_j: GPU energy of the instruction, J.

    Example:
        >>> ProfileMeasurement(1410, time_s=0.010, energy_j=3.0).power_w
        300.0
    """

    frequency_mhz: int
    time_s: float
    energy_j: float

    @property
    def power_w(self) -> float:
        """Average power during the instruction, W."""
        return self.energy_j / self.time_s


class InstructionProfile:
    """Measured (frequency, time, energy) options per (stage, instruction type).

    Args:
        measurements: ``{(stage, kind): [ProfileMeasurement, ...]}``; each list is stored
            sorted by frequency, highest first.
        gpu_name: What the profile was measured on (or modelled after), for reports.
        simulated: ``True`` when the numbers come from a model, not a GPU (reports say so).
        blocking_power_w: GPU power while blocked on pipeline communication, W, as measured
            while profiling (or modelled); ``None``: not measured.

    Raises:
        ZeusProfileError: A time or energy is not a positive finite number, or a list is empty.

    Example:
        >>> prof = InstructionProfile.from_rows([
        ...     (0, "forward", 1410, 0.010, 3.0), (0, "forward", 1200, 0.011, 2.6),
        ...     (0, "backward", 1410, 0.020, 6.0), (0, "backward", 1200, 0.022, 5.2),
        ... ])
        >>> prof.stages, [m.frequency_mhz for m in prof.get(0, "forward")]
        ([0], [1410, 1200])
    """

    def __init__(
        self,
        measurements: Mapping[tuple[int, InstructionKind], Sequence[ProfileMeasurement]]
        | Mapping[tuple[int, str], Sequence[ProfileMeasurement]],
        gpu_name: str = "",
        simulated: bool = False,
        blocking_power_w: float | None = None,
    ) -> None:
        self.gpu_name = gpu_name
        self.simulated = simulated
        if blocking_power_w is not None and not (math.isfinite(blocking_power_w) and blocking_power_w >= 0):
            raise ZeusProfileError(
                f"InstructionProfile: blocking_power_w={blocking_power_w} W must be a finite value >= 0."
            )
        self.blocking_power_w = None if blocking_power_w is None else float(blocking_power_w)
        data: dict[tuple[int, InstructionKind], list[ProfileMeasurement]] = {}
        for (stage, kind), rows in measurements.items():
            key = (int(stage), InstructionKind.parse(kind))
            if key[0] < 0:
                raise ZeusProfileError(f"InstructionProfile: stage {stage} is negative.")
            if not rows:
                raise ZeusProfileError(
                    f"InstructionProfile: no measurements for stage {stage} {key[1].value}."
                )
            for m in rows:
                if not (
                    m.time_s > 0 and math.isfinite(m.time_s) and m.energy_j > 0 and math.isfinite(m.energy_j)
                ):
                    raise ZeusProfileError(
                        f"InstructionProfile: stage {stage} {key[1].value} at {m.frequency_mhz} MHz has time "
                        f"{m.time_s} s and energy {m.energy_j} J; both must be positive and finite."
                    )
                if m.frequency_mhz <= 0:
                    raise ZeusProfileError(
                        f"InstructionProfile: stage {stage} {key[1].value} has frequency "
                        f"{m.frequency_mhz} MHz."
                    )
            data[key] = sorted(rows, key=lambda m: -m.frequency_mhz)
        self._data = data

    @classmethod
    def from_rows(
        cls,
        rows: Iterable[tuple[int, str | InstructionKind, float, float, float]],
        gpu_name: str = "",
        simulated: bool = False,
        blocking_power_w: float | None = None,
    ) -> "InstructionProfile":
        """Build from ``(stage, instruction, frequency_mhz, time_s, energy_j)`` tuples (repeats averaged)."""
        sums: dict[tuple[int, InstructionKind, int], list[float]] = {}
        for stage, kind, freq, time_s, energy_j in rows:
            key = (int(stage), InstructionKind.parse(kind), int(round(float(freq))))
            acc = sums.setdefault(key, [0.0, 0.0, 0.0])
            acc[0] += float(time_s)
            acc[1] += float(energy_j)
            acc[2] += 1
        grouped: dict[tuple[int, InstructionKind], list[ProfileMeasurement]] = {}
        for (stage, kind, freq), (t, e, n) in sums.items():
            if n > 1:
                logger.debug("Averaging %d measurements of stage %d %s at %d MHz", n, stage, kind.value, freq)
            grouped.setdefault((stage, kind), []).append(ProfileMeasurement(freq, t / n, e / n))
        return cls(grouped, gpu_name=gpu_name, simulated=simulated, blocking_power_w=blocking_power_w)

    @classmethod
    def from_csv(cls, path: str | Path, gpu_name: str = "", simulated: bool = False) -> "InstructionProfile":
        """Read a profile CSV (header ``stage,instruction,frequency,time,energy``).

        A metadata file beside it with the same stem (``profile.json`` for ``profile.csv``, as
        ``PerseusRuntime`` writes) supplies the GPU name, the measured blocking
        power and the simulated flag where present.

        Raises:
            ZeusProfileError: The file is missing, lacks a column, or a row does not parse; the
                message names the file and line. The metadata file exists but is not JSON.
        """
        path = Path(path)
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise ZeusProfileError(f"Cannot read profile {path}: {exc}. Pass an existing CSV file.") from exc
        meta = _sidecar(path)
        return cls.from_csv_text(
            text,
            source=str(path),
            gpu_name=gpu_name or str(meta.get("gpu_name", "")),
            simulated=simulated or bool(meta.get("simulated", False)),
            blocking_power_w=meta.get("blocking_power_w"),
        )

    @classmethod
    def from_csv_text(
        cls,
        text: str,
        source: str = "<text>",
        gpu_name: str = "",
        simulated: bool = False,
        blocking_power_w: float | None = None,
    ) -> "InstructionProfile":
        """Parse profile CSV text; see :meth:`from_csv`."""
        reader = csv.DictReader(io.StringIO(text, newline=""))
        try:
            records = list(reader)
        except csv.Error as exc:
            raise ZeusProfileError(f"{source}: not a readable CSV file ({exc}).") from exc
        columns = [c.strip() for c in (reader.fieldnames or [])]
        missing = [c for c in PROFILE_CSV_HEADER if c not in columns]
        if missing:
            raise ZeusProfileError(
                f"{source}: profile CSV lacks column(s) {missing} (found {columns}); the header must be "
                f"{','.join(PROFILE_CSV_HEADER)}."
            )
        rows = []
        for line, raw in enumerate(records, start=2):
            row = {k.strip(): (v or "").strip() for k, v in raw.items() if k is not None}
            try:
                rows.append(
                    (
                        int(row["stage"]),
                        InstructionKind.parse(row["instruction"]),
                        float(row["frequency"]),
                        float(row["time"]),
                        float(row["energy"]),
                    )
                )
                if not math.isfinite(rows[-1][2]):
                    raise ValueError(f"frequency {row['frequency']!r} is not a finite number of MHz")
            except (ValueError, TypeError) as exc:
                raise ZeusProfileError(f"{source}:{line}: cannot parse row {row}: {exc}.") from exc
        if not rows:
            raise ZeusProfileError(f"{source}: profile CSV has no rows.")
        try:
            return cls.from_rows(
                rows, gpu_name=gpu_name, simulated=simulated, blocking_power_w=blocking_power_w
            )
        except ZeusProfileError as exc:
            raise ZeusProfileError(f"{source}: {exc}") from exc

    def to_csv(self, path: str | Path) -> None:
        """Write the profile CSV (parent folders are created) and its metadata JSON beside it.

        The metadata (same stem, ``.json``) keeps the GPU name, the simulated flag and the
        blocking power, which :meth:`from_csv` reads back.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(
            path, self.to_csv_text()
        )  # a symlink planted in a shared folder is replaced, not followed
        meta = {
            "gpu_name": self.gpu_name,
            "simulated": self.simulated,
            "blocking_power_w": self.blocking_power_w,
        }
        write_atomic(path.with_suffix(".json"), json.dumps(meta, indent=1))

    def to_csv_text(self) -> str:
        """The profile as CSV text, sorted by stage, instruction, then frequency (highest first)."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(PROFILE_CSV_HEADER)
        for (stage, kind), rows in sorted(self._data.items(), key=lambda kv: (kv[0][0], kv[0][1].value)):
            for m in rows:
                writer.writerow([stage, kind.value, m.frequency_mhz, repr(m.time_s), repr(m.energy_j)])
        return out.getvalue()

    @property
    def stages(self) -> list[int]:
        """Stages with at least one measurement, ascending."""
        return sorted({stage for stage, _ in self._data})

    def keys(self) -> list[tuple[int, InstructionKind]]:
        """All ``(stage, kind)`` pairs present."""
        return sorted(self._data, key=lambda k: (k[0], k[1].value))

    def get(self, stage: int, kind: InstructionKind | str) -> list[ProfileMeasurement]:
        """Measurements of ``(stage, kind)``, highest frequency first.

        Raises:
            ZeusProfileError: The profile has no row for that stage and instruction.
        """
        key = (int(stage), InstructionKind.parse(kind))
        try:
            return list(self._data[key])
        except KeyError:
            raise ZeusProfileError(
                f"Profile has no {key[1].value} measurements for stage {stage} (it covers "
                f"{[f'{s}:{k.value}' for s, k in self.keys()]}). Profile that stage first."
            ) from None

    def check_covers(self, schedule: PipelineSchedule) -> None:
        """Check that every (stage, kind) the schedule runs has measurements.

        Raises:
            ZeusProfileError: Naming every missing pair.
        """
        needed = {(i.stage, i.kind) for i in schedule.instructions()}
        missing = sorted((s, k.value) for s, k in needed if (s, k) not in self._data)
        if missing:
            raise ZeusProfileError(
                f"Profile does not cover schedule {schedule.name!r} with {schedule.num_stages} stages: "
                "missing "
                f"{missing}. Profile those stages or pass --stages matching the profile ({self.stages})."
            )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, InstructionProfile) and self._data == other._data

    def __repr__(self) -> str:
        n = sum(len(v) for v in self._data.values())
        sim = ", simulated" if self.simulated else ""
        return f"InstructionProfile({len(self._data)} instruction types, {n} measurements{sim})"


def _sidecar(csv_path: Path) -> dict:
    """The metadata JSON beside a profile CSV (same stem), or ``{}`` when there is none."""
    meta_path = csv_path.with_suffix(".json")
    if not meta_path.exists():
        return {}
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZeusProfileError(
            f"{meta_path} (metadata of {csv_path.name}) cannot be read: {exc}. Fix or delete it."
        ) from exc
    if not isinstance(meta, dict):
        raise ZeusProfileError(f"{meta_path}: expected a JSON object of profile metadata.")
    return meta
