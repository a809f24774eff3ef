"""Zeus's ``zeus.device``: :func:`get_gpus`, :func:`get_cpus`, :func:`get_soc` in Zeus's units (mW, mJ).

Example:
    >>> from zeus_core.compat.device import get_gpus
    >>> from zeus_core.testing import FakeGPUSpec, FakeNVML
    >>> with FakeNVML([FakeGPUSpec.a40()]).install():
    ...     get_gpus().get_instant_power_usage(0)
    250000
"""

from zeus_core.compat.device.cpu import CpuDramMeasurement, CPUs, get_cpus
from zeus_core.compat.device.gpu import GPUs, get_gpus
from zeus_core.compat.device.soc import get_soc

__all__ = ["get_gpus", "get_cpus", "get_soc", "GPUs", "CPUs", "CpuDramMeasurement"]
