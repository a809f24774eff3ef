"""The whole run's time and energy, forecast after each epoch from the steady rate per optimizer step.

After the first epoch, the rate comes from the part of it after warm-up: the tracker's running epoch
is read at steps 1, 2, 4, 8, ... (a handful of reads), and the first of those points after which
the energy per step stays within ``tolerance`` of the epoch's second half marks the end of warm-up
(compilation, autotuning, caches, a GPU still heating up). Later epochs add their steps and energy
to that steady rate. The forecast is what the run spent so far (set-up between epochs included)
plus the remaining steps at that rate; remaining steps come from the planned total steps, or
planned epochs times steps per epoch. Evaluation is not in the epochs' figures (the tracker
pauses), so it is not in the forecast. See docs/insights.md ("A forecast after the first epoch").
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Forecast", "Forecaster"]


@dataclass(frozen=True)
class Forecast:
    """The forecast total of a training run.

    Attributes:
        after_epoch: Epochs finished when it was made (1: after the first).
        energy_j: Forecast energy of the whole run, J.
        time_s: Forecast training time of the whole run, s.
        total_steps: Optimizer steps the run was planned for.
        warmup_steps: Steps of the first epoch left out of the rate as warm-up.
    """

    after_epoch: int
    energy_j: float
    time_s: float
    total_steps: int
    warmup_steps: int


@dataclass
class _Epoch:
    steps: int
    time_s: float
    energy_j: float


@dataclass
class Forecaster:
    """Forecasts a run's totals from its epochs (see the module docstring).

    Args:
        total_steps: Optimizer steps planned for the run (``None``: unknown).
        total_epochs: Epochs planned (used when ``total_steps`` is unknown).
        tolerance: How close (relative) the energy per step after warm-up must stay to the first
            epoch's second half.

    Example:
        >>> f = Forecaster(total_epochs=10)
        >>> for step in (1, 2, 4, 8):  # warm-up: the first step costs 5 J, later ones 1 J
        ...     f.snapshot(step, time_s=step * 0.1, energy_j=4.0 + step)
        >>> f.epoch_end(steps=10, time_s=1.0, energy_j=14.0).energy_j  # 14 J + 9 epochs x 10 J
        104.0
    """

    total_steps: int | None = None
    total_epochs: int | None = None
    tolerance: float = 0.05
    epochs: list[_Epoch] = field(default_factory=list)
    first: Forecast | None = None
    latest: Forecast | None = None
    _points: list[tuple[int, float, float]] = field(default_factory=list)
    _warmup: tuple[int, float, float] = (0, 0.0, 0.0)

    def plan(self, total_steps: float | None = None, total_epochs: float | None = None) -> None:
        """Set what the run is planned for (non-positive or infinite values mean unknown)."""

        def usable(x: float | None) -> int | None:
            return int(x) if x is not None and 0 < x < float("inf") else None

        self.total_steps = usable(total_steps) or self.total_steps
        self.total_epochs = usable(total_epochs) or self.total_epochs

    @property
    def in_first_epoch(self) -> bool:
        """Whether the first epoch is still running (snapshots are taken only then)."""
        return not self.epochs

    @staticmethod
    def wants_snapshot(step_in_epoch: int) -> bool:
        """Whether step ``step_in_epoch`` (1-based) of the first epoch is a snapshot point: a power of two."""
        return step_in_epoch > 0 and step_in_epoch & (step_in_epoch - 1) == 0

    def snapshot(self, step_in_epoch: int, time_s: float, energy_j: float) -> None:
        """Record the first epoch's time and energy so far after ``step_in_epoch`` steps (s, J)."""
        if self.in_first_epoch:
            self._points.append((int(step_in_epoch), float(time_s), float(energy_j)))

    def epoch_end(
        self, steps: int, time_s: float, energy_j: float, spent: tuple[float, float] | None = None
    ) -> Forecast | None:
        """Add a finished epoch; the updated forecast, or ``None`` if the run's length is unknown.

        Args:
            steps: The epoch's optimizer steps.
            time_s: The epoch's time, s.
            energy_j: The epoch's energy, J.
            spent: The run's time (s) and energy (J) so far, set-up between epochs included
                (default: the sum of the epochs).
        """
        if self.in_first_epoch:
            self._warmup = self._warmup_end(steps, time_s, energy_j)
        self.epochs.append(_Epoch(int(steps), float(time_s), float(energy_j)))
        forecast = self._forecast(spent)
        if forecast is not None:
            self.latest = forecast
            if self.first is None:
                self.first = forecast
        return forecast

    def _warmup_end(self, steps: int, time_s: float, energy_j: float) -> tuple[int, float, float]:
        """The snapshot that ends warm-up in the first epoch: ``(steps, s, J)`` before the steady part."""
        points = [p for p in self._points if 0 < p[0] < steps]
        if steps < 4 or not points:
            return (0, 0.0, 0.0)
        half = min(points, key=lambda p: abs(p[0] - steps / 2))
        tail_rate = (energy_j - half[2]) / (steps - half[0])
        for point in sorted(points):
            if point[0] > steps / 2:
                break
            rate = (energy_j - point[2]) / (steps - point[0])
            if tail_rate > 0 and abs(rate - tail_rate) <= self.tolerance * tail_rate:
                return point
        return half

    def _forecast(self, spent: tuple[float, float] | None) -> Forecast | None:
        done_steps = sum(e.steps for e in self.epochs)
        if self.total_steps is not None:
            remaining = max(0, self.total_steps - done_steps)
        elif self.total_epochs is not None:
            per_epoch = done_steps / len(self.epochs)
            remaining = max(0, round((self.total_epochs - len(self.epochs)) * per_epoch))
        else:
            return None
        first = self.epochs[0]
        w_steps, w_time, w_energy = self._warmup
        steady_steps = first.steps - w_steps + sum(e.steps for e in self.epochs[1:])
        if steady_steps <= 0:
            return None
        steady_time = first.time_s - w_time + sum(e.time_s for e in self.epochs[1:])
        steady_energy = first.energy_j - w_energy + sum(e.energy_j for e in self.epochs[1:])
        done_time, done_energy = spent or (
            sum(e.time_s for e in self.epochs),
            sum(e.energy_j for e in self.epochs),
        )
        return Forecast(
            after_epoch=len(self.epochs),
            energy_j=done_energy + remaining * steady_energy / steady_steps,
            time_s=done_time + remaining * steady_time / steady_steps,
            total_steps=done_steps + remaining,
            warmup_steps=w_steps,
        )

    def error_pct(self, energy_j: float, time_s: float) -> tuple[float, float] | None:
        """How far the first forecast was off the outcome, % (energy, time); ``None`` without one."""
        if self.first is None or energy_j <= 0 or time_s <= 0:
            return None
        return (
            100.0 * (self.first.energy_j - energy_j) / energy_j,
            100.0 * (self.first.time_s - time_s) / time_s,
        )
