"""Measured power-limit profiles replayed in real time on a fake NVML, for the power-limit optimizer.

A profile written by Zeus's ``GlobalPowerLimitOptimizer`` (one row per power limit: window
``…_<W>``, ``elapsed_time`` s over 40 steps, ``gpu<i>_energy`` J) says how long a training step
takes and what each GPU draws at every limit. :class:`RealTimeReplay` turns it into training
steps on the wall clock: one :class:`~zeus_core.testing.FakeNVML` GPU per energy column, and
each :meth:`~RealTimeReplay.step` draws the profile's power on every GPU for the profile's step
time at the limit in force, scaled so that the slowest limit's step lasts ``slowest_step_s``
(20 ms by default; the relative times are the profile's). Between steps (the training loop's
own work, a power-limit optimizer's included) the GPUs draw ``idle_w``, so work done inside a
measured window is measured, as on a real GPU that waits for its host.

:meth:`~RealTimeReplay.truth` is the noise-free answer the replay was built from (time and job
energy per step at each limit; the fake holds a GPU's draw at its limit, as the truth does).

Example:
    >>> from zeus_core import data
    >>> replay = RealTimeReplay(data.path("power_limit_profiles") / "A40_resnet50_1gpu.csv")
    >>> t300, e300 = replay.truth()[300.0]
    >>> round(t300, 4), round(e300 / t300)  # a 20 ms step at 100 W scaled to 6.9 ms at 300 W
    (0.0069, 259)
    >>> with replay.install():
    ...     from zeus_core.device._nvidia import nvidia_gpus
    ...     gpus = nvidia_gpus(environ={})
    ...     replay.step()
    >>> [g.name for g in gpus]
    ['NVIDIA A40']
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from zeus_core.testing._fake_nvml import FakeDevice, FakeGPUSpec, FakeNVML
from zeus_core.testing._gpu_models import MeasuredProfile

__all__ = ["RealTimeReplay"]

_MAX_CORRECTION_S = 0.0003


class _Sleeper:
    """Sleeps for a duration, right on the median: ``time.sleep`` overshoots by about 0.1 ms.

    The median overshoot of the last 64 sleeps (at most ``_MAX_CORRECTION_S``) is slept less, so
    a typical step lasts its time and a late wake-up (the machine's other work) makes it longer,
    as a stall would, never shorter. Spinning instead would hold the GIL, and another Python
    thread (a monitor's background reader) would then delay the wake-up by up to the switch
    interval (5 ms): the wait sleeps, so such threads run in it.
    """

    def __init__(self) -> None:
        self._overshoots: deque[float] = deque(maxlen=64)

    def sleep(self, seconds: float) -> float:
        """Sleep about ``seconds``; returns the time actually slept, s."""
        correction = min(statistics.median(self._overshoots), _MAX_CORRECTION_S) if self._overshoots else 0.0
        asked = max(seconds - correction, 0.0)
        start = time.perf_counter()
        if asked > 0:
            time.sleep(asked)
        slept = time.perf_counter() - start
        if asked > 0:
            self._overshoots.append(slept - asked)
        return slept


_SLEEPER = _Sleeper()  # one per process: what it learns holds for every replay


class RealTimeReplay:
    """A measured profile's training steps on the wall clock, on fake NVML GPUs (module docstring).

    Args:
        path: A Zeus power-limit profile CSV (one ``gpu<i>_energy`` column per GPU).
        slowest_step_s: Wall-clock length of a step at the slowest limit, s (the others scale).
        idle_w: What each GPU draws between steps, W.
        fake: A fake NVML to reuse (its GPUs are replaced); ``None`` makes one. Code that binds
            ``pynvml`` once (the published ``zeus``) needs the same fake across replays.

    Attributes:
        fake: The fake NVML; :meth:`install` puts it in ``sys.modules["pynvml"]``.
        name: The profile's file name without ``.csv``.
        steps: Steps run so far.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        slowest_step_s: float = 0.02,
        idle_w: float = 30.0,
        fake: FakeNVML | None = None,
    ) -> None:
        path = Path(path)
        header = path.read_text(encoding="utf-8").splitlines()[0].split(",")
        columns = sum(1 for h in header if h.startswith("gpu") and h.endswith("_energy"))
        self._profiles = [MeasuredProfile.from_zeus_csv(path, gpu=i) for i in range(columns)]
        limits = [w for w, _, _ in self._profiles[0].points]
        slowest = max(self._profiles[0].step(w, None)[0] for w in limits)
        self._scale = slowest_step_s / slowest
        self._limits = sorted(limits, reverse=True)
        self.name = path.stem
        self.idle_w = float(idle_w)
        first = self._profiles[0]
        specs = [
            FakeGPUSpec(
                name=first.gpu_name,
                min_limit_w=min(limits),
                max_limit_w=max(limits),
                default_limit_w=max(limits),
                power_w=self.idle_w,
                uuid=f"GPU-replay-{self.name}-{i}",
            )
            for i in range(columns)
        ]
        if fake is None:
            fake = FakeNVML(specs, clock=time.time, root=True)
        else:
            fake.devices = [FakeDevice(spec, i, fake.clock()) for i, spec in enumerate(specs)]
        self.fake = fake
        self.steps = 0
        self._sleeper = _SLEEPER
        self._busy: dict[float, list[float]] = {}  # wall-clock busy time of every step, by limit

    def fidelity(self) -> float:
        """How much the machine's other work slowed the steps.

        The largest relative gap between the mean wall-clock step (late wake-ups included) and the
        profile's, at any limit run.
        """
        gaps = [abs(sum(ts) / len(ts) / self.step_at(w)[0] - 1) for w, ts in self._busy.items() if ts]
        return max(gaps, default=0.0)

    @property
    def limits(self) -> list[float]:
        """The profile's limits, W, highest first."""
        return list(self._limits)

    @property
    def limit_w(self) -> float:
        """The limit in force on the fake GPUs, W."""
        return self.fake.devices[0].power_limit_mw / 1000

    def step_at(self, limit_w: float) -> tuple[float, list[float]]:
        """Wall-clock step time (s) and each GPU's draw (W) under ``limit_w``."""
        points = [p.step(limit_w, None) for p in self._profiles]
        return points[0][0] * self._scale, [min(w, limit_w) for _, w in points]

    def truth(self) -> dict[float, tuple[float, float]]:
        """Noise-free time per step (s) and job GPU energy per step (J) at each limit."""
        out = {}
        for limit in self._limits:
            t, powers = self.step_at(limit)
            out[limit] = (t, sum(powers) * t)
        return out

    def step(self) -> None:
        """One training step at the limit in force: the GPUs are busy for its time, then idle.

        The GPUs finish on time even when this process wakes up late (the machine's other work):
        the rest of the wait is idle, as for a GPU whose host is late with the next step.
        """
        limit = self.limit_w
        t, powers = self.step_at(limit)
        clock = self.fake.clock
        start = clock()
        for i, watts in enumerate(powers):
            self.fake.set_power(i, watts)
        slept = self._sleeper.sleep(t)
        end = min(start + t, clock())
        for dev in self.fake.devices:  # busy until the step's end, idle from there (a read since stays)
            dev.accumulate(max(end, dev._last))
            dev.power_w = self.idle_w
        self._busy.setdefault(limit, []).append(slept)
        self.steps += 1

    def between_epochs(self, seconds: float = 0.05) -> None:
        """Time between epochs (evaluation, checkpoints), idle and outside any step."""
        self._sleeper.sleep(seconds)

    @contextmanager
    def install(self) -> Iterator["RealTimeReplay"]:
        """Make ``import pynvml`` find the fake GPUs inside the ``with`` block."""
        with self.fake.install():
            yield self
