"""Zeus's ``zeus._legacy.policy``: ``JITPowerLimitOptimizer`` and ``PruningGTSBatchSizeOptimizer``.

Example:
    >>> from zeus_core.compat._legacy.policy import JITPowerLimitOptimizer
    >>> JITPowerLimitOptimizer().name
    'JITPSO'
"""

from zeus_core.compat._legacy.policy.optimizer import JITPowerLimitOptimizer, PruningGTSBatchSizeOptimizer

__all__ = ["JITPowerLimitOptimizer", "PruningGTSBatchSizeOptimizer"]
