"""What to measure next, when a visit has measured enough, and the choice, from the measurements alone.

Every rule works only from what the selector says (a measurement's cost; for a constraint, its
feasibility against the reference): docs/optimizers/power-limit.md, "The plan".
"""

from __future__ import annotations

import enum
import math
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from zeus_core import _distributed as distributed
from zeus_core.optimizer.power_limit._measurement import PowerLimitMeasurement
from zeus_core.optimizer.power_limit._options import PowerLimitOptions
from zeus_core.optimizer.power_limit._selectors import OptimumSelector
from zeus_core.optimizer.power_limit._statistics import quantile, significantly_greater

__all__ = ["Step", "Action", "candidate_limits", "Planner", "PlanThread", "choose", "impossible"]

Measurements = Sequence[PowerLimitMeasurement]


class Step(str, enum.Enum):
    """What to do next: measure a limit (the next lower one, or a contender again), or set the choice."""

    MEASURE = "measure"
    DONE = "done"


@dataclass(frozen=True)
class Action:
    """The next step: measure ``power_limit`` (W) up to ``cap`` steps in all, or set it as the choice.

    ``again``: the limit has samples already; ``reason``: why the survey ended (empty while surveying).
    """

    step: Step
    power_limit: float
    again: bool = False
    cap: int = 0
    reason: str = ""


def candidate_limits(max_w: float, min_w: float, step_w: float) -> list[float]:
    """Limits from ``max_w`` down to ``min_w`` in ``step_w`` steps, W, highest first (``min_w`` if landed on).

    Example:
        >>> candidate_limits(300.0, 100.0, 75.0)
        [300.0, 225.0, 150.0]
    """
    limits, i = [], 0
    while max_w - i * step_w >= min_w - 1e-9:
        limits.append(round(max_w - i * step_w, 6))
        i += 1
    return limits


def impossible(m: PowerLimitMeasurement, options: PowerLimitOptions) -> str:
    """Why ``m`` is impossible (``""``: it is not): its power per GPU exceeds its limit ("Measurements").

    Example:
        >>> impossible(PowerLimitMeasurement(100, energy=30.0, time=0.1, steps=40), PowerLimitOptions())
        '300 W per GPU on average is impossible under a 100 W limit'
    """
    allowed = m.power_limit * (1 + options.power_tolerance + options.counter_period_s / (m.time * m.steps))
    per_gpu = m.average_power / m.num_gpus
    return f"{per_gpu:.0f} W per GPU on average is impossible under a {m.power_limit:g} W limit" * (
        per_gpu > allowed
    )


def _shifted(m: PowerLimitMeasurement, time_factor: float, energy_factor: float) -> PowerLimitMeasurement:
    """``m`` with time and energy scaled (no validation: only selectors read it)."""
    out = object.__new__(PowerLimitMeasurement)
    out.__dict__.update(m.__dict__, time=m.time * time_factor, energy=m.energy * energy_factor)
    return out


_Cache = dict[Any, Any]
"""Costs and their errors (by measurement and limits measured), and feasibility verdicts."""


class _Judge:
    """Costs, intervals and feasibility of one set of measurements, as the selector defines them.

    ``cache`` keeps costs and verdicts across calls: a check recomputes only the running limit's.
    """

    def __init__(
        self,
        selector: OptimumSelector,
        measurements: Measurements,
        options: PowerLimitOptions,
        cache: _Cache | None = None,
    ) -> None:
        self.selector, self.options, self.ms = selector, options, list(measurements)
        self.confidence = options.confidence
        self.cost, self.se = {}, {}
        context = tuple(m.power_limit for m in self.ms)
        cache = self._cache = {} if cache is None else cache
        for m in self.ms:
            if (m, context) not in cache:
                self.cost[m.power_limit] = selector.cost(m, self.ms)
                cache[m, context] = (self.cost[m.power_limit], self._cost_se(m))
            self.cost[m.power_limit], self.se[m.power_limit] = cache[m, context]
        self.ref = selector.reference(self.ms) if selector.constrains else None
        self._contenders: list[PowerLimitMeasurement] | None = None
        feasible = [m for m in self.ms if self.ref is None or selector.feasible(m, self.ref)]
        self.feasible = {m.power_limit for m in feasible}
        self.best = min(feasible or self.ms, key=lambda m: (self.cost[m.power_limit], -m.power_limit))

    def _cost_se(self, m: PowerLimitMeasurement) -> float:
        """Standard error of the cost (delta method; the gradient by finite differences)."""
        base, h = self.cost[m.power_limit], 1e-4
        per_j = (
            (self.selector.cost(_shifted(m, 1, 1 + h), self.ms) - base) / (h * m.energy) if m.energy else 0.0
        )
        per_s = (self.selector.cost(_shifted(m, 1 + h, 1), self.ms) - base) / (h * m.time)
        return m.stderr(per_j, per_s)

    def q(self, dof: int, confidence: float | None = None) -> float:
        return quantile(confidence or self.confidence, dof)

    def rose(self, m: PowerLimitMeasurement, margin: float, confidence: float | None = None) -> bool:
        """Whether ``m`` costs significantly more than ``(1 + margin)`` × the best's cost."""
        b, scale = self.best, 1 + margin
        return significantly_greater(
            self.cost[m.power_limit], self.se[m.power_limit], m.dof,
            scale * self.cost[b.power_limit], scale * self.se[b.power_limit], b.dof,
            confidence or self.confidence,
        )  # fmt: skip

    def status(self, m: PowerLimitMeasurement, slack: float = 0.0, confidence: float | None = None) -> int:
        """``1``: surely feasible, ``-1``: surely infeasible, ``0``: unsure (at the joint interval's ends).

        ``slack > 0``: feasible even ``1 + slack`` times slower and costlier; ``< 0``: infeasible even
        ``1 − slack`` times faster and cheaper.
        """
        if self.ref is None:
            return 1
        key = (m, self.ref, slack, confidence or self.confidence)
        if key not in self._cache:
            self._cache[key] = self._feasibility(m, self.ref, slack, confidence)
        return self._cache[key]

    def _feasibility(
        self, m: PowerLimitMeasurement, ref: PowerLimitMeasurement, slack: float, confidence: float | None
    ) -> int:
        q = self.q(min(m.dof, ref.dof), confidence)
        shifts = []
        for f in (
            lambda x: x.stderr(0, 1) / x.time,
            lambda x: x.stderr(1, 0) / x.energy if x.energy else 0.0,
        ):
            r_m, r_ref = f(m), 0.0 if m is ref else f(ref)  # the reference against itself: one error
            joint = math.hypot(r_m, r_ref)
            if math.isinf(q) or not math.isfinite(joint):
                return 0
            shifts.append((q * r_m * r_m / joint, q * r_ref * r_ref / joint) if joint > 0 else (0.0, 0.0))
        (tm, tr), (em, er) = shifts
        up, down = (1 + max(slack, 0.0)), 1 / (1 - min(slack, 0.0))
        if self.selector.feasible(_shifted(m, (1 + tm) * up, (1 + em) * up), _shifted(ref, 1 - tr, 1 - er)):
            return 1  # feasible even at the worst end
        best = _shifted(m, (1 - tm) * down, (1 - em) * down), _shifted(ref, 1 + tr, 1 + er)
        return 0 if self.selector.feasible(*best) else -1

    def contenders(self) -> list[PowerLimitMeasurement]:
        """Limits not surely infeasible or costlier than the best, and the reference while one is unsure."""
        if self._contenders is None:
            out = [m for m in self.ms if m is self.best or (self.status(m) >= 0 and not self.rose(m, 0.0))]
            if self.ref is not None and self.ref not in out and any(self.status(m) == 0 for m in out):
                out.append(self.ref)
            self._contenders = out
        return list(self._contenders)

    def survey_done(self) -> str | None:
        """Why no lower limit can win, or ``None``.

        After a feasible best, the last ``patience`` limits rose, or turned infeasible, by over ``margin``.
        """
        patience, margin = self.options.patience, self.options.margin
        if len(self.ms) <= patience or self.best.power_limit not in self.feasible:
            return None  # nothing feasible yet: a constraint may be met lower down
        tail, above = self.ms[-patience:], [m.power_limit for m in self.ms[:-patience]]
        names = "/".join(f"{m.power_limit:g}" for m in tail)
        constrained = self.ref is not None and self.feasible.intersection(above)
        if constrained and all(self.status(m, -margin) < 0 for m in tail):
            return f"the last {patience} limit(s) ({names} W) are infeasible by more than {margin:.0%}"
        if all(m is not self.best for m in tail) and all(self.rose(m, margin) for m in tail):
            return (
                f"the cost rose by more than {margin:.0%} at the last {patience} limit(s) ({names} W) "
                f"after the best, {self.best.power_limit:g} W"
            )
        return None

    def settled(self) -> bool:
        """Whether the best is surely within ``tie_tol`` of every other contender (and surely feasible)."""
        tie = self.options.tie_tol
        if tie <= 0:
            return False
        best = self.best
        others = [m for m in self.contenders() if m is not best]
        checks = len(others) + (self.ref is not None and best is not self.ref)
        strict = 1 - (1 - self.confidence) / max(checks, 1)  # Bonferroni: all verdicts hold together
        if self.ref is not None and best is not self.ref and self.status(best, tie, strict) < 1:
            return False
        c, se = self.cost[best.power_limit], self.se[best.power_limit]
        return all(
            significantly_greater(
                self.cost[m.power_limit] + tie * c, self.se[m.power_limit], m.dof, c, se, best.dof, strict
            )
            for m in others
        )

    def tight(self, m: PowerLimitMeasurement) -> bool:
        """Whether ``m``'s time and power per step are known within ``rel_tol`` at ``confidence``."""
        o = self.options
        if m.steps < o.min_steps or m.samples < o.min_samples:  # type: ignore[operator]
            return False
        q = self.q(m.dof)
        return (
            q * m.stderr(0, 1) <= o.rel_tol * m.time and q * m.power_stderr() <= o.rel_tol * m.average_power
        )

    def priority(self, m: PowerLimitMeasurement) -> float:
        """Order of revisits (lower first): the reference, then the lowest optimistic cost."""
        if m is self.ref:
            return -math.inf
        return self.cost[m.power_limit] - self.q(m.dof) * self.se[m.power_limit]


def choose(selector: OptimumSelector, measurements: Measurements, cache: _Cache | None = None) -> float:
    """The choice: the selector's own ``select``, or the least cost among feasible limits, W."""
    if selector.chooses_itself:
        return float(selector.select(list(measurements)))
    return _Judge(
        selector, sorted(measurements, key=lambda m: -m.power_limit), _DEFAULTS, cache
    ).best.power_limit


_DEFAULTS = PowerLimitOptions()


class Planner:
    """The whole profiling policy over ``limits`` (W, highest first): docs/optimizers/power-limit.md."""

    def __init__(
        self,
        selector: OptimumSelector,
        limits: Sequence[float],
        options: PowerLimitOptions,
        profile_steps: int,
        warmup_steps: int,
    ) -> None:
        self.selector, self.limits, self.options = selector, list(limits), options
        self.profile_steps, self.warmup_steps = profile_steps, warmup_steps
        self.early = bool(options.early_stopping) and selector.has_cost
        self._cache: _Cache = {}
        self._decisive: set[float] = set()  # what the choice rested on at the last plan

    def _cap(self, m: PowerLimitMeasurement) -> int:
        """Most measured steps ``m``'s limit may have after one more visit."""
        return min(self.options.visit_cap(self.profile_steps), m.steps + self.profile_steps)

    def next_action(
        self, ms: Measurements, left_out: Sequence[float] = (), budget_left: int | None = None
    ) -> Action:
        """What to do after a visit (or on resuming) from ``ms`` (highest limit first).

        ``left_out``: limits impossible too often; ``budget_left``: steps left when the action is taken.
        """
        limits = [w for w in self.limits if w not in left_out]
        if not limits:
            return Action(Step.DONE, self.limits[0], reason="every limit's measurement was impossible")
        if not ms:
            return Action(Step.MEASURE, limits[0], cap=self.profile_steps)
        shortest = self.warmup_steps + (min(self.options.min_steps, self.profile_steps) if self.early else 1)
        if budget_left is not None and budget_left < shortest:
            return Action(Step.DONE, self.choose(ms), reason="the step budget is spent")
        lowest = min(m.power_limit for m in ms)
        remaining = [w for w in limits if w < lowest]
        if not self.early:
            if remaining:
                return Action(Step.MEASURE, remaining[0], cap=self.profile_steps)
            return Action(Step.DONE, self.choose(ms), reason="every limit was profiled")
        if len(self._cache) > 5000:
            self._cache.clear()
        judge = _Judge(self.selector, ms, self.options, self._cache)
        reason = judge.survey_done()
        if reason is None and remaining:
            return Action(Step.MEASURE, remaining[0], cap=self.profile_steps)
        return self._after_survey(
            judge, reason or f"every limit down to {lowest:g} W was profiled", budget_left
        )

    def _after_survey(self, judge: _Judge, reason: str, budget_left: int | None) -> Action:
        """Measure a contender again, or what the choice rests on to Zeus's length, or decide."""
        choice = self.choose(judge.ms)
        self._decisive = {m.power_limit for m in judge.ms if m.power_limit == choice or m is judge.ref}
        contenders = judge.contenders()
        room = [
            m for m in judge.ms if self._cap(m) - m.steps >= self.options.min_steps and not judge.tight(m)
        ]
        unsure = [m for m in contenders if m in room]
        short = [m for m in room if m.power_limit in self._decisive and m.steps < self.profile_steps]
        if len(contenders) > 1 and unsure and not judge.settled():
            if budget_left is not None:  # only the most promising that the budget pays for
                affordable = budget_left // (self.warmup_steps + self.profile_steps)
                unsure = sorted(unsure, key=judge.priority)[: max(2, affordable)]
            target = min(unsure, key=lambda m: (m.steps, judge.priority(m), -m.power_limit))
        elif short:
            target = min(short, key=lambda m: (m.steps, -m.power_limit))
        else:
            return Action(Step.DONE, choice, reason=reason)
        return Action(Step.MEASURE, target.power_limit, again=True, cap=self._cap(target), reason=reason)

    def choose(self, ms: Measurements) -> float:
        """The choice from ``ms`` (:func:`choose`), W."""
        return choose(self.selector, ms, self._cache)

    def enough(self, running: PowerLimitMeasurement, ms: Measurements) -> bool:
        """Whether a revisit (``running``: its limit's figures so far) may stop before its cap (plan, 3)."""
        if not self.early or running.samples < self.options.min_samples:  # type: ignore[operator]
            return False
        judge = _Judge(self.selector, ms, self.options, self._cache)
        if judge.tight(running):
            return True
        if running.steps < self.profile_steps and running.power_limit in self._decisive:
            return False
        contenders = judge.contenders()
        return len(contenders) < 2 or all(c is not running for c in contenders) or judge.settled()


class PlanThread:
    """Plans, judges and writes files off the training thread, in order (docs: "Off the training thread").

    ``wait()``: whether taking a plan waits for it (a simulated clock, so runs repeat exactly).
    """

    def __init__(self, wait: Callable[[], bool]) -> None:
        self._wait = wait
        self._executor: ThreadPoolExecutor | None = None
        self._plan: Future[Action] | None = None
        self._asked = 0

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_executor": None, "_plan": None}  # a copy (ddp_spawn) plans anew

    @property
    def pending(self) -> bool:
        """Whether a plan is being made or waits to be taken."""
        return self._plan is not None

    def submit(self, plan: Callable[..., Action], *args: Any) -> None:
        """Start making a plan (``plan(*args)``, on the planner thread)."""
        self._plan, self._asked = self.post(plan, *args), 0

    def post(self, work: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run ``work(*args)`` on the planner thread (after what is queued), e.g. writing a file."""
        if self._executor is None:  # started by on_train_begin, never on a step
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="zeus-plo-planner")
        return self._executor.submit(work, *args)

    def ready(self) -> bool:
        """Whether :meth:`take` may be called now (asked once per step; the same answer on every rank)."""
        self._asked += 1  # waited for from the third step on (steps of microseconds would spend the budget)
        if self._plan is None or self._wait() or self._asked > 2:
            return True
        return distributed.world_size() == 1 and self._plan.done()  # else the same step on every rank

    def take(self) -> Action:
        """The plan (waiting for it if needed); an error made while planning is raised here."""
        assert self._plan is not None
        plan, self._plan = self._plan, None
        return plan.result()

    def settle(self) -> None:
        """Wait until everything queued on the planner thread is done (a plan stays to be taken)."""
        if self._executor is not None:
            self.post(lambda: None).result()

    def close(self) -> None:
        """Stop the planner thread (after what is queued)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
