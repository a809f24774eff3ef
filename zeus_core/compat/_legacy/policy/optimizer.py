"""Zeus's ``zeus._legacy.policy.optimizer``: the published policies' names over the suite's.

``PruningGTSBatchSizeOptimizer`` is the suite's batch-size bandit
(:class:`zeus_core.simulate.ZeusPolicy`: pruning from the default batch size, then Gaussian Thompson
sampling) with Zeus's settings: two pruning rounds, its window and seed. ``JITPowerLimitOptimizer``
is the simulator's just-in-time power limit (:func:`zeus_core.simulate.jit_power_limit`: the power
limits are profiled during a batch size's first epoch and the one of lowest Zeus cost is kept).
Both are handed to :class:`zeus_core.compat._legacy.simulate.Simulator`, which runs them; they do
not offer Zeus's per-call ``register_job``/``predict``/``observe`` (write a
:class:`zeus_core.simulate.Policy` for a policy of your own).

Example:
    >>> from zeus_core.compat._legacy.policy.optimizer import PruningGTSBatchSizeOptimizer
    >>> PruningGTSBatchSizeOptimizer(seed=1, verbose=False).name
    'Pruning GaussianTS BSO'
"""

from __future__ import annotations

import math
from dataclasses import replace

from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.batch_size import BatchSizeBandit
from zeus_core.simulate import WorkloadTrace, ZeusPolicy

__all__ = ["PruningGTSBatchSizeOptimizer", "JITPowerLimitOptimizer"]

#: Pruning rounds of Zeus's ``PruningExploreManager`` (the suite's ``JobSpec`` default is 1).
ZEUS_PRUNING_ROUNDS = 2


class PruningGTSBatchSizeOptimizer:
    """Zeus's pruning + Gaussian Thompson sampling batch-size optimizer, as the suite's bandit.

    Args:
        prior_mean: Prior mean of each arm's reward (Zeus's reward is minus the cost, J).
        prior_precision: Prior precision of that mean, 1/J²; 0 = no prior (Zeus's default).
        window_size: Observations per batch size the posterior uses; 0 = all (Zeus's default).
        concurrency: Whether jobs overlap (Zeus's Alibaba simulation); kept for the signature.
        seed: Seeds Thompson sampling.
        verbose: Whether the simulator prints each trial.

    Example:
        >>> bso = PruningGTSBatchSizeOptimizer(seed=7, verbose=False)
        >>> bso.seed, bso.window_size
        (7, 0)
    """

    def __init__(
        self,
        prior_mean: float = 0.0,
        prior_precision: float = 0.0,
        window_size: int = 0,
        concurrency: bool = False,
        seed: int = 123456,
        verbose: bool = True,
    ) -> None:
        if prior_precision < 0 or (prior_precision > 0 and prior_mean >= 0):
            raise ZeusConfigError(
                f"PruningGTSBatchSizeOptimizer(prior_mean={prior_mean}, prior_precision={prior_precision}): "
                "a prior needs a precision > 0 and a negative mean reward (minus a cost, J)."
            )
        self.prior_mean = prior_mean
        self.prior_precision = prior_precision
        self.window_size = window_size
        self.concurrency = concurrency
        self.seed = seed
        self.verbose = verbose

    @property
    def name(self) -> str:
        """Zeus's name of the optimizer."""
        return "Pruning GaussianTS BSO"

    def policy(self, trace: WorkloadTrace, eta_knob: float, beta_knob: float) -> ZeusPolicy:
        """The suite's policy for one workload with these settings (``beta_knob`` ``inf``: no early stop)."""
        beta = None if math.isinf(beta_knob) else beta_knob
        policy = ZeusPolicy(
            trace,
            seed=self.seed,
            eta_knob=eta_knob,
            beta_knob=beta,
            window_size=self.window_size,
            num_pruning_rounds=ZEUS_PRUNING_ROUNDS,
        )
        if self.prior_precision > 0:  # Zeus's reward prior (minus the cost) as the bandit's cost prior
            policy.spec = replace(
                policy.spec, prior_mean=-self.prior_mean, prior_std=self.prior_precision**-0.5
            )
            policy.bandit = BatchSizeBandit(policy.spec)
        return policy


class JITPowerLimitOptimizer:
    """Zeus's just-in-time power-limit optimizer: profile a batch size's limits once, keep the cheapest.

    Args:
        verbose: Kept for the signature (the simulator's ``verbose`` prints the chosen limits).

    Example:
        >>> JITPowerLimitOptimizer(verbose=False).name
        'JITPSO'
    """

    def __init__(self, verbose: bool = True) -> None:
        self.verbose = verbose

    @property
    def name(self) -> str:
        """Zeus's name of the optimizer."""
        return "JITPSO"
