"""Trace-driven simulation of recurring training jobs; reproduces Zeus (NSDI'23).

Everything it reports is simulated from measured traces (bundled: ``zeus_core.data.path("zeus_nsdi23")``).
``zeus-suite reproduce nsdi23 --gpu v100`` runs the paper's experiment from the command line.

Example:
    >>> from zeus_core.simulate import load_nsdi23_traces, make_policy, simulate  # doctest: +SKIP
    >>> trace = load_nsdi23_traces("v100")[2]                                       # doctest: +SKIP
    >>> result = simulate(trace, make_policy("zeus", trace, seed=1), seed=1)        # doctest: +SKIP
    >>> result.cost_j                                                               # doctest: +SKIP
"""

from __future__ import annotations

from zeus_core.simulate.nsdi23 import (
    PolicySummary,
    WorkloadReport,
    default_policies,
    run_nsdi23,
    run_workload,
)
from zeus_core.simulate.policies import (
    POLICIES,
    Choice,
    DefaultPolicy,
    FixedPolicy,
    GridSearchPolicy,
    Policy,
    TrialOutcome,
    ZeusPolicy,
    make_policy,
)
from zeus_core.simulate.published import PublishedZeusPolicy, published_zeus_available
from zeus_core.simulate.simulator import (
    SimulationResult,
    TrialRecord,
    expected_fixed_cost,
    jit_power_limit,
    noise_free_cost,
    oracle,
    simulate,
)
from zeus_core.simulate.traces import (
    NSDI23_WORKLOADS,
    EpochProfile,
    Workload,
    WorkloadTrace,
    default_trace_dir,
    load_nsdi23_traces,
    load_workload_trace,
)
from zeus_core.simulate.variants import generate_variant

__all__ = [
    "Choice",
    "DefaultPolicy",
    "EpochProfile",
    "FixedPolicy",
    "GridSearchPolicy",
    "NSDI23_WORKLOADS",
    "POLICIES",
    "Policy",
    "PolicySummary",
    "PublishedZeusPolicy",
    "SimulationResult",
    "TrialOutcome",
    "TrialRecord",
    "Workload",
    "WorkloadReport",
    "WorkloadTrace",
    "ZeusPolicy",
    "default_policies",
    "default_trace_dir",
    "expected_fixed_cost",
    "generate_variant",
    "jit_power_limit",
    "load_nsdi23_traces",
    "load_workload_trace",
    "make_policy",
    "noise_free_cost",
    "oracle",
    "published_zeus_available",
    "run_nsdi23",
    "run_workload",
    "simulate",
]
