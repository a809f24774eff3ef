"""Zeus's ``zeus.monitor.temperature``: :class:`TemperatureMonitor`, polling from construction.

The suite's :class:`zeus_core.TemperatureMonitor` has Zeus's query methods
(``get_temperature_timeline``, ``get_temperature``) and starts with ``start()``; Zeus's starts when
it is made and takes ``max_samples_per_gpu``.

Example:
    >>> from zeus_core.compat.monitor import TemperatureMonitor
    >>> from zeus_core.testing import FakeGPUSpec, FakeNVML
    >>> with FakeNVML([FakeGPUSpec.a40()]).install():
    ...     monitor = TemperatureMonitor(update_period=0.1)
    ...     print(monitor.get_temperature())
    ...     monitor.stop()
    {0: 30.0}
"""

from __future__ import annotations

from typing import Any, Sequence

from zeus_core.monitor import _thermal

__all__ = ["TemperatureMonitor"]


class TemperatureMonitor(_thermal.TemperatureMonitor):
    """Zeus's ``TemperatureMonitor(gpu_indices, update_period, max_samples_per_gpu)``, started at once.

    Args:
        gpu_indices: GPUs to watch (``cuda:<i>``); ``None``: all.
        update_period: Sampling period, s.
        max_samples_per_gpu: Samples kept per GPU; ``None``: 36,000.
        **suite_options: ``gpus=`` (GPU objects instead of this machine's), ``clock=``.

    Example:
        >>> from zeus_core.compat.monitor import TemperatureMonitor
        >>> from zeus_core.testing import FakeGPUSpec, FakeNVML
        >>> with FakeNVML([FakeGPUSpec.a40(), FakeGPUSpec.a40()]).install():
        ...     monitor = TemperatureMonitor(gpu_indices=[1], update_period=0.1)
        ...     print(list(monitor.get_temperature_timeline()))
        ...     monitor.stop()
        [1]
    """

    def __init__(
        self,
        gpu_indices: Sequence[int] | None = None,
        update_period: float = 1.0,
        max_samples_per_gpu: int | None = None,
        **suite_options: Any,
    ) -> None:
        super().__init__(
            suite_options.pop("gpus", None),
            gpu_indices,
            update_period=update_period,
            capacity=max_samples_per_gpu or 36_000,
            **suite_options,
        )
        self.gpu_indices = [g.index for g in self.gpus]
        self.start()
