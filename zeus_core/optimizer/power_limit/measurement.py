"""What profiling one power limit yields, and the statistics behind early stopping.

A :class:`PowerLimitMeasurement` is a plain value: the job's mean time and energy per optimizer
step at one power limit, plus the per-step variances that say how precise those means are. It
round-trips through JSON (:meth:`PowerLimitMeasurement.to_dict` / :meth:`~PowerLimitMeasurement.from_dict`).

The variances come from *samples*: groups of consecutive steps, each read once from the energy
counter (:mod:`zeus_core.optimizer.power_limit.sampling` says how they are cut). A sample of
``n_i`` steps that took ``t_i`` s and ``e_i`` J gives the per-step values ``x_i = t_i / n_i`` and
``y_i = e_i / n_i``; with ``N = Σ n_i`` steps in ``k`` samples the estimates are weighted by steps::

    mean      x̄  = Σ n_i·x_i / N                        (= total time / N)
    variance  s² = Σ n_i·(x_i − x̄)² / (k − 1)           (per-step variance, unbiased when the
    covariance     Σ n_i·(x_i − x̄)(y_i − ȳ) / (k − 1)    steps are independent draws)
    std. error     sqrt(s² / N),  with k − 1 degrees of freedom for the t-quantiles

With one step per sample (steps longer than the shortest sample) these are the ordinary
per-step mean, sample variance and ``s/√N``.

:class:`EarlyStopping` holds the knobs of the early-stopping rules, which
:mod:`zeus_core.optimizer.power_limit.planner` states.
"""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Mapping, Sequence

from zeus_core.exceptions import ZeusConfigError, ZeusProfileError

__all__ = ["PowerLimitMeasurement", "EarlyStopping", "drop_stalls", "relative_step_spread"]


@dataclass(frozen=True)
class PowerLimitMeasurement:
    """Time and energy per optimizer step of the whole job at one power limit.

    Energy is summed over every monitored GPU of every rank; time is the slowest rank's. The
    means come from one measurement window per rank (synchronised at both ends); the variances
    come from the samples read from the same window (see the module docstring for the
    step-weighted estimates) and only serve to judge precision.

    Attributes:
        power_limit_w: The power limit every GPU ran under, W.
        steps: Measured optimizer steps.
        time_per_step_s: Mean time per step, s.
        energy_per_step_j: Mean GPU energy per step of the whole job, J.
        time_var_s2: Sample variance of the per-step time, s².
        energy_var_j2: Sample variance of the per-step energy, J².
        covariance_js: Sample covariance of per-step energy and time, J·s.
        num_gpus: GPUs in the job (all ranks) whose energy is summed.
        samples: Samples (energy-counter reads) the variances come from, 1..``steps``;
            ``None`` means one per step (measurements saved before samples existed).
        spread_dof: Degrees of freedom of the variances when they rest on the job-wide spread
            (:meth:`with_spread_floor`), or ``None`` when they rest on this limit's samples alone.
    """

    power_limit_w: float
    steps: int
    time_per_step_s: float
    energy_per_step_j: float
    time_var_s2: float = 0.0
    energy_var_j2: float = 0.0
    covariance_js: float = 0.0
    num_gpus: int = 1
    samples: int | None = None
    spread_dof: int | None = None

    def __post_init__(self) -> None:
        for name in (
            "power_limit_w",
            "time_per_step_s",
            "energy_per_step_j",
            "time_var_s2",
            "energy_var_j2",
            "covariance_js",
        ):
            object.__setattr__(self, name, float(getattr(self, name)))
        samples = self.steps if self.samples is None else self.samples
        object.__setattr__(self, "samples", samples)
        finite = all(
            math.isfinite(getattr(self, n))
            for n in ("power_limit_w", "time_per_step_s", "energy_per_step_j", "time_var_s2", "energy_var_j2")
        )
        if (
            not finite
            or self.power_limit_w <= 0
            or self.steps < 1
            or self.time_per_step_s <= 0
            or self.energy_per_step_j < 0
            or self.num_gpus < 1
            or not 1 <= samples <= self.steps
            or (self.spread_dof is not None and self.spread_dof < 0)
        ):
            raise ZeusProfileError(
                f"PowerLimitMeasurement at {self.power_limit_w} W: need a finite limit > 0 W, "
                f"finite figures, steps >= 1, time > 0, energy >= 0, "
                f"num_gpus >= 1 and 1 <= samples <= steps; got steps={self.steps}, "
                f"time={self.time_per_step_s} s, energy={self.energy_per_step_j} J, "
                f"num_gpus={self.num_gpus}, samples={self.samples}."
            )

    @classmethod
    def from_samples(
        cls,
        power_limit_w: float,
        times_s: Sequence[float],
        energies_j: Sequence[float],
        num_gpus: int,
        total_time_s: float | None = None,
        total_energy_j: float | None = None,
        *,
        steps: Sequence[int] | None = None,
    ) -> "PowerLimitMeasurement":
        """Summarise samples of the job, weighting each by its steps (see the module docstring).

        Args:
            power_limit_w: The limit the samples were taken at, W.
            times_s: Job time of each sample, s.
            energies_j: Job GPU energy of each sample, J.
            num_gpus: GPUs whose energy is summed.
            total_time_s: Synchronised window time over all steps, s; defaults to the samples' sum.
            total_energy_j: Synchronised window energy, J; defaults to the samples' sum.
            steps: Steps in each sample (>= 1 each); ``None``: one step per sample.

        Raises:
            ZeusConfigError: The sequences are empty or of different lengths, or a sample has no steps.
        """
        k = len(times_s)
        counts = [1] * k if steps is None else [int(n) for n in steps]
        if k == 0 or k != len(energies_j) or k != len(counts) or min(counts) < 1:
            raise ZeusConfigError(
                "PowerLimitMeasurement.from_samples: need as many time, energy and step counts as samples "
                f"(>= 1, each sample >= 1 step), got {len(times_s)}, {len(energies_j)} and {counts}."
            )
        n = sum(counts)
        mean_t = math.fsum(times_s) / n
        mean_e = math.fsum(energies_j) / n
        var_t = var_e = cov = 0.0
        if k > 1:
            dev = [(t / c - mean_t, e / c - mean_e, c) for t, e, c in zip(times_s, energies_j, counts)]
            var_t = math.fsum(c * dt * dt for dt, _, c in dev) / (k - 1)
            var_e = math.fsum(c * de * de for _, de, c in dev) / (k - 1)
            cov = math.fsum(c * dt * de for dt, de, c in dev) / (k - 1)
        if total_time_s is not None and total_time_s > 0:
            mean_t = total_time_s / n
        if total_energy_j is not None:
            mean_e = total_energy_j / n
        return cls(
            power_limit_w=float(power_limit_w),
            steps=n,
            time_per_step_s=mean_t,
            energy_per_step_j=max(mean_e, 0.0),
            time_var_s2=var_t,
            energy_var_j2=var_e,
            covariance_js=cov,
            num_gpus=num_gpus,
            samples=k,
        )

    @property
    def average_power_w(self) -> float:
        """Average job power (all GPUs) at this limit, W."""
        return self.energy_per_step_j / self.time_per_step_s

    @property
    def dof(self) -> int:
        """Degrees of freedom of the variance estimates: samples − 1, or :attr:`spread_dof`."""
        if self.spread_dof is not None:
            return self.spread_dof
        return self.samples - 1  # type: ignore[operator]  # never None after __post_init__

    def cost(self, energy_weight: float, time_weight: float) -> float:
        """A linear cost per step, ``energy_weight·J + time_weight·s``.

        Args:
            energy_weight: Weight of energy per step (unitless).
            time_weight: Weight of time per step, W (J per s).
        """
        return energy_weight * self.energy_per_step_j + time_weight * self.time_per_step_s

    def cost_stderr(self, energy_weight: float, time_weight: float) -> float:
        """Standard error of :meth:`cost` (``inf`` with a single sample), in the cost's unit."""
        if self.dof < 1:
            return math.inf
        var = (
            energy_weight**2 * self.energy_var_j2
            + time_weight**2 * self.time_var_s2
            + 2.0 * energy_weight * time_weight * self.covariance_js
        )
        return math.sqrt(max(var, 0.0) / self.steps)

    def time_stderr(self) -> float:
        """Standard error of :attr:`time_per_step_s`, s."""
        return self.cost_stderr(0.0, 1.0)

    def power_stderr(self) -> float:
        """Standard error of :attr:`average_power_w` (ratio estimator, delta method), W."""
        if self.dof < 1:
            return math.inf
        p = self.average_power_w
        var = self.energy_var_j2 - 2.0 * p * self.covariance_js + p * p * self.time_var_s2
        return math.sqrt(max(var, 0.0) / self.steps) / self.time_per_step_s

    def with_spread_floor(
        self, time_rel_sd: float | None, energy_rel_sd: float | None, spread_dof: int | None = None
    ) -> "PowerLimitMeasurement":
        """This measurement with per-step variances at least those of the given relative spreads.

        A few samples can show a spread far below the jitter the job really has (four samples
        that happen to agree), which makes every test on them overconfident. The job-wide spread
        (:func:`relative_step_spread` over every limit measured so far) is a floor: each
        variance becomes ``max(own, (rel_sd · mean)²)``, and the covariance keeps its correlation.

        The job-wide spread rests on far more samples than one limit's few, so where this
        limit's own spread is consistent with it (not above the 99th percentile that the job's
        jitter gives ``samples − 1`` degrees of freedom), the variances take its ``spread_dof``
        degrees of freedom: tests on a limit of four samples then use a t quantile near 2, not
        3.2. A limit noisier than the job keeps its own degrees of freedom.

        Args:
            time_rel_sd: Relative standard deviation of one step's time, or ``None`` (no floor).
            energy_rel_sd: Relative standard deviation of one step's energy, or ``None``.
            spread_dof: Degrees of freedom of the job-wide spreads, or ``None`` (keep this limit's).
        """
        floor_t = ((time_rel_sd or 0.0) * self.time_per_step_s) ** 2
        floor_e = ((energy_rel_sd or 0.0) * self.energy_per_step_j) ** 2
        vt, ve = max(self.time_var_s2, floor_t), max(self.energy_var_j2, floor_e)
        own_dof = self.samples - 1  # type: ignore[operator]
        dof = None
        if (
            spread_dof is not None
            and spread_dof > own_dof
            and time_rel_sd
            and energy_rel_sd
            and _consistent(self.time_var_s2, floor_t, own_dof)
            and _consistent(self.energy_var_j2, floor_e, own_dof)
        ):
            dof = spread_dof
        if vt == self.time_var_s2 and ve == self.energy_var_j2 and dof == self.spread_dof:
            return self
        own = math.sqrt(self.time_var_s2 * self.energy_var_j2)
        corr = self.covariance_js / own if own > 0 else 0.0
        return replace(
            self,
            time_var_s2=vt,
            energy_var_j2=ve,
            covariance_js=corr * math.sqrt(vt * ve),
            spread_dof=dof,
        )

    def merge(self, other: "PowerLimitMeasurement") -> "PowerLimitMeasurement":
        """Pool two measurements of the same limit (e.g. a refinement visit) into one.

        Means are weighted by steps; variances and covariance are pooled exactly as if every
        sample of both had been summarised at once (the spread between the two means, weighted
        ``N1·N2/N``, only widens the intervals); the samples add up.

        Raises:
            ZeusConfigError: The measurements are of different limits.
        """
        if other.power_limit_w != self.power_limit_w:
            raise ZeusConfigError(
                f"PowerLimitMeasurement.merge: {self.power_limit_w:g} W and {other.power_limit_w:g} W are "
                "different limits."
            )
        n1, n2 = self.steps, other.steps
        n = n1 + n2
        k1, k2 = self.samples - 1, other.samples - 1  # type: ignore[operator]
        dt = other.time_per_step_s - self.time_per_step_s
        de = other.energy_per_step_j - self.energy_per_step_j
        w = n1 * n2 / n

        def pooled(v1: float, v2: float, cross: float) -> float:
            return (k1 * v1 + k2 * v2 + w * cross) / (k1 + k2 + 1)

        return PowerLimitMeasurement(
            power_limit_w=self.power_limit_w,
            steps=n,
            time_per_step_s=(n1 * self.time_per_step_s + n2 * other.time_per_step_s) / n,
            energy_per_step_j=(n1 * self.energy_per_step_j + n2 * other.energy_per_step_j) / n,
            time_var_s2=pooled(self.time_var_s2, other.time_var_s2, dt * dt),
            energy_var_j2=pooled(self.energy_var_j2, other.energy_var_j2, de * de),
            covariance_js=pooled(self.covariance_js, other.covariance_js, dt * de),
            num_gpus=max(self.num_gpus, other.num_gpus),
            samples=k1 + k2 + 2,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "PowerLimitMeasurement":
        """Inverse of :meth:`to_dict`; unknown keys are ignored, missing variances default to 0.

        A missing ``samples`` means one per step (files written before samples existed).

        Raises:
            ZeusProfileError: A required key is missing or a value is invalid.
        """
        known = {f.name for f in fields(cls)}
        try:
            kwargs = {k: v for k, v in data.items() if k in known}
            samples = kwargs.get("samples")
            return cls(
                power_limit_w=float(kwargs["power_limit_w"]),
                steps=int(kwargs["steps"]),
                time_per_step_s=float(kwargs["time_per_step_s"]),
                energy_per_step_j=float(kwargs["energy_per_step_j"]),
                time_var_s2=float(kwargs.get("time_var_s2", 0.0)),
                energy_var_j2=float(kwargs.get("energy_var_j2", 0.0)),
                covariance_js=float(kwargs.get("covariance_js", 0.0)),
                num_gpus=int(kwargs.get("num_gpus", 1)),
                samples=None if samples is None else int(samples),
                spread_dof=None if kwargs.get("spread_dof") is None else int(kwargs["spread_dof"]),
            )
        except (KeyError, TypeError, ValueError) as e:
            if isinstance(e, ZeusProfileError):
                raise
            raise ZeusProfileError(
                f"Power-limit measurement {dict(data)!r} is malformed ({e!r}); it needs power_limit_w, "
                "steps, time_per_step_s and energy_per_step_j."
            ) from e

    def describe(self) -> str:
        """One line, e.g. ``"250 W: 0.2813 s/step, 247.1 W, 69.51 J/step (40 steps, ±0.4 % time s.e.)"``.

        When samples group several steps, their number follows the steps
        (``"(200 steps in 8 samples, ±0.3 % time s.e.)"``).
        """
        rel = self.time_stderr() / self.time_per_step_s * 100 if self.dof >= 1 else math.inf
        grouped = f" in {self.samples} samples" if self.samples != self.steps else ""
        return (
            f"{self.power_limit_w:g} W: {self.time_per_step_s:.4f} s/step, {self.average_power_w:.1f} W, "
            f"{self.energy_per_step_j:.2f} J/step ({self.steps} steps{grouped}, ±{rel:.1f} % time s.e.)"
        )


def drop_stalls(
    times_s: Sequence[float],
    energies_j: Sequence[float],
    steps: Sequence[int],
    stall_ratio: float = 0.25,
    step_spread: float | None = None,
) -> tuple[list[float], list[float], list[int]]:
    """The samples without stalls: those whose time per step is far above the visit's median.

    A stall (a data-loader hiccup, a checkpoint write, a garbage collection) makes a step slower
    whatever the power limit, so it says nothing about the limit and, pooled into a mean, can
    flip a decision. A stalled step inside a sample of ``n`` steps raises the sample's time per
    step by only ``1/n`` of the stall, so a sample is a stall when its time per step exceeds the
    median by more than ``stall_ratio / n`` of the median and by more than five standard
    deviations of a sample's time per step, so ordinary jitter is never dropped.

    The spread comes from ``step_spread`` when given (the relative standard deviation of one
    step's time, pooled over every limit measured so far: see :func:`relative_step_spread`),
    which holds even when a visit has only a few samples and half of them stalled; the median
    then starts from the faster half of the samples and is re-taken over the samples kept
    until nothing changes. Without it, the spread
    is the visit's own 1.4826 × median absolute deviation (one pass), and fewer than half of the
    samples may go (the median's breakdown point). Only slow samples are dropped (stalls never
    make steps faster), at least two are kept, and only where there are at least three samples
    to take a median of.

    Args:
        times_s: Time of each sample, s.
        energies_j: Energy of each sample, J.
        steps: Steps in each sample.
        stall_ratio: Smallest excess of one step over the median time per step that counts as
            a stall (0.25: 25 %).
        step_spread: Relative standard deviation of one step's time (0.05: 5 %), or ``None``.

    Returns:
        The kept samples' times, energies and steps, in their order.

    Example:
        >>> drop_stalls([1.0, 1.02, 0.98, 3.0, 1.01], [10, 10, 10, 11, 10], [1, 1, 1, 1, 1])[0]
        [1.0, 1.02, 0.98, 1.01]
        >>> drop_stalls([5.0, 4.2, 3.9, 6.0, 4.1], [1.0] * 5, [5] * 5, step_spread=0.05)[0]  # 2 stalled
        [4.2, 3.9, 4.1]
    """
    kept = (list(times_s), list(energies_j), list(steps))
    if len(times_s) < 3:
        return kept
    per_step = [t / n for t, n in zip(times_s, steps)]

    def normal(center: float, spread: list[float]) -> list[int]:
        return [
            i
            for i, (x, n) in enumerate(zip(per_step, steps))
            if x <= center + max(stall_ratio * center / n, spread[i])
        ]

    if step_spread is None:
        median = statistics.median(per_step)
        mad = statistics.median(abs(x - median) for x in per_step)
        keep = normal(median, [5 * 1.4826 * mad] * len(per_step))
        if 2 * len(keep) <= len(per_step):
            return kept
    else:
        # Stalls only slow samples down, so the centre starts from the faster half (a visit of
        # four samples may hold two stalls) and is re-taken over the samples kept until it settles.
        median = statistics.median(sorted(per_step)[: (len(per_step) + 1) // 2])
        spread = [5 * step_spread / math.sqrt(n) for n in steps]
        keep = []
        for _ in range(len(per_step)):
            found = normal(median, [median * s for s in spread])
            if found == keep:
                break
            keep = found
            median = statistics.median(per_step[i] for i in keep)
        if len(keep) < 2:
            return kept
    if len(keep) == len(per_step):
        return kept
    return [times_s[i] for i in keep], [energies_j[i] for i in keep], [steps[i] for i in keep]


def relative_step_spread(visits: Sequence[tuple[Sequence[float], Sequence[int]]]) -> float | None:
    """Relative standard deviation of one step's time, pooled over groups of samples (robust), or ``None``.

    Within each group (the samples of one limit), every pair of samples ``i, j`` with times per
    step ``x`` over ``n`` steps gives ``|x_i − x_j| / (m·sqrt(1/n_i + 1/n_j))``, ``m`` the group's
    median: for jitter alone that is ``σ·|Z|``, whatever the group's size (deviations from a
    group's own median shrink in groups of a few samples). The estimate is 1.4826 × the median
    of all pairs. Stalls inflate it a little (a pair with a stalled sample is large); cleaning
    the samples with it and estimating again removes that. Jitter is relative, so limits pool.
    ``None`` with fewer than eight pairs.

    Example:
        >>> round(relative_step_spread([([1.0, 1.1, 0.9, 1.0], [1] * 4)] * 3), 4)
        0.1048
    """
    devs: list[float] = []
    for times, steps in visits:
        per_step = [t / n for t, n in zip(times, steps)]
        if len(per_step) < 2:
            continue
        median = statistics.median(per_step)
        if median <= 0:  # e.g. energies of short samples that a coarse counter read as 0 J
            continue
        for a in range(len(per_step)):
            for b in range(a + 1, len(per_step)):
                scale = median * math.sqrt(1.0 / steps[a] + 1.0 / steps[b])
                devs.append(abs(per_step[a] - per_step[b]) / scale)
    return 1.4826 * statistics.median(devs) if len(devs) >= 8 else None


def _consistent(own_var: float, floor_var: float, own_dof: int) -> bool:
    """Whether a variance on ``own_dof`` degrees of freedom fits the job's ``floor_var``.

    Under the job's jitter, ``own_dof · own / floor`` is chi-square with ``own_dof`` degrees of
    freedom; it fits below that distribution's 99th percentile (Wilson–Hilferty).
    """
    if own_dof < 1 or own_var <= floor_var:
        return True
    if floor_var <= 0:
        return False
    h = 2.0 / (9.0 * own_dof)
    return own_var / floor_var <= (1.0 - h + 2.3263 * math.sqrt(h)) ** 3


def _t_central(t: float, dof: int) -> float:
    """P(|T| < t) for Student's t with integer ``dof`` (Abramowitz & Stegun 26.7.3–4, exact)."""
    theta = math.atan(t / math.sqrt(dof))
    c2 = math.cos(theta) ** 2
    if dof % 2 == 1:
        term = total = 0.0
        if dof > 1:
            term = total = 1.0
            for k in range(3, dof - 1, 2):  # products (2·4···(k−1)) / (3·5···k) times cos^(k-1)
                term *= c2 * (k - 1) / k
                total += term
        return 2.0 / math.pi * (theta + math.sin(theta) * math.cos(theta) * total)
    term = total = 1.0
    for k in range(2, dof - 1, 2):  # (1·3···(k−1)) / (2·4···k) times cos^k
        term *= c2 * (k - 1) / k
        total += term
    return math.sin(theta) * total


@functools.lru_cache(maxsize=512)
def _t_quantile(confidence: float, dof: int) -> float:
    """``t`` with ``P(|T| < t) = confidence`` for integer ``dof >= 1``, by bisection."""
    lo, hi = 0.0, 1.0
    while _t_central(hi, dof) < confidence:
        hi *= 2.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if _t_central(mid, dof) < confidence:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class EarlyStopping:
    """Knobs of the early-stopping rules of :class:`GlobalPowerLimitOptimizer`.

    Attributes:
        confidence: Two-sided confidence of every interval and test (e.g. 0.95).
        rel_tol: A measurement is tight enough once the confidence half-widths of its time per
            step and of its average power are both within this fraction of the estimates.
        min_steps: Measured steps per limit in the survey sweep, and the fewest before any
            measurement may stop (>= 3).
        min_samples: Samples (energy-counter reads, see
            :mod:`~zeus_core.optimizer.power_limit.sampling`) per limit in the survey sweep, and
            the fewest before any measurement may stop (>= 2). With steps shorter than the
            shortest sample the survey measures ``max(min_steps, min_samples samples)`` steps;
            with longer steps every step is a sample and ``min_steps`` decides.
        check_every: Measured steps between checks of the rules (one cross-rank all-reduce each);
            a check happens at the first sample end on or after each multiple of ``check_every``
            steps (counted from ``min_steps`` before a limit's first verdict).
        patience: The sweep ends once this many consecutive limits after the best one are each
            significantly worse than the best by more than ``margin``.
        margin: Relative rise that counts towards ``patience`` (0.10: 10 % costlier than the best).
            Real profiles show bumps of several percent between neighbouring limits that are not
            sampling noise (thermals, input pipeline); rises below the margin do not end the sweep.
        max_refine_steps: Most measured steps of a contender that is still tied with another
            after ``profile_steps`` (``None``: 3 × ``profile_steps``; values below
            ``profile_steps`` act as ``profile_steps``). Contenders are by construction close to
            the optimum, so measuring them longer costs little energy compared with running at
            the optimum; they are measured in rounds of ``profile_steps`` steps, fewest first.
        tie_tol: Refinement ends once the choice is, at ``confidence``, within this fraction of
            every other contender's cost (``0.005``: the choice costs at most 0.5 % more than any
            contender). Either choice is then good enough, so telling them apart would only cost
            profiling. ``0`` turns this stop off.

    Raises:
        ZeusConfigError: A knob is out of range.
    """

    confidence: float = 0.95
    rel_tol: float = 0.005
    min_steps: int = 10
    min_samples: int = 4
    check_every: int = 5
    patience: int = 2
    margin: float = 0.10
    max_refine_steps: int | None = None
    tie_tol: float = 0.005

    def __post_init__(self) -> None:
        problems = []
        if not 0.5 <= self.confidence < 1.0:
            problems.append(f"confidence={self.confidence} (use 0.5 <= confidence < 1)")
        if not self.rel_tol > 0:
            problems.append(f"rel_tol={self.rel_tol} (use a positive fraction such as 0.01)")
        if self.min_steps < 3:
            problems.append(f"min_steps={self.min_steps} (use >= 3: variances need samples)")
        if self.min_samples < 2:
            problems.append(f"min_samples={self.min_samples} (use >= 2: a spread needs two samples)")
        if self.check_every < 1:
            problems.append(f"check_every={self.check_every} (use >= 1)")
        if self.patience < 1:
            problems.append(f"patience={self.patience} (use >= 1)")
        if not self.margin >= 0:
            problems.append(f"margin={self.margin} (use a fraction >= 0, e.g. 0.10)")
        if self.max_refine_steps is not None and (
            isinstance(self.max_refine_steps, bool)
            or not isinstance(self.max_refine_steps, int)
            or self.max_refine_steps < 1
        ):
            problems.append(
                f"max_refine_steps={self.max_refine_steps!r} (use an int >= 1, or None for 3 × profile_steps)"
            )
        if not 0 <= self.tie_tol < 1:
            problems.append(f"tie_tol={self.tie_tol} (use a fraction in [0, 1), e.g. 0.005)")
        if problems:
            raise ZeusConfigError("EarlyStopping: " + "; ".join(problems) + ".")

    def refine_cap(self, profile_steps: int) -> int:
        """Most measured steps of a tied contender, in all (see :attr:`max_refine_steps`)."""
        cap = 3 * profile_steps if self.max_refine_steps is None else self.max_refine_steps
        return max(profile_steps, cap)

    def quantile(self, dof: int) -> float:
        """Two-sided Student-t quantile for :attr:`confidence` with ``dof`` degrees of freedom.

        ``inf`` for ``dof < 1`` (no spread estimate yet).
        """
        return _t_quantile(self.confidence, dof) if dof >= 1 else math.inf

    def is_tight(self, m: PowerLimitMeasurement) -> bool:
        """Whether ``m``'s time per step and average power are both known within :attr:`rel_tol`.

        Never with fewer than ``min_steps`` steps or ``min_samples`` samples.
        """
        if m.steps < self.min_steps or m.samples < self.min_samples:  # type: ignore[operator]
            return False
        q = self.quantile(m.dof)
        return (
            q * m.time_stderr() <= self.rel_tol * m.time_per_step_s
            and q * m.power_stderr() <= self.rel_tol * m.average_power_w
        )

    def significantly_greater(
        self, a: float, se_a: float, a_dof: int, b: float, se_b: float, b_dof: int
    ) -> bool:
        """Whether ``a > b`` beyond noise: ``a − b > q·sqrt(se_a² + se_b²)`` (q for the smaller dof)."""
        q = self.quantile(min(a_dof, b_dof))
        spread = math.hypot(se_a, se_b)
        if math.isinf(q) or math.isinf(spread):
            return False
        return a - b > q * spread
