"""The training session under every framework adapter: lifecycle, tracker, options, insights, trial reporter.

Adapters (``zeus_integrations``) translate their framework's events into one
:class:`TrainingLifecycle`, which begins and ends the measurement once, keeps the
:class:`TrainingTracker`'s per-step and per-epoch time and energy, drives the Zeus optimizers, and
reports finished epochs to a batch-size trial (:class:`TrialReporter`). Every adapter takes the
same options, declared once: :class:`TrainingOptions` (and :class:`TrialOptions`); among them
``insights=``, an :class:`EnergyInsights` that configures what adapters add to their figures
(J/sample and J/token, a forecast, carbon and cost). docs/integrations.md describes the
lifecycle, docs/insights.md the insights.

Example:
    >>> from zeus_core.training import TrainingOptions
    >>> sorted(TrainingOptions.__optional_keys__)
    ['include_validation', 'insights', 'log_every_n_steps', 'monitor', 'simulate', 'verbose']
"""

from zeus_core.training._insights import EnergyInsights
from zeus_core.training._lifecycle import LifecycleResults, TrainingLifecycle
from zeus_core.training._options import TrainingOptions, TrialOptions, ZeusOptimizers
from zeus_core.training._tracker import TrainingTracker
from zeus_core.training._trial_reporter import TrialReporter

__all__ = [
    "EnergyInsights",
    "LifecycleResults",
    "TrainingLifecycle",
    "TrainingOptions",
    "TrialOptions",
    "TrainingTracker",
    "TrialReporter",
    "ZeusOptimizers",
]
