"""Zeus's ``zeus.monitor.power``: :class:`PowerMonitor` with power domains, polling from construction.

The suite's :class:`zeus_core.PowerMonitor` samples in a thread once started; Zeus's starts on
construction, takes ``update_period``/``max_samples_per_gpu``/``power_domains`` and answers
``get_power``, ``get_power_timeline(domain, ...)``, ``get_all_power_timelines`` and
``get_energy`` (``None`` before any sample). This class is that shape over the suite's monitor.

Example:
    >>> from zeus_core.compat.monitor import PowerMonitor
    >>> from zeus_core.testing import simulated_gpu
    >>> monitor = PowerMonitor(update_period=0.05, gpus=[simulated_gpu("a40", busy=True)])
    >>> monitor.measurement_domains, monitor.get_power()
    ([<PowerDomain.DEVICE_INSTANT: 'device_instant'>], {0: 300.0})
    >>> monitor.stop()
"""

from __future__ import annotations

import logging
from enum import Enum
from typing import Any, Sequence

from zeus_core.monitor import _power

__all__ = ["PowerMonitor", "PowerDomain"]

logger = logging.getLogger(__name__)

_DEFAULT_PERIOD_S = 0.1  # Zeus's inferred period is at most this
_DEFAULT_CAPACITY = 360_000  # samples per GPU and domain when Zeus's "unbounded" is asked: 10 h at 0.1 s


class PowerDomain(str, Enum):
    """What a GPU's power is read as (Zeus's names).

    Example:
        >>> from zeus_core.compat.monitor.power import PowerDomain
        >>> PowerDomain("device_average") is PowerDomain.DEVICE_AVERAGE
        True
    """

    DEVICE_INSTANT = "device_instant"
    DEVICE_AVERAGE = "device_average"
    MEMORY_AVERAGE = "memory_average"


class PowerMonitor:
    """Zeus's ``PowerMonitor``: polls every supported power domain of the GPUs from construction.

    Args:
        gpu_indices: GPUs to watch (``cuda:<i>``); ``None``: all.
        update_period: Sampling period, s; ``None``: 0.1 s (the longest period Zeus infers).
        max_samples_per_gpu: Samples kept per GPU and domain; ``None``: 360,000 (10 h at 0.1 s).
        power_domains: Domains to sample; ``None``: every domain the GPUs report.
        **suite_options: ``gpus=`` (GPU objects instead of this machine's, e.g. simulated ones).

    Raises:
        ValueError: Empty ``gpu_indices``/``power_domains``, or a domain the GPUs do not report.

    Example:
        >>> from zeus_core.compat.monitor import PowerMonitor
        >>> from zeus_core.testing import simulated_gpu
        >>> monitor = PowerMonitor(gpus=[simulated_gpu("a40", busy=True)])
        >>> list(monitor.get_all_power_timelines())
        ['device_instant']
        >>> monitor.stop()
    """

    def __init__(
        self,
        gpu_indices: Sequence[int] | None = None,
        update_period: float | None = None,
        max_samples_per_gpu: int | None = None,
        power_domains: Sequence[PowerDomain | str] | None = None,
        **suite_options: Any,
    ) -> None:
        if gpu_indices is not None and not gpu_indices:
            raise ValueError("PowerMonitor(gpu_indices=[]): give None (all GPUs) or at least one index.")
        if power_domains is not None and not power_domains:
            raise ValueError("PowerMonitor(power_domains=[]): give None (every supported domain) or some.")
        gpus = suite_options.pop("gpus", None)
        if gpus is None:
            from zeus_core.device import get_gpus

            gpus = get_gpus()
        chosen = _power._select(list(gpus), gpu_indices)
        supported = [PowerDomain(d) for d in _power.supported_power_domains(chosen)]
        requested = supported if power_domains is None else [PowerDomain(d) for d in power_domains]
        for domain in requested:
            if domain not in supported:
                raise ValueError(
                    f"PowerMonitor(power_domains=[..., {domain.value!r}]): these GPUs do not report it. "
                    f"Supported domains: {[d.value for d in supported]}."
                )
        if update_period is None:
            update_period = _DEFAULT_PERIOD_S
        elif update_period < 0.05:
            logger.warning(
                "An update period of %g s may be too fast for the GPUs' power readings.", update_period
            )
        self.gpu_indices = [g.index for g in chosen]
        self.update_period = float(update_period)
        self.measurement_domains: list[PowerDomain] = list(dict.fromkeys(requested))
        self._monitor = _power.PowerMonitor(
            gpus=chosen,
            interval_s=self.update_period,
            capacity=max_samples_per_gpu or _DEFAULT_CAPACITY,
            domains=[d.value for d in self.measurement_domains] or ["device_instant"],
            **suite_options,
        )
        self._monitor.start()

    def _domain(self, power_domain: PowerDomain | str, call: str) -> str:
        domain = PowerDomain(power_domain)
        if domain not in self.measurement_domains:
            raise ValueError(
                f"PowerMonitor.{call}: power domain {domain.value!r} is not monitored. "
                f"Monitored domains: {[d.value for d in self.measurement_domains]}."
            )
        return domain.value

    def get_power_timeline(
        self,
        power_domain: PowerDomain | str,
        gpu_index: int | None = None,
        start_time: float | None = None,
        end_time: float | None = None,
    ) -> dict[int, list[tuple[float, float]]]:
        """Power samples of one domain: GPU index -> ``[(time s, W)]``, oldest first.

        Raises:
            ValueError: The domain is not monitored.
        """
        domain = self._domain(power_domain, "get_power_timeline")
        timeline = self._monitor.get_power_timeline(start_time, end_time, domain=domain)
        return {i: s for i, s in timeline.items() if gpu_index is None or i == gpu_index}

    def get_all_power_timelines(
        self, gpu_index: int | None = None, start_time: float | None = None, end_time: float | None = None
    ) -> dict[str, dict[int, list[tuple[float, float]]]]:
        """Every monitored domain's timeline: domain name -> GPU index -> ``[(time s, W)]``."""
        return {
            d.value: self.get_power_timeline(d, gpu_index, start_time, end_time)
            for d in self.measurement_domains
        }

    def get_energy(
        self, start_time: float, end_time: float, power_domain: PowerDomain | str | None = None
    ) -> dict[int, float] | None:
        """Energy per GPU between two ``time.time()`` instants, J; ``None`` before any sample.

        Integrates ``power_domain`` (``None``: instant power where monitored, else the device's average).

        Raises:
            ValueError: The domain (or, with ``None``, either device domain) is not monitored.
        """
        if power_domain is not None:
            domain: str | None = self._domain(power_domain, "get_energy")
        elif {PowerDomain.DEVICE_INSTANT, PowerDomain.DEVICE_AVERAGE} & set(self.measurement_domains):
            domain = None
        else:
            raise ValueError(
                "PowerMonitor.get_energy: neither device_instant nor device_average is monitored."
            )
        try:
            return self._monitor.get_energy(start_time, end_time, domain=domain)
        except ValueError:  # no sample yet
            return None

    def get_power(
        self, time: float | None = None, power_domain: PowerDomain | str = PowerDomain.DEVICE_INSTANT
    ) -> dict[int, float] | None:
        """Power per GPU at ``time`` (nearest sample; ``None``: latest), W; ``None`` before any sample.

        Raises:
            ValueError: ``power_domain`` is not monitored.
        """
        domain = self._domain(power_domain, "get_power")
        power = self._monitor.get_power(time, domain=domain)
        return power if len(power) == len(self.gpu_indices) else None

    def stop(self) -> None:
        """Stop polling (samples stay queryable)."""
        self._monitor.stop()
