"""A fake ``pynvml`` with the quirks of real GPUs, for monitor tests and benchmarks.

:class:`QuirkyNVML` is :class:`~zeus_core.testing._fake_nvml.FakeNVML` (same functions, constants and
errors; install it the same way) with what the idealized fake hides:

- **a coarse energy counter**: ``nvmlDeviceGetTotalEnergyConsumption`` returns the true energy
  as of the counter's last refresh, and the counter refreshes every ``counter_period_s`` (about
  100 ms on the suite's H100, ``benchmarks/results/h100_real_gpu_check.log``), at a phase of its
  own per GPU;
- **read latency**: each NVML read sleeps (releasing the GIL, as a ctypes call into NVML does)
  for the generation's latency; the value is taken at a random instant inside the call;
- **averaged power**: ``nvmlDeviceGetPowerUsage`` is a trailing one-second average on Ampere
  (except GA100) and newer, and instantaneous before; ``nvmlDeviceGetFieldValues`` answers
  ``NVML_FI_DEV_POWER_INSTANT`` (true power now) and ``NVML_FI_DEV_POWER_AVERAGE`` (one-second
  average) where the driver has the fields;
- **time-varying true power**: a :class:`StepProfile` per GPU (e.g. :func:`square_wave`, power
  swinging 100 <-> 300 W every 15 ms as it does across the kernels of a training step), capped
  by the power limit;
- **lost GPUs**: :meth:`QuirkyNVML.lose` makes every later call on that GPU raise ``GpuIsLost``.

It exposes the truth for accuracy checks: :meth:`QuirkyNVML.true_energy` integrates the true
power exactly (J). The idealized :class:`FakeNVML` stays for tests that need exact counters.

Example:
    >>> fake = QuirkyNVML([FakeGPUSpec.h100()], quirks=Quirks.hopper(), profiles=[square_wave()])
    >>> with fake.install():
    ...     from zeus_core.device._nvidia import nvidia_gpus
    ...     gpu = nvidia_gpus(environ={})[0]
"""

from __future__ import annotations

import bisect
import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import pynvml as _real

from zeus_core.testing._fake_nvml import FakeDevice, FakeGPUSpec, FakeNVML, NVMLError, _FieldValue

__all__ = ["Quirks", "StepProfile", "square_wave", "QuirkyNVML", "FakeGPUSpec"]


@dataclass(frozen=True)
class Quirks:
    """How one GPU generation reports energy and power.

    Attributes:
        counter_period_s: How often the energy counter refreshes, s.
        energy_read_latency_s: Duration of one ``nvmlDeviceGetTotalEnergyConsumption`` call, s.
        power_read_latency_s: Duration of one power read (``nvmlDeviceGetPowerUsage`` or field
            values), s.
        power_usage_average_s: ``nvmlDeviceGetPowerUsage`` averages over this trailing window, s
            (``0``: it is instantaneous).
        instant_field: Whether ``NVML_FI_DEV_POWER_INSTANT`` / ``..._AVERAGE`` answer.

    Example:
        >>> from zeus_core.testing import Quirks
        >>> Quirks.hopper().counter_period_s, Quirks.volta().power_usage_average_s
        (0.1, 0.0)
    """

    counter_period_s: float = 0.1
    energy_read_latency_s: float = 0.004
    power_read_latency_s: float = 0.001
    power_usage_average_s: float = 1.0
    instant_field: bool = True

    @classmethod
    def hopper(cls) -> "Quirks":
        """H100, from the suite's own H100 log and NVML's documentation.

        Counter every ~100 ms, 3.6-4.3 ms per energy read (``h100_real_gpu_check.log``);
        ``nvmlDeviceGetPowerUsage`` a 1 s average (NVML docs: Ampere except GA100, and newer).
        The power-read latency is an assumption (the H100 log timed energy reads only).
        """
        return cls()

    @classmethod
    def ampere(cls) -> "Quirks":
        """A40/A10-class Ampere: averaged ``nvmlDeviceGetPowerUsage`` (NVML docs).

        Counter period and latency taken as on Hopper (no public measurement).
        """
        return cls()

    @classmethod
    def ga100(cls) -> "Quirks":
        """A100/A30 (GA100): ``nvmlDeviceGetPowerUsage`` is instantaneous (NVML docs)."""
        return cls(power_usage_average_s=0.0)

    @classmethod
    def volta(cls) -> "Quirks":
        """V100: the first counter; instantaneous ``nvmlDeviceGetPowerUsage`` (NVML docs).

        Drivers of its era lack the instant-power field. Counter period and latency as on Hopper
        (assumed).
        """
        return cls(power_usage_average_s=0.0, instant_field=False)

    @classmethod
    def ideal(cls) -> "Quirks":
        """No quirks: a counter refreshed continuously, free reads (for comparisons)."""
        return cls(counter_period_s=0.0, energy_read_latency_s=0.0, power_read_latency_s=0.0)


class StepProfile:
    """Piecewise-constant true power, W, over the fake's clock (repeating by default).

    Args:
        segments: ``(duration_s, watts)`` pairs, in order.
        repeat: Repeat the segments forever; otherwise the last level holds after them.
        start: Clock time at which the first segment starts, s.

    Example:
        >>> from zeus_core.testing import StepProfile
        >>> burst = StepProfile([(0.5, 300.0), (0.5, 100.0)])
        >>> burst.power(0.25), burst.power(0.75), burst.energy(0.0, 2.0)
        (300.0, 100.0, 400.0)
    """

    def __init__(
        self, segments: Sequence[tuple[float, float]], repeat: bool = True, start: float = 0.0
    ) -> None:
        if not segments or any(d <= 0 for d, _ in segments):
            raise ValueError("StepProfile: give (duration_s > 0, watts) segments")
        self.segments = [(float(d), float(w)) for d, w in segments]
        self.repeat = repeat
        self.start = start
        self._edges = [0.0]
        for d, _ in self.segments:
            self._edges.append(self._edges[-1] + d)
        self.period = self._edges[-1]

    def power(self, t: float, cap_w: float = float("inf")) -> float:
        """True power at clock time ``t``, W, capped at ``cap_w``."""
        x = t - self.start
        if self.repeat:
            x %= self.period
        i = min(max(bisect.bisect_right(self._edges, x) - 1, 0), len(self.segments) - 1)
        return min(self.segments[i][1], cap_w)

    def _cumulative(self, t: float, cap_w: float) -> float:
        """Energy from ``start`` to ``t``, J (negative before ``start``)."""
        x = t - self.start
        whole, x = divmod(x, self.period) if self.repeat else (0.0, x)
        per_period = sum(d * min(w, cap_w) for d, w in self.segments)
        energy = whole * per_period
        for (d, w), edge in zip(self.segments, self._edges):
            if x <= edge:
                break
            energy += min(d, x - edge) * min(w, cap_w)
        if not self.repeat and x > self.period:
            energy += (x - self.period) * min(self.segments[-1][1], cap_w)
        return energy

    def energy(self, t0: float, t1: float, cap_w: float = float("inf")) -> float:
        """Exact energy over ``[t0, t1]``, J."""
        return self._cumulative(t1, cap_w) - self._cumulative(t0, cap_w)


def square_wave(low_w: float = 100.0, high_w: float = 300.0, half_period_s: float = 0.015) -> StepProfile:
    """Power alternating between ``low_w`` and ``high_w`` every ``half_period_s`` (high first).

    Example:
        >>> from zeus_core.testing import square_wave
        >>> wave = square_wave(100.0, 300.0, 0.015)
        >>> wave.power(0.01), wave.power(0.02)
        (300.0, 100.0)
    """
    return StepProfile([(half_period_s, high_w), (half_period_s, low_w)])


def constant(watts: float) -> StepProfile:
    """Constant power, W."""
    return StepProfile([(1.0, watts)])


class QuirkyNVML(FakeNVML):
    """A :class:`FakeNVML` whose GPUs behave like real ones (see the module docstring).

    Args:
        gpus: The fake GPUs, in NVML index order (their ``power_w`` is unused: see ``profiles``).
        quirks: One :class:`Quirks` for all GPUs, or one per GPU (default: Hopper's).
        profiles: True power per GPU (default: a 100 <-> 300 W square wave every 15 ms).
        clock: Time source, s (wall-clock by default).
        sleep: How a call waits out its latency (``time.sleep``; releases the GIL).
        seed: Seeds the counter phases and the instants at which reads sample.
        **kw: Passed to :class:`FakeNVML` (``root``, ...).

    Example:
        >>> from zeus_core.testing import FakeGPUSpec, Quirks, QuirkyNVML, VirtualClock, square_wave
        >>> clock = VirtualClock()
        >>> fake = QuirkyNVML([FakeGPUSpec.a40()], quirks=Quirks.ideal(), profiles=[square_wave()])
        >>> fake.true_energy(0, 0.0, 0.03)  # one period of 300 W then 100 W, J
        6.0
    """

    def __init__(
        self,
        gpus: Sequence[FakeGPUSpec] = (),
        *,
        quirks: Quirks | Sequence[Quirks] | None = None,
        profiles: Sequence[StepProfile] | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        seed: int = 0,
        **kw: Any,
    ) -> None:
        super().__init__(gpus, clock=clock, **kw)
        n = len(self.devices)
        if quirks is None or isinstance(quirks, Quirks):
            quirks = [quirks or Quirks.hopper()] * n
        self.quirks = list(quirks)
        self.profiles = list(profiles) if profiles is not None else [square_wave() for _ in range(n)]
        if len(self.quirks) != n or len(self.profiles) != n:
            raise ValueError("QuirkyNVML: give one quirks/profile per GPU (or one Quirks for all)")
        self._sleep = sleep
        self._rng = random.Random(seed)
        self._phase = [self._rng.uniform(0.0, q.counter_period_s) for q in self.quirks]
        # The counter is energy_mj (J x 1000) at _origin[i] plus the true energy since then.
        self._origin = [clock()] * n
        self._lost: set[int] = set()

    # -- truth and test helpers (not NVML) --------------------------------------------------------
    def true_power(self, index: int, t: float) -> float:
        """What GPU ``index`` draws at clock time ``t``, W (its power limit caps the profile)."""
        return self.profiles[index].power(t, self.devices[index].power_limit_mw / 1000.0)

    def true_energy(self, index: int, t0: float, t1: float) -> float:
        """Exact energy GPU ``index`` drew over ``[t0, t1]``, J (at its current power limit)."""
        return self.profiles[index].energy(t0, t1, self.devices[index].power_limit_mw / 1000.0)

    def lose(self, index: int) -> None:
        """GPU ``index`` falls off the bus: every later call on it raises ``GpuIsLost``."""
        self._lost.add(index)

    def set_power(self, index: int, watts: float) -> None:
        """From now on GPU ``index`` draws a constant ``watts``, W."""
        self._rebase(index)
        self.profiles[index] = constant(watts)

    # -- internals --------------------------------------------------------------------------------
    def _rebase(self, index: int) -> None:
        """Fold the energy drawn so far into the counter's base before the power behaviour changes."""
        now = self.clock()
        dev = self.devices[index]
        dev.energy_mj += self.true_energy(index, self._origin[index], now) * 1000.0
        self._origin[index] = now

    def _call(self, dev: FakeDevice, latency_s: float) -> float:
        """Wait out one call's latency; the clock time at which the call samples its value, s."""
        if dev.index in self._lost:
            raise NVMLError(_real.NVML_ERROR_GPU_IS_LOST)
        start = self.clock()
        if latency_s > 0:
            self._sleep(latency_s)
            if dev.index in self._lost:
                raise NVMLError(_real.NVML_ERROR_GPU_IS_LOST)
            return start + self._rng.random() * (self.clock() - start)
        return start

    def _counter_energy_j(self, index: int, t: float) -> float:
        """What the counter says at clock time ``t``, J: the true energy as of its last refresh."""
        period = self.quirks[index].counter_period_s
        if period > 0:
            phase = self._phase[index]
            t = phase + ((t - phase) // period) * period
        origin = self._origin[index]
        return self.devices[index].energy_mj / 1000.0 + self.true_energy(index, origin, max(origin, t))

    def _average_w(self, index: int, t: float, window_s: float) -> float:
        if window_s <= 0:
            return self.true_power(index, t)
        return self.true_energy(index, t - window_s, t) / window_s

    def _dev(self, handle: Any) -> FakeDevice:
        dev = super()._dev(handle)
        if dev.index in self._lost:
            raise NVMLError(_real.NVML_ERROR_GPU_IS_LOST)
        return dev

    # -- energy and power (NVML) ------------------------------------------------------------------
    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        self.calls["nvmlDeviceGetTotalEnergyConsumption"] += 1
        dev = self._dev(handle)
        if not dev.has_counter:
            raise NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)
        t = self._call(dev, self.quirks[dev.index].energy_read_latency_s)
        return int(self._counter_energy_j(dev.index, t) * 1000.0)

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        self.calls["nvmlDeviceGetPowerUsage"] += 1
        dev = self._dev(handle)
        q = self.quirks[dev.index]
        t = self._call(dev, q.power_read_latency_s)
        return int(self._average_w(dev.index, t, q.power_usage_average_s) * 1000)

    def nvmlDeviceGetFieldValues(self, handle: Any, field_ids: Sequence[Any]) -> list[_FieldValue]:
        self.calls["nvmlDeviceGetFieldValues"] += 1
        dev = self._dev(handle)
        q = self.quirks[dev.index]
        t = self._call(dev, q.power_read_latency_s)
        out = []
        for f in field_ids:
            fid, scope = f if isinstance(f, tuple) else (f, 0)
            windows = {_real.NVML_FI_DEV_POWER_INSTANT: 0.0, _real.NVML_FI_DEV_POWER_AVERAGE: 1.0}
            if fid in windows and q.instant_field and scope in (0, _real.NVML_POWER_SCOPE_GPU):
                mw = int(self._average_w(dev.index, t, windows[fid]) * 1000)
                out.append(_FieldValue(fid, scope, _real.NVML_SUCCESS, mw, int(t * 1e6)))
            else:
                out.append(_FieldValue(fid, scope, _real.NVML_ERROR_NOT_SUPPORTED, 0, int(t * 1e6)))
        return out

    def nvmlDeviceSetPowerManagementLimit(self, handle: Any, limit_mw: int) -> None:
        dev = self._dev(handle)
        self._rebase(dev.index)  # energy so far was drawn under the old limit
        super().nvmlDeviceSetPowerManagementLimit(handle, limit_mw)
