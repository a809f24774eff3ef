"""The Zeus NSDI'23 experiment: every workload under ours, Zeus 0.16, Default and Grid Search, over seeds.

For each workload of :data:`~zeus_core.simulate._traces.NSDI23_WORKLOADS` on one GPU's power trace,
each policy is simulated for the paper's number of recurrences (or ``recurrences``) with each
seed; totals are averaged over seeds. The best fixed configuration in hindsight (the oracle) is
reported as the expected cost per recurrence × recurrences. Everything here is simulated from
measured traces, and every report says so.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from zeus_core.exceptions import ZeusConfigError
from zeus_core.simulate._policies import make_policy
from zeus_core.simulate._simulator import SimulationResult, oracle, simulate
from zeus_core.simulate._traces import NSDI23_WORKLOADS, Workload, WorkloadTrace, load_nsdi23_traces

__all__ = [
    "PolicySummary",
    "WorkloadReport",
    "run_nsdi23",
    "run_workload",
    "DEFAULT_POLICIES",
    "default_policies",
]

logger = logging.getLogger(__name__)

DEFAULT_POLICIES: tuple[str, ...] = ("default", "grid", "zeus")
"""The policies every installation can run (``zeus`` is ours)."""


def default_policies() -> tuple[str, ...]:
    """:data:`DEFAULT_POLICIES`, plus the published ``zeus-0.16`` where ``zeus==0.16.0`` is installed."""
    from zeus_core.simulate._published import published_zeus_available

    return DEFAULT_POLICIES + (("zeus-0.16",) if published_zeus_available() else ())


@dataclass(frozen=True)
class PolicySummary:
    """Totals of one policy on one workload, averaged over seeds (simulated).

    Attributes:
        policy: Policy name (``oracle`` for the best fixed configuration in hindsight).
        energy_j: Cumulative energy to accuracy, J.
        time_s: Cumulative time to accuracy, s.
        cost_j: Cumulative Zeus cost, J.
        per_seed_cost_j: Cumulative Zeus cost of each seed, J (empty for the oracle).
        note: Extra description (the oracle's configuration).

    Example:
        >>> PolicySummary("default", energy_j=1.0, time_s=2.0, cost_j=3.0).cost_j
        3.0
    """

    policy: str
    energy_j: float
    time_s: float
    cost_j: float
    per_seed_cost_j: tuple[float, ...] = ()
    note: str = ""


@dataclass
class WorkloadReport:
    """All policies on one workload and GPU.

    Attributes:
        workload: ``dataset/network``.
        gpu: GPU name.
        default_batch_size: Default batch size used (capped to the trace).
        recurrences: Recurrences per simulation.
        seeds: Seeds simulated.
        summaries: Policy name -> totals (the oracle under ``"oracle"``).
        runs: Policy name -> the simulation of each seed (in ``seeds`` order).

    Example:
        >>> from zeus_core.simulate import load_nsdi23_traces
        >>> trace = load_nsdi23_traces("v100")[4]
        >>> report = run_workload(trace, [1], recurrences=5, policies=["default", "zeus"])
        >>> sorted(report.summaries), report.seeds_costlier("zeus") in (0, 1)
        (['default', 'oracle', 'zeus'], True)
    """

    workload: str
    gpu: str
    default_batch_size: int
    recurrences: int
    seeds: tuple[int, ...]
    summaries: dict[str, PolicySummary] = field(default_factory=dict)
    runs: dict[str, list[SimulationResult]] = field(default_factory=dict, repr=False)

    def reduction(self, policy: str, metric: str = "cost_j", baseline: str = "default") -> float:
        """Fractional reduction of ``metric`` (``energy_j``/``time_s``/``cost_j``) versus ``baseline``."""
        base = getattr(self.summaries[baseline], metric)
        return 1.0 - getattr(self.summaries[policy], metric) / base if base else 0.0

    def seeds_costlier(self, policy: str, baseline: str = "default") -> int | None:
        """On how many seeds ``policy``'s cumulative cost exceeded ``baseline``'s (None: not per seed)."""
        mine, theirs = self.summaries[policy].per_seed_cost_j, self.summaries[baseline].per_seed_cost_j
        if not mine or len(mine) != len(theirs):
            return None
        return sum(m > t for m, t in zip(mine, theirs))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (totals only), marked ``simulated``."""
        return {
            "simulated": True,
            "workload": self.workload,
            "gpu": self.gpu,
            "default_batch_size": self.default_batch_size,
            "recurrences": self.recurrences,
            "seeds": list(self.seeds),
            "policies": {
                name: {
                    "energy_j": s.energy_j,
                    "time_s": s.time_s,
                    "cost_j": s.cost_j,
                    "per_seed_cost_j": list(s.per_seed_cost_j),
                    "note": s.note,
                    "energy_reduction_vs_default": self.reduction(name, "energy_j"),
                    "time_reduction_vs_default": self.reduction(name, "time_s"),
                    "cost_reduction_vs_default": self.reduction(name, "cost_j"),
                    "seeds_costlier_than_default": self.seeds_costlier(name),
                }
                for name, s in self.summaries.items()
            },
        }


def run_workload(
    trace: WorkloadTrace,
    seeds: Sequence[int],
    *,
    recurrences: int | None = None,
    eta_knob: float = 0.5,
    beta_knob: float | None = 2.0,
    policies: Sequence[str] | None = None,
) -> WorkloadReport:
    """Simulate one workload under each policy and seed, plus the oracle.

    Args:
        trace: The workload's traces.
        seeds: Seeds; results are averaged over them.
        recurrences: Recurrences; default the paper's ``2 × |batch sizes| × |power limits|``.
        eta_knob: Weight of energy in the Zeus cost.
        beta_knob: Early-stop factor of Zeus and Grid Search (``None`` disables).
        policies: Registered policy names (default :func:`default_policies`).

    Returns:
        The workload's report.

    Example:
        >>> from zeus_core.simulate import load_nsdi23_traces
        >>> report = run_workload(load_nsdi23_traces("v100")[4], [1, 2], recurrences=5, policies=["default"])
        >>> report.summaries["default"].per_seed_cost_j != ()
        True
    """
    if not seeds:
        raise ZeusConfigError("run_workload: seeds must not be empty; pass e.g. [1].")
    n = trace.num_recurrences() if recurrences is None else recurrences
    report = WorkloadReport(
        trace.workload.name, trace.gpu, trace.workload.default_batch_size, n, tuple(seeds)
    )
    for name in default_policies() if policies is None else policies:
        runs = [
            simulate(
                trace,
                make_policy(name, trace, s, eta_knob, beta_knob),
                seed=s,
                recurrences=n,
                eta_knob=eta_knob,
            )
            for s in seeds
        ]
        report.runs[name] = runs
        k = len(runs)
        report.summaries[name] = PolicySummary(
            name,
            sum(r.energy_j for r in runs) / k,
            sum(r.time_s for r in runs) / k,
            sum(r.cost_j for r in runs) / k,
            tuple(r.cost_j for r in runs),
        )
        logger.debug(
            "%s on %s, %s: cost %.4g J", trace.workload.name, trace.gpu, name, report.summaries[name].cost_j
        )
    bs, pl, (energy, time, cost) = oracle(trace, eta_knob)
    report.summaries["oracle"] = PolicySummary("oracle", n * energy, n * time, n * cost, (), f"{bs} @ {pl} W")
    return report


def run_nsdi23(
    gpu: str,
    *,
    trace_dir: str | Path | None = None,
    power_trace: str | Path | None = None,
    seeds: Sequence[int] = (1,),
    recurrences: int | None = None,
    eta_knob: float = 0.5,
    beta_knob: float | None = 2.0,
    workloads: Sequence[Workload] = NSDI23_WORKLOADS,
    policies: Sequence[str] | None = None,
) -> list[WorkloadReport]:
    """Run the paper's experiment on one GPU's traces (see :func:`run_workload` for the arguments).

    Args:
        gpu: GPU name (``a40``, ``v100``, or a name for ``power_trace``).
        trace_dir: Folder with ``summary_train.csv`` (default: the bundled ``zeus_nsdi23`` traces).
        power_trace: Power trace of another GPU, same format as ``summary_power_<gpu>.csv``.
        seeds: Seeds.
        recurrences: Recurrences per simulation (default: the paper's).
        eta_knob: Weight of energy in the Zeus cost.
        beta_knob: Early-stop factor.
        workloads: Workloads to run.
        policies: Policies to run (default :func:`default_policies`).

    Returns:
        One report per workload.

    Example:
        >>> reports = run_nsdi23("v100", seeds=[1], recurrences=3, policies=["default"])
        >>> [r.workload.split("/")[0] for r in reports][-2:]
        ['squad', 'sentiment140']
    """
    traces = load_nsdi23_traces(gpu, trace_dir, power_trace, workloads)
    return [
        run_workload(
            t, seeds, recurrences=recurrences, eta_knob=eta_knob, beta_knob=beta_knob, policies=policies
        )
        for t in traces
    ]
