"""Instruction profiler: time and energy of every instruction per SM clock, and which clocks to profile.

The adaptive sweep and how blocking power is measured: docs/optimizers/perseus.md ("Profiling").
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from zeus_core.exceptions import ZeusConfigError, ZeusProfileError
from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.optimizer.pipeline_frequency._profile import InstructionProfile
from zeus_core.optimizer.pipeline_frequency._schedule import InstructionKind

__all__ = ["FrequencySweep", "InstructionMeasurement", "InstructionProfiler", "profiler_window_name"]

logger = logging.getLogger(__name__)

_MIN_BLOCKING_SHARE = 0.01  # blocked time below this share of an iteration is too short to measure


def profiler_window_name(what: str) -> str:
    """The :class:`ZeusMonitor` window name the profiler uses for ``"instruction"`` or ``"iteration"``."""
    return f"__perseus_{what}"


_INSTRUCTION_WINDOW = profiler_window_name("instruction")
_ITERATION_WINDOW = profiler_window_name("iteration")


@dataclass(frozen=True)
class FrequencySweep:
    """Which SM clocks to profile, for how long, and when to stop.

    By default *adaptive*: from the highest clock down, geometrically, until every instruction
    type's energy rises, then bisecting the widest gaps; a plan is ready within 10 iterations
    (docs/optimizers/perseus.md, "Profiling").

    Args:
        frequencies_mhz: Explicit clocks to profile, MHz (each must be supported by the GPU);
            all of them are profiled unless the energy rises (``patience``).
        step_mhz: A fixed-step sweep instead: every ``step_mhz`` from the highest supported clock
            down to ``min_mhz``, with the same early stop. ``None`` (default): adaptive.
        min_mhz: Lowest clock to profile, MHz (``None``: the lowest supported).
        max_frequencies: Clocks the adaptive sweep profiles at most.
        descent_ratio: Each clock of the adaptive descent is this fraction of the one before.
        iterations_per_frequency: Training iterations measured at each clock.
        patience: Stop descending after this many clocks in a row at which every instruction
            type of the stage used more energy than at its best clock so far (``0``: never stop
            early; explicit and stepped sweeps then profile every clock).
        tolerance: Relative margin for "more energy" (measurement noise), e.g. ``0.01``.

    Raises:
        ZeusConfigError: A value is out of range.

    Example:
        >>> FrequencySweep(step_mhz=300).frequencies_for([1740, 1500, 1440, 1200, 1140, 900, 600])
        [1740, 1440, 1140, 600]
        >>> FrequencySweep().frequencies_for([1740, 1500, 1440, 1200])  # adaptive: starts at the top
        [1740]
    """

    frequencies_mhz: tuple[int, ...] | None = None
    step_mhz: int | None = None
    min_mhz: int | None = None
    max_frequencies: int = 8
    descent_ratio: float = 0.8
    iterations_per_frequency: int = 1
    patience: int = 1
    tolerance: float = 0.01

    def __post_init__(self) -> None:
        if self.frequencies_mhz is not None:
            freqs = tuple(int(f) for f in self.frequencies_mhz)
            if not freqs or min(freqs) <= 0:
                raise ZeusConfigError(
                    f"FrequencySweep(frequencies_mhz={self.frequencies_mhz}): give at least one positive "
                    "clock, MHz."
                )
            object.__setattr__(self, "frequencies_mhz", freqs)
        if self.step_mhz is not None and self.step_mhz <= 0:
            raise ZeusConfigError(f"FrequencySweep(step_mhz={self.step_mhz}): the step must be > 0 MHz.")
        if self.iterations_per_frequency < 1:
            raise ZeusConfigError(
                f"FrequencySweep(iterations_per_frequency={self.iterations_per_frequency}): "
                "measure at least 1."
            )
        if self.patience < 0 or not 0 <= self.tolerance < 1:
            raise ZeusConfigError(
                f"FrequencySweep(patience={self.patience}, tolerance={self.tolerance}): need patience >= 0 "
                "and 0 <= tolerance < 1."
            )
        if self.max_frequencies < 2 or not 0 < self.descent_ratio < 1:
            raise ZeusConfigError(
                f"FrequencySweep(max_frequencies={self.max_frequencies}, "
                f"descent_ratio={self.descent_ratio}): "
                "need at least 2 clocks and 0 < descent_ratio < 1."
            )

    @property
    def adaptive(self) -> bool:
        """Whether the clocks are chosen while profiling (no explicit list, no fixed step)."""
        return self.frequencies_mhz is None and self.step_mhz is None

    def frequencies_for(self, supported_mhz: Sequence[int]) -> list[int]:
        """The clocks to profile on a GPU with these supported clocks, MHz, highest first.

        For an adaptive sweep, only the first clock (the highest); :meth:`next_frequency`
        picks the others from the measurements.

        Raises:
            ZeusConfigError: The GPU reports no clocks, or an explicit clock is not supported.
        """
        supported = _sorted_clocks(supported_mhz)
        if self.frequencies_mhz is not None:
            bad = [f for f in self.frequencies_mhz if f not in supported]
            if bad:
                raise ZeusConfigError(
                    f"FrequencySweep(frequencies_mhz={list(self.frequencies_mhz)}): {bad} MHz not "
                    f"supported by the GPU (it supports {supported[-1]}–{supported[0]} MHz, "
                    f"e.g. {supported[:6]})."
                )
            return sorted(set(self.frequencies_mhz), reverse=True)
        if self.step_mhz is None:
            return supported[:1]
        floor = self._floor(supported)
        chosen: list[int] = []
        target = supported[0]
        while target >= floor:
            pick = next((f for f in supported if f <= target), None)
            if pick is None or pick < floor:
                break
            if not chosen or pick < chosen[-1]:
                chosen.append(pick)
            target -= self.step_mhz
        if chosen[-1] != floor and floor in supported and chosen[-1] - floor >= self.step_mhz / 2:
            chosen.append(floor)
        return chosen

    def _floor(self, supported: list[int]) -> int:
        return supported[-1] if self.min_mhz is None else max(self.min_mhz, supported[-1])

    def next_frequency(
        self, supported_mhz: Sequence[int], measured: Mapping[int, Mapping[str, float]]
    ) -> int | None:
        """The adaptive sweep's next clock, MHz, or ``None`` when profiling is done.

        Args:
            supported_mhz: The GPU's supported clocks, MHz.
            measured: Per clock profiled so far, in the order profiled: per instruction type,
                its mean (effective) energy, J.
        """
        clocks = list(measured)
        supported = _sorted_clocks(supported_mhz)
        if not clocks:
            return supported[0]
        if len(clocks) >= self.max_frequencies:
            return None
        floor = self._floor(supported)
        descending = all(a > b for a, b in zip(clocks, clocks[1:]))
        if descending and not _energy_rose(measured, self.patience, self.tolerance):
            below = [f for f in supported if floor <= f <= clocks[-1] * self.descent_ratio]
            if below:
                return below[0]
            if clocks[-1] > floor:
                return floor
        return _bisect_widest_gap(supported, measured)


def _sorted_clocks(supported_mhz: Sequence[int]) -> list[int]:
    supported = sorted({int(f) for f in supported_mhz}, reverse=True)
    if not supported:
        raise ZeusConfigError(
            "FrequencySweep: the GPU reports no supported SM clocks, so clocks cannot be locked or profiled."
        )
    return supported


def _energy_rose(measured: Mapping[int, Mapping[str, float]], patience: int, tolerance: float) -> bool:
    """Whether, for every instruction type, each of the last ``patience`` clocks beat none of the earlier."""
    clocks = list(measured)
    if patience <= 0 or len(clocks) <= patience:
        return False
    kinds = {k for per in measured.values() for k in per}
    for kind in kinds:
        earlier = [measured[f][kind] for f in clocks[:-patience] if kind in measured[f]]
        recent = [measured[f][kind] for f in clocks[-patience:] if kind in measured[f]]
        if not earlier or not recent or any(e <= min(earlier) * (1 + tolerance) for e in recent):
            return False
    return bool(kinds)


def _bisect_widest_gap(supported: list[int], measured: Mapping[int, Mapping[str, float]]) -> int | None:
    """A supported clock in the middle of the widest gap between profiled clocks that matter.

    Clocks that matter: from the highest down to the first profiled clock below the lowest
    least-energy clock of any instruction type (so the energy minimum is bracketed).
    """
    ordered = sorted(measured, reverse=True)
    kinds = {k for per in measured.values() for k in per}
    best = [min((f for f in ordered if k in measured[f]), key=lambda f: measured[f][k]) for k in kinds]
    lowest_best = min(best) if best else ordered[-1]
    below = [f for f in ordered if f < lowest_best]
    region = [f for f in ordered if f >= lowest_best] + below[:1]
    gaps = sorted(zip(region, region[1:]), key=lambda g: g[0] - g[1], reverse=True)
    for hi, lo in gaps:
        inside = [f for f in supported if lo < f < hi]
        if inside:
            mid = (hi + lo) / 2
            return min(inside, key=lambda f: abs(f - mid))
    return None


@dataclass(frozen=True)
class InstructionMeasurement:
    """One instruction run, measured.

    Attributes:
        stage: Pipeline stage.
        kind: Forward or backward.
        microbatch: Microbatch index.
        frequency_mhz: Locked SM clock during the instruction, MHz.
        time_s: Duration, s.
        energy_j: GPU energy, J.

    Example:
        >>> from zeus_core.optimizer.pipeline_frequency import InstructionKind
        >>> InstructionMeasurement(0, InstructionKind.FORWARD, 0, 1740, 0.1, 30.0).energy_j
        30.0
    """

    stage: int
    kind: InstructionKind
    microbatch: int
    frequency_mhz: int
    time_s: float
    energy_j: float


class InstructionProfiler:
    """Measures each instruction's time and energy; collects the rows of the profile CSV.

    Args:
        monitor: A monitor of exactly the GPU this stage computes on (``cpu_indices=[]``).
        stage: This process's pipeline stage.

    Raises:
        ZeusConfigError: The monitor measures no GPU or more than one, or ``stage`` < 0.

    Example:
        >>> from zeus_core import ZeusMonitor
        >>> from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock
        >>> clock = VirtualClock()
        >>> gpu = SimulatedGPU(PhysicalModel.a40(), clock=clock, busy=True)
        >>> profiler = InstructionProfiler(ZeusMonitor(gpus=[gpu], cpu_indices=[]), stage=1)
        >>> for mhz in (1740, 1200):
        ...     gpu.set_locked_sm_frequency(mhz)
        ...     profiler.begin_iteration(mhz)
        ...     profiler.begin_instruction("forward", 0); clock.advance(0.1)
        ...     _ = profiler.end_instruction("forward", 0)
        ...     _ = profiler.end_iteration()
        >>> [row[:3] for row in profiler.rows()]
        [(1, 'forward', 1740), (1, 'forward', 1200)]
    """

    def __init__(self, monitor: ZeusMonitor, stage: int) -> None:
        if len(monitor.gpus) != 1:
            raise ZeusConfigError(
                f"InstructionProfiler: the monitor measures GPUs {[g.index for g in monitor.gpus]}; give it "
                "exactly the one GPU of this pipeline stage (ZeusMonitor(gpus=[gpu], cpu_indices=[]))."
            )
        if stage < 0:
            raise ZeusConfigError(f"InstructionProfiler(stage={stage}): stages count from 0.")
        self.monitor = monitor
        self.stage = stage
        self.measurements: list[InstructionMeasurement] = []
        self._frequency: int | None = None
        self._open: tuple[InstructionKind, int] | None = None
        self._iter_inst_time = 0.0
        self._iter_inst_energy = 0.0
        # Per clock: [blocked time s, blocked energy J, iteration time s] over finished iterations.
        self._blocking: dict[int, list[float]] = {}

    @property
    def simulated(self) -> bool:
        """Whether the measured GPU is simulated."""
        return self.monitor.simulated

    # -- iterations -----------------------------------------------------------------------------
    def begin_iteration(self, frequency_mhz: int) -> None:
        """Start measuring an iteration whose instructions all run at ``frequency_mhz`` (MHz)."""
        if _ITERATION_WINDOW in self.monitor.open_windows:
            self.monitor.end_window(_ITERATION_WINDOW, cancel=True)
        self._frequency = int(frequency_mhz)
        self._iter_inst_time = self._iter_inst_energy = 0.0
        self.monitor.begin_window(_ITERATION_WINDOW)

    def end_iteration(self) -> tuple[float, float]:
        """Finish the iteration. Returns its time (s) and GPU energy (J).

        Raises:
            ZeusConfigError: No iteration is being measured.
        """
        if self._frequency is None or _ITERATION_WINDOW not in self.monitor.open_windows:
            raise ZeusConfigError("InstructionProfiler.end_iteration(): call begin_iteration() first.")
        self.cancel_instruction()
        m = self.monitor.end_window(_ITERATION_WINDOW)
        energy = m.gpu_total_energy
        acc = self._blocking.setdefault(self._frequency, [0.0, 0.0, 0.0])
        acc[0] += max(0.0, m.time - self._iter_inst_time)
        acc[1] += max(0.0, energy - self._iter_inst_energy)
        acc[2] += m.time
        self._frequency = None
        return m.time, energy

    def cancel_iteration(self) -> None:
        """Drop the iteration being measured (e.g. it failed)."""
        self.cancel_instruction()
        if _ITERATION_WINDOW in self.monitor.open_windows:
            self.monitor.end_window(_ITERATION_WINDOW, cancel=True)
        self._frequency = None

    # -- instructions ---------------------------------------------------------------------------
    def begin_instruction(self, kind: InstructionKind | str, microbatch: int) -> None:
        """Start measuring one instruction (waits for queued GPU work first).

        Raises:
            ZeusConfigError: No iteration is being measured.
        """
        if self._frequency is None:
            raise ZeusConfigError(
                "InstructionProfiler.begin_instruction(): call begin_iteration(frequency_mhz) first."
            )
        if self._open is not None:
            self.cancel_instruction()
        self._open = (InstructionKind.parse(kind), int(microbatch))
        self.monitor.begin_window(_INSTRUCTION_WINDOW)

    def end_instruction(self, kind: InstructionKind | str, microbatch: int) -> InstructionMeasurement:
        """Finish measuring the instruction begun last (waits for its GPU work).

        Raises:
            ZeusConfigError: No instruction is open, or it is a different one.
        """
        kind = InstructionKind.parse(kind)
        if self._open != (kind, int(microbatch)) or self._frequency is None:
            raise ZeusConfigError(
                f"InstructionProfiler.end_instruction({kind.value}, {microbatch}): the open instruction is "
                f"{self._open}; instructions must end in the order they began."
            )
        self._open = None
        m = self.monitor.end_window(_INSTRUCTION_WINDOW)
        energy = m.gpu_total_energy
        self._iter_inst_time += m.time
        self._iter_inst_energy += energy
        meas = InstructionMeasurement(self.stage, kind, int(microbatch), self._frequency, m.time, energy)
        self.measurements.append(meas)
        return meas

    def cancel_instruction(self) -> None:
        """Drop the open instruction, if any (it raised)."""
        if self._open is not None:
            self._open = None
            if _INSTRUCTION_WINDOW in self.monitor.open_windows:
                self.monitor.end_window(_INSTRUCTION_WINDOW, cancel=True)

    # -- results --------------------------------------------------------------------------------
    def rows(self) -> list[tuple[int, str, int, float, float]]:
        """Profile CSV rows ``(stage, instruction, frequency MHz, time s, energy J)``, one per measurement."""
        return [(m.stage, m.kind.value, m.frequency_mhz, m.time_s, m.energy_j) for m in self.measurements]

    def frequencies(self) -> list[int]:
        """Clocks measured so far, MHz, in the order first measured."""
        return list(dict.fromkeys(m.frequency_mhz for m in self.measurements))

    def mean_energy(self, kind: InstructionKind | str, frequency_mhz: int) -> float | None:
        """Mean energy of one instruction type at one clock, J (``None``: not measured)."""
        kind = InstructionKind.parse(kind)
        values = [
            m.energy_j for m in self.measurements if m.kind is kind and m.frequency_mhz == frequency_mhz
        ]
        return sum(values) / len(values) if values else None

    def energy_has_risen(self, patience: int, tolerance: float = 0.0) -> bool:
        """Whether the energy rose at each of the last ``patience`` clocks, for every instruction type.

        "Rose" means more than ``tolerance`` (relative) above the type's best earlier clock.
        Returns ``False`` when ``patience`` is 0 or fewer than ``patience + 1`` clocks are measured.
        """
        return _energy_rose(self.effective_energies(0.0), patience, tolerance)

    def effective_energies(self, blocking_power_w: float | None = None) -> dict[int, dict[str, float]]:
        """Per clock (in the order profiled), per instruction type: mean energy − blocking power × time, J.

        Args:
            blocking_power_w: W; ``None``: :meth:`blocking_power_w` as measured so far (0 if unknown).
        """
        watts = self.blocking_power_w() if blocking_power_w is None else blocking_power_w
        watts = watts or 0.0
        sums: dict[int, dict[str, list[float]]] = {}
        for m in self.measurements:
            acc = sums.setdefault(m.frequency_mhz, {}).setdefault(m.kind.value, [0.0, 0.0])
            acc[0] += m.energy_j - watts * m.time_s
            acc[1] += 1
        return {f: {k: e / n for k, (e, n) in per.items()} for f, per in sums.items()}

    def blocking_power_w(self, frequency_mhz: int | None = None) -> float | None:
        """Average GPU power outside instructions (blocked on communication), W.

        Args:
            frequency_mhz: Use the iterations at this clock; default: the highest clock measured.

        Returns:
            ``None`` when no iteration at that clock spent a measurable share of its time
            outside instructions.
        """
        if not self._blocking:
            return None
        f = max(self._blocking) if frequency_mhz is None else int(frequency_mhz)
        blocked_s, blocked_j, total_s = self._blocking.get(f, (0.0, 0.0, 0.0))
        if total_s <= 0 or blocked_s < _MIN_BLOCKING_SHARE * total_s or blocked_s <= 0:
            return None
        return blocked_j / blocked_s

    def to_profile(self, gpu_name: str = "") -> InstructionProfile:
        """The measurements as an :class:`InstructionProfile` (repeats averaged).

        Raises:
            ZeusProfileError: Nothing was measured.
        """
        if not self.measurements:
            raise ZeusProfileError(
                f"InstructionProfiler (stage {self.stage}): no instruction was measured; run profiling "
                "iterations first."
            )
        bad = [
            m
            for m in self.measurements
            if not (m.time_s > 0 and m.energy_j > 0 and math.isfinite(m.energy_j))
        ]
        if bad:
            logger.warning("Dropping %d measurements with zero time or energy (e.g. %s).", len(bad), bad[0])
        rows = [r for r, m in zip(self.rows(), self.measurements) if m not in bad]
        return InstructionProfile.from_rows(rows, gpu_name=gpu_name, simulated=self.simulated)
