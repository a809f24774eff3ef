"""Zeus's ``zeus.utils.framework``: :func:`sync_execution`, :func:`all_reduce` and the rank helpers.

Example:
    >>> from zeus_core.compat.utils.framework import all_reduce, get_rank, is_distributed
    >>> all_reduce([1.0, 2.0], "sum"), get_rank(), is_distributed()  # a single process
    ([1.0, 2.0], 0, False)
"""

from __future__ import annotations

from typing import Literal, Sequence

from zeus_core import _distributed
from zeus_core.monitor._sync import sync_execution

__all__ = ["sync_execution", "all_reduce", "is_distributed", "get_rank", "get_world_size"]


def all_reduce(object: Sequence[float], operation: Literal["sum", "max"]) -> list[float]:
    """Element-wise sum or max of ``object`` over all ranks (``torch.distributed``; itself alone).

    Example:
        >>> from zeus_core.compat.utils.framework import all_reduce
        >>> all_reduce([3.0], "max")
        [3.0]
    """
    return _distributed.all_reduce(object, operation)


def is_distributed() -> bool:
    """Whether ``torch.distributed`` is initialised with more than one rank.

    Example:
        >>> from zeus_core.compat.utils.framework import is_distributed
        >>> is_distributed()
        False
    """
    return _distributed.world_size() > 1


def get_rank() -> int:
    """This process's global rank (0 outside ``torch.distributed``).

    Example:
        >>> from zeus_core.compat.utils.framework import get_rank
        >>> get_rank()
        0
    """
    return _distributed.rank()


def get_world_size() -> int:
    """The number of ranks (1 outside ``torch.distributed``).

    Example:
        >>> from zeus_core.compat.utils.framework import get_world_size
        >>> get_world_size()
        1
    """
    return _distributed.world_size()
