"""A simulated GPU for machines without one (CI, laptops, replay benchmarks).

A :class:`SimulatedGPU` behaves like a GPU whose speed and power follow a
:class:`GpuBehavior`: either a :class:`MeasuredProfile` read from a real power-limit profile
(bundled: ``zeus_core.data.path("power_limit_profiles")``), or the :class:`PhysicalModel`
documented below. Its energy counter integrates its power over its clock; everything it reports
says "simulated".

Time runs on a clock: wall-clock time by default, or a :class:`VirtualClock` that simulated work
advances instantly (replays of thousands of training steps in milliseconds). On the wall clock a
simulated GPU follows the work it stands in for (an :class:`~zeus_core.device.activity.Activity`,
by default this process's CPU time): over each interval it is busy for the share of the interval
the work used the CPU, so its power follows its model at the user's real step times and drops to
idle power while the user's code sleeps or waits.

With no real GPU, :func:`simulated_gpus_from_env` (called by discovery) returns simulated GPUs when
the environment variable ``ZEUS_SUITE_SIMULATE`` asks for them, and otherwise says once, visibly,
that no GPU was found and how to simulate one.
"""

from __future__ import annotations

import bisect
import csv
import random
import re
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

from zeus_core.device.activity import Activity, ChildProcessActivity, ProcessActivity
from zeus_core.device.base import GPU, Clock, PowerLimitConstraints, wall_clock
from zeus_core.exceptions import (
    ZeusConfigError,
    ZeusNotSupportedError,
    ZeusPermissionError,
    ZeusProfileError,
)

__all__ = [
    "VirtualClock",
    "GpuBehavior",
    "MeasuredProfile",
    "PhysicalModel",
    "SimulatedGPU",
    "simulate_steps",
    "SIMULATE_ENV",
    "simulated_gpus_from_env",
]


class VirtualClock:
    """A clock that only moves when simulated work advances it. Seconds.

    Example:
        >>> clock = VirtualClock()
        >>> clock.advance(2.5)
        >>> clock()
        2.5
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def __call__(self) -> float:
        """The current time, s."""
        return self._now

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` (s, not negative)."""
        if seconds < 0:
            raise ZeusConfigError(f"VirtualClock.advance({seconds}): time cannot go backwards.")
        self._now += seconds


class GpuBehavior(ABC):
    """How a simulated GPU's step time and power depend on its power limit and SM clock.

    Attributes:
        gpu_name: Product name of the modelled GPU, e.g. ``"NVIDIA A40"``.
        constraints: Power-limit range, W.
        idle_power_w: Power while no work runs, W.
        sm_frequencies_mhz: Supported SM clocks, MHz, highest first (empty: clocks cannot be locked).
    """

    gpu_name: str
    constraints: PowerLimitConstraints
    idle_power_w: float
    sm_frequencies_mhz: list[int]

    @abstractmethod
    def step(self, power_limit_w: float, sm_mhz: int | None) -> tuple[float, float]:
        """Time of one unit of work (s) and average power while doing it (W).

        Args:
            power_limit_w: The GPU's power limit, W.
            sm_mhz: The locked SM clock, MHz, or ``None`` when unlocked.
        """


@dataclass
class MeasuredProfile(GpuBehavior):
    """Step time and power per power limit, as measured on a real GPU.

    Between measured limits, time and power are interpolated linearly; below the lowest
    measured limit the lowest measurement holds. Measured profiles carry no clock data, so a
    GPU driven by one cannot lock its SM clock.

    Attributes:
        points: ``(power_limit_w, step_time_s, power_w)`` rows, any order.
        gpu_name: Product name of the GPU the profile was measured on.
        constraints: Power-limit range, W (defaults to the range of the measured limits).
        idle_power_w: Power while idle, W.
        source: Where the profile came from (for reports).
    """

    points: list[tuple[float, float, float]]
    gpu_name: str = "GPU"
    constraints: PowerLimitConstraints = None  # type: ignore[assignment]
    idle_power_w: float = 30.0
    source: str = ""
    sm_frequencies_mhz: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.points:
            raise ZeusProfileError("MeasuredProfile needs at least one (limit, time, power) row.")
        self.points = sorted((float(w), float(t), float(p)) for w, t, p in self.points)
        for limit, step_time, power in self.points:
            if step_time <= 0 or power <= 0:
                raise ZeusProfileError(
                    f"MeasuredProfile row at {limit} W has time {step_time} s and power {power} W; "
                    "both must be positive."
                )
        if self.constraints is None:
            lo, hi = self.points[0][0], self.points[-1][0]
            self.constraints = PowerLimitConstraints(min_w=lo, max_w=hi, default_w=hi)
        self._limits = [p[0] for p in self.points]

    @classmethod
    def from_zeus_csv(
        cls,
        path: str | Path,
        gpu: int = 0,
        steps_per_window: int = 40,
        gpu_name: str | None = None,
    ) -> "MeasuredProfile":
        """Read a power-limit profile written by Zeus's ``GlobalPowerLimitOptimizer``.

        Each row is one profiling window named ``…_<limit in W>`` with ``elapsed_time`` (s) and
        ``gpu<i>_energy`` (J) columns. The window is assumed to span ``steps_per_window`` steps
        (Zeus's default ``profile_steps``); only ratios between limits matter to optimizers.

        Args:
            path: CSV file.
            gpu: Which ``gpu<i>_energy`` column to follow.
            steps_per_window: Training steps per profiling window.
            gpu_name: Product name; defaults to the file-name prefix (``A40_…`` -> ``"NVIDIA A40"``).

        Raises:
            ZeusProfileError: The file lacks the columns, or a window name has no limit.
        """
        path = Path(path)
        column = f"gpu{gpu}_energy"
        points: list[tuple[float, float, float]] = []
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames is None or column not in reader.fieldnames:
                raise ZeusProfileError(
                    f"{path}: no column {column!r} (columns: {reader.fieldnames}). "
                    "Pass the gpu index of an existing gpu<i>_energy column."
                )
            for line, row in enumerate(reader, start=2):
                match = re.search(r"_(\d+(?:\.\d+)?)$", row.get("window_name", ""))
                if match is None:
                    raise ZeusProfileError(
                        f"{path}:{line}: window name {row.get('window_name')!r} does not end in "
                        "'_<power limit in W>'."
                    )
                elapsed = float(row["elapsed_time"])
                energy = float(row[column])
                points.append((float(match.group(1)), elapsed / steps_per_window, energy / elapsed))
        if gpu_name is None:
            prefix = path.stem.split("_")[0]
            gpu_name = f"NVIDIA {prefix}" if prefix else "GPU"
        return cls(points=points, gpu_name=gpu_name, source=path.name)

    def step(self, power_limit_w: float, sm_mhz: int | None) -> tuple[float, float]:
        """Time (s) and power (W) of one unit of work, interpolated between measured limits."""
        if sm_mhz is not None:
            raise ZeusNotSupportedError(
                f"Simulated {self.gpu_name} follows a measured power-limit profile, which has no "
                "SM-clock data. Use a PhysicalModel to simulate clock locking."
            )
        limits = self._limits
        if power_limit_w <= limits[0]:
            return self.points[0][1], self.points[0][2]
        if power_limit_w >= limits[-1]:
            return self.points[-1][1], self.points[-1][2]
        i = bisect.bisect_left(limits, power_limit_w)
        (l0, t0, p0), (l1, t1, p1) = self.points[i - 1], self.points[i]
        w = (power_limit_w - l0) / (l1 - l0)
        return t0 + w * (t1 - t0), p0 + w * (p1 - p0)


@dataclass
class PhysicalModel(GpuBehavior):
    """A documented DVFS model of a GPU running a fixed unit of work.

    With ``f`` the SM clock (MHz) in ``[f_min, f_max]``:

    * voltage rises linearly with clock: ``V(f) = v_min + (1 - v_min)·(f - f_min)/(f_max - f_min)``
      (relative to the voltage at ``f_max``);
    * power is ``P(f) = static_power_w + dynamic_power_w · (f / f_max) · V(f)²`` (W);
    * one unit of work takes ``T(f) = memory_time_s + compute_time_s · f_max / f`` (s):
      the memory-bound part does not speed up with the SM clock, the compute-bound part does.

    Under a power limit the GPU runs at the highest supported clock whose ``P(f)`` fits under the
    limit (what the driver's governor does); a locked clock caps it further.

    Attributes:
        gpu_name: Product name modelled.
        f_min_mhz, f_max_mhz: SM clock range, MHz.
        f_step_mhz: Spacing of supported clocks, MHz.
        static_power_w: Power that does not scale with the clock, W.
        dynamic_power_w: Clock-dependent power at ``f_max``, W.
        v_min: Voltage at ``f_min`` relative to ``f_max``.
        compute_time_s: Compute-bound time of one unit of work at ``f_max``, s.
        memory_time_s: Memory-bound time of one unit of work, s.
        constraints: Power-limit range, W.
        idle_power_w: Power while idle, W.
    """

    gpu_name: str = "NVIDIA A40"
    f_min_mhz: int = 210
    f_max_mhz: int = 1740
    f_step_mhz: int = 15
    static_power_w: float = 75.0
    dynamic_power_w: float = 225.0
    v_min: float = 0.65
    compute_time_s: float = 0.08
    memory_time_s: float = 0.02
    constraints: PowerLimitConstraints = field(
        default_factory=lambda: PowerLimitConstraints(min_w=100.0, max_w=300.0, default_w=300.0)
    )
    idle_power_w: float = 30.0
    sm_frequencies_mhz: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0 < self.f_min_mhz < self.f_max_mhz:
            raise ZeusConfigError(
                f"PhysicalModel: need 0 < f_min_mhz < f_max_mhz, got {self.f_min_mhz}, {self.f_max_mhz}."
            )
        if self.compute_time_s < 0 or self.memory_time_s < 0 or self.compute_time_s + self.memory_time_s <= 0:
            raise ZeusConfigError("PhysicalModel: compute_time_s and memory_time_s must be >= 0, not both 0.")
        self.sm_frequencies_mhz = list(range(self.f_max_mhz, self.f_min_mhz - 1, -self.f_step_mhz))
        if self.sm_frequencies_mhz[-1] != self.f_min_mhz:
            self.sm_frequencies_mhz.append(self.f_min_mhz)

    @classmethod
    def a40(cls, **overrides: float) -> "PhysicalModel":
        """An NVIDIA A40-like model (100–300 W, 210–1740 MHz)."""
        return cls(**overrides)  # type: ignore[arg-type]

    @classmethod
    def a100(cls, **overrides: float) -> "PhysicalModel":
        """An NVIDIA A100 (SXM4 40 GB)-like model (100–400 W, 210–1410 MHz)."""
        params = dict(
            gpu_name="NVIDIA A100-SXM4-40GB",
            f_min_mhz=210,
            f_max_mhz=1410,
            static_power_w=90.0,
            dynamic_power_w=310.0,
            constraints=PowerLimitConstraints(100.0, 400.0, 400.0),
            idle_power_w=50.0,
        )
        params.update(overrides)
        return cls(**params)  # type: ignore[arg-type]

    @classmethod
    def h100(cls, **overrides: float) -> "PhysicalModel":
        """An NVIDIA H100 (SXM5)-like model (200–700 W, 345–1980 MHz)."""
        params = dict(
            gpu_name="NVIDIA H100 80GB HBM3",
            f_min_mhz=345,
            f_max_mhz=1980,
            static_power_w=120.0,
            dynamic_power_w=580.0,
            constraints=PowerLimitConstraints(200.0, 700.0, 700.0),
            idle_power_w=70.0,
        )
        params.update(overrides)
        return cls(**params)  # type: ignore[arg-type]

    def power_at(self, sm_mhz: float) -> float:
        """Board power at SM clock ``sm_mhz`` under full load, W."""
        f = min(max(sm_mhz, self.f_min_mhz), self.f_max_mhz)
        v = self.v_min + (1.0 - self.v_min) * (f - self.f_min_mhz) / (self.f_max_mhz - self.f_min_mhz)
        return self.static_power_w + self.dynamic_power_w * (f / self.f_max_mhz) * v * v

    def time_at(self, sm_mhz: float) -> float:
        """Time of one unit of work at SM clock ``sm_mhz``, s."""
        f = min(max(sm_mhz, self.f_min_mhz), self.f_max_mhz)
        return self.memory_time_s + self.compute_time_s * self.f_max_mhz / f

    def effective_frequency(self, power_limit_w: float, sm_mhz: int | None) -> int:
        """The SM clock the GPU runs at under a power limit and an optional locked clock, MHz."""
        for f in self.sm_frequencies_mhz:  # highest first
            if sm_mhz is not None and f > sm_mhz:
                continue
            if self.power_at(f) <= power_limit_w:
                return f
        return self.sm_frequencies_mhz[-1]

    def step(self, power_limit_w: float, sm_mhz: int | None) -> tuple[float, float]:
        """Time (s) and power (W) of one unit of work at the clock the limit and lock allow."""
        f = self.effective_frequency(power_limit_w, sm_mhz)
        return self.time_at(f), self.power_at(f)


class SimulatedGPU(GPU):
    """A GPU whose speed and power follow a :class:`GpuBehavior`; it says "simulated" everywhere.

    The energy counter integrates power over :attr:`clock`: the behaviour's power at the current
    power limit and SM clock while busy, ``idle_power_w`` while idle. A GPU is busy from
    :meth:`set_busy` ``(True)`` (or during :meth:`run_steps`) until ``set_busy(False)``. Otherwise,
    when it follows an ``activity`` (the default on the wall clock: this process's CPU time), it is
    busy for the share of each interval the activity used the CPU (capped at one CPU): over an
    interval of ``dt`` s with ``c`` CPU-s used, it draws ``idle·dt + (busy power − idle)·min(c, dt)``
    J. A lower power limit lowers the busy power but cannot slow the user's CPU code; use
    :meth:`run_steps` (or a :class:`VirtualClock`) where the work's speed must follow the limit.

    Args:
        behavior: A :class:`MeasuredProfile` or :class:`PhysicalModel`.
        index: The index this GPU appears under.
        clock: Time source, s; defaults to wall-clock time. Pass a :class:`VirtualClock` for
            instant simulations (:meth:`run_steps` then advances it instead of sleeping).
        noise: Relative standard deviation of per-step time and power (e.g. ``0.03``).
        seed: Seed for the noise.
        energy_counter: ``False`` emulates a GPU without an energy counter (pre-Volta), so
            monitors must estimate energy from sampled power.
        can_control: ``False`` emulates a process without the right to set limits or clocks.
        busy: Whether the GPU starts busy.
        activity: What the GPU follows when not explicitly busy: an
            :class:`~zeus_core.device.activity.Activity`, ``None`` (idle unless busy), or
            ``"auto"``: this process's CPU time on the wall clock, ``None`` on any other clock.

    Example:
        >>> gpu = SimulatedGPU(PhysicalModel.a40(), clock=VirtualClock())
        >>> gpu.set_power_limit(200)
        >>> elapsed = gpu.run_steps(10)
        >>> gpu.get_total_energy() / elapsed <= 200  # average power, W, under the 200 W limit
        True
    """

    vendor = "simulated"

    def __init__(
        self,
        behavior: GpuBehavior,
        index: int = 0,
        *,
        clock: Clock | None = None,
        noise: float = 0.0,
        seed: int | None = None,
        energy_counter: bool = True,
        can_control: bool = True,
        busy: bool = False,
        activity: Activity | Literal["auto"] | None = "auto",
    ) -> None:
        super().__init__(index)
        if noise < 0:
            raise ZeusConfigError(f"SimulatedGPU(noise={noise}): noise must be >= 0.")
        if activity == "auto":
            activity = ProcessActivity() if clock is None or clock is wall_clock else None
        elif activity is not None and not isinstance(activity, Activity):
            raise ZeusConfigError(
                f"SimulatedGPU(activity={activity!r}): pass an Activity (e.g. ProcessActivity()), "
                "'auto' or None."
            )
        self.behavior = behavior
        self._clock: Clock = clock if clock is not None else wall_clock
        self._noise = noise
        self._rng = random.Random(seed)
        self._energy_counter = energy_counter
        self._can_control = can_control
        self._power_limit_w = behavior.constraints.default_w
        self._sm_lock_mhz: int | None = None
        self._busy = busy
        self._noise_factor = 1.0
        self._energy_j = 0.0
        self._last_t = self._clock()
        self._activity: Activity | None = activity
        self._last_cpu = activity.cpu_seconds() if activity is not None else 0.0
        self._utilization = 0.0
        self._lock = threading.Lock()  # power samplers read from other threads

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the lock (a new one is made on unpickling)."""
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Rebuild the lock; CPU time is counted afresh in the new process."""
        self.__dict__.update(state)
        self._lock = threading.Lock()
        if self._activity is not None:  # CPU time starts again in a new process
            self._last_cpu = self._activity.cpu_seconds()

    # -- identity -----------------------------------------------------------------------------
    @property
    def simulated(self) -> bool:
        """Always ``True``."""
        return True

    @property
    def clock(self) -> Clock:
        """The time source this GPU integrates power over, s."""
        return self._clock

    @property
    def name(self) -> str:
        """The modelled product name, followed by ``(simulated)``."""
        return f"{self.behavior.gpu_name} (simulated)"

    @property
    def uuid(self) -> str:
        """A stable made-up UUID starting with ``SIM-``."""
        return f"SIM-{self.behavior.gpu_name.replace(' ', '-')}-{self.index}"

    # -- power limit ----------------------------------------------------------------------------
    def power_limit_constraints(self) -> PowerLimitConstraints:
        """The behaviour's power-limit range, W."""
        return self.behavior.constraints

    def get_power_limit(self) -> float:
        """The current power limit, W."""
        return self._power_limit_w

    def _require_control(self, what: str) -> None:
        if not self._can_control:
            raise ZeusPermissionError(
                f"{what} on simulated GPU {self.index}: this simulated process has no permission "
                "(created with can_control=False)."
            )

    def check_control_permission(self) -> None:
        """Raise :class:`ZeusPermissionError` if created with ``can_control=False``."""
        self._require_control("Changing power limits or clocks")

    def set_power_limit(self, watts: float) -> None:
        """Set the power limit, W (within the behaviour's range)."""
        self._require_control(f"set_power_limit({watts})")
        c = self.behavior.constraints
        if not c.min_w <= watts <= c.max_w:
            raise ZeusConfigError(
                f"set_power_limit({watts}) on GPU {self.index} ({self.name}): outside the allowed "
                f"range {c.min_w:g}–{c.max_w:g} W."
            )
        self._accumulate()
        self._power_limit_w = float(watts)

    # -- clocks ---------------------------------------------------------------------------------
    def supported_memory_frequencies(self) -> list[int]:
        """One made-up memory clock, MHz (``[0]`` without clock data)."""
        return [0] if not self.behavior.sm_frequencies_mhz else [1215]

    def supported_sm_frequencies(self, memory_mhz: int | None = None) -> list[int]:
        """The behaviour's SM clocks, MHz, highest first."""
        return list(self.behavior.sm_frequencies_mhz)

    def set_locked_sm_frequency(self, min_mhz: int, max_mhz: int | None = None) -> None:
        """Lock the SM clock at ``max_mhz`` (or ``min_mhz``), MHz."""
        self._require_control(f"set_locked_sm_frequency({min_mhz}, {max_mhz})")
        freqs = self.behavior.sm_frequencies_mhz
        if not freqs:
            raise ZeusNotSupportedError(
                f"{self.name} has no SM-clock data (it follows a measured power-limit profile)."
            )
        upper = min_mhz if max_mhz is None else max_mhz
        if upper < min_mhz or min_mhz < freqs[-1] or upper > freqs[0]:
            raise ZeusConfigError(
                f"set_locked_sm_frequency({min_mhz}, {max_mhz}) on GPU {self.index}: clocks must satisfy "
                f"{freqs[-1]} <= min <= max <= {freqs[0]} MHz."
            )
        self._accumulate()
        self._sm_lock_mhz = int(upper)

    def reset_locked_sm_frequency(self) -> None:
        """Unlock the SM clock."""
        self._require_control("reset_locked_sm_frequency()")
        self._accumulate()
        self._sm_lock_mhz = None

    def get_locked_sm_frequency(self) -> tuple[int, int] | None:
        """The locked SM clock as a range ``(mhz, mhz)``, MHz, or ``None`` when unlocked."""
        lock = self._sm_lock_mhz
        return None if lock is None else (lock, lock)

    @property
    def locked_sm_frequency(self) -> int | None:
        """The locked SM clock, MHz, or ``None`` when unlocked."""
        return self._sm_lock_mhz

    # -- energy and power -----------------------------------------------------------------------
    @property
    def has_energy_counter(self) -> bool:
        """Whether the GPU emulates an energy counter (``energy_counter``)."""
        return self._energy_counter

    @property
    def activity(self) -> Activity | None:
        """What the GPU follows when not explicitly busy (``None``: idle unless busy)."""
        return self._activity

    def follow(self, activity: Activity | None) -> None:
        """Follow ``activity`` from now on (``None``: idle unless busy); ends an explicit busy state."""
        with self._lock:
            self._accumulate_locked()
            self._activity = activity
            self._last_cpu = activity.cpu_seconds() if activity is not None else 0.0
            self._busy = False

    @property
    def utilization(self) -> float:
        """Share of the last interval the GPU was busy, 0–1 (1 while explicitly busy)."""
        return 1.0 if self._busy else self._utilization

    def _busy_power(self) -> float:
        return self.behavior.step(self._power_limit_w, self._sm_lock_mhz)[1] * self._noise_factor

    def get_power(self) -> float:
        """Power now, W: busy power, idle power, or in between by the followed activity's utilization."""
        if self._busy:
            return self._busy_power()
        if self._activity is None:
            return self.behavior.idle_power_w
        with self._lock:
            self._accumulate_locked()  # the utilization of the interval since the last reading
        idle = self.behavior.idle_power_w
        return idle + (self._busy_power() - idle) * self._utilization

    def _accumulate(self) -> None:
        with self._lock:
            self._accumulate_locked()

    def _accumulate_locked(self) -> None:
        now = self._clock()
        dt = now - self._last_t
        if self._activity is not None:
            cpu = self._activity.cpu_seconds()
            used = min(max(cpu - self._last_cpu, 0.0), max(dt, 0.0))
            self._last_cpu = cpu  # also while explicitly busy, so that CPU time is not counted later
        if self._busy:
            self._energy_j += self._busy_power() * dt
        elif self._activity is None:
            self._energy_j += self.behavior.idle_power_w * dt
        else:
            idle = self.behavior.idle_power_w
            self._energy_j += idle * dt + (self._busy_power() - idle) * used
            if dt > 0:
                self._utilization = used / dt
        self._last_t = now

    def get_total_energy(self) -> float:
        """Energy since creation, J (raises without an energy counter)."""
        if not self._energy_counter:
            raise ZeusNotSupportedError(
                f"Simulated GPU {self.index} emulates a GPU without an energy counter; sample its power."
            )
        self._accumulate()
        return self._energy_j

    def set_busy(self, busy: bool) -> None:
        """Mark the GPU busy (drawing the behaviour's power) or idle (``idle_power_w``)."""
        self._accumulate()
        self._busy = busy

    @property
    def busy(self) -> bool:
        """Whether the GPU is currently doing work."""
        return self._busy

    def step_time(self) -> float:
        """Draw the duration of the next unit of work at the current settings, s (sets this step's noise)."""
        step_time, _ = self.behavior.step(self._power_limit_w, self._sm_lock_mhz)
        self._accumulate()
        if self._noise:
            self._noise_factor = max(0.5, self._rng.gauss(1.0, self._noise))
            step_time *= max(0.5, self._rng.gauss(1.0, self._noise))
        return step_time

    def run_steps(self, n: int = 1) -> float:
        """Simulate ``n`` units of work (training steps) on this GPU; see :func:`simulate_steps`."""
        return simulate_steps([self], n)


def simulate_steps(gpus: Sequence[SimulatedGPU], n: int = 1) -> float:
    """Run ``n`` data-parallel steps on simulated GPUs that share one clock. Returns elapsed s.

    Each step lasts as long as the slowest GPU's step (they synchronise every step, like
    data-parallel training); all GPUs are busy for the whole step. With a :class:`VirtualClock`
    the clock is advanced; with wall-clock time this sleeps.
    """
    if not gpus:
        return 0.0
    clock = gpus[0].clock
    if any(g.clock is not clock for g in gpus):
        raise ZeusConfigError("simulate_steps: all GPUs must share one clock.")
    total = 0.0
    was_busy = [g.busy for g in gpus]
    for g in gpus:
        g.set_busy(True)
    for _ in range(n):
        step = max(g.step_time() for g in gpus)
        if isinstance(clock, VirtualClock):
            clock.advance(step)
        else:
            time.sleep(step)
        total += step
    for g, b in zip(gpus, was_busy):
        g.set_busy(b)
    return total


#: The environment variable that asks for simulated GPUs where no real one is found.
SIMULATE_ENV = "ZEUS_SUITE_SIMULATE"
_ENV_MODELS = {"a40": PhysicalModel.a40, "a100": PhysicalModel.a100, "h100": PhysicalModel.h100}
_OFF = {"", "0", "false", "no", "off"}
_ON = {"1", "true", "yes", "on"}


def _parse_simulate_env(raw: str) -> tuple[str, int]:
    """``"a100:2"`` → ``("a100", 2)``; ``"1"`` → ``("a40", 1)``."""
    model, _, count_text = raw.strip().lower().partition(":")
    model = "a40" if model in _ON else model
    try:
        count = int(count_text) if count_text else 1
    except ValueError:
        count = 0
    if model not in _ENV_MODELS or count < 1:
        raise ZeusConfigError(
            f"{SIMULATE_ENV}={raw!r} is not understood. Use 1 (a simulated A40), a model name "
            f"({', '.join(_ENV_MODELS)}), optionally with ':<number of GPUs>' (e.g. a100:2), or unset it."
        )
    return model, count


def simulated_gpus_from_env(environ: Mapping[str, str]) -> list[GPU]:
    """The GPUs to use when no real GPU was found: simulated ones if ``ZEUS_SUITE_SIMULATE`` asks.

    Says so once per process, visibly (``zeus_core.console``): with the variable unset, that no
    GPU was found and how to get a simulated one; with it set, which simulated GPUs are measured.
    The simulated GPUs run on the wall clock and follow this process's CPU time.

    Args:
        environ: The environment to read ``ZEUS_SUITE_SIMULATE`` from: unset/``0`` for none,
            ``1`` for one simulated A40, or ``a40``/``a100``/``h100``, optionally ``:<count>``.

    Raises:
        ZeusConfigError: The variable's value is not understood (the message shows the valid ones).
    """
    from zeus_core import console

    raw = environ.get(SIMULATE_ENV, "")
    if raw.strip().lower() in _OFF:
        console.warn_once(
            "no-gpu",
            "No GPU found (`zeus-suite env` says why), so GPU energy is not measured. To try Zeus Suite "
            f"with a simulated GPU, set {SIMULATE_ENV}=1 (or a40, a100, h100) or pass one: "
            "ZeusMonitor(gpus=[SimulatedGPU(PhysicalModel.a40())]). Its figures are marked simulated.",
        )
        return []
    model, count = _parse_simulate_env(raw)
    gpus: list[GPU] = [SimulatedGPU(_ENV_MODELS[model](), index=i) for i in range(count)]
    console.info_once(
        "simulated-gpus",
        f"No GPU found; {SIMULATE_ENV}={raw.strip()}: measuring {count} simulated "
        f"{gpus[0].name.replace(' (simulated)', '')} GPU(s), busy while this process uses the CPU. "
        "Every figure from them is marked simulated.",
    )
    return gpus


def follow_child(gpus: Sequence[GPU]) -> ChildProcessActivity:
    """Make the simulated GPUs among ``gpus`` follow a child process that is about to start.

    Used by ``zeus-suite measure --simulate -- CMD``: call it before the measurement begins (the
    GPUs idle until the command runs), then ``attach(pid)`` the returned activity once the command
    has started. Real GPUs are left alone.
    """
    activity = ChildProcessActivity()
    for g in gpus:
        if isinstance(g, SimulatedGPU):
            g.follow(activity)
    return activity


def following_note(gpus: Sequence[GPU], elapsed_s: float) -> str | None:
    """One line saying what the simulated GPUs among ``gpus`` assumed, or ``None`` without any.

    Args:
        gpus: The measured GPUs.
        elapsed_s: The measured window's length, s.
    """
    sims = [g for g in gpus if isinstance(g, SimulatedGPU)]
    if not sims:
        return None
    activity = sims[0].activity
    if activity is None:
        return "Simulated GPU(s) were busy throughout (they follow no activity)."
    used = activity.cpu_seconds()
    share = min(used / elapsed_s, 1.0) if elapsed_s > 0 else 0.0
    return (
        f"Simulated GPU(s) were busy while {activity.description}: {used:.2f} CPU-s in "
        f"{elapsed_s:.2f} s, busy {share:.0%} of the time, idle power otherwise (simulated)."
    )


def simulated_stand_in(environ: Mapping[str, str] | None = None) -> list[int]:
    """GPU indices an adapter measures for a process that trains off-GPU (on the CPU).

    None, unless ``ZEUS_SUITE_SIMULATE`` asks for simulated GPUs: then the one this process stands
    in for, ``LOCAL_RANK`` modulo their number (so each local rank of a CPU run gets its own).
    ``ZEUS_SUITE_SIMULATE`` is meant for machines without a GPU, where discovery returns these.

    Args:
        environ: Environment to read (default: ``os.environ``).

    Raises:
        ZeusConfigError: ``ZEUS_SUITE_SIMULATE`` is not understood.
    """
    import os

    env = os.environ if environ is None else environ
    raw = env.get(SIMULATE_ENV, "")
    if raw.strip().lower() in _OFF:
        return []
    _, count = _parse_simulate_env(raw)
    local_rank = env.get("LOCAL_RANK", "0").strip()
    return [int(local_rank) % count if local_rank.isdigit() else 0]
