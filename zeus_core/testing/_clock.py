"""The one virtual clock of the simulators and fakes: time that moves only when told to.

A :class:`VirtualClock` is a callable returning seconds, like ``time.time``; simulated GPUs, the
fake NVML and the simulated pipeline GPU all accept one, so a replay of thousands of training
steps takes milliseconds and gives the same figures on every run.
"""

from __future__ import annotations

from zeus_core.exceptions import ZeusConfigError

__all__ = ["VirtualClock"]


class VirtualClock:
    """A clock that only moves when simulated work advances it, s.

    Args:
        start: The time it starts at, s.

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
        """Move time forward by ``seconds``.

        Raises:
            ZeusConfigError: ``seconds`` is negative.
        """
        if seconds < 0:
            raise ZeusConfigError(f"VirtualClock.advance({seconds}): time cannot go backwards.")
        self._now += seconds
