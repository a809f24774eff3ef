"""Perseus: per-instruction GPU frequency plans for pipeline-parallel training.

The data every part shares (pipeline schedules, instruction profiles, frequency plans) is here;
:mod:`.planner` computes the time–energy frontier and its plans, and :mod:`.runtime` profiles,
plans and applies them inside training. The algorithm: docs/optimizers/perseus.md.

Names load lazily (listed once, in ``__init__.pyi``), so importing this package imports neither
numpy, scipy, matplotlib nor torch.

Example:
    >>> from zeus_core.optimizer.pipeline_frequency import FrequencyPlan, synchronous_1f1b
    >>> FrequencyPlan.uniform(synchronous_1f1b(2, 2), 1410).frequency(1, "backward", 0)
    1410
"""

from zeus_core._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__, globals())
