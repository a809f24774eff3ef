"""Measurement: time and energy of windows, power and temperature timelines, and their export to Prometheus.

:class:`ZeusMonitor` measures named windows (an epoch, a step), each giving a
:class:`Measurement`; :class:`PowerMonitor` keeps power timelines to integrate any span later;
:class:`TemperatureMonitor` keeps GPU temperature and clock-event (throttle) reasons, and
:func:`check_window` says whether a window was thermally sound (:class:`ThermalCheck`);
:class:`PrometheusExporter` and :class:`MetricsServer` publish them. docs/measuring.md explains
how a window's energy is read, docs/insights.md the thermal checks.

Example:
    >>> from zeus_core.monitor import ZeusMonitor
    >>> from zeus_core.testing import VirtualClock, simulated_gpu
    >>> clock = VirtualClock()
    >>> monitor = ZeusMonitor(gpus=[simulated_gpu("a40", clock=clock, busy=True)], cpu_indices=[])
    >>> monitor.begin_window("step"); clock.advance(2.0)
    >>> round(monitor.end_window("step").total_energy)
    600
"""

from zeus_core.monitor._energy import WindowHandle, ZeusMonitor
from zeus_core.monitor._measurement import Measurement
from zeus_core.monitor._power import PowerMonitor
from zeus_core.monitor._prometheus import MetricsServer, PrometheusExporter
from zeus_core.monitor._thermal import TemperatureMonitor, ThermalCheck, check_window

__all__ = [
    "ZeusMonitor",
    "WindowHandle",
    "Measurement",
    "PowerMonitor",
    "PrometheusExporter",
    "MetricsServer",
    "TemperatureMonitor",
    "ThermalCheck",
    "check_window",
]
