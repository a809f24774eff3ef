"""Estimates, stalls, the job's jitter and intervals, from samples alone (docs/optimizers/power-limit.md)."""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import replace
from typing import Any, Sequence

from zeus_core.optimizer.power_limit._measurement import PowerLimitMeasurement, Visit

__all__ = [
    "summarize",
    "drop_stalls",
    "relative_step_spread",
    "SampleLog",
    "quantile",
    "significantly_greater",
]

_Samples = tuple[list[float], list[float], list[int]]  # samples' times (s), energies (J) and steps


def summarize(
    power_limit: float,
    times_s: Sequence[float],
    energies_j: Sequence[float],
    steps: Sequence[int],
    num_gpus: int,
) -> PowerLimitMeasurement:
    """A limit's measurement (W, s, J) from samples of ``steps[i]`` steps each, weighted by their steps."""
    k, n = len(times_s), sum(steps)
    mean_t, mean_e = math.fsum(times_s) / n, math.fsum(energies_j) / n
    var_t = var_e = cov = 0.0
    if k > 1:
        dev = [(t / c - mean_t, e / c - mean_e, c) for t, e, c in zip(times_s, energies_j, steps)]
        var_t = math.fsum(c * dt * dt for dt, _, c in dev) / (k - 1)
        var_e = math.fsum(c * de * de for _, de, c in dev) / (k - 1)
        cov = math.fsum(c * dt * de for dt, de, c in dev) / (k - 1)
    return PowerLimitMeasurement(power_limit, n, mean_t, max(mean_e, 0.0), var_t, var_e, cov, num_gpus, k)


def drop_stalls(
    times_s: Sequence[float],
    energies_j: Sequence[float],
    steps: Sequence[int],
    stall_ratio: float = 0.25,
    step_spread: float | None = None,
) -> _Samples:
    """The samples without stalls (docs/optimizers/power-limit.md, "Measurements").

    ``step_spread``: the job's relative jitter of one step; without it, the samples' own, and fewer
    than half may go.
    """
    kept = (list(times_s), list(energies_j), list(steps))
    if len(times_s) < 3:
        return kept
    per_step = [t / n for t, n in zip(times_s, steps)]
    if step_spread is None:
        median = statistics.median(per_step)
        mad = 5 * 1.4826 * statistics.median(abs(x - median) for x in per_step)
        keep = [i for i, x in enumerate(per_step) if x <= median + max(stall_ratio * median / steps[i], mad)]
        if 2 * len(keep) <= len(per_step):
            return kept
    else:  # stalls only slow: the median starts from the faster half, then is re-taken over the kept
        median = statistics.median(sorted(per_step)[: (len(per_step) + 1) // 2])
        allowed = [max(stall_ratio / n, 5 * step_spread / math.sqrt(n)) for n in steps]  # of the median
        keep = []
        for _ in range(len(per_step)):
            found = [i for i, x in enumerate(per_step) if x <= median * (1 + allowed[i])]
            if found == keep:
                break
            keep = found
            median = statistics.median([per_step[i] for i in keep])
        if len(keep) < 2:
            return kept
    return [times_s[i] for i in keep], [energies_j[i] for i in keep], [steps[i] for i in keep]


def relative_step_spread(groups: Sequence[tuple[Sequence[float], Sequence[int]]]) -> float | None:
    """The job's jitter: relative SD of one step's value, from consecutive samples of each group (limit).

    Robust (1.4826 × a median); ``None`` with fewer than eight pairs. See docs/optimizers/power-limit.md.
    """
    devs: list[float] = []
    for values, steps in groups:
        per_step = [v / n for v, n in zip(values, steps)]
        if len(per_step) < 2:
            continue
        median = statistics.median(per_step)
        if median <= 0:
            continue
        scale = [median * math.sqrt(1 / steps[a] + 1 / steps[a + 1]) for a in range(len(steps) - 1)]
        devs += [abs(per_step[a] - per_step[a + 1]) / scale[a] for a in range(len(scale))]
    return 1.4826 * statistics.median(devs) if len(devs) >= 8 else None


def _floored(
    m: PowerLimitMeasurement, time_sd: float | None, energy_sd: float | None, dof: int
) -> PowerLimitMeasurement:
    """``m`` with variances at least the job's jitter's, and its ``dof`` where consistent with it."""
    floor_t, floor_e = ((time_sd or 0.0) * m.time) ** 2, ((energy_sd or 0.0) * m.energy) ** 2
    vt, ve = max(m.time_var_s2, floor_t), max(m.energy_var_j2, floor_e)
    own = m.samples - 1  # type: ignore[operator]
    consistent = _consistent(m.time_var_s2, floor_t, own) and _consistent(m.energy_var_j2, floor_e, own)
    borrow = dof > own and bool(time_sd) and bool(energy_sd) and consistent
    if vt == m.time_var_s2 and ve == m.energy_var_j2 and not borrow:
        return m
    scale = math.sqrt(m.time_var_s2 * m.energy_var_j2)
    corr = m.covariance_js / scale if scale > 0 else 0.0
    cov, spread_dof = corr * math.sqrt(vt * ve), dof if borrow else None
    return replace(m, time_var_s2=vt, energy_var_j2=ve, covariance_js=cov, spread_dof=spread_dof)


def _consistent(own_var: float, floor_var: float, own_dof: int) -> bool:
    """Whether ``own_var`` on ``own_dof`` degrees of freedom fits the job's ``floor_var`` (χ², 99 %)."""
    if own_dof < 1 or own_var <= floor_var:
        return True
    if floor_var <= 0:
        return False
    h = 2.0 / (9.0 * own_dof)
    return own_var / floor_var <= (1.0 - h + 2.3263 * math.sqrt(h)) ** 3


class SampleLog:
    """Every visit's samples (``visits``), and the measurements they give (judged with the job's jitter)."""

    def __init__(self, num_gpus: int = 1, visits: Sequence[Visit] = ()) -> None:
        self.num_gpus = num_gpus
        self.visits: list[Visit] = []
        self._spreads: tuple[float | None, float | None, int] | None = None
        self._spread_samples = 0  # samples the jitter was last estimated from
        self._judged: dict[float, PowerLimitMeasurement] = {}
        self._groups: dict[float, _Samples] = {}  # samples by limit
        for v in visits:
            self.add(v)

    def add(self, visit: Visit) -> None:
        """Record a finished visit; its limit is judged again (every limit, once the samples grew by 25 %)."""
        self.visits.append(visit)
        t, e, n = self._groups.setdefault(visit.power_limit, ([], [], []))
        t += visit.times_s
        e += visit.energies_j
        n += visit.steps
        samples = sum(len(v.steps) for v in self.visits)
        if self._spreads is None or self._spreads[0] is None or samples >= 1.25 * self._spread_samples:
            self._spreads, self._judged = None, {}
        else:
            self._judged.pop(visit.power_limit, None)

    def spreads(self) -> tuple[float | None, float | None, int]:
        """The job's relative jitter of one step's time and energy (``None``: too few samples), and dof."""
        if self._spreads is None:
            groups = list(self._groups.values())
            self._spread_samples = sum(len(t) for t, _, _ in groups)
            time_sd = relative_step_spread([(t, n) for t, _, n in groups])
            cleaned = [drop_stalls(t, e, n, step_spread=time_sd) for t, e, n in groups]
            time_sd = relative_step_spread([(t, n) for t, _, n in cleaned]) or time_sd
            dof = sum(max(len(t) - 1, 0) for t, _, _ in cleaned) // 2
            self._spreads = (time_sd, relative_step_spread([(e, n) for _, e, n in cleaned]), dof)
        return self._spreads

    def _judge(self, limit: float, samples: _Samples) -> PowerLimitMeasurement:
        time_sd, energy_sd, dof = self.spreads()
        t, e, n = drop_stalls(*samples, step_spread=time_sd)
        return _floored(summarize(limit, t, e, n, self.num_gpus), time_sd, energy_sd, dof)

    def measurements(self) -> list[PowerLimitMeasurement]:
        """Every measured limit's measurement, highest limit first."""
        for w in self._groups.keys() - self._judged.keys():
            self._judged[w] = self._judge(w, self._groups[w])
        return [self._judged[w] for w in sorted(self._groups, reverse=True)]

    def with_running(self, visit: Visit) -> list[PowerLimitMeasurement]:
        """:meth:`measurements` with a visit in progress counted for its limit (the jitter as it stands)."""
        t, e, n = self._groups.get(visit.power_limit, ([], [], []))
        samples = (t + [*visit.times_s], e + [*visit.energies_j], n + [*visit.steps])
        running = self._judge(visit.power_limit, samples)
        others = [m for m in self.measurements() if m.power_limit != visit.power_limit]
        return sorted([*others, running], key=lambda m: -m.power_limit)

    def to_json(self) -> list[list[Any]]:
        """JSON-safe form (one item per visit)."""
        return [v.to_json() for v in self.visits]


@functools.lru_cache(maxsize=2048)
def quantile(confidence: float, dof: int) -> float:
    """Two-sided Student-t quantile: ``P(|T| < t) = confidence`` (``inf`` for ``dof < 1``)."""
    if dof < 1:
        return math.inf
    p = 0.5 + confidence / 2
    if dof == 1:
        return math.tan(math.pi * (p - 0.5))
    if dof == 2:
        return (2 * p - 1) * math.sqrt(2 / (4 * p * (1 - p)))
    z = statistics.NormalDist().inv_cdf(p)
    z2 = z * z
    t = z + (  # Cornish-Fisher (Abramowitz & Stegun 26.7.5); exact enough from 8 degrees of freedom
        (z2 + 1) * z / 4 / dof
        + ((5 * z2 + 16) * z2 + 3) * z / 96 / dof**2
        + (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384 / dof**3
        + ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160 / dof**4
    )
    if dof >= 8:
        return t
    log_norm = math.lgamma((dof + 1) / 2) - math.lgamma(dof / 2) - 0.5 * math.log(dof * math.pi)
    for _ in range(4):  # Newton on the exact distribution
        density = math.exp(log_norm - (dof + 1) / 2 * math.log1p(t * t / dof))
        t -= (_t_central(t, dof) - confidence) / (2 * density)
    return t


def _t_central(t: float, dof: int) -> float:
    """``P(|T| < t)`` for Student's t with integer ``dof`` (Abramowitz & Stegun 26.7.3–4)."""
    theta = math.atan(t / math.sqrt(dof))
    c2, odd = math.cos(theta) ** 2, dof % 2 == 1
    term = total = 0.0 if dof == 1 else 1.0
    for k in range(3 if odd else 2, dof - 1, 2):
        term *= c2 * (k - 1) / k
        total += term
    if odd:
        return 2.0 / math.pi * (theta + math.sin(theta) * math.cos(theta) * total)
    return math.sin(theta) * total


def significantly_greater(
    a: float, se_a: float, dof_a: int, b: float, se_b: float, dof_b: int, confidence: float
) -> bool:
    """Whether ``a > b`` beyond noise: ``a − b > t·sqrt(se_a² + se_b²)``, ``t`` for the smaller dof."""
    q = quantile(confidence, min(dof_a, dof_b))
    spread = math.hypot(se_a, se_b)
    return not (math.isinf(q) or math.isinf(spread)) and a - b > q * spread
