"""Plans for one target iteration time, in real (not quantised) time.

The real-time LP, slack reclaiming and the min-cut repair that make zero-slowdown, deadline and
straggler plans meet their time exactly (docs/optimizers/perseus.md, "Plans on the frontier, in
real time").

Example:
    >>> from zeus_core.optimizer.pipeline_frequency import plan_frontier, synchronous_1f1b
    >>> from zeus_core.testing import physical_instruction_profile
    >>> fr = plan_frontier(synchronous_1f1b(2, 3), physical_instruction_profile("a40", 2))
    >>> ladders = [fr.options[(i.stage, i.kind)].all_pareto for i in fr.dag.instructions]
    >>> target = fr.max_frequency_plan().iteration_time_s
    >>> chosen = reclaim_slack(fr.dag, ladders, lp_plan(fr.dag, ladders, target), target)
    >>> fr.replay(chosen).iteration_time_s <= target * (1 + 1e-9)
    True
"""

from __future__ import annotations

import bisect
import logging
from typing import Sequence

import numpy as np

from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.pipeline_frequency.planner._cost_model import ExecutionOption
from zeus_core.optimizer.pipeline_frequency.planner._dag import PipelineDAG
from zeus_core.optimizer.pipeline_frequency.planner._frontier_solver import CutNetwork
from zeus_core.optimizer.pipeline_frequency.planner._max_flow import FlowBackend

__all__ = ["lp_plan", "reclaim_slack", "repair_to_time"]

logger = logging.getLogger(__name__)

# HiGHS meets constraints to about 1e-7 (absolute); aim that much below the target.
_LP_MARGIN_S = 2e-7


def _hull(ladder: Sequence[ExecutionOption]) -> list[tuple[float, float]]:
    """Lower convex hull of (time s, effective energy J), fastest first."""
    pts = sorted((o.time_s, o.effective_energy_j) for o in ladder)
    hull: list[tuple[float, float]] = []
    for p in pts:
        while (
            len(hull) >= 2
            and (
                (hull[-1][0] - hull[-2][0]) * (p[1] - hull[-2][1])
                - (hull[-1][1] - hull[-2][1]) * (p[0] - hull[-2][0])
            )
            <= 0
        ):
            hull.pop()
        hull.append(p)
    return hull


def lp_plan(
    dag: PipelineDAG, ladders: Sequence[Sequence[ExecutionOption]], time_s: float
) -> list[ExecutionOption]:
    """Least-effective-energy options with the real iteration time at most ``time_s`` (LP relaxation).

    Args:
        dag: The iteration's DAG.
        ladders: Per instruction (``dag.instructions`` order), its Pareto options, slowest first.
        time_s: Target iteration time, s.

    Returns:
        One option per instruction. The iteration time is at most ``time_s`` up to the LP
        solver's tolerance (about 1e-7 s); check with a replay.

    Raises:
        ModuleNotFoundError: scipy is missing (``pip install 'zeus-suite[pipeline]'``).
        ZeusConfigError: ``time_s`` is below the all-fastest iteration time.
    """
    try:
        from scipy.optimize import linprog  # type: ignore[import-untyped]
        from scipy.sparse import csr_array  # type: ignore[import-untyped]
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError("lp_plan needs scipy: pip install 'zeus-suite[pipeline]'") from exc
    n = dag.num_nodes
    hull_cache: dict[int, list[tuple[float, float]]] = {}
    hulls = [hull_cache.setdefault(id(lad), _hull(lad)) for lad in ladders]
    tmax = np.array([h[-1][0] for h in hulls])
    nseg = np.array([len(h) - 1 for h in hulls], dtype=np.int64)
    seg_off = n + np.concatenate([[0], np.cumsum(nseg)[:-1]]).astype(np.int64)
    slopes, lengths = [], []
    for h in hulls:
        for (t_fast, e_fast), (t_slow, e_slow) in zip(h[:-1], h[1:]):
            lengths.append(t_slow - t_fast)
            slopes.append((e_fast - e_slow) / (t_slow - t_fast))
    nvar = n + int(nseg.sum())
    fastest = dag.longest_path(np.array([h[0][0] for h in hulls]))
    if time_s < fastest * (1 - 1e-9):
        raise ZeusConfigError(
            f"lp_plan: target {time_s:.6g} s is below the fastest iteration time {fastest:.6g} s."
        )
    target = max(time_s - _LP_MARGIN_S, fastest)

    def seg_entries(ops: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        counts = nseg[ops]
        r = np.repeat(rows, counts)
        start = np.repeat(seg_off[ops] - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
        return r, start + np.arange(int(counts.sum()))

    src, dst = dag.edge_src, dag.edge_dst
    e_rows = np.arange(len(src))
    s_rows = len(src) + np.arange(len(dag.sinks))
    r1, c1 = seg_entries(src, e_rows)
    r2, c2 = seg_entries(dag.sinks, s_rows)
    rows = np.concatenate([e_rows, e_rows, r1, s_rows, r2])
    cols = np.concatenate([src, dst, c1, dag.sinks, c2])
    vals = np.concatenate(
        [np.ones(len(src)), -np.ones(len(src)), -np.ones(len(r1)), np.ones(len(s_rows)), -np.ones(len(r2))]
    )
    a_ub = csr_array((vals, (rows, cols)), shape=(len(src) + len(s_rows), nvar))
    b_ub = np.concatenate([-tmax[src], target - tmax[dag.sinks]])
    # Start-time windows from the all-fastest durations (earliest start, latest start for the
    # target): they hold for every feasible plan, and they let HiGHS's presolve fix the critical
    # instructions and cut the simplex work several times over on large pipelines.
    fast = np.array([h[0][0] for h in hulls])
    earliest = dag.earliest_finish(fast) - fast
    bounds = np.zeros((nvar, 2))
    bounds[:n, 0] = earliest
    bounds[:n, 1] = np.maximum(dag.latest_finish(fast, target) - fast, earliest)
    bounds[n:, 1] = lengths
    cost = np.concatenate([np.zeros(n), slopes])
    res = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if res.status != 0:  # pragma: no cover - the all-fastest plan is always feasible
        raise ZeusConfigError(f"lp_plan: the LP for {time_s:.6g} s failed: {res.message}")
    owner = np.repeat(np.arange(n), nseg)
    durations = tmax - np.bincount(owner, weights=np.asarray(res.x)[n:], minlength=n)
    chosen = []
    for lad, d in zip(ladders, durations.tolist()):
        chosen.append(next((o for o in lad if o.time_s <= d * (1 + 1e-12)), lad[-1]))
    return chosen


def reclaim_slack(
    dag: PipelineDAG,
    ladders: Sequence[Sequence[ExecutionOption]],
    chosen: Sequence[ExecutionOption],
    time_s: float,
) -> list[ExecutionOption]:
    """Slow every instruction to the slowest option that still ends the iteration by ``time_s``.

    Start times stay as early as the current options allow; going backwards through the DAG,
    each instruction may end as late as its (already re-planned) successors start, or
    ``time_s``. Instructions only get slower, and the result meets ``time_s`` whenever the input
    did.

    Args:
        dag: The iteration's DAG.
        ladders: Per instruction, its Pareto options, slowest first.
        chosen: Current option per instruction.
        time_s: Target iteration time, s.
    """
    times = np.array([o.time_s for o in chosen])
    starts = (dag.earliest_finish(times) - times).tolist()
    succ: list[list[int]] = [[] for _ in range(dag.num_nodes)]
    for u, v in zip(dag.edge_src.tolist(), dag.edge_dst.tolist()):
        succ[u].append(v)
    asc_cache: dict[int, list[float]] = {}
    latest_start = [0.0] * dag.num_nodes
    out = list(chosen)
    for i in range(dag.num_nodes - 1, -1, -1):  # instructions are stored in topological order
        end = min([time_s] + [latest_start[j] for j in succ[i]])
        budget = end - starts[i]
        lad = ladders[i]
        asc = asc_cache.get(id(lad))
        if asc is None:
            asc = asc_cache[id(lad)] = [o.time_s for o in reversed(lad)]  # fastest first
        k = bisect.bisect_right(asc, budget * (1 + 1e-12)) - 1
        if k >= 0 and asc[k] > out[i].time_s:
            out[i] = lad[len(lad) - 1 - k]
        latest_start[i] = end - out[i].time_s
    return out


def repair_to_time(
    dag: PipelineDAG,
    ladders: Sequence[Sequence[ExecutionOption]],
    chosen: Sequence[ExecutionOption],
    time_s: float,
    backend: FlowBackend | None = None,
) -> tuple[list[ExecutionOption], int]:
    """Speed instructions up until the real iteration time is at most ``time_s``.

    Each round cuts all longest real paths at the least cost: a minimum cut of the critical
    sub-DAG whose capacities are each instruction's cost rate (J of effective energy per s saved)
    to its next faster Pareto option; every instruction on the cut moves one option faster. It
    ends because every instruction at its fastest option meets any target at or above the
    fastest time.

    Args:
        dag: The iteration's DAG.
        ladders: Per instruction, its Pareto options, slowest first.
        chosen: Current option per instruction.
        time_s: Target iteration time, s.
        backend: Max-flow back end (``"scipy"`` or ``"networkx"``; default: scipy if installed).

    Returns:
        The repaired options and how many single-option moves were made.
    """
    out = list(chosen)
    network = CutNetwork(dag)
    limit = time_s * (1 + 1e-9)
    changes = 0
    zeros = np.zeros(network.num_arcs, dtype=np.int64)
    while True:
        times = np.array([o.time_s for o in out])
        ef = dag.earliest_finish(times)
        makespan = float(ef.max())
        if makespan <= limit:
            return out, changes
        crit = network.critical(ef, dag.latest_finish(times, makespan), times, makespan, tol=1e-9 * makespan)
        nxt: dict[int, ExecutionOption] = {}
        rates = np.full(dag.num_nodes, np.inf)
        for i in np.flatnonzero(crit[network.ops]).tolist():
            faster = next((o for o in ladders[i] if o.time_s < out[i].time_s), None)
            if faster is not None:
                nxt[i] = faster
                saved = out[i].time_s - faster.time_s
                rates[i] = max(faster.effective_energy_j - out[i].effective_energy_j, 0.0) / saved
        finite = np.isfinite(rates)
        scale = 2**28 / max(float(rates[finite].sum()), 1e-300) if finite.any() else 1.0
        ub = np.full(network.num_arcs, CutNetwork.INF, dtype=np.int64)
        scaled = np.rint(np.where(finite, rates, 0.0) * scale).astype(np.int64) + 1
        ub[network.ops] = np.where(finite, scaled, CutNetwork.INF)
        flow = network.augment(network.residual_capacities(crit, zeros, zeros, ub), backend)
        if flow[0] >= CutNetwork.INF:
            logger.warning(
                "Cannot repair plan to %.6g s: a late path is already at its fastest clocks.", time_s
            )
            return out, changes
        s_in, s_out, _ = network.source_side(network.residual_capacities(crit, flow, zeros, ub))
        for i in np.flatnonzero(crit[network.ops] & s_in & ~s_out).tolist():
            out[i] = nxt[i]
            changes += 1
