"""Zeus's ``zeus.optimizer``: ``power_limit``, ``batch_size`` and ``pipeline_frequency``.

Example:
    >>> from zeus_core.compat.optimizer.power_limit import GlobalPowerLimitOptimizer, ZeusCost
    >>> ZeusCost(eta_knob=0.5).eta_knob
    0.5
"""
