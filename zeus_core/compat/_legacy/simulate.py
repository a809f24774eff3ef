"""Zeus's ``zeus._legacy.simulate``: ``Simulator`` and ``HistoryEntry``, run by the suite's simulator.

``Simulator(train_df, power_df, bso, plo, seed=...).simulate_one_job(job, num_recurrence,
beta_knob, eta_knob)`` returns Zeus's ``HistoryEntry`` list: one entry per run of the job that ran
(batch size, power limit W, energy J, whether it reached the target, time s), as Zeus records
them; a run that early stopping cancels before its first epoch is not recorded, as in Zeus. The
runs are the suite's simulation of the same traces with the same seed (its run draws are Zeus's);
the batch sizes are the suite's bandit's choices (docs/migrating.md says how they differ).

Example:
    >>> from zeus_core import data
    >>> from zeus_core.compat._legacy.job import Job
    >>> from zeus_core.compat._legacy.policy import JITPowerLimitOptimizer, PruningGTSBatchSizeOptimizer
    >>> folder = data.path("zeus_nsdi23")
    >>> sim = Simulator(str(folder / "summary_train.csv"), str(folder / "summary_power_v100.csv"),
    ...                 PruningGTSBatchSizeOptimizer(seed=1, verbose=False), JITPowerLimitOptimizer(False),
    ...                 seed=1, verbose=False)
    >>> history = sim.simulate_one_job(Job("squad", "bert_base_uncased", "adamw", 84.0, 6, 32), 3, 2.0, 0.5)
    >>> history[0].bs, history[0].reached
    (32, True)
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zeus_core.compat._legacy.job import Job
from zeus_core.compat._legacy.policy.optimizer import JITPowerLimitOptimizer, PruningGTSBatchSizeOptimizer
from zeus_core.exceptions import ZeusConfigError
from zeus_core.simulate import (
    NSDI23_WORKLOADS,
    SimulationResult,
    Workload,
    WorkloadTrace,
    load_workload_trace,
    simulate,
)
from zeus_core.simulate._overlapping import simulate_overlapping

__all__ = ["HistoryEntry", "Simulator"]


@dataclass
class HistoryEntry:
    """One run of the job, Zeus's fields.

    Attributes:
        bs: Batch size.
        pl: Power limit, W.
        energy: Energy, J.
        reached: Whether the run reached the target metric.
        time: Time, s.

    Example:
        >>> HistoryEntry(32, 250, 1.5e6, True, 9000.0).energy
        1500000.0
    """

    bs: int
    pl: int
    energy: float
    reached: bool
    time: float


def _csv(trace: Any, folder: Path, name: str) -> Path:
    """A trace's CSV file: the path given, or the ``pandas.DataFrame`` written to ``folder/name``."""
    if isinstance(trace, (str, Path)):
        return Path(trace)
    path = folder / name
    trace.to_csv(path, index=False, na_rep="nan")  # a run that never reached the target: nan
    return path


class Simulator:
    """Zeus's trace-driven simulator of a recurring job, run by the suite's.

    Args:
        summary_train: Path to, or ``pandas.DataFrame`` of, the train trace (``summary_train.csv``).
        summary_power: Path to, or ``pandas.DataFrame`` of, a power trace (``summary_power_<gpu>.csv``).
        batch_size_optimizer: A :class:`PruningGTSBatchSizeOptimizer` (its settings and seed).
        power_limit_optimizer: A :class:`JITPowerLimitOptimizer`.
        seed: Seeds the draws of training runs from the trace (Zeus's run draws for the same seed).
        verbose: Print each run.

    Raises:
        ZeusConfigError: Another kind of optimizer (the suite runs its own policies).

    Example:
        >>> sim = Simulator(train_df, power_df, PruningGTSBatchSizeOptimizer(), JITPowerLimitOptimizer())
        ... # doctest: +SKIP
    """

    def __init__(
        self,
        summary_train: str | Any,
        summary_power: str | Any,
        batch_size_optimizer: PruningGTSBatchSizeOptimizer,
        power_limit_optimizer: JITPowerLimitOptimizer,
        seed: int = 123456,
        verbose: bool = True,
    ) -> None:
        if not isinstance(batch_size_optimizer, PruningGTSBatchSizeOptimizer) or not isinstance(
            power_limit_optimizer, JITPowerLimitOptimizer
        ):
            raise ZeusConfigError(
                f"Simulator({type(batch_size_optimizer).__name__}, {type(power_limit_optimizer).__name__}): "
                "the compat simulator runs PruningGTSBatchSizeOptimizer with JITPowerLimitOptimizer; for "
                "another policy, implement zeus_core.simulate.Policy and call zeus_core.simulate.simulate."
            )
        self.summary_train = summary_train
        self.summary_power = summary_power
        self.bso = batch_size_optimizer
        self.plo = power_limit_optimizer
        self.seed = seed
        self.verbose = verbose

    def trace(self, job: Job) -> WorkloadTrace:
        """The suite's trace of ``job`` from this simulator's train and power traces."""
        if job.default_bs is None:
            raise ZeusConfigError(f"Simulator: {job} needs a default batch size (Job(..., default_bs)).")
        known = {(w.dataset, w.network, w.optimizer): w for w in NSDI23_WORKLOADS}
        listed = known.get((job.dataset, job.network, job.optimizer))
        workload = Workload(
            job.dataset,
            job.network,
            job.optimizer,
            job.target_metric,
            job.max_epochs,
            job.default_bs,
            higher_is_better=True if listed is None else listed.higher_is_better,
        )
        with tempfile.TemporaryDirectory(prefix="zeus-legacy-") as tmp:
            train = _csv(self.summary_train, Path(tmp), "summary_train.csv")
            power = _csv(self.summary_power, Path(tmp), "summary_power.csv")
            return load_workload_trace(workload, train, power, gpu="trace")

    def simulate_one_job(
        self, job: Job, num_recurrence: int, beta_knob: float, eta_knob: float
    ) -> list[HistoryEntry]:
        """Simulate ``num_recurrence`` recurrences of ``job``; Zeus's ``HistoryEntry`` per run.

        Args:
            job: The job.
            num_recurrence: How many times it recurs.
            beta_knob: Early-stop factor (``numpy.inf``: none).
            eta_knob: Weight of energy in the Zeus cost.

        Returns:
            Every run that ran, in order (failed and early-stopped ones included).

        Example:
            >>> history = sim.simulate_one_job(job, 10, beta_knob=2.0, eta_knob=0.5)  # doctest: +SKIP
        """
        trace = self.trace(job)
        if self.verbose:
            print(f"[Simulator] {job} recurring {num_recurrence} times; max power {trace.max_power_w} W.")
        result = simulate(
            trace,
            self.bso.policy(trace, eta_knob, beta_knob),
            seed=self.seed,
            recurrences=num_recurrence,
            eta_knob=eta_knob,
        )
        return self._history(result, [1.0] * num_recurrence)

    def simulate_one_alibaba_group(
        self, job: Job, group_df: Any, beta_knob: float, eta_knob: float
    ) -> list[HistoryEntry]:
        """Simulate one recurring-job group of the Alibaba trace, whose submissions may overlap.

        A submission made while others of the group run takes the batch size of the cheapest
        converged run so far; a run that misses the target is retried when it ends (Zeus's rules,
        :func:`zeus_core.simulate._overlapping.simulate_overlapping`).

        Args:
            job: The job of the group.
            group_df: ``pandas.DataFrame`` of the group's submissions sorted by ``start_time``, with
                ``start_time`` and ``end_time`` (s) and ``runtime_ratio`` (the submission's runtime
                over its dataset's mean).
            beta_knob: Early-stop factor (``numpy.inf``: none).
            eta_knob: Weight of energy in the Zeus cost.

        Returns:
            Every run that ran, in the order the runs ended; energy and time scaled by the
            submission's ``runtime_ratio``, as Zeus scales them.

        Example:
            >>> history = sim.simulate_one_alibaba_group(job, group, 2.0, 0.5)  # doctest: +SKIP
        """
        trace = self.trace(job)
        rows = list(group_df.itertuples(index=False))
        if self.verbose:
            print(f"[Simulator] {job} recurring {len(rows)} times; max power {trace.max_power_w} W.")
        result = simulate_overlapping(
            trace,
            self.bso.policy(trace, eta_knob, beta_knob),
            [(float(r.start_time), float(r.end_time)) for r in rows],
            seed=self.seed,
            eta_knob=eta_knob,
        )
        return self._history(result, [float(r.runtime_ratio) for r in rows])

    def _history(self, result: SimulationResult, ratios: list[float]) -> list[HistoryEntry]:
        """Zeus's history: every trial that ran, energy and time scaled by its submission's ratio."""
        history = []
        for t in result.trials:
            if t.epochs == 0 and not t.converged:  # cancelled before its first epoch: Zeus records none
                continue
            ratio = ratios[t.recurrence]
            history.append(
                HistoryEntry(t.batch_size, t.power_limit_w, t.energy_j * ratio, t.converged, t.time_s * ratio)
            )
            if self.verbose:
                print(
                    f"[Simulator] recurrence {t.recurrence + 1}: BS {t.batch_size}, PL {t.power_limit_w} W"
                    f"{' (profiled)' if t.profiled_power else ''}, {t.epochs} epochs, "
                    f"{'reached' if t.converged else 'failed'}: {t.time_s * ratio:.1f} s, "
                    f"{t.energy_j * ratio:.1f} J"
                )
        return history
