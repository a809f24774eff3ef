"""Generated power-limit profiles: a physical model of GPUs under a power cap, with noise.

The power-limit optimizer is developed against generated profiles (many GPUs, random workloads,
random noise) and only checked against measured ones. docs/simulating.md describes the physics
(a DVFS curve with a voltage knee, memory-bound plateaus) and the noise (jitter, stalls, warm-up).

Example:
    >>> import random
    >>> w = PowerLimitWorkload.random(GPUS["A100"], random.Random(0))
    >>> t_top, p_top = w.step(400.0)
    >>> t_low, p_low = w.step(200.0)
    >>> t_low >= t_top and p_low <= 200.0
    True
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from zeus_core.testing._catalogue import gpu_product

__all__ = ["GpuModel", "GPUS", "PowerLimitWorkload", "StepNoise", "NoisyRun", "generate"]


@dataclass(frozen=True)
class GpuModel:
    """A GPU's power-limit range, from public specifications.

    Attributes:
        name: Product name as NVML reports it.
        min_w: Lowest settable power limit, W.
        max_w: Highest (default) power limit, W.
        pl_step_w: Spacing of the limits to profile, W (Zeus's 25 W where the range allows ~9 limits).

    Example:
        >>> from zeus_core.testing import GpuModel
        >>> GpuModel.of("V100").limits()
        [300.0, 275.0, 250.0, 225.0, 200.0, 175.0, 150.0]
    """

    name: str
    min_w: float
    max_w: float
    pl_step_w: float = 25.0

    def limits(self) -> list[float]:
        """The limits a sweep profiles, highest first, W (``min_w`` only if the steps land on it)."""
        count = int(math.floor((self.max_w - self.min_w) / self.pl_step_w + 1e-9))
        return [self.max_w - i * self.pl_step_w for i in range(count + 1)]

    @classmethod
    def of(cls, gpu: str, pl_step_w: float = 25.0) -> GpuModel:
        """The power-limit range of a GPU in the catalogue (``"A100"``, ``"RTX 6000"``, ...)."""
        product = gpu_product(gpu)
        return cls(product.name, product.limits.min_w, product.limits.max_w, pl_step_w)


# The GPUs of generated workloads, in the order generate() cycles through them, and the spacing
# of the limits a sweep profiles on each, W.
_SWEEP_STEPS_W = {"V100": 25.0, "A100": 25.0, "H100": 50.0, "RTX 6000": 20.0, "A40": 25.0, "L4": 4.0}

GPUS: dict[str, GpuModel] = {label: GpuModel.of(label, step) for label, step in _SWEEP_STEPS_W.items()}
"""GPU models by short name: limit ranges from the GPU catalogue (SXM parts at their TDP).

Example:
    >>> from zeus_core.testing import GPUS
    >>> list(GPUS), GPUS["H100"].limits()[:3]
    (['V100', 'A100', 'H100', 'RTX 6000', 'A40', 'L4'], [700.0, 650.0, 600.0])
"""


@dataclass(frozen=True)
class PowerLimitWorkload:
    """One training workload on one GPU model (see the module docstring for the model).

    Attributes:
        gpu: The GPU model.
        step_time_s: Time of one step at the top clock, s.
        compute_share: Share ``c`` of the step that scales with the clock (0–1).
        activity: SM activity ``a`` scaling dynamic power (0–1).
        static_w: Static (leakage and board) power, W.
        dynamic_w: Dynamic power at the top clock and voltage with ``a = 1``, W.
        v_min: Voltage floor as a fraction of the top voltage; also the knee clock fraction.
        f_floor: Lowest clock fraction the GPU runs at under any limit.
        enforcement: Draw under an active cap, as a fraction of the limit.
        idle_w: Power while the GPU waits (stalls), W.

    Example:
        >>> import random
        >>> from zeus_core.testing import GPUS, PowerLimitWorkload
        >>> workload = PowerLimitWorkload.random(GPUS["A100"], random.Random(0))
        >>> t_top, p_top = workload.step(400.0)
        >>> t_low, p_low = workload.step(200.0)
        >>> t_low >= t_top and p_low <= 200.0
        True
    """

    gpu: GpuModel
    step_time_s: float
    compute_share: float
    activity: float
    static_w: float
    dynamic_w: float
    v_min: float
    f_floor: float = 0.1
    enforcement: float = 0.98
    idle_w: float = 60.0

    @classmethod
    def random(cls, gpu: GpuModel, rng: random.Random) -> "PowerLimitWorkload":
        """A random plausible workload on ``gpu``: from memory-bound to compute-bound, light to heavy.

        The draw at the top clock ranges from 55 % to 115 % of the top limit, so some workloads
        never reach the top limits (plateaus) and others are capped everywhere.
        """
        static_w = gpu.max_w * rng.uniform(0.12, 0.3)
        activity = rng.uniform(0.55, 1.0)
        top_draw = gpu.max_w * rng.uniform(0.55, 1.15)
        dynamic_w = max(top_draw - static_w, 0.2 * gpu.max_w) / activity
        return cls(
            gpu=gpu,
            step_time_s=math.exp(rng.uniform(math.log(0.03), math.log(0.6))),
            compute_share=rng.uniform(0.3, 1.0),
            activity=activity,
            static_w=static_w,
            dynamic_w=dynamic_w,
            v_min=rng.uniform(0.55, 0.8),
            enforcement=rng.uniform(0.95, 1.0),
            idle_w=static_w * rng.uniform(0.5, 0.9),
        )

    def power_at(self, f: float) -> float:
        """Power at clock fraction ``f``, W."""
        v = max(self.v_min, f)
        return self.static_w + self.dynamic_w * self.activity * f * v * v

    def clock_under(self, limit_w: float) -> float:
        """Highest clock fraction whose power fits ``limit_w`` (never below ``f_floor``)."""
        if self.power_at(1.0) <= limit_w:
            return 1.0
        lo, hi = self.f_floor, 1.0
        if self.power_at(lo) >= limit_w:
            return lo
        for _ in range(60):  # power rises with the clock: bisection
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if self.power_at(mid) <= limit_w else (lo, mid)
        return lo

    def step(self, limit_w: float) -> tuple[float, float]:
        """Noise-free (time per step s, average power W) under ``limit_w``."""
        cap = self.enforcement * limit_w  # the controller holds the draw just under the limit
        f = self.clock_under(cap)
        t = self.step_time_s * (self.compute_share / f + (1.0 - self.compute_share))
        return t, min(self.power_at(f), cap)

    def profile(self) -> dict[float, tuple[float, float]]:
        """Noise-free (time per step s, power W) at every limit of the GPU's sweep."""
        return {w: self.step(w) for w in self.gpu.limits()}


@dataclass(frozen=True)
class StepNoise:
    """How real steps deviate from the model.

    Attributes:
        jitter: Relative standard deviation of each step's time and power (0.05: 5 %).
        stall_prob: Probability that a step stalls.
        stall_factor: A stalled step lasts this many times as long; the extra time at idle power.
        transient_steps: After a limit change, steps whose time and power still lean towards the
            previous limit's (the lean halves every step).

    Example:
        >>> from zeus_core.testing import StepNoise
        >>> StepNoise.realistic().describe(), StepNoise.none().describe()
        ('5% jitter + stalls', 'none')
    """

    jitter: float = 0.0
    stall_prob: float = 0.0
    stall_factor: float = 3.0
    transient_steps: int = 0

    @classmethod
    def none(cls) -> "StepNoise":
        """No noise: every step is the model's."""
        return cls()

    @classmethod
    def realistic(cls) -> "StepNoise":
        """5 % jitter, 2 % of steps stalled 3×, a 3-step warm-up transient after each limit change."""
        return cls(jitter=0.05, stall_prob=0.02, stall_factor=3.0, transient_steps=3)

    def describe(self) -> str:
        """Short label, e.g. ``"5% jitter + stalls"`` or ``"none"``."""
        if not (self.jitter or self.stall_prob or self.transient_steps):
            return "none"
        return f"{self.jitter:.0%} jitter + stalls" if self.stall_prob else f"{self.jitter:.0%} jitter"


class NoisyRun:
    """Draws the steps of one training run of a workload: limit in, (busy s, power W, idle s) out.

    Deterministic for a given seed.

    Args:
        workload: The workload.
        noise: The noise model.
        seed: Seed of the run's random draws.

    Example:
        >>> from zeus_core.testing import NoisyRun, StepNoise, generate
        >>> run = NoisyRun(generate(1, seed=0)[0], StepNoise.realistic(), seed=0)
        >>> busy_s, power_w, idle_s = run.step(250.0)
        >>> busy_s > 0 and power_w <= 250.0 and idle_s >= 0
        True
    """

    def __init__(self, workload: PowerLimitWorkload, noise: StepNoise, seed: int) -> None:
        self.workload = workload
        self.noise = noise
        self._rng = random.Random(seed)
        self._limit: float | None = None
        self._previous: tuple[float, float] | None = None
        self._since_change = 0

    def step(self, limit_w: float) -> tuple[float, float, float]:
        """One step under ``limit_w``: busy time s, power while busy W, idle (stall) time s."""
        t, p = self.workload.step(limit_w)
        if limit_w != self._limit:
            self._previous = self.workload.step(self._limit) if self._limit is not None else None
            self._limit, self._since_change = limit_w, 0
        if self._previous is not None and self._since_change < self.noise.transient_steps:
            lean = 0.5 ** (self._since_change + 1)
            t += lean * (self._previous[0] - t)
            p += lean * (self._previous[1] - p)
        self._since_change += 1
        if self.noise.jitter:
            t *= max(0.5, self._rng.gauss(1.0, self.noise.jitter))
            p *= max(0.5, self._rng.gauss(1.0, self.noise.jitter / 2))
        idle = 0.0
        if self.noise.stall_prob and self._rng.random() < self.noise.stall_prob:
            idle = t * (self.noise.stall_factor - 1.0)
        return t, min(p, limit_w), idle  # a cap holds the average draw at or under the limit


def generate(count: int, seed: int = 0, gpus: list[str] | None = None) -> list[PowerLimitWorkload]:
    """``count`` random workloads, cycling over the GPU models (all of :data:`GPUS` by default).

    Args:
        count: Number of workloads.
        seed: Seed; the same seed gives the same workloads.
        gpus: Short names of the GPU models to use.

    Raises:
        KeyError: An unknown GPU name (the message lists the known ones).

    Example:
        >>> from zeus_core.testing import generate
        >>> [w.gpu.name for w in generate(3, seed=0, gpus=["A40", "H100"])]
        ['NVIDIA A40', 'NVIDIA H100 80GB HBM3', 'NVIDIA A40']
    """
    names = list(GPUS) if gpus is None else gpus
    unknown = [n for n in names if n not in GPUS]
    if unknown:
        raise KeyError(f"Unknown GPU model(s) {unknown}; known: {list(GPUS)}.")
    rng = random.Random(seed)
    return [PowerLimitWorkload.random(GPUS[names[i % len(names)]], rng) for i in range(count)]
