"""Integer maximum flow and reachability for the planner's minimum cuts.

A fixed edge layout, per-call capacities; scipy's compiled Dinic, or networkx's preflow-push where
scipy is missing. Both are exact (docs/optimizers/perseus.md, "The frontier: iterated minimum cuts").

Example:
    >>> import numpy as np
    >>> g = ResidualGraph(4, np.array([0, 0, 1, 1, 2]), np.array([1, 2, 2, 3, 3]))
    >>> caps = g.from_edge_order(np.array([5, 3, 2, 4, 5]))
    >>> flow = g.max_flow(caps, 0, 3, backend="networkx")
    >>> int(flow[g.tails == 0].sum())  # the flow value
    8
    >>> g.reachable(caps, 1).tolist()
    [False, True, True, True]
"""

from __future__ import annotations

import importlib.util
from typing import Literal

import numpy as np

from zeus_core.exceptions import ZeusConfigError

__all__ = ["MAX_CAPACITY", "FlowBackend", "default_backend", "ResidualGraph"]

#: Largest capacity any back end accepts exactly (scipy's 32-bit limit).
MAX_CAPACITY = 2**31 - 1

FlowBackend = Literal["scipy", "networkx"]


def default_backend() -> FlowBackend:
    """``"scipy"`` when scipy is installed, else ``"networkx"``."""
    return "scipy" if importlib.util.find_spec("scipy") is not None else "networkx"


class ResidualGraph:
    """A directed graph with a fixed edge layout and per-call capacities.

    Args:
        num_nodes: Nodes are ``0 .. num_nodes - 1``.
        tails, heads: Candidate edges, in any order; at most one per ordered pair.

    Attributes:
        tails, heads: The edges in layout order (sorted by tail, then head).
        order: ``order[j]`` is the input position of layout edge ``j``.

    Raises:
        ZeusConfigError: Two edges share the same ``(tail, head)``.
    """

    def __init__(self, num_nodes: int, tails: np.ndarray, heads: np.ndarray) -> None:
        self.num_nodes = int(num_nodes)
        tails, heads = np.asarray(tails, dtype=np.int64), np.asarray(heads, dtype=np.int64)
        keys = tails * self.num_nodes + heads
        self.order = np.argsort(keys, kind="stable")
        self._keys = keys[self.order]
        if len(self._keys) > 1 and np.any(self._keys[1:] == self._keys[:-1]):
            raise ZeusConfigError("ResidualGraph: two edges share a (tail, head) pair; merge them first.")
        self.tails, self.heads = tails[self.order], heads[self.order]
        self._heads32 = self.heads.astype(np.int32)
        self._use_scipy = importlib.util.find_spec("scipy") is not None

    def from_edge_order(self, values: np.ndarray) -> np.ndarray:
        """Permute per-edge values given in input order into layout order."""
        return np.asarray(values)[self.order]

    def _csr(self, sel: np.ndarray, data: np.ndarray):  # noqa: ANN202 - scipy type
        from scipy.sparse import csr_matrix  # type: ignore[import-untyped]

        counts = np.bincount(self.tails[sel], minlength=self.num_nodes)
        indptr = np.zeros(self.num_nodes + 1, dtype=np.int32)
        np.cumsum(counts, out=indptr[1:])
        return csr_matrix((data, self._heads32[sel], indptr), shape=(self.num_nodes, self.num_nodes))

    def reachable(self, capacities: np.ndarray, source: int) -> np.ndarray:
        """Mask of the nodes reachable from ``source`` over edges with positive capacity."""
        sel = np.flatnonzero(capacities > 0)
        mask = np.zeros(self.num_nodes, dtype=bool)
        if self._use_scipy:
            from scipy.sparse.csgraph import breadth_first_order  # type: ignore[import-untyped]

            graph = self._csr(sel, np.ones(len(sel)))
            mask[breadth_first_order(graph, source, directed=True, return_predecessors=False)] = True
            return mask
        adjacency: dict[int, list[int]] = {}
        for u, v in zip(self.tails[sel].tolist(), self.heads[sel].tolist()):
            adjacency.setdefault(u, []).append(v)
        stack, mask[source] = [source], True
        while stack:
            for v in adjacency.get(stack.pop(), ()):
                if not mask[v]:
                    mask[v] = True
                    stack.append(v)
        return mask

    def max_flow(
        self, capacities: np.ndarray, source: int, sink: int, backend: FlowBackend | None = None
    ) -> np.ndarray:
        """Maximum ``source → sink`` flow; the net flow tail→head on every layout edge (int64).

        An edge and its reverse both report the same net flow with opposite signs.

        Args:
            capacities: Non-negative integers in layout order, at most :data:`MAX_CAPACITY`.
            source: Source node.
            sink: Sink node.
            backend: ``"scipy"``, ``"networkx"``, or ``None`` for :func:`default_backend`.

        Raises:
            ZeusConfigError: A capacity is out of range, or the back end is unknown.
        """
        caps = np.asarray(capacities, dtype=np.int64)
        if len(caps) and (caps.min() < 0 or caps.max() > MAX_CAPACITY):
            raise ZeusConfigError(
                f"max_flow: capacities must lie in [0, {MAX_CAPACITY}], got [{caps.min()}, {caps.max()}]."
            )
        backend = backend or default_backend()
        sel = np.flatnonzero(caps > 0)
        out = np.zeros(len(caps), dtype=np.int64)
        if backend == "scipy":
            from scipy.sparse.csgraph import maximum_flow  # type: ignore[import-untyped]

            graph = self._csr(sel, caps[sel].astype(np.int32))
            flow = maximum_flow(graph, source, sink, method="dinic").flow
            if not flow.has_sorted_indices:  # pragma: no cover - scipy returns sorted rows
                flow.sort_indices()
            rows = np.repeat(np.arange(self.num_nodes, dtype=np.int64), np.diff(flow.indptr))
            fkeys = rows * self.num_nodes + flow.indices
            pos = np.searchsorted(fkeys, self._keys)
            pos_c = np.minimum(pos, max(len(fkeys) - 1, 0))
            found = (fkeys[pos_c] == self._keys) if len(fkeys) else np.zeros(len(caps), bool)
            out[found] = flow.data[pos_c[found]]
            return out
        if backend == "networkx":
            return self._networkx_max_flow(caps, sel, source, sink, out)
        raise ZeusConfigError(f"max_flow: unknown backend {backend!r}; use 'scipy' or 'networkx'.")

    def _networkx_max_flow(
        self, caps: np.ndarray, sel: np.ndarray, source: int, sink: int, out: np.ndarray
    ) -> np.ndarray:
        import networkx as nx  # type: ignore[import-untyped]
        from networkx.algorithms.flow import preflow_push  # type: ignore[import-untyped]

        graph = nx.DiGraph()
        graph.add_nodes_from((source, sink))
        for u, v, c in zip(self.tails[sel].tolist(), self.heads[sel].tolist(), caps[sel].tolist()):
            graph.add_edge(u, v, capacity=c)
        _, flow = nx.maximum_flow(graph, source, sink, flow_func=preflow_push)
        for j, (u, v) in enumerate(zip(self.tails.tolist(), self.heads.tolist())):
            out[j] = flow.get(u, {}).get(v, 0) - flow.get(v, {}).get(u, 0)
        return out
