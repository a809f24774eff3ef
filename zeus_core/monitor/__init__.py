"""Measurement: ZeusMonitor (energy/time windows) and PowerMonitor (power timelines)."""

from zeus_core.monitor.energy import WindowHandle, ZeusMonitor
from zeus_core.monitor.measurement import Measurement

__all__ = ["ZeusMonitor", "WindowHandle", "Measurement"]
