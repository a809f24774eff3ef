"""A simulated GPU for machines without one (CI, laptops, replay benchmarks).

A :class:`SimulatedGPU` behaves like a GPU whose speed and power follow a
:class:`~zeus_core.testing.GpuBehavior`; its energy counter integrates its power over its clock,
and everything it reports says "simulated". On the wall clock it follows the work it stands in
for (by default this process's CPU time); on a :class:`~zeus_core.testing.VirtualClock`,
:func:`simulate_steps` advances time instantly. docs/simulating.md describes when it is busy.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any, Literal, Sequence

from zeus_core.device._activity import Activity, ProcessActivity
from zeus_core.device._base import GPU, Clock, PowerLimitConstraints, wall_clock
from zeus_core.exceptions import ZeusConfigError, ZeusNotSupportedError, ZeusPermissionError
from zeus_core.testing._clock import VirtualClock
from zeus_core.testing._gpu_models import GpuBehavior

__all__ = ["SimulatedGPU", "simulate_steps"]


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
            :class:`~zeus_core.device._activity.Activity`, ``None`` (idle unless busy), or
            ``"auto"``: this process's CPU time on the wall clock, ``None`` on any other clock.

    Example:
        >>> from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock
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

    Raises:
        ZeusConfigError: The GPUs do not share one clock.

    Example:
        >>> from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock, simulate_steps
        >>> clock = VirtualClock()
        >>> fast = SimulatedGPU(PhysicalModel.a40(), 0, clock=clock)
        >>> slow = SimulatedGPU(PhysicalModel.a40(), 1, clock=clock)
        >>> slow.set_power_limit(150)  # the slower GPU sets the pace of every step
        >>> simulate_steps([fast, slow], 10) == 10 * slow.behavior.step(150, None)[0]
        True
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
