"""Hypothesis strategies for the parser fuzz tests: any JSON, and valid documents with one part broken."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats()  # NaN and infinities included, as json.loads reads them
    | st.text(max_size=12)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
"""Any JSON value (with NaN/Infinity, which Python's json reads and writes)."""


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    paths = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            paths += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            paths += _paths(item, (*prefix, i))
    return paths


@st.composite
def broken(draw: st.DrawFn, valid: Any) -> Any:
    """``valid`` with one part replaced by any JSON value, or deleted."""
    doc = copy.deepcopy(valid)
    path = draw(st.sampled_from(_paths(doc)))
    if not path:
        return draw(JSON)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if isinstance(parent, dict) and draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = draw(JSON)
    return doc
