"""How a simulated GPU's speed and power follow its power limit and SM clock.

A :class:`GpuBehavior` turns (power limit, locked SM clock) into the time and power of one unit
of work. Two are provided: :class:`MeasuredProfile` (a real GPU's power-limit profile,
interpolated) and :class:`PhysicalModel` (a DVFS model whose presets take their product facts
from :data:`~zeus_core.testing.GPU_CATALOGUE`). docs/simulating.md describes both models.
"""

from __future__ import annotations

import bisect
import csv
import math
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from zeus_core.device._base import PowerLimitConstraints
from zeus_core.exceptions import ZeusConfigError, ZeusNotSupportedError, ZeusProfileError
from zeus_core.testing._catalogue import GPU_CATALOGUE, Preset

__all__ = ["GpuBehavior", "MeasuredProfile", "PhysicalModel"]

_A40 = GPU_CATALOGUE["a40"]
_A40_CLOCKS = _A40.clocks()

# The model parameters of each PhysicalModel preset (the GPU's product facts come from the
# catalogue); a preset leaves out the parameters it shares with the A40 defaults below.
_PRESET_PARAMETERS: dict[str, dict[str, float]] = {
    "a40": {},
    "a100": {"static_power_w": 90.0, "dynamic_power_w": 310.0, "idle_power_w": 50.0},
    "h100": {"static_power_w": 120.0, "dynamic_power_w": 580.0, "idle_power_w": 70.0},
}


class GpuBehavior(ABC):
    """How a simulated GPU's step time and power depend on its power limit and SM clock.

    Attributes:
        gpu_name: Product name of the modelled GPU, e.g. ``"NVIDIA A40"``.
        constraints: Power-limit range, W.
        idle_power_w: Power while no work runs, W.
        sm_frequencies_mhz: Supported SM clocks, MHz, highest first (empty: clocks cannot be locked).

    Example:
        >>> from zeus_core.device import PowerLimitConstraints
        >>> from zeus_core.testing import GpuBehavior, SimulatedGPU, VirtualClock
        >>> class Flat(GpuBehavior):  # 0.25 s and 200 W per step at any limit
        ...     gpu_name, idle_power_w, sm_frequencies_mhz = "Flat GPU", 20.0, []
        ...     constraints = PowerLimitConstraints(100.0, 300.0, 300.0)
        ...     def step(self, power_limit_w, sm_mhz):
        ...         return 0.25, 200.0
        >>> gpu = SimulatedGPU(Flat(), clock=VirtualClock())
        >>> gpu.run_steps(4), gpu.get_total_energy()
        (1.0, 200.0)
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

    Example:
        >>> from zeus_core import data
        >>> from zeus_core.testing import MeasuredProfile
        >>> profile = MeasuredProfile.from_zeus_csv(data.path("power_limit_profiles/A40_resnet50_1gpu.csv"))
        >>> profile.gpu_name, profile.constraints.max_w
        ('NVIDIA A40', 300.0)
        >>> MeasuredProfile([(100, 0.2, 95.0), (300, 0.1, 290.0)]).step(200.0, None)
        (0.15000000000000002, 192.5)
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
            if not (0 < step_time < math.inf and 0 < power < math.inf and 0 < limit < math.inf):
                raise ZeusProfileError(
                    f"MeasuredProfile row at {limit} W has time {step_time} s and power {power} W; "
                    "all must be positive and finite."
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
                elapsed, energy = (_csv_number(path, line, row, name) for name in ("elapsed_time", column))
                if elapsed <= 0 or energy < 0:
                    raise ZeusProfileError(
                        f"{path}:{line}: elapsed_time={elapsed} s and {column}={energy} J; the time must "
                        "be positive and the energy not negative."
                    )
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


def _csv_number(path: Path, line: int, row: dict[str, str], name: str) -> float:
    """Field ``name`` of a CSV row as a finite number, or an error naming the file, line and field."""
    text = row.get(name)
    try:
        value = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value):
        raise ZeusProfileError(f"{path}:{line}: field {name!r} is {text!r}, not a finite number.")
    return value


@dataclass
class PhysicalModel(GpuBehavior):
    """A DVFS model of a GPU running a fixed unit of work (docs/simulating.md has the equations).

    Power rises with the clock and the square of a voltage that rises linearly with it; a unit of
    work has a memory-bound share that does not speed up with the clock and a compute-bound share
    that does. Under a power limit the GPU runs at the highest clock whose power fits the limit.
    The defaults are an NVIDIA A40; :meth:`preset` (or ``PhysicalModel.a40()``, ``.a100()``,
    ``.h100()``) builds a catalogued GPU's model.

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

    Example:
        >>> model = PhysicalModel.a100()
        >>> model.effective_frequency(400.0, None), model.effective_frequency(200.0, None) < 1410
        (1410, True)
    """

    PRESETS: ClassVar[tuple[str, ...]] = tuple(_PRESET_PARAMETERS)
    a40: ClassVar[Preset[PhysicalModel]] = Preset()
    a100: ClassVar[Preset[PhysicalModel]] = Preset()
    h100: ClassVar[Preset[PhysicalModel]] = Preset()

    gpu_name: str = _A40.name
    f_min_mhz: int = _A40_CLOCKS.min_mhz
    f_max_mhz: int = _A40_CLOCKS.max_mhz
    f_step_mhz: int = _A40_CLOCKS.step_mhz
    static_power_w: float = 75.0
    dynamic_power_w: float = 225.0
    v_min: float = 0.65
    compute_time_s: float = 0.08
    memory_time_s: float = 0.02
    constraints: PowerLimitConstraints = _A40.limits
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
    def preset(cls, gpu: str, **overrides: Any) -> PhysicalModel:
        """The model of a catalogued GPU (one of :attr:`PRESETS`), with ``overrides`` applied.

        Raises:
            ZeusConfigError: ``gpu`` has no preset (the message lists them).
        """
        key = gpu.strip().lower()
        if key not in _PRESET_PARAMETERS:
            raise ZeusConfigError(f"No PhysicalModel preset {gpu!r}; use one of {', '.join(cls.PRESETS)}.")
        product = GPU_CATALOGUE[key]
        clocks = product.clocks()
        params: dict[str, Any] = dict(
            gpu_name=product.name,
            f_min_mhz=clocks.min_mhz,
            f_max_mhz=clocks.max_mhz,
            f_step_mhz=clocks.step_mhz,
            constraints=product.limits,
            **_PRESET_PARAMETERS[product.key],
        )
        return cls(**{**params, **overrides})

    def voltage_at(self, sm_mhz: float) -> float:
        """Voltage at SM clock ``sm_mhz`` relative to the voltage at ``f_max`` (``v_min`` to 1)."""
        f = min(max(sm_mhz, self.f_min_mhz), self.f_max_mhz)
        return self.v_min + (1.0 - self.v_min) * (f - self.f_min_mhz) / (self.f_max_mhz - self.f_min_mhz)

    def power_at(self, sm_mhz: float, activity: float = 1.0) -> float:
        """Board power at SM clock ``sm_mhz``, W, with the SMs ``activity`` (0–1] busy."""
        f = min(max(sm_mhz, self.f_min_mhz), self.f_max_mhz)
        v = self.voltage_at(f)
        return self.static_power_w + activity * self.dynamic_power_w * (f / self.f_max_mhz) * v * v

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
