"""The training session under every framework adapter: lifecycle, tracker and batch-size trial reporter.

Adapters (``zeus_integrations``) translate their framework's events into one
:class:`TrainingLifecycle`, which begins and ends the measurement once, keeps the
:class:`TrainingTracker`'s per-step and per-epoch time and energy, drives the optimizers, and
reports finished epochs to a batch-size trial (:class:`TrialReporter`). :class:`EnergyInsights`
configures what adapters add to their figures: J/sample and J/token, a forecast, carbon and cost.

Example:
    >>> from zeus_core.training import TrainingLifecycle
    >>> TrainingLifecycle.__name__
    'TrainingLifecycle'
"""

from zeus_core.training._insights import EnergyInsights
from zeus_core.training._lifecycle import LifecycleResults, TrainingLifecycle
from zeus_core.training._tracker import TrainingTracker
from zeus_core.training._trial_reporter import TrialReporter

__all__ = ["EnergyInsights", "LifecycleResults", "TrainingLifecycle", "TrainingTracker", "TrialReporter"]
