"""Measured power-limit profiles replayed in real time on a fake NVML, for the power-limit optimizer.

A profile written by Zeus's ``GlobalPowerLimitOptimizer`` (one row per power limit: window
``…_<W>``, ``elapsed_time`` s over 40 steps, ``gpu<i>_energy`` J) says how long a training step
takes and what each GPU draws at every limit. :class:`RealTimeReplay` turns it into training
steps on the wall clock: one :class:`~zeus_core.testing.FakeNVML` GPU per energy column, and
each :meth:`~RealTimeReplay.step` keeps every GPU busy at the profile's power for the profile's
step time at the limit in force, scaled so that a step at the highest limit lasts ``top_step_s``
(20 ms by default, so 20-90 ms at the lower limits; the relative times are the profile's). The
measured steps lasted 40-830 ms at the highest limit: much shorter replayed steps would magnify
the loop's own time between two measured windows into a bias the real job does not have.

The GPUs run one step behind the host, as CUDA's asynchronous launches make them: each call
queues the next step, so the loop's own work between steps (a power-limit optimizer's callbacks
included) overlaps the GPUs' work instead of adding to every step, as in the job the profile
was measured on (the profile's step time is that job's whole step). Host work that outlasts the
queued step (a stall, an evaluation between epochs) leaves the GPUs idle (``idle_w``) until the
next call; that is measured, as on a real GPU. Steps end on an absolute timeline, so a late
wake-up of this process delays the host, not the GPUs.

:meth:`~RealTimeReplay.truth` is the noise-free answer the replay was built from (time and job
energy per step at each limit; the fake holds a GPU's draw at its limit, as the truth does).

Example:
    >>> from zeus_core import data
    >>> replay = RealTimeReplay(data.path("power_limit_profiles") / "A40_resnet50_1gpu.csv")
    >>> t300, e300 = replay.truth()[300.0]
    >>> round(t300, 4), round(e300 / t300)  # 20 ms at 300 W (58 ms at 100 W)
    (0.02, 259)
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
    the host typically wakes when its step ends. Spinning instead would hold the GIL, and another Python
    thread (a monitor's background reader) would then delay the wake-up by up to the switch
    interval (5 ms): the wait sleeps, so such threads run in it.
    """

    def __init__(self) -> None:
        self._overshoots: deque[float] = deque(maxlen=64)

    def sleep(self, seconds: float) -> None:
        """Sleep about ``seconds``."""
        correction = min(statistics.median(self._overshoots), _MAX_CORRECTION_S) if self._overshoots else 0.0
        asked = max(seconds - correction, 0.0)
        start = time.perf_counter()
        if asked > 0:
            time.sleep(asked)
        slept = time.perf_counter() - start
        if asked > 0:
            self._overshoots.append(slept - asked)


_SLEEPER = _Sleeper()  # one per process: what it learns holds for every replay


class _QueuedGPU(FakeDevice):
    """A replay GPU: draws ``power_w`` until ``busy_until`` (the queued work runs out), ``idle_w`` after."""

    def __init__(self, spec: FakeGPUSpec, index: int, now: float, idle_w: float) -> None:
        super().__init__(spec, index, now)
        self.idle_w = idle_w
        self.busy_until = now

    def draw(self, now: float, watts: float, until: float) -> None:
        """Draw ``watts`` from ``now`` (or the last reading, if later) until ``until``, then idle."""
        self.accumulate(max(now, self._last))
        self.power_w, self.busy_until = watts, until

    def accumulate(self, now: float) -> None:
        if self._last < self.busy_until < now:
            super().accumulate(self.busy_until)
            self.power_w = self.idle_w
        super().accumulate(now)


class RealTimeReplay:
    """A measured profile's training steps on the wall clock, on fake NVML GPUs (module docstring).

    Args:
        path: A Zeus power-limit profile CSV (one ``gpu<i>_energy`` column per GPU).
        top_step_s: Wall-clock length of a step at the highest limit, s (the others scale).
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
        top_step_s: float = 0.02,
        idle_w: float = 30.0,
        fake: FakeNVML | None = None,
    ) -> None:
        path = Path(path)
        header = path.read_text(encoding="utf-8").splitlines()[0].split(",")
        columns = sum(1 for h in header if h.startswith("gpu") and h.endswith("_energy"))
        self._profiles = [MeasuredProfile.from_zeus_csv(path, gpu=i) for i in range(columns)]
        limits = [w for w, _, _ in self._profiles[0].points]
        self._scale = top_step_s / self._profiles[0].step(max(limits), None)[0]
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
            fake = FakeNVML([], clock=time.time, root=True)
        self._gpus = [_QueuedGPU(spec, i, fake.clock(), self.idle_w) for i, spec in enumerate(specs)]
        fake.devices = list[FakeDevice](self._gpus)
        self.fake = fake
        self.steps = 0
        self._sleeper = _SLEEPER
        self._end: float | None = None  # when the GPUs finish the last step called (wall clock), s
        self._called = 0.0  # when that step was called: the next one was queued from then
        self._periods: dict[float, list[float]] = {}  # every step's period on the GPUs, s, by limit

    def fidelity(self) -> float:
        """How much host stalls (the machine's other work, the loop's) slowed the GPUs' steps.

        The largest relative gap between the mean period of a step on the GPUs (idle time before it
        included) and the profile's step time, at any limit run.
        """
        gaps = [abs(sum(ts) / len(ts) / self.step_at(w)[0] - 1) for w, ts in self._periods.items() if ts]
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
        """One training step at the limit in force; returns when the GPUs have finished it.

        The step was queued when the previous one was called, so it starts on the GPUs when the
        previous one ends, or at that call if the GPUs were idle (module docstring).
        """
        limit = self.limit_w
        t, powers = self.step_at(limit)
        now = self.fake.clock()
        if self._end is None:  # the GPUs were idle: the step starts now
            previous_end = start = now
        else:
            previous_end, start = self._end, max(self._end, self._called)
        end = start + t
        for dev, watts in zip(self._gpus, powers):
            # the queued step so far drew the last step's power; the next is queued when this call returns
            dev.draw(now, watts, until=max(end, now) + t)
        self._periods.setdefault(limit, []).append(end - previous_end)
        self._end, self._called = end, now
        self.steps += 1
        if end > now:
            self._sleeper.sleep(end - now)

    def between_epochs(self, seconds: float = 0.05) -> None:
        """Time between epochs (evaluation, checkpoints): the GPUs finish the last step, then idle."""
        last_end = self.fake.clock() if self._end is None else self._end
        for dev in self._gpus:
            dev.draw(last_end, self.idle_w, until=last_end)  # busy until the last step's end
        self._end = None
        self._sleeper.sleep(seconds)

    @contextmanager
    def install(self) -> Iterator["RealTimeReplay"]:
        """Make ``import pynvml`` find the fake GPUs inside the ``with`` block."""
        with self.fake.install():
            yield self
