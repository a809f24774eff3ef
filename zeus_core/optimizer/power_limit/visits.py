"""Every visit's raw samples, so each limit's measurement is re-judged with the job-wide jitter.

A visit of a limit yields a few samples (see :mod:`~zeus_core.optimizer.power_limit.sampling`).
Judged alone, a visit of four samples two of which hold a stall cannot tell the stalls from the
workload: the first limit measured (the highest, which the slowdown selector compares every other
limit with) has nothing to compare with. :class:`VisitLog` keeps the samples of every visit and
re-summarises every limit whenever a visit ends:

1. The job-wide jitter of one step's time (:func:`~.measurement.relative_step_spread`) is
   estimated over every limit's samples (all its visits together), then again over the samples
   cleaned with that estimate (stalls inflate the first estimate; two rounds settle it).
2. Each limit's samples, all visits together, are cleaned with it
   (:func:`~.measurement.drop_stalls`: a short refinement visit is judged with the limit's
   earlier samples) and summarised, and the jitter is a floor under each limit's own spread
   (:meth:`~.measurement.PowerLimitMeasurement.with_spread_floor`).

The log is saved with checkpoints and profile files (:meth:`to_json`), so a resumed job judges
exactly as an uninterrupted one. Measurements loaded without samples (older files) are kept as
they are and pooled with any later visit of the same limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Sequence

from zeus_core.exceptions import ZeusProfileError
from zeus_core.optimizer.power_limit.measurement import (
    PowerLimitMeasurement,
    drop_stalls,
    relative_step_spread,
)

__all__ = ["Visit", "VisitLog"]


@dataclass(frozen=True)
class Visit:
    """The samples of one visit of one limit (all-reduced: the same on every rank).

    Attributes:
        power_limit_w: The limit, W.
        times_s: Job time of each sample, s.
        energies_j: Job GPU energy of each sample, J.
        steps: Steps in each sample.
    """

    power_limit_w: float
    times_s: tuple[float, ...]
    energies_j: tuple[float, ...]
    steps: tuple[int, ...]


class VisitLog:
    """The visits of a profiling run, and the measurements they give (see the module docstring)."""

    def __init__(self) -> None:
        self.visits: list[Visit] = []
        self._spreads: tuple[float | None, float | None, int] | None = None  # of the visits so far

    def add(self, visit: Visit) -> None:
        """Record a finished visit."""
        self.visits.append(visit)
        self._spreads = None

    def _by_limit(
        self, extra: Visit | None = None
    ) -> dict[float, tuple[list[float], list[float], list[int]]]:
        """Each limit's samples over all its visits (and ``extra``, a visit in progress)."""
        out: dict[float, tuple[list[float], list[float], list[int]]] = {}
        for v in [*self.visits, *([extra] if extra is not None else [])]:
            times, energies, steps = out.setdefault(v.power_limit_w, ([], [], []))
            times.extend(v.times_s)
            energies.extend(v.energies_j)
            steps.extend(v.steps)
        return out

    def spreads(self) -> tuple[float | None, float | None]:
        """Job-wide relative standard deviation of one step's time and energy (``None``: too few samples)."""
        time_sd, energy_sd, _ = self._estimates()
        return time_sd, energy_sd

    def spread_dof(self) -> int:
        """Degrees of freedom of :meth:`spreads`.

        Half the samples' (each limit's cleaned samples − 1, summed): a median of pairwise
        differences is a less efficient estimate than a variance, and half is a safe count.
        """
        return self._estimates()[2]

    def _estimates(self) -> tuple[float | None, float | None, int]:
        if self._spreads is None:
            self._spreads = self._estimate_spreads()
        return self._spreads

    def _estimate_spreads(self) -> tuple[float | None, float | None, int]:
        groups = list(self._by_limit().values())
        time_sd = relative_step_spread([(t, n) for t, _, n in groups])
        cleaned = groups
        for _ in range(2):  # stalls inflate the first estimate; the cleaned samples give the jitter
            cleaned = [drop_stalls(t, e, n, step_spread=time_sd) for t, e, n in groups]
            time_sd = relative_step_spread([(t, n) for t, _, n in cleaned]) or time_sd
        dof = sum(max(len(t) - 1, 0) for t, _, _ in cleaned) // 2
        return time_sd, relative_step_spread([(e, n) for _, e, n in cleaned]), dof

    def measurements(
        self, num_gpus: int, loaded: Sequence[PowerLimitMeasurement] = (), extra: Visit | None = None
    ) -> list[PowerLimitMeasurement]:
        """Every limit's measurement from its visits (pooled with a ``loaded`` one), highest first.

        Args:
            num_gpus: GPUs whose energy each sample sums.
            loaded: Measurements without samples (resumed from older files), pooled with later visits.
            extra: A visit in progress, judged with the finished ones (its limit's figure includes it).
        """
        time_sd, energy_sd, dof = self._estimates()
        by_limit: dict[float, PowerLimitMeasurement] = {m.power_limit_w: m for m in loaded}
        for limit, (times, energies, steps) in self._by_limit(extra).items():
            t, e, n = drop_stalls(times, energies, steps, step_spread=time_sd)
            m = PowerLimitMeasurement.from_samples(limit, t, e, num_gpus, steps=n)
            prior = by_limit.get(limit)
            by_limit[limit] = prior.merge(m) if prior is not None else m
        return sorted(
            (m.with_spread_floor(time_sd, energy_sd, dof) for m in by_limit.values()),
            key=lambda m: -m.power_limit_w,
        )

    def to_json(self) -> list[list[Any]]:
        """JSON-safe form: ``[limit, times, energies, steps]`` per visit."""
        return [[v.power_limit_w, list(v.times_s), list(v.energies_j), list(v.steps)] for v in self.visits]

    @classmethod
    def from_json(cls, data: Sequence[Sequence[Any]] | None, limits: Collection[float]) -> "VisitLog":
        """A log from :meth:`to_json`, keeping only visits of ``limits`` (the measured ones).

        Raises:
            ZeusProfileError: A visit is malformed.
        """
        log = cls()
        for item in data or []:
            try:
                limit, times, energies, steps = item
                visit = Visit(
                    float(limit),
                    tuple(float(t) for t in times),
                    tuple(float(e) for e in energies),
                    tuple(int(n) for n in steps),
                )
            except (TypeError, ValueError) as exc:
                raise ZeusProfileError(
                    f"A saved profiling visit is malformed ({exc}): {str(item)[:200]}"
                ) from exc
            if not visit.times_s or not len(visit.times_s) == len(visit.energies_j) == len(visit.steps):
                raise ZeusProfileError(f"A saved profiling visit has mismatched samples: {str(item)[:200]}")
            if visit.power_limit_w in limits:
                log.add(visit)
        return log
