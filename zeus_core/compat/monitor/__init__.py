"""Zeus's ``zeus.monitor``: :class:`ZeusMonitor`, :class:`Measurement`, :class:`PowerMonitor` and the rest.

Same arguments, units and meanings as Zeus 0.16, built on the suite's monitors. The modules
``energy``, ``power``, ``temperature``, ``carbon``, ``price`` and ``power_streaming`` stand for
Zeus's modules of the same names; ``python -m zeus.monitor`` is ``python -m zeus_core.monitor``.
See docs/migrating.md.

Example:
    >>> from zeus_core.compat.monitor import ZeusMonitor
    >>> from zeus_core.testing import VirtualClock, simulated_gpu
    >>> clock = VirtualClock()
    >>> monitor = ZeusMonitor(gpus=[simulated_gpu("a40", clock=clock, busy=True)])
    >>> monitor.begin_window("step"); clock.advance(1.0)
    >>> monitor.end_window("step").total_energy
    300.0
"""

from zeus_core.compat.monitor.energy import Measurement, ZeusMonitor
from zeus_core.compat.monitor.power import PowerDomain, PowerMonitor
from zeus_core.compat.monitor.temperature import TemperatureMonitor

__all__ = ["ZeusMonitor", "Measurement", "PowerMonitor", "PowerDomain", "TemperatureMonitor"]
