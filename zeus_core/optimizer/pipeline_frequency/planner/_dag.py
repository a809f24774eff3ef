"""The computation DAG of one pipeline iteration, and longest-path arithmetic on it.

Kept as a networkx graph and as level-grouped numpy arrays, so longest paths over thousands of
instructions are a few vectorised calls (docs/optimizers/perseus.md, "The iteration's DAG").
"""

from __future__ import annotations

from typing import Sequence

import networkx as nx  # type: ignore[import-untyped]
import numpy as np

from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.pipeline_frequency._schedule import Instruction, PipelineSchedule

__all__ = ["PipelineDAG"]


class PipelineDAG:
    """Dependency DAG of one iteration of a :class:`PipelineSchedule`.

    Args:
        schedule: The schedule; its program orders and data dependencies become edges.

    Attributes:
        schedule: The schedule.
        graph: ``networkx.DiGraph`` over :class:`Instruction` nodes; node attribute ``index`` is
            the node's position in :attr:`instructions`.
        instructions: Instructions in a topological order (every edge goes from a lower index to
            a higher one).
        edge_src, edge_dst: Edge endpoints as indices into :attr:`instructions`.
        sources, sinks: Indices of instructions without predecessors / successors.

    Raises:
        ZeusConfigError: The schedule deadlocks (its dependencies contain a cycle); the message
            shows the cycle.

    Example:
        >>> from zeus_core.optimizer.pipeline_frequency import synchronous_1f1b
        >>> dag = PipelineDAG(synchronous_1f1b(2, 2))
        >>> dag.num_nodes, dag.graph.number_of_edges()
        (8, 10)
        >>> dag.longest_path([1.0] * 8)  # every instruction takes 1 s
        6.0
    """

    def __init__(self, schedule: PipelineSchedule) -> None:
        self.schedule = schedule
        graph = nx.DiGraph()
        graph.add_nodes_from(schedule.instructions())
        graph.add_edges_from(schedule.program_order_edges(), kind="program")
        for a, b in schedule.data_dependencies():
            if not graph.has_edge(a, b):
                graph.add_edge(a, b, kind="data")
        try:
            generations = [sorted(g) for g in nx.topological_generations(graph)]
        except nx.NetworkXUnfeasible:
            cycle = nx.find_cycle(graph)
            raise ZeusConfigError(
                f"Schedule {schedule.name!r} deadlocks: its instructions wait on each other in a cycle "
                f"{' -> '.join(str(a) for a, _ in cycle)} -> {cycle[0][0]}. Fix the per-stage order."
            ) from None
        self.instructions: list[Instruction] = [inst for gen in generations for inst in gen]
        self.index: dict[Instruction, int] = {inst: i for i, inst in enumerate(self.instructions)}
        for inst, i in self.index.items():
            graph.nodes[inst]["index"] = i
        self.graph = graph
        n = len(self.instructions)
        src = np.array([self.index[a] for a, b in graph.edges], dtype=np.int64)
        dst = np.array([self.index[b] for a, b in graph.edges], dtype=np.int64)
        order = np.lexsort((src, dst))
        self.edge_src, self.edge_dst = src[order], dst[order]
        indeg = np.bincount(self.edge_dst, minlength=n)
        outdeg = np.bincount(self.edge_src, minlength=n)
        self.sources = np.flatnonzero(indeg == 0)
        self.sinks = np.flatnonzero(outdeg == 0)
        self._build_levels([len(g) for g in generations])

    def _build_levels(self, sizes: list[int]) -> None:
        """Level slices (instructions are stored level by level) and padded neighbour tables."""
        n = len(self.instructions)
        bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self._levels = [(int(bounds[i]), int(bounds[i + 1])) for i in range(len(sizes))]
        self.level = np.repeat(np.arange(len(sizes)), sizes)
        # Per level: its slice and the columns of its padded predecessor / successor tables
        # (neighbours listed per instruction, padded with the sentinel index n).
        preds = _padded(self.edge_dst, self.edge_src, n)
        succs = _padded(self.edge_src, self.edge_dst, n)
        self._fwd = [
            (a, b, [preds[a:b, j].copy() for j in range(preds.shape[1])]) for a, b in self._levels[1:]
        ]
        self._bwd = [
            (a, b, [succs[a:b, j].copy() for j in range(succs.shape[1])]) for a, b in reversed(self._levels)
        ]

    @property
    def num_nodes(self) -> int:
        """Number of instructions."""
        return len(self.instructions)

    def earliest_finish(self, durations: Sequence[float] | np.ndarray) -> np.ndarray:
        """Earliest finish time of every instruction when each starts as soon as it can.

        Args:
            durations: Duration of each instruction, indexed like :attr:`instructions` (any unit;
                integer arrays stay integer). Durations must not be negative. A 2-D array
                ``(instructions, plans)`` evaluates many plans at once (one column each).
        """
        d = np.asarray(durations)
        ef = np.zeros((len(d) + 1, *d.shape[1:]), dtype=d.dtype)  # ef[n] = 0 is the padding sentinel
        a, b = self._levels[0]
        ef[a:b] = d[a:b]
        for a, b, cols in self._fwd:
            m = ef[cols[0]]
            for col in cols[1:]:
                np.maximum(m, ef[col], out=m)
            np.add(m, d[a:b], out=ef[a:b])
        return ef[:-1]

    def latest_finish(self, durations: Sequence[float] | np.ndarray, makespan: float) -> np.ndarray:
        """Latest finish time of every instruction that still ends the iteration by ``makespan``."""
        d = np.asarray(durations)
        ls = np.empty(len(d) + 1, dtype=np.result_type(d.dtype, type(makespan)))
        ls[-1] = makespan  # padding sentinel: "no successor"
        lf = np.empty(len(d), dtype=ls.dtype)
        for a, b, cols in self._bwd:
            m = ls[cols[0]]
            for col in cols[1:]:
                np.minimum(m, ls[col], out=m)
            lf[a:b] = m
            np.subtract(m, d[a:b], out=ls[a:b])
        return lf

    def longest_path(self, durations: Sequence[float] | np.ndarray) -> float:
        """Iteration time (the DAG's longest path) for the given durations."""
        return self.earliest_finish(durations).max().item()

    def longest_paths(self, durations: np.ndarray) -> np.ndarray:
        """Iteration time of many plans at once: ``durations`` is ``(plans, instructions)``."""
        d = np.asarray(durations)
        if d.ndim != 2 or d.shape[1] != self.num_nodes:
            raise ZeusConfigError(
                f"PipelineDAG.longest_paths: expected durations of shape (plans, {self.num_nodes}), "
                f"got {d.shape}."
            )
        return self.earliest_finish(np.ascontiguousarray(d.T)).max(axis=0)

    def start_times(self, durations: Sequence[float] | np.ndarray) -> np.ndarray:
        """Earliest start time of every instruction (as-soon-as-possible schedule)."""
        d = np.asarray(durations)
        return self.earliest_finish(d) - d


def _padded(keys: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """``out[i]`` lists ``values`` whose key is ``i``, padded with ``n`` to a common width (>= 1)."""
    counts = np.bincount(keys, minlength=n)
    width = max(int(counts.max()) if len(counts) else 0, 1)
    out = np.full((n, width), n, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    k, v = keys[order], values[order]
    first = np.searchsorted(k, k)
    out[k, np.arange(len(k)) - first] = v
    return out
