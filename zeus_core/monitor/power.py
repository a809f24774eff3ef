"""Deprecated: ``from zeus_core import PowerMonitor`` (or ``from zeus_core.monitor import PowerMonitor``)."""

from zeus_core._deprecation import moved
from zeus_core.monitor._power import PowerMonitor

__all__ = ["PowerMonitor"]

moved(__name__, "from zeus_core import PowerMonitor")
