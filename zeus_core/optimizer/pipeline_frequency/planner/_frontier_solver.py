"""Phillips–Dessouky time–cost frontier with exact long steps and warm-started flows.

From every instruction at its slowest, each step shortens the DAG at the least marginal cost, a
minimum cut of the critical sub-DAG. Why each point is optimal, and why integer costs, warm starts
and long steps keep it so: docs/optimizers/perseus.md ("The frontier: iterated minimum cuts").
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from zeus_core.exceptions import ZeusError
from zeus_core.optimizer.pipeline_frequency.planner._dag import PipelineDAG
from zeus_core.optimizer.pipeline_frequency.planner._max_flow import (
    FlowBackend,
    ResidualGraph,
    default_backend,
)

__all__ = ["IntegerCostTable", "SolverStep", "SolverResult", "CutNetwork", "solve_frontier"]

logger = logging.getLogger(__name__)

_INF = 2**30
_FINITE_BUDGET = 2**28
# Node ids of the flow network: super source, source, sink, then in_i = 3 + 2i, out_i = 4 + 2i.
_SUPER, _SRC, _SNK = 0, 1, 2


@dataclass(frozen=True)
class IntegerCostTable:
    """Convex piecewise-linear costs in integer units, one row per cost *type*.

    Attributes:
        min_q, max_q: Duration range of each type, quanta.
        savings: Per type, ``savings[t][q - min_q - 1] = c(q - 1) − c(q)`` for
            ``q = min_q+1 .. max_q`` in cost units; non-increasing in ``q``.
        base: Per type, ``c(max_q)`` in cost units.
        unit_j: Joules per cost unit.
        base_j: Per type, ``c(max_q)`` in J, unrounded (for reports; ``None``: ``base × unit_j``).
    """

    min_q: np.ndarray
    max_q: np.ndarray
    savings: list[np.ndarray]
    base: np.ndarray
    unit_j: float
    base_j: np.ndarray | None = None

    @classmethod
    def from_float(
        cls,
        min_q: Sequence[int],
        max_q: Sequence[int],
        savings_j: Sequence[np.ndarray],
        base_j: Sequence[float],
        type_counts: Sequence[int],
    ) -> "IntegerCostTable":
        """Round per-quantum savings (J) to a common integer unit.

        Args:
            min_q: Shortest duration per type, quanta.
            max_q: Longest duration per type, quanta.
            savings_j: Non-increasing per-quantum savings, J.
            base_j: Cost at ``max_q``, J.
            type_counts: How many DAG instructions use each type (sets the unit so that the sum
                of all capacities stays below 2**28).
        """
        total = sum(float(s[0]) * c for s, c in zip(savings_j, type_counts) if len(s))
        unit = max(total / _FINITE_BUDGET, 1e-12)
        savings = [np.rint(np.asarray(s, dtype=float) / unit).astype(np.int64) for s in savings_j]
        base_f = np.asarray(base_j, dtype=float)
        base = np.rint(base_f / unit).astype(np.int64)
        return cls(
            np.asarray(min_q, dtype=np.int64), np.asarray(max_q, dtype=np.int64), savings, base, unit, base_f
        )

    def cost_j(self, types: np.ndarray, cost_units: np.ndarray | int) -> np.ndarray | float:
        """Convert total costs in units (of instructions of ``types``) to J with the exact base."""
        base_units = int(self.base[types].sum())
        base_j = float(self.base_j[types].sum()) if self.base_j is not None else base_units * self.unit_j
        return base_j + (np.asarray(cost_units) - base_units) * self.unit_j

    def cost(self, types: np.ndarray, durations: np.ndarray) -> int:
        """Total cost (units) of instructions of ``types`` at ``durations``."""
        total = int(self.base[types].sum())
        for t, q in zip(types.tolist(), durations.tolist()):
            s = self.savings[t]
            total += int(s[q - self.min_q[t] : self.max_q[t] - self.min_q[t]].sum())
        return total


@dataclass
class SolverStep:
    """One cut applied ``length`` times: durations ``d − j·direction`` for ``j = 1..length``.

    Attributes:
        start_time: Longest path before the step, quanta.
        length: Quanta removed by the step.
        slope: Added cost per quantum removed, cost units.
        ops: Instructions whose durations change.
        direction: ``+1`` shortened, ``-1`` lengthened, per entry of ``ops``.
    """

    start_time: int
    length: int
    slope: int
    ops: np.ndarray
    direction: np.ndarray


@dataclass
class SolverResult:
    """The frontier as a start point plus long steps.

    Attributes:
        initial_durations: Every instruction at its slowest, quanta.
        initial_cost: Cost of the start point, cost units.
        steps: The steps, from the longest time to the shortest.
        min_time: Longest path with every instruction at its fastest, quanta.
        flows: Max-flow computations run.
        newton_evaluations: Parametric longest-path evaluations run.
        solve_time_s: Wall time of the solve, s.
    """

    initial_durations: np.ndarray
    initial_cost: int
    steps: list[SolverStep]
    min_time: int
    flows: int = 0
    newton_evaluations: int = 0
    solve_time_s: float = 0.0
    _checkpoints: dict[int, np.ndarray] = field(default_factory=dict, repr=False)

    def durations_after(self, num_steps: int, extra: int = 0) -> np.ndarray:
        """Durations after ``num_steps`` full steps plus ``extra`` quanta of the next one."""
        base = max((k for k in self._checkpoints if k <= num_steps), default=0)
        d = (self._checkpoints[base] if base else self.initial_durations).copy()
        for step in self.steps[base:num_steps]:
            d[step.ops] -= step.length * step.direction
        if extra:
            step = self.steps[num_steps]
            d[step.ops] -= extra * step.direction
        return d


class CutNetwork:
    """The flow network of a DAG for minimum cuts (instruction ``i`` is the edge ``in_i → out_i``).

    Nodes: super source 0, source 1, sink 2, then ``in_i = 3 + 2i`` and ``out_i = 4 + 2i``.
    Edges, in this order: super source → source (capacity "infinity", which keeps every flow
    value within 32 bits), the instruction edges, the DAG's edges ``out_u → in_v``, source →
    ``in`` of every DAG source, ``out`` of every DAG sink → sink. Every edge can carry residual
    capacity forwards (``ub − flow``) and backwards (``flow − lb``); :attr:`residual` fixes that
    layout once.

    Args:
        dag: The DAG.
    """

    SUPER, SOURCE, SINK = _SUPER, _SRC, _SNK
    INF = _INF

    def __init__(self, dag: PipelineDAG) -> None:
        self.dag = dag
        n = dag.num_nodes
        ops = np.arange(n)
        self.tails = np.concatenate(
            [[_SUPER], 3 + 2 * ops, 4 + 2 * dag.edge_src, np.full(len(dag.sources), _SRC), 4 + 2 * dag.sinks]
        )
        self.heads = np.concatenate(
            [[_SRC], 4 + 2 * ops, 3 + 2 * dag.edge_dst, 3 + 2 * dag.sources, np.full(len(dag.sinks), _SNK)]
        )
        self.num_nodes, self.num_arcs = 3 + 2 * n, len(self.tails)
        self.ops = slice(1, 1 + n)
        self.residual = ResidualGraph(
            self.num_nodes, np.concatenate([self.tails, self.heads]), np.concatenate([self.heads, self.tails])
        )
        pos = np.empty(2 * self.num_arcs, dtype=np.int64)
        pos[self.residual.order] = np.arange(2 * self.num_arcs)
        self._fwd_pos = pos[: self.num_arcs]  # layout position of each edge's forward residual

    def critical(
        self, ef: np.ndarray, lf: np.ndarray, d: np.ndarray, makespan: float, tol: float = 0.0
    ) -> np.ndarray:
        """Mask of edges on a longest path (``tol``: absolute tolerance for float times)."""
        dag = self.dag
        crit_op = np.abs(lf - ef) <= tol
        return np.concatenate(
            [
                [True],
                crit_op,
                np.abs(lf[dag.edge_dst] - d[dag.edge_dst] - ef[dag.edge_src]) <= tol,
                crit_op[dag.sources],
                np.abs(ef[dag.sinks] - makespan) <= tol,
            ]
        )

    def residual_capacities(
        self, crit: np.ndarray, flow: np.ndarray, lb: np.ndarray, ub: np.ndarray
    ) -> np.ndarray:
        """Residual capacities of the critical edges, in the residual layout."""
        return self.residual.from_edge_order(
            np.concatenate([np.where(crit, ub - flow, 0), np.where(crit, flow - lb, 0)])
        )

    def augment(self, caps: np.ndarray, backend: FlowBackend | None) -> np.ndarray:
        """Max flow in a residual graph; returns the flow change per edge (tail → head)."""
        return self.residual.max_flow(caps, _SUPER, _SNK, backend)[self._fwd_pos]

    def source_side(self, caps: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        """Nodes reachable from the super source over positive residual capacity.

        Returns:
            Per instruction, whether its ``in`` node and its ``out`` node are reachable, and
            whether the sink is (then the flow is not maximal yet).
        """
        in_s = self.residual.reachable(caps, _SUPER)
        n = self.dag.num_nodes
        return in_s[3 : 3 + 2 * n : 2], in_s[4 : 4 + 2 * n : 2], bool(in_s[_SNK])


def solve_frontier(
    dag: PipelineDAG,
    types: np.ndarray,
    table: IntegerCostTable,
    *,
    long_steps: bool = True,
    backend: FlowBackend | None = None,
    check_invariants: bool = False,
    checkpoint_every: int = 64,
    stop_at: int | None = None,
) -> SolverResult:
    """Run Phillips–Dessouky from all-slowest down to the shortest iteration time.

    Args:
        dag: The iteration's DAG.
        types: Cost type of each instruction (row of ``table``), indexed like ``dag.instructions``.
        table: Integer cost model.
        long_steps: Apply each cut for as many quanta as stay optimal (``False``: one quantum
            per cut, as lowtime does; for tests and comparisons).
        backend: Max-flow back end (``"scipy"`` or ``"networkx"``; default: scipy if installed).
        check_invariants: Verify the flow certificate after every step (slower; for tests).
        checkpoint_every: Keep full durations every this many steps (fast reconstruction).
        stop_at: Stop once the longest path is at most this many quanta (``None``: go down to
            the shortest time). A step that would pass it is cut at it.

    Raises:
        ZeusError: An internal invariant failed (a bug; please report it with the inputs).
    """
    started = time.perf_counter()
    backend = backend or default_backend()
    n = dag.num_nodes
    types = np.asarray(types, dtype=np.int64)
    lo, hi = table.min_q[types], table.max_q[types]
    pieces = _Pieces.of(table, types, long_steps)
    net = CutNetwork(dag)
    op_arcs = net.ops
    flow = np.zeros(net.num_arcs, dtype=np.int64)
    lb = np.zeros(net.num_arcs, dtype=np.int64)
    ub = np.full(net.num_arcs, _INF, dtype=np.int64)
    key_scale = 4 * n + 4  # path key = length·key_scale − (#shortened − #lengthened)

    d = hi.copy()
    min_time = int(dag.longest_path(lo))
    result = SolverResult(d.copy(), table.cost(types, d), [], min_time)
    ef = dag.earliest_finish(d)
    while True:
        makespan = int(ef.max())
        if stop_at is not None and makespan <= stop_at:
            break
        crit = net.critical(ef, dag.latest_finish(d, makespan), d, makespan)
        idx_short, idx_long = pieces.bounds(d, lo, hi, lb, ub, op_arcs)
        if check_invariants:
            _check_certificate(flow, lb, ub, crit)
        cut = _min_cut(net, crit, flow, lb, ub, backend, result)
        if cut is None:
            break  # every cut crosses an instruction already at its fastest: shortest time reached
        s_in, s_out = cut
        crit_op = crit[op_arcs]
        shorten = crit_op & s_in & ~s_out
        lengthen = crit_op & ~s_in & s_out & (flow[op_arcs] > 0)
        if not shorten.any():
            raise ZeusError("Perseus planner: finite minimum cut shortens nothing (internal error).")
        direction = shorten.astype(np.int64) - lengthen.astype(np.int64)
        k = pieces.step_limit(idx_short[shorten], idx_long[lengthen])
        if stop_at is not None:
            k = min(k, max(makespan - stop_at, 1))
        k, evals, ef = _longest_safe_step(dag, d, direction, makespan, k, key_scale)
        result.newton_evaluations += evals
        if k == 0:
            raise ZeusError("Perseus planner: no integral step keeps the cut optimal (internal error).")
        changed = np.flatnonzero(direction)
        result.steps.append(SolverStep(makespan, k, int(flow[0]), changed, direction[changed]))
        d = d - k * direction
        if checkpoint_every and len(result.steps) % checkpoint_every == 0:
            result._checkpoints[len(result.steps)] = d.copy()
    if makespan != min_time and (stop_at is None or makespan > stop_at):
        raise ZeusError(
            f"Perseus planner stopped at {makespan} quanta, expected the minimum {min_time} (internal error)."
        )
    result.solve_time_s = time.perf_counter() - started
    logger.debug(
        "PD frontier: %d steps, %d flows, %d Newton evaluations, %.3f s",
        len(result.steps),
        result.flows,
        result.newton_evaluations,
        result.solve_time_s,
    )
    return result


@dataclass(frozen=True)
class _Pieces:
    """Per-quantum savings of every type, flattened, with the run length of each linear piece.

    ``savings[off[i] + q - lo[i] - 1]`` is what instruction ``i`` costs to shorten from ``q``;
    ``run_down`` / ``run_up`` count how many quanta further down / up the saving stays the same
    (1 everywhere without long steps). The last entry is a sentinel (saving 0, run 0).
    """

    savings: np.ndarray
    run_down: np.ndarray
    run_up: np.ndarray
    off: np.ndarray

    @classmethod
    def of(cls, table: IntegerCostTable, types: np.ndarray, long_steps: bool) -> "_Pieces":
        offsets = np.concatenate([[0], np.cumsum([len(s) for s in table.savings])[:-1]]).astype(np.int64)
        down, up = [], []
        for s in table.savings:
            rd, ru = np.ones(len(s), np.int64), np.ones(len(s), np.int64)
            for j in range(1, len(s)):
                if s[j] == s[j - 1]:
                    rd[j] = rd[j - 1] + 1
            for j in range(len(s) - 2, -1, -1):
                if s[j] == s[j + 1]:
                    ru[j] = ru[j + 1] + 1
            down.append(rd)
            up.append(ru)
        sentinel = [np.zeros(1, np.int64)]
        run_down, run_up = np.concatenate(down + sentinel), np.concatenate(up + sentinel)
        if not long_steps:
            run_down, run_up = np.minimum(run_down, 1), np.minimum(run_up, 1)
        savings = np.concatenate(list(table.savings) + sentinel)
        return cls(savings, run_down, run_up, offsets[types])

    def bounds(
        self, d: np.ndarray, lo: np.ndarray, hi: np.ndarray, lb: np.ndarray, ub: np.ndarray, ops: slice
    ) -> tuple[np.ndarray, np.ndarray]:
        """Set the instruction edges' flow bounds for durations ``d``; returns the piece indices used."""
        can_short, can_long = d > lo, d < hi
        idx_short = np.where(can_short, self.off + d - lo - 1, len(self.savings) - 1)
        idx_long = np.where(can_long, self.off + d - lo, len(self.savings) - 1)
        ub[ops] = np.where(can_short, self.savings[idx_short], _INF)
        lb[ops] = np.where(can_long, self.savings[idx_long], 0)
        return idx_short, idx_long

    def step_limit(self, shortened: np.ndarray, lengthened: np.ndarray) -> int:
        """Quanta every changed instruction stays on its current linear piece."""
        limit = int(self.run_down[shortened].min())
        return min(limit, int(self.run_up[lengthened].min())) if len(lengthened) else limit


def _min_cut(
    net: CutNetwork,
    crit: np.ndarray,
    flow: np.ndarray,
    lb: np.ndarray,
    ub: np.ndarray,
    backend: FlowBackend,
    result: SolverResult,
) -> tuple[np.ndarray, np.ndarray] | None:
    """Source side of a minimum cut of the critical sub-DAG (``flow`` is made maximal in place).

    Returns:
        Per instruction, whether its ``in`` and ``out`` nodes are on the source side; ``None``
        when the minimum cut is infinite (the shortest time is reached).

    Raises:
        ZeusError: The warm-start flow violates its bounds (internal error).
    """
    caps = net.residual_capacities(crit, flow, lb, ub)
    if caps.min() < 0:
        raise ZeusError("Perseus planner: warm-start flow violates its bounds (internal error).")
    s_in, s_out, sink_reached = net.source_side(caps)
    if sink_reached:
        # The warm-start flow is no longer maximal: augment it in its residual graph.
        flow += net.augment(caps, backend)
        result.flows += 1
        if int(flow[0]) >= _INF:
            return None
        s_in, s_out, _ = net.source_side(net.residual_capacities(crit, flow, lb, ub))
    return s_in, s_out


def _longest_safe_step(
    dag: PipelineDAG, d: np.ndarray, a: np.ndarray, makespan: int, k: int, key_scale: int
) -> tuple[int, int, np.ndarray]:
    """Largest ``j ≤ k`` with ``longest_path(d − j·a) == makespan − j`` (Newton from above).

    ``g(j) = longest_path(d − j·a) + j − makespan`` is convex, piecewise linear and zero on
    ``[0, j*]``; at a violating ``j`` the longest path (ties broken towards the fewest net
    shortenings, i.e. the steepest line) is a supporting line of ``g`` whose root is a new upper
    bound, so the iterates decrease to ``floor(j*)`` in finitely many evaluations.

    Returns:
        ``(j, evaluations, earliest finish times at d − j·a)``.
    """
    evals = 0
    half = key_scale // 2
    while k > 0:
        evals += 1
        keys = dag.earliest_finish((d - k * a) * key_scale - a)
        top = int(keys.max())
        length = (top + half) // key_scale
        net_short = length * key_scale - top
        if length <= makespan - k:
            return k, evals, (keys + half) // key_scale
        length0 = length + k * net_short
        k = (makespan - length0) // (1 - net_short)
    return 0, evals, dag.earliest_finish(d)


def _check_certificate(flow: np.ndarray, lb: np.ndarray, ub: np.ndarray, crit: np.ndarray) -> None:
    if np.any(lb[~crit] != 0):
        raise ZeusError(
            "Perseus planner: a non-critical instruction could be slowed for free (internal error)."
        )
    if np.any(flow[~crit] != 0):
        raise ZeusError("Perseus planner: flow on a non-critical edge (internal error).")
    if np.any(flow[crit] < lb[crit]) or np.any(flow[crit] > ub[crit]):
        raise ZeusError("Perseus planner: flow outside its bounds (internal error).")
