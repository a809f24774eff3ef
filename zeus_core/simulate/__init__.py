"""Trace-driven simulation of recurring training jobs; reproduces Zeus (NSDI'23).

Everything it reports is simulated from measured traces (bundled: ``zeus_core.data.path("zeus_nsdi23")``).
``zeus-suite reproduce nsdi23 --gpu v100`` runs the paper's experiment from the command line. The
policies: ``make_policy("zeus", ...)`` is ours (the suite's batch-size bandit), ``"zeus-0.16"`` the
published one (needs ``zeus==0.16.0``), ``"default"`` and ``"grid"`` the paper's baselines.
:func:`generate_variant` makes traces of GPUs that were never measured. See
docs/optimizers/batch-size.md.

Example:
    >>> from zeus_core.simulate import DefaultPolicy, load_nsdi23_traces, make_policy, simulate
    >>> trace = load_nsdi23_traces("v100")[5]  # sentiment140
    >>> ours = simulate(trace, make_policy("zeus", trace, seed=1), seed=1)
    >>> default = simulate(trace, DefaultPolicy(trace), seed=1)
    >>> round(ours.cost_j / default.cost_j, 2) < 1
    True
"""

from __future__ import annotations

from zeus_core.simulate._nsdi23 import (
    PolicySummary,
    WorkloadReport,
    run_nsdi23,
    run_workload,
)
from zeus_core.simulate._policies import (
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
from zeus_core.simulate._published import PublishedZeusPolicy
from zeus_core.simulate._simulator import (
    SimulationResult,
    TrialRecord,
    expected_fixed_cost,
    jit_power_limit,
    noise_free_cost,
    oracle,
    simulate,
)
from zeus_core.simulate._traces import (
    NSDI23_WORKLOADS,
    EpochProfile,
    Workload,
    WorkloadTrace,
    default_trace_dir,
    load_nsdi23_traces,
    load_workload_trace,
)
from zeus_core.simulate._variants import generate_variant

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
    "default_trace_dir",
    "expected_fixed_cost",
    "generate_variant",
    "jit_power_limit",
    "load_nsdi23_traces",
    "load_workload_trace",
    "make_policy",
    "noise_free_cost",
    "oracle",
    "run_nsdi23",
    "run_workload",
    "simulate",
]
