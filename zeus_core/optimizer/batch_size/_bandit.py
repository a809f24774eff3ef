"""The batch-size bandit: pruning exploration, then unimodal Thompson sampling, within a budget.

Each allowed batch size is an arm; pulling it means running one trial of the recurring job with
that batch size, and its outcome is the trial's Zeus cost (J) and whether it reached the target.
The bandit is a pure function of the job spec and the observations in the order they arrived, so
a service can rebuild it from its database at any time and get the same answers. The algorithm
is described once, in docs/optimizers/batch-size.md; in short:

* **Pruning** walks the batch sizes from the default downwards, then upwards. A walk ends at an
  arm that fails (did not converge, or cost more than ``beta_knob`` × the best), or before an arm
  that its explored neighbours predict to fail. When the round ends, arms costlier than
  ``beta_knob`` × the round's best are dropped.
* **Thompson sampling** then samples the leader (lowest posterior mean), its neighbours and the
  runner-up (:mod:`~zeus_core.optimizer.batch_size._posterior` models each arm's cost).
* **The budget** (:mod:`~zeus_core.optimizer.batch_size._budget`): the default batch size is
  measured first, and the first trial of each of its two neighbours is always allowed (nothing
  can be learnt without them). Any other trial is handed out only while the job's cumulative cost
  plus the trial's pessimistic cost stays within ``(1 + slack)`` × the default's; otherwise the
  safe arm is played (the default, or an arm whose pessimistic cost is below the default's mean
  cost), and exploration waits for the savings.
* **Early stopping**: a trial stops once its cost, plus the cost of the fewest epochs it can
  still need (the fewest any converged trial took), passes ``beta_knob`` × the best converged
  cost: the lowest mean converged cost of any arm.

Phases (a :class:`Phase`) change only in :meth:`BatchSizeBandit.observe`: ``pruning`` ->
``thompson`` when the last of ``num_pruning_rounds`` rounds ends, or earlier after a round that
passed every surviving arm.
"""

from __future__ import annotations

import hashlib
import logging
import math
import random
from dataclasses import replace
from enum import Enum
from typing import Any, Sequence

from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.batch_size._budget import ExplorationBudget, account
from zeus_core.optimizer.batch_size._observation import Observation
from zeus_core.optimizer.batch_size._posterior import ArmPosterior, posteriors
from zeus_core.optimizer.batch_size._spec import JobSpec

__all__ = ["Observation", "Phase", "ArmPosterior", "BatchSizeBandit"]

logger = logging.getLogger(__name__)

# How many posterior standard deviations above its mean an explored arm's pessimistic cost is.
_PESSIMISM_STD = 1.0
# A pruning walk ends after this many arms in a row each cost clearly more than the one before
# (cost is unimodal in the batch size; one rise may be a bump of a real cost curve).
_PATIENCE = 2
# Largest factor (as its logarithm) by which an unexplored arm's predicted cost may exceed its
# explored neighbour's: e^40 ≈ 2e17 is beyond any budget, and keeps every product finite.
_MAX_LOG_RISE = 40.0


class Phase(str, Enum):
    """The bandit's phase (compares equal to its string value).

    Example:
        >>> Phase.PRUNING == "pruning"
        True
    """

    PRUNING = "pruning"
    THOMPSON = "thompson"


def _trial_rng(seed: int, trial_number: int) -> random.Random:
    digest = hashlib.sha256(f"zeus-bso/{seed}/{trial_number}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


class BatchSizeBandit:
    """Chooses the batch size of each trial of a recurring job (see the module docstring).

    Args:
        spec: The job and the bandit's knobs.
        observations: Finished trials so far, in the order they finished.

    Raises:
        ZeusConfigError: An observation names a batch size the spec does not allow.

    Example:
        >>> spec = JobSpec("job", (32, 64, 128), 64, target_metric=0.9, max_power_w=300.0, slack=0.1)
        >>> bandit = BatchSizeBandit(spec)
        >>> bandit.next_batch_size(trial_number=1)
        64
        >>> bandit.observe(Observation(64, cost=1000.0, converged=True))
        >>> bandit.next_batch_size(trial_number=2)
        32
        >>> bandit.early_stop_threshold()
        2000.0
    """

    def __init__(self, spec: JobSpec, observations: Sequence[Observation] = ()) -> None:
        if not isinstance(spec, JobSpec):
            raise ZeusConfigError(f"BatchSizeBandit: spec must be a JobSpec, got {type(spec).__name__}.")
        self._spec = spec
        self._observations: list[Observation] = []
        self._history: dict[int, list[Observation]] = {b: [] for b in spec.batch_sizes}
        self._phase = Phase.PRUNING
        self._round = 0
        self._survivors: list[int] = list(spec.batch_sizes)
        self._default = spec.default_batch_size
        self._round_results: dict[int, tuple[float, bool]] = {}
        self._cache: dict[str, Any] = {}  # derived values; cleared by observe()
        if spec.num_pruning_rounds == 0:
            self._phase = Phase.THOMPSON
        for obs in observations:
            self.observe(obs)

    # ----------------------------------------------------------------- state
    @property
    def spec(self) -> JobSpec:
        """The job spec."""
        return self._spec

    @property
    def phase(self) -> Phase:
        """``"pruning"`` or ``"thompson"``."""
        return self._phase

    @property
    def arms(self) -> list[int]:
        """The batch sizes still in play (not pruned), ascending."""
        return list(self._survivors)

    @property
    def pruning_round(self) -> int:
        """The current pruning round (0-based); once pruning is over, the rounds it took."""
        return self._round

    @property
    def observations(self) -> list[Observation]:
        """Every observation so far, in order."""
        return list(self._observations)

    # ------------------------------------------------------------- updating
    def observe(self, obs: Observation) -> None:
        """Add one finished trial.

        Args:
            obs: The trial's batch size, Zeus cost (J) and whether it converged.

        Raises:
            ZeusConfigError: ``obs.batch_size`` is not one of the spec's batch sizes.
        """
        if not isinstance(obs, Observation):
            raise ZeusConfigError(
                f"BatchSizeBandit.observe: expected an Observation, got {type(obs).__name__}."
            )
        if obs.batch_size not in self._history:
            raise ZeusConfigError(
                f"BatchSizeBandit.observe: batch_size={obs.batch_size} is not one of the job's batch sizes "
                f"{self._spec.batch_sizes}."
            )
        threshold = self.early_stop_threshold()
        self._cache.clear()
        self._observations.append(obs)
        self._history[obs.batch_size].append(obs)
        if self._phase is Phase.PRUNING:
            self._observe_pruning(obs, threshold)

    def _observe_pruning(self, obs: Observation, threshold: float | None) -> None:
        down, up = self._directions()
        if obs.batch_size not in down + up or obs.batch_size in self._round_results:
            return
        cost = obs.recurring_cost
        passed = obs.converged and (threshold is None or cost <= threshold)
        self._round_results[obs.batch_size] = (cost, passed)
        logger.debug(
            "%s pruning round %d: batch size %d %s (recurring cost %.1f J)",
            self._spec.job_id,
            self._round,
            obs.batch_size,
            "passed" if passed else "failed",
            cost,
        )
        if self._frontiers() == (None, None):
            self._finish_round()

    def _finish_round(self) -> None:
        passed = {b: c for b, (c, ok) in self._round_results.items() if ok}
        beta = self._spec.beta_knob
        if passed and beta is not None:
            # The best cost of the whole round is known now: drop what costs over beta × it.
            cheapest = min(passed.values())
            passed = {b: c for b, c in passed.items() if c <= beta * cheapest}
        # Every survivor passed: the next round would explore the same arms against the same
        # evidence, so pruning has converged and ends early.
        all_passed = len(passed) == len(self._survivors)
        if passed:
            self._survivors = sorted(passed)
            self._default = min(passed, key=lambda b: (passed[b], b))
        else:
            logger.warning(
                "%s: no batch size reached the target in pruning round %d; nothing pruned.",
                self._spec.job_id,
                self._round,
            )
        self._round += 1
        self._round_results = {}
        self._cache.clear()  # the posteriors cover the survivors
        if all_passed or self._round >= self._spec.num_pruning_rounds:
            self._phase = Phase.THOMPSON
        logger.debug(
            "%s: pruning round %d done; arms %s, default %d, phase %s",
            self._spec.job_id,
            self._round,
            self._survivors,
            self._default,
            self._phase.value,
        )

    def _directions(self) -> tuple[list[int], list[int]]:
        down = sorted((b for b in self._survivors if b <= self._default), reverse=True)
        up = sorted(b for b in self._survivors if b > self._default)
        return down, up

    def _frontiers(self) -> tuple[int | None, int | None]:
        """The next unexplored arm of the downward and the upward walk (None: the walk ended)."""
        down, up = self._directions()
        return self._walk(down), self._walk(up)

    def _walk(self, direction: list[int]) -> int | None:
        """The next unexplored arm of a walk, or None once it ended (see the module docstring)."""
        rises = 0
        before: int | None = None
        for b in direction:
            result = self._round_results.get(b)
            if result is None:
                threshold = self.early_stop_threshold()
                if threshold is not None and self._predicted_cost(b) > threshold:
                    return None  # its neighbours say it would cost more than beta × the best
                return b
            if not result[1]:
                return None
            rises = rises + 1 if before is not None and self._clearly_costlier(b, before) else 0
            if rises >= _PATIENCE:
                return None  # two rises in a row: past the bottom of the valley
            before = b
        return None

    def _clearly_costlier(self, a: int, b: int) -> bool:
        """Whether arm ``a``'s posterior mean exceeds arm ``b``'s by more than one standard deviation."""
        post = self.posteriors()
        pa, pb = post[a], post[b]
        spread = math.hypot(pa.std, pb.std) if math.isfinite(pa.std) and math.isfinite(pb.std) else 0.0
        return pa.mean > pb.mean + spread

    # ------------------------------------------------------------- deciding
    def next_batch_size(self, trial_number: int, pending: Sequence[int] = ()) -> int:
        """The batch size for a new trial.

        During pruning this is the next unexplored arm of a walk (downwards first), skipping one
        already handed to a running trial; when every candidate is running, the cheapest arm
        known so far. During Thompson sampling, an arm without observations is tried first; then
        one posterior sample is drawn for the leader (the arm with the lowest posterior mean cost),
        each of its neighbouring arms and the runner-up, and the cheapest sample wins. Either way
        the choice must fit the exploration budget, or the safe arm is played instead.

        Args:
            trial_number: The trial's number; with ``spec.seed`` it seeds this choice, so asking
                again for the same trial gives the same answer.
            pending: Batch sizes of trials handed out but not yet finished.

        Returns:
            One of the spec's batch sizes.
        """
        candidates = self._candidates(trial_number, set(pending))
        if self._spec.slack is None:
            return candidates[0]
        budget = self._budget_with(pending)
        for b in candidates:
            if self._exempt(b) or budget.allows(self.pessimistic_cost(b)):
                return b
        if budget.default_recurrence_cost_j is None:
            return self._spec.default_batch_size  # the budget needs the default measured first
        safe = self._safe_arm()
        logger.debug(
            "%s trial %d: batch sizes %s would break the budget (%.1f J left); playing %d",
            self._spec.job_id,
            trial_number,
            candidates,
            budget.remaining_j,
            safe,
        )
        return safe

    def _candidates(self, trial_number: int, busy: set[int]) -> list[int]:
        """What the bandit would play without a budget, in order of preference."""
        if self._phase is Phase.PRUNING:
            walks = [b for b in self._frontiers() if b is not None and b not in busy]
            return walks or [self._best_known()]
        rng = _trial_rng(self._spec.seed, trial_number)
        posteriors = self.posteriors()
        untried = [b for b in self._survivors if posteriors[b].count == 0]
        free = [b for b in untried if b not in busy]
        if free:
            return [free[0] if len(free) == 1 else rng.choice(free)]
        candidates = {b: p for b, p in posteriors.items() if p.count > 0 or self._spec.prior_mean is not None}
        if not candidates:
            return [rng.choice(untried)]
        candidates = self._neighbourhood(candidates)
        draws = {b: rng.gauss(p.mean, p.std) if p.std > 0 else p.mean for b, p in candidates.items()}
        return [min(draws, key=lambda b: (draws[b], b))]

    def _neighbourhood(self, candidates: dict[int, ArmPosterior]) -> dict[int, ArmPosterior]:
        """The leader (lowest posterior mean), its neighbouring surviving arms, and the runner-up."""
        known = {b: p.mean for b, p in candidates.items() if p.count > 0}
        if not known:
            return candidates
        ranked = sorted(known, key=lambda b: (known[b], b))
        arms = [b for b in self._survivors if b in candidates]
        i = arms.index(ranked[0])
        near = set(arms[max(0, i - 1) : i + 2]) | set(ranked[1:2])
        return {b: p for b, p in candidates.items() if b in near}

    def _best_known(self) -> int:
        means = {b: p.mean for b, p in self.posteriors().items() if p.count > 0}
        if not means:
            return self._default
        return min(means, key=lambda b: (means[b], b))

    def _exempt(self, batch_size: int) -> bool:
        """Whether this is the first trial of one of the default's neighbours (never gated)."""
        if self._history[batch_size]:
            return False
        sizes = self._spec.batch_sizes
        i = sizes.index(self._spec.default_batch_size)
        return batch_size in sizes[max(0, i - 1) : i + 2]

    def _safe_arm(self) -> int:
        """The default, or an explored arm whose pessimistic cost is below the default's mean cost.

        An arm proves cheaper than the default only when its pessimistic cost (mean plus one
        standard deviation) beats the default's posterior mean; comparing pessimistic costs alone
        would favour the arm played most (the smallest standard deviation), even one that costs
        more than the default, and lock the job into it once the budget is spent.
        """
        posteriors = self.posteriors()
        default = self._spec.default_batch_size
        known = [b for b, p in posteriors.items() if p.count > 0]
        if not known:
            return default

        def bound(b: int) -> float:
            # Playing the default costs what the budget charges against it: its mean, not a bound.
            return posteriors[b].mean if b == default else self.pessimistic_cost(b)

        return min(known, key=lambda b: (bound(b), b))

    # --------------------------------------------------------------- budget
    def budget(self) -> ExplorationBudget:
        """The job's cumulative cost so far against the default's, and the budget left (J)."""
        if "budget" not in self._cache:
            self._cache["budget"] = account(
                self._observations, self._spec.default_batch_size, self._spec.slack
            )
        budget: ExplorationBudget = self._cache["budget"]
        return budget

    def _budget_with(self, pending: Sequence[int]) -> ExplorationBudget:
        """The budget with each running trial counted as a recurrence at its pessimistic cost."""
        budget = self.budget()
        per_recurrence = budget.default_recurrence_cost_j
        if not pending or per_recurrence is None:
            return budget
        return replace(
            budget,
            cost_j=budget.cost_j + sum(self.pessimistic_cost(b) for b in pending),
            default_cost_j=budget.default_cost_j + len(pending) * per_recurrence,
            estimated_recurrences=budget.estimated_recurrences + len(pending),
        )

    def pessimistic_cost(self, batch_size: int) -> float:
        """What one more recurrence with ``batch_size`` costs at worst, as the budget counts it, J.

        An explored arm: its posterior mean plus one posterior standard deviation. An arm never
        played: what its explored neighbours predict (:meth:`_predicted_cost`). ``inf`` before any
        arm was played.
        """
        p = self.posteriors().get(batch_size)
        if p is not None and p.count > 0:
            return p.mean + _PESSIMISM_STD * p.std if math.isfinite(p.std) else p.mean
        return self._predicted_cost(batch_size)

    def _predicted_cost(self, batch_size: int) -> float:
        """An arm's cost as its explored neighbours suggest, J (an explored arm's: its posterior mean).

        On each side, the nearest explored arm's posterior mean; where cost rose from the next
        explored arm towards it, extrapolated along that rise (linearly in log cost against log
        batch size). The larger of the two sides. ``inf`` before any arm was played.
        """
        means = {b: q.mean for b, q in self.posteriors().items() if q.count > 0}
        if batch_size in means:
            return means[batch_size]
        if not means:
            return math.inf
        x = math.log2(batch_size)
        guesses = []
        for side in (
            sorted((b for b in means if b < batch_size), reverse=True),
            sorted(b for b in means if b > batch_size),
        ):
            if not side:
                continue
            guess = means[side[0]]
            if len(side) > 1 and means[side[1]] > 0 and means[side[0]] > means[side[1]]:
                x1, x2 = math.log2(side[0]), math.log2(side[1])
                # In logs: a rise from 1 µJ to 1e16 J over the 31 doublings of a batch size must not
                # overflow a float (it would stop every later request on the job).
                rise = (math.log(means[side[0]]) - math.log(means[side[1]])) * (x - x1) / (x1 - x2)
                guess *= math.exp(min(rise, _MAX_LOG_RISE))
            guesses.append(guess)
        return max(guesses)

    def posteriors(self) -> dict[int, ArmPosterior]:
        """Belief about each surviving arm's mean cost, J (effective costs, see the module docs)."""
        if "posteriors" not in self._cache:
            windows = {b: self._window(b) for b in self._survivors}
            self._cache["posteriors"] = posteriors(self._spec, windows, self._best_converged_cost())
        return dict(self._cache["posteriors"])

    def _best_converged_cost(self) -> float | None:
        """The lowest mean recurring cost of an arm's windowed converged trials, J (None: none yet).

        An arm's mean, not the cheapest single trial: the minimum of many noisy runs falls as
        trials accumulate, and beta_knob × a lucky run would stop the best arm's own slower runs.
        """
        if "best" not in self._cache:
            means = []
            for b in self._history:
                costs = [o.recurring_cost for o in self._window(b) if o.converged]
                if costs:
                    means.append(sum(costs) / len(costs))
            self._cache["best"] = min(means) if means else None
        best: float | None = self._cache["best"]
        return best

    def _window(self, batch_size: int) -> list[Observation]:
        history = self._history[batch_size]
        w = self._spec.window_size
        return history[-w:] if w else history

    # ------------------------------------------------------- early stopping
    def early_stop_threshold(self) -> float | None:
        """``beta_knob`` × the best converged cost so far, J; ``None`` before any or when disabled.

        The best converged cost is the lowest mean of an arm's windowed converged trials.
        """
        beta = self._spec.beta_knob
        best = self._best_converged_cost()
        if beta is None or best is None:
            return None
        return beta * best

    def _fewest_epochs(self) -> int:
        """The fewest epochs any windowed converged trial took to reach the target (1 if unknown)."""
        counts = [o.epochs for b in self._history for o in self._window(b) if o.converged and o.epochs > 0]
        return min(counts) if counts else 1

    def should_stop(self, cost_so_far: float, epoch: int, next_epoch_cost: float | None = None) -> bool:
        """Whether a running trial must stop now (it then counts as failed unless it converged).

        Args:
            cost_so_far: The trial's accumulated Zeus cost, J.
            epoch: Epochs completed so far.
            next_epoch_cost: Optional estimate of one more epoch's cost, J (e.g. the last epoch's);
                when given, the trial also stops if the epochs it must still run (at least one,
                and at least as many as the fewest any converged trial took) would cross the
                threshold, instead of finding out later.

        Returns:
            ``True`` when ``epoch >= max_epochs`` or the cost (plus the look-ahead, if given)
            exceeds :meth:`early_stop_threshold`.
        """
        if epoch >= self._spec.max_epochs:
            return True
        threshold = self.early_stop_threshold()
        if threshold is None:
            return False
        if cost_so_far > threshold:
            return True
        if next_epoch_cost is None:
            return False
        ahead = max(1, self._fewest_epochs() - epoch)
        return cost_so_far + ahead * next_epoch_cost > threshold

    # -------------------------------------------------------------- report
    def summary(self) -> dict[str, Any]:
        """A JSON-safe picture of the bandit: phase, arms, posteriors (J), best arm, threshold, budget."""
        posteriors = self.posteriors()
        per_arm: dict[str, dict[str, Any]] = {}
        for b in self._spec.batch_sizes:
            history = self._history[b]
            p = posteriors.get(b)
            per_arm[str(b)] = {
                "pruned": b not in self._survivors,
                "observations": len(history),
                "failures": sum(not o.converged for o in history),
                "posterior_mean_cost": _json_float(p.mean) if p else None,
                "posterior_std_cost": _json_float(p.std) if p else None,
            }
        known = {b: p.mean for b, p in posteriors.items() if p.count > 0}
        best = min(known, key=lambda b: (known[b], b)) if known else None
        return {
            "job_id": self._spec.job_id,
            "phase": self._phase.value,
            "pruning_round": self._round,
            "arms": list(self._survivors),
            "default_batch_size": self._default,
            "num_observations": len(self._observations),
            "best_batch_size": best,
            "best_converged_cost": _json_float(self._best_converged_cost()),
            "early_stop_threshold": _json_float(self.early_stop_threshold()),
            "budget": self.budget().to_dict(),
            "per_arm": per_arm,
        }


def _json_float(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)
