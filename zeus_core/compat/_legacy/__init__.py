"""Zeus's ``zeus._legacy``: the NSDI '23 trace-driven simulator's API over :mod:`zeus_core.simulate`.

Zeus's research-reproducibility examples (``run_single.py``) build a ``Job``, a
``PruningGTSBatchSizeOptimizer``, a ``JITPowerLimitOptimizer`` and a ``Simulator`` over the train
and power traces, and read back a list of ``HistoryEntry`` (batch size, power limit W, energy J,
whether the target was reached, time s). Here the same calls run the suite's simulator
(:func:`zeus_core.simulate.simulate`) under the suite's batch-size policy
(:class:`zeus_core.simulate.ZeusPolicy`); see docs/migrating.md for how its choices differ.

Example:
    >>> from zeus_core.compat._legacy.job import Job
    >>> str(Job("squad", "bert_base_uncased", "adamw", 84.0, 6, 32))
    'Job(squad,bert_base_uncased,adamw,84.0,bs32~6)'
"""
