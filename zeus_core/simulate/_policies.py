"""Policies the trace-driven simulator compares: ours, Zeus 0.16, Default, Grid Search, fixed ones.

A policy picks the (batch size, power limit) of every trial and decides when a running trial stops.
Returning ``None`` as the power limit asks for Zeus's just-in-time power-limit choice: the
simulator profiles the power limits during the first epoch of a batch size's first trial and uses
the cheapest one from then on (see :mod:`zeus_core.simulate._simulator`).

Write your own by implementing :class:`Policy` and registering a factory in :data:`POLICIES`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Protocol

from zeus_core._cost import zeus_cost
from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.batch_size import BatchSizeBandit, JobSpec, Observation
from zeus_core.simulate._traces import WorkloadTrace

__all__ = [
    "Choice",
    "TrialOutcome",
    "Policy",
    "ZeusPolicy",
    "DefaultPolicy",
    "GridSearchPolicy",
    "FixedPolicy",
    "PolicyFactory",
    "POLICIES",
    "make_policy",
]


@dataclass(frozen=True)
class Choice:
    """The knobs of one trial.

    Attributes:
        batch_size: Batch size.
        power_limit_w: Power limit, W; ``None`` = just-in-time profiling picks it.

    Example:
        >>> Choice(64, None).power_limit_w is None
        True
    """

    batch_size: int
    power_limit_w: int | None


@dataclass(frozen=True)
class TrialOutcome:
    """What a policy learns when a trial ends.

    Attributes:
        batch_size: Batch size used.
        power_limit_w: Power limit used after profiling, W.
        cost_j: Zeus cost of the trial, J.
        converged: Whether it reached the target.
        overhead_j: One-time part of ``cost_j`` (power-limit profiling beyond a normal epoch), J.
        epochs: Epochs the trial ran.

    Example:
        >>> TrialOutcome(32, 250, cost_j=1000.0, converged=True).epochs
        0
    """

    batch_size: int
    power_limit_w: int
    cost_j: float
    converged: bool
    overhead_j: float = 0.0
    epochs: int = 0


class Policy(Protocol):
    """A knob-choosing policy for one recurring job.

    Example:
        A policy that always plays batch size 32 at a just-in-time power limit:

        >>> class Always32:
        ...     name = "always-32"
        ...     def choose(self, trial_number: int) -> Choice:
        ...         return Choice(32, None)
        ...     def observe(self, outcome: TrialOutcome) -> None:
        ...         pass
        ...     def should_stop(self, cost_so_far: float, epoch: int, next_epoch_cost: float) -> bool:
        ...         return False
        >>> Always32().choose(1).batch_size
        32
    """

    name: str

    def choose(self, trial_number: int) -> Choice:
        """The knobs of trial ``trial_number`` (1-based, counted over all recurrences)."""
        ...

    def observe(self, outcome: TrialOutcome) -> None:
        """Learn from a finished trial."""
        ...

    def should_stop(self, cost_so_far: float, epoch: int, next_epoch_cost: float | None) -> bool:
        """Whether the running trial stops now.

        ``cost_so_far`` is the trial's recurring cost so far (one-time profiling overhead left
        out), J; ``next_epoch_cost`` the cost of one more epoch at the chosen limit (``None`` if
        unknown), J.
        """
        ...


class ZeusPolicy:
    """Ours: the suite's batch-size bandit across recurrences, JIT power limits within each trial.

    The bandit is conservative as the service's is by default (``slack`` 0): its budget measures
    the default with what each converged trial of the default batch size would have cost at the
    maximum power limit (the Default policy), which the power profile of the first epoch gives.

    Args:
        trace: The workload.
        seed: Seeds Thompson sampling.
        eta_knob: Weight of energy in the Zeus cost.
        beta_knob: Early-stop factor (``None`` disables it).
        window_size: Bandit window per arm; 0 (all observations) as in the paper's artifact, since
            the traces do not drift. The service's :class:`JobSpec` defaults to 10.
        num_pruning_rounds: Most pruning rounds (pruning ends early after a round every arm passes);
            :class:`JobSpec`'s default.
        slack: The exploration budget's slack (:class:`JobSpec`'s default 0; ``None``: no budget).

    Example:
        >>> from zeus_core.simulate import load_nsdi23_traces
        >>> trace = load_nsdi23_traces("v100")[4]  # squad, default batch size 32
        >>> ZeusPolicy(trace, seed=1).choose(1).batch_size  # the default is measured first
        32
    """

    name = "zeus"

    def __init__(
        self,
        trace: WorkloadTrace,
        seed: int,
        eta_knob: float = 0.5,
        beta_knob: float | None = 2.0,
        window_size: int = 0,
        num_pruning_rounds: int = JobSpec.num_pruning_rounds,
        slack: float | None = JobSpec.slack,
    ) -> None:
        w = trace.workload
        self._trace = trace
        self.spec = JobSpec(
            job_id=f"{w.name}@{trace.gpu}",
            batch_sizes=trace.batch_sizes,
            default_batch_size=w.default_batch_size,
            target_metric=w.target_metric,
            higher_is_better=w.higher_is_better,
            max_epochs=w.max_epochs,
            eta_knob=eta_knob,
            beta_knob=beta_knob,
            window_size=window_size,
            num_pruning_rounds=num_pruning_rounds,
            max_power_w=trace.max_power_w,
            seed=seed,
            slack=slack,
        )
        self.bandit = BatchSizeBandit(self.spec)
        default = w.default_batch_size
        at_max = trace.epochs[(default, max(trace.power_limits_for(default)))]
        self._default_epoch_cost = zeus_cost(at_max.energy_j, at_max.time_s, eta_knob, trace.max_power_w)

    def choose(self, trial_number: int) -> Choice:
        """The bandit's batch size; JIT power limit."""
        return Choice(self.bandit.next_batch_size(trial_number), None)

    def observe(self, outcome: TrialOutcome) -> None:
        """Feed the trial's cost, overhead and epochs to the bandit.

        A converged trial of the default batch size also says what the same run would have cost
        at the maximum power limit (the Default policy): the budget's measured reference.
        """
        reference = None
        if outcome.converged and outcome.batch_size == self.spec.default_batch_size:
            reference = outcome.epochs * self._default_epoch_cost
        self.bandit.observe(
            Observation(
                outcome.batch_size,
                outcome.cost_j,
                outcome.converged,
                min(outcome.overhead_j, outcome.cost_j),
                outcome.epochs,
                reference,
            )
        )

    def should_stop(self, cost_so_far: float, epoch: int, next_epoch_cost: float | None) -> bool:
        """The bandit's early-stop rule."""
        return self.bandit.should_stop(cost_so_far, epoch, next_epoch_cost)


class FixedPolicy:
    """Always the same configuration, no early stopping (stops at ``max_epochs`` only).

    Args:
        trace: The workload.
        batch_size: Batch size.
        power_limit_w: Power limit, W; ``None``: the just-in-time choice (profiled in the first
            trial's first epoch, as ours and Zeus do).

    Example:
        >>> from zeus_core.simulate import load_nsdi23_traces
        >>> FixedPolicy(load_nsdi23_traces("v100")[4], 16, 200).choose(7)
        Choice(batch_size=16, power_limit_w=200)
    """

    name = "fixed"

    def __init__(self, trace: WorkloadTrace, batch_size: int, power_limit_w: int | None) -> None:
        known = (
            batch_size in trace.batch_sizes
            if power_limit_w is None
            else (batch_size, power_limit_w) in trace.epochs
        )
        if not known:
            where = (
                f"batch size {batch_size}" if power_limit_w is None else f"({batch_size}, {power_limit_w} W)"
            )
            raise ZeusConfigError(f"FixedPolicy: {where} is not in the {trace.workload.name} trace.")
        self._choice = Choice(batch_size, power_limit_w)
        self._max_epochs = trace.workload.max_epochs

    def choose(self, trial_number: int) -> Choice:
        """The fixed configuration."""
        return self._choice

    def observe(self, outcome: TrialOutcome) -> None:
        """Nothing to learn."""

    def should_stop(self, cost_so_far: float, epoch: int, next_epoch_cost: float | None) -> bool:
        """Only the epoch budget stops a trial."""
        return epoch >= self._max_epochs


class DefaultPolicy(FixedPolicy):
    """The user's default batch size at the maximum power limit, every time.

    Example:
        >>> from zeus_core.simulate import load_nsdi23_traces
        >>> DefaultPolicy(load_nsdi23_traces("v100")[4]).choose(1)
        Choice(batch_size=32, power_limit_w=250)
    """

    name = "default"

    def __init__(self, trace: WorkloadTrace) -> None:
        bs = trace.workload.default_batch_size
        super().__init__(trace, bs, max(trace.power_limits_for(bs)))


class GridSearchPolicy:
    """Try every (batch size, power limit) in turn, one per recurrence, then keep the cheapest.

    The default batch size's configurations come first (so a working configuration is known
    early), then the other batch sizes ascending; power limits from the largest down. Trials use
    the same early stopping as Zeus (``beta_knob`` × the best converged cost); when an explored
    configuration fails, the recurrence is re-run at the best one found so far.

    Args:
        trace: The workload.
        beta_knob: Early-stop factor (``None`` disables it).

    Example:
        >>> from zeus_core.simulate import load_nsdi23_traces
        >>> GridSearchPolicy(load_nsdi23_traces("v100")[4]).choose(1)  # the default first, top limit first
        Choice(batch_size=32, power_limit_w=250)
    """

    name = "grid"

    def __init__(self, trace: WorkloadTrace, beta_knob: float | None = 2.0) -> None:
        default = trace.workload.default_batch_size
        order = [default] + [bs for bs in trace.batch_sizes if bs != default]
        self._configs = [
            Choice(bs, pl) for bs in order for pl in sorted(trace.power_limits_for(bs), reverse=True)
        ]
        self._beta = beta_knob
        self._max_epochs = trace.workload.max_epochs
        self._next = 0
        self._retry = False
        self._best: tuple[float, Choice] | None = None

    def choose(self, trial_number: int) -> Choice:
        """The next untried configuration (or the best one to re-run a failure), then the best one."""
        exploring = self._next < len(self._configs)
        if exploring and not (self._retry and self._best is not None):
            return self._configs[self._next]
        if self._best is None:
            raise ZeusConfigError(
                "GridSearchPolicy: no configuration reached the target; the target is unreachable."
            )
        return self._best[1]

    def observe(self, outcome: TrialOutcome) -> None:
        """Advance the grid; remember the cheapest converged configuration."""
        if self._retry and self._best is not None:
            self._retry = not outcome.converged
        elif self._next < len(self._configs):
            self._next += 1
            self._retry = not outcome.converged
        if outcome.converged and (self._best is None or outcome.cost_j < self._best[0]):
            self._best = (outcome.cost_j, Choice(outcome.batch_size, outcome.power_limit_w))

    def should_stop(self, cost_so_far: float, epoch: int, next_epoch_cost: float | None) -> bool:
        """Epoch budget, or ``beta_knob`` × the best converged cost (including the next epoch)."""
        if epoch >= self._max_epochs:
            return True
        if self._beta is None or self._best is None:
            return False
        threshold = self._beta * self._best[0]
        return cost_so_far > threshold or (
            next_epoch_cost is not None and cost_so_far + next_epoch_cost > threshold
        )


PolicyFactory = Callable[[WorkloadTrace, int, float, "float | None"], Policy]
"""Builds a policy from (trace, seed, eta_knob, beta_knob)."""


def _published_zeus(trace: WorkloadTrace, seed: int, eta: float, beta: float | None) -> Policy:
    from zeus_core.simulate._published import PublishedZeusPolicy

    return PublishedZeusPolicy(trace, seed, math.inf if beta is None else beta)


POLICIES: dict[str, PolicyFactory] = {
    "zeus": lambda trace, seed, eta, beta: ZeusPolicy(trace, seed, eta, beta),
    "default": lambda trace, seed, eta, beta: DefaultPolicy(trace),
    "grid": lambda trace, seed, eta, beta: GridSearchPolicy(trace, beta),
    "zeus-0.16": _published_zeus,
}
"""Policies by name, for :func:`make_policy` and ``zeus-suite reproduce``.

Example:
    >>> sorted(POLICIES)
    ['default', 'grid', 'zeus', 'zeus-0.16']
"""


def make_policy(
    name: str, trace: WorkloadTrace, seed: int, eta_knob: float = 0.5, beta_knob: float | None = 2.0
) -> Policy:
    """Build a registered policy by name.

    ``zeus`` is ours (:class:`ZeusPolicy`: the suite's bandit, conservative by default),
    ``zeus-0.16`` the published one (needs ``zeus==0.16.0``), ``default`` and ``grid`` the
    paper's baselines.

    Raises:
        ZeusConfigError: ``name`` is not registered.

    Example:
        >>> from zeus_core.simulate import load_nsdi23_traces
        >>> make_policy("default", load_nsdi23_traces("v100")[4], seed=1).name
        'default'
    """
    try:
        factory = POLICIES[name]
    except KeyError:
        raise ZeusConfigError(
            f"make_policy: unknown policy {name!r}; choose one of {sorted(POLICIES)}."
        ) from None
    return factory(trace, seed, eta_knob, beta_knob)
