"""Measurement: ZeusMonitor (energy/time windows), PowerMonitor (power timelines), TemperatureMonitor."""

from zeus_core.monitor._thermal import TemperatureMonitor, ThermalCheck, check_window
from zeus_core.monitor.energy import WindowHandle, ZeusMonitor
from zeus_core.monitor.measurement import Measurement

__all__ = ["ZeusMonitor", "WindowHandle", "Measurement", "TemperatureMonitor", "ThermalCheck", "check_window"]
