"""The Phillips–Dessouky solver: exactness against brute force and an LP, speed-ups, max flow."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.pipeline_frequency import PipelineDAG, gpipe, synchronous_1f1b
from zeus_core.optimizer.pipeline_frequency.planner._frontier_solver import (
    IntegerCostTable,
    SolverResult,
    solve_frontier,
)
from zeus_core.optimizer.pipeline_frequency.planner._max_flow import MAX_CAPACITY, ResidualGraph


def _points(result: SolverResult) -> dict[int, int]:
    """Frontier cost (units) per iteration time (quanta), from the start point and the steps."""
    cost = result.initial_cost
    pts = {result.steps[0].start_time if result.steps else -1: cost}
    for step in result.steps:
        for j in range(1, step.length + 1):
            pts[step.start_time - j] = cost + j * step.slope
        cost += step.length * step.slope
    return pts


def _random_table(rng: np.random.Generator, ntypes: int, max_span: int, values=None) -> IntegerCostTable:
    mins = rng.integers(1, 4, ntypes)
    spans = rng.integers(0, max_span + 1, ntypes)
    pool = values if values is not None else list(range(0, 20))
    savings = [np.sort(rng.choice(pool, size=int(s)))[::-1].astype(np.int64) for s in spans]
    base = rng.integers(0, 5, ntypes).astype(np.int64)
    return IntegerCostTable(mins.astype(np.int64), (mins + spans).astype(np.int64), savings, base, 1.0)


def _tiny_cases(count: int, seed: int):
    rng = np.random.default_rng(seed)
    made = 0
    while made < count:
        s, m = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        dag = PipelineDAG((synchronous_1f1b if rng.random() < 0.5 else gpipe)(s, m))
        if dag.num_nodes > 8:
            continue
        made += 1
        yield dag, _random_table(rng, dag.num_nodes, 3)


def test_frontier_equals_brute_force_on_tiny_dags() -> None:
    """Every integer time from the slowest to the fastest: PD's cost == the enumerated optimum."""
    checked = 0
    for dag, table in _tiny_cases(40, seed=11):
        types = np.arange(dag.num_nodes)
        result = solve_frontier(dag, types, table, check_invariants=True)
        best: dict[int, int] = {}
        for combo in itertools.product(*[range(lo, hi + 1) for lo, hi in zip(table.min_q, table.max_q)]):
            d = np.array(combo, dtype=np.int64)
            t, c = int(dag.longest_path(d)), table.cost(types, d)
            best[t] = min(best.get(t, c), c)
        running, best_within = None, {}
        for t in sorted(best):  # least cost with the longest path at most t
            running = best[t] if running is None else min(running, best[t])
            best_within[t] = running
        pts = _points(result)
        pts.pop(-1, None)
        for t, c in pts.items():
            assert c == best_within[t], (t, c, best_within[t])
            checked += 1
        assert min(pts, default=result.min_time) == result.min_time
    assert checked > 100


def test_reconstructed_durations_match_time_and_cost() -> None:
    for dag, table in _tiny_cases(10, seed=5):
        types = np.arange(dag.num_nodes)
        result = solve_frontier(dag, types, table, checkpoint_every=2)
        cost = result.initial_cost
        for k, step in enumerate(result.steps):
            for j in range(1, step.length + 1):
                d = result.durations_after(k, j)
                assert int(dag.longest_path(d)) == step.start_time - j
                assert table.cost(types, d) == cost + j * step.slope
                assert np.all((d >= table.min_q) & (d <= table.max_q))
            cost += step.length * step.slope


def _lp_cost(dag: PipelineDAG, types: np.ndarray, table: IntegerCostTable, t: int) -> float:
    """The LP relaxation's optimum at iteration time t (HiGHS), minus the base cost."""
    from scipy.optimize import linprog
    from scipy.sparse import csr_array

    n = dag.num_nodes
    owners = [i for i in range(n) for _ in range(len(table.savings[types[i]]))]
    c = np.concatenate([np.zeros(n)] + [table.savings[types[i]] for i in range(n)]).astype(float)
    rows, cols, vals, b = [], [], [], []
    ys = {i: [n + k for k, o in enumerate(owners) if o == i] for i in range(n)}
    for r, (u, v) in enumerate(zip(dag.edge_src.tolist(), dag.edge_dst.tolist())):
        rows += [r, r] + [r] * len(ys[u])
        cols += [u, v] + ys[u]
        vals += [1, -1] + [-1] * len(ys[u])
        b.append(-table.max_q[types[u]])
    for i in range(n):
        r = len(b)
        rows += [r] + [r] * len(ys[i])
        cols += [i] + ys[i]
        vals += [1] + [-1] * len(ys[i])
        b.append(t - table.max_q[types[i]])
    a = csr_array((vals, (rows, cols)), shape=(len(b), len(c)))
    res = linprog(c, A_ub=a, b_ub=b, bounds=[(0, None)] * n + [(0, 1)] * len(owners), method="highs")
    assert res.status == 0
    return res.fun


@pytest.mark.parametrize("seed", [0, 1])
def test_long_steps_match_unit_steps_and_the_lp(seed: int) -> None:
    pytest.importorskip("scipy")
    rng = np.random.default_rng(seed)
    for _ in range(6):
        s, m = int(rng.integers(2, 5)), int(rng.integers(2, 7))
        dag = PipelineDAG(synchronous_1f1b(s, m) if rng.random() < 0.7 else gpipe(s, m))
        per_stage = rng.random() < 0.5
        if per_stage:  # one cost type per (stage, kind), as real profiles have
            types = np.array([2 * i.stage + (i.kind.value == "backward") for i in dag.instructions])
            table = _random_table(rng, 2 * s, 12, values=[0, 1, 2, 3, 5, 8, 13, 40, 100])
        else:
            types = np.arange(dag.num_nodes)
            table = _random_table(rng, dag.num_nodes, 12, values=[0, 1, 2, 3, 5, 8, 13, 40, 100])
        long = solve_frontier(dag, types, table, check_invariants=True)
        unit = solve_frontier(dag, types, table, long_steps=False)
        assert _points(long) == _points(unit)
        assert len(long.steps) <= len(unit.steps)
        pts = _points(long)
        base = int(table.base[types].sum())
        for t in rng.choice(sorted(k for k in pts if k >= 0), size=min(4, len(pts)), replace=False):
            assert _lp_cost(dag, types, table, int(t)) == pytest.approx(pts[int(t)] - base, abs=1e-6)


def test_scipy_and_networkx_backends_agree() -> None:
    pytest.importorskip("scipy")
    rng = np.random.default_rng(7)
    dag = PipelineDAG(synchronous_1f1b(3, 4))
    types = np.array([2 * i.stage + (i.kind.value == "backward") for i in dag.instructions])
    table = _random_table(rng, 6, 10, values=[0, 1, 2, 4, 7, 30])
    a = solve_frontier(dag, types, table, backend="scipy")
    b = solve_frontier(dag, types, table, backend="networkx")
    assert _points(a) == _points(b)


def test_stop_at_solves_only_down_to_the_requested_time() -> None:
    rng = np.random.default_rng(2)
    dag = PipelineDAG(synchronous_1f1b(3, 5))
    types = np.array([2 * i.stage + (i.kind.value == "backward") for i in dag.instructions])
    table = _random_table(rng, 6, 10)
    full = _points(solve_frontier(dag, types, table))
    target = (max(full) + min(full)) // 2
    part = solve_frontier(dag, types, table, stop_at=target)
    pts = _points(part)
    assert min(pts) == target
    assert all(full[t] == c for t, c in pts.items())


def test_integer_cost_table_fits_scipys_32_bit_capacities() -> None:
    savings = [np.array([5000.0, 20.0, 1e-3]), np.array([], dtype=float)]
    table = IntegerCostTable.from_float([1, 4], [4, 4], savings, [100.0, 7.0], type_counts=[5000, 10])
    assert table.unit_j > 0
    assert 5000 * int(table.savings[0][0]) < 2**28 + 5000  # the budget for all finite capacities
    assert np.all(np.diff(table.savings[0]) <= 0)  # rounding keeps convexity
    assert abs(table.base[1] * table.unit_j - 7.0) <= table.unit_j / 2
    types = np.array([0, 1, 1])
    assert table.cost_j(types, table.cost(types, np.array([4, 4, 4]))) == pytest.approx(114.0)


@pytest.mark.parametrize("backend", ["scipy", "networkx"])
def test_residual_graph_max_flow_matches_networkx(backend: str) -> None:
    if backend == "scipy":
        pytest.importorskip("scipy")
    rng = np.random.default_rng(4)
    n = 30
    for _ in range(5):
        pairs = {
            (int(u), int(v)) for u, v in rng.integers(0, n, (120, 2)) if u < v
        }  # a DAG: no reverse edges
        tails, heads = np.array([u for u, _ in pairs]), np.array([v for _, v in pairs])
        caps_in = rng.integers(0, 50, len(pairs))
        g = ResidualGraph(n, tails, heads)
        caps = g.from_edge_order(caps_in)
        ref = nx.DiGraph()
        ref.add_nodes_from(range(n))
        ref.add_edges_from(
            (u, v, {"capacity": c}) for u, v, c in zip(tails.tolist(), heads.tolist(), caps_in.tolist())
        )
        flow = g.max_flow(caps, 0, n - 1, backend=backend)
        assert int(flow[g.tails == 0].sum()) == nx.maximum_flow_value(ref, 0, n - 1)
        assert np.all((flow >= 0) & (flow <= caps))
        for u in range(1, n - 1):  # conservation
            assert flow[g.tails == u].sum() == flow[g.heads == u].sum()
        positive = nx.DiGraph(
            [(u, v) for u, v, c in zip(tails.tolist(), heads.tolist(), caps_in.tolist()) if c > 0]
        )
        positive.add_node(0)
        assert set(np.flatnonzero(g.reachable(caps, 0)).tolist()) == nx.descendants(positive, 0) | {0}


@pytest.mark.parametrize("backend", ["scipy", "networkx"])
def test_antiparallel_edges_report_one_net_flow(backend: str) -> None:
    if backend == "scipy":
        pytest.importorskip("scipy")
    tails, heads = np.array([0, 1, 2, 2, 0]), np.array([1, 2, 1, 3, 2])
    g = ResidualGraph(4, tails, heads)
    flow = g.max_flow(g.from_edge_order(np.array([5, 3, 4, 5, 2])), 0, 3, backend=backend)
    by_edge = dict(zip(zip(g.tails.tolist(), g.heads.tolist()), flow.tolist()))
    assert by_edge[(1, 2)] == -by_edge[(2, 1)] == 3
    assert by_edge[(0, 1)] + by_edge[(0, 2)] == 5


def test_max_flow_refuses_capacities_scipy_would_wrap() -> None:
    g = ResidualGraph(2, np.array([0]), np.array([1]))
    with pytest.raises(ZeusConfigError, match="capacities must lie"):
        g.max_flow(np.array([MAX_CAPACITY + 1]), 0, 1)
    with pytest.raises(ZeusConfigError, match="share a"):
        ResidualGraph(2, np.array([0, 0]), np.array([1, 1]))
