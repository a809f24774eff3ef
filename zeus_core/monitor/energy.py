"""Deprecated: ``from zeus_core import ZeusMonitor`` (or ``from zeus_core.monitor import ZeusMonitor``)."""

from zeus_core._deprecation import moved
from zeus_core.monitor._energy import ZeusMonitor

__all__ = ["ZeusMonitor"]

moved(__name__, "from zeus_core import ZeusMonitor")
