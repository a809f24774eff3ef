"""A simulated GPU whose energy counter behaves like NVML's on real hardware (test helper).

NVML's total-energy counter only advances every few tens of milliseconds, and reading it takes
milliseconds (about 3 ms on an H100, which delays the training step that follows). The GPU here
reproduces both on a :class:`VirtualClock`: the counter shows the true energy as of the latest
multiple of ``update_s`` of the clock, and each read advances the clock by ``read_s`` while the
GPU draws whatever it draws at that moment (idle power between steps).
"""

from __future__ import annotations

import bisect
import math
from typing import Any

from zeus_core.testing import SimulatedGPU, VirtualClock

__all__ = ["CoarseCounterGPU"]


class CoarseCounterGPU(SimulatedGPU):
    """:class:`SimulatedGPU` with an energy counter that updates every ``update_s`` and slow reads.

    Args:
        *args: As for :class:`SimulatedGPU` (its ``clock`` must be a :class:`VirtualClock`).
        update_s: Counter update period, s.
        read_s: Time one counter read takes, s.
        **kwargs: As for :class:`SimulatedGPU`.

    Attributes:
        reads: Counter reads so far.
    """

    def __init__(self, *args: Any, update_s: float = 0.05, read_s: float = 0.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        assert isinstance(self.clock, VirtualClock), "CoarseCounterGPU needs a VirtualClock"
        self.update_s = update_s
        self.read_s = read_s
        self.reads = 0
        # (time s, true cumulative energy J) at every change of power; linear in between.
        self._times = [self._last_t]
        self._energies = [0.0]

    def _accumulate(self) -> None:
        super()._accumulate()
        if self._last_t > self._times[-1]:
            self._times.append(self._last_t)
            self._energies.append(self._energy_j)

    def true_energy(self) -> float:
        """The exact energy so far, J (what an ideal counter would show)."""
        self._accumulate()
        return self._energy_j

    def get_total_energy(self) -> float:
        """The counter: true energy as of the latest multiple of ``update_s``, J (takes ``read_s``)."""
        self.reads += 1
        if self.read_s:
            self._accumulate()
            self.clock.advance(self.read_s)  # type: ignore[attr-defined]
        self._accumulate()
        tick = math.floor(self.clock() / self.update_s + 1e-9) * self.update_s
        i = bisect.bisect_right(self._times, tick) - 1
        t0, e0 = self._times[i], self._energies[i]
        if i + 1 < len(self._times):
            t1, e1 = self._times[i + 1], self._energies[i + 1]
            e0 += (e1 - e0) * (tick - t0) / (t1 - t0)
        if i > 1:  # history before the latest tick is no longer needed
            del self._times[: i - 1], self._energies[: i - 1]
        return e0
