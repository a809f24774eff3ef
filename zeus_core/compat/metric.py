"""Zeus's ``zeus.metric``: :class:`EnergyHistogram`, :class:`EnergyCumulativeCounter`, :class:`PowerGauge`.

Each pushes to a Prometheus Pushgateway under Zeus's metric names and ``window``/``index``
labels (``energy_monitor_{gpu,cpu,dram}_energy_joules``, ``power_monitor_gpu_power_watts``),
built on the suite's monitors and :class:`~zeus_core.PrometheusExporter`. Zeus samples the
counter and the gauge in spawned processes; here a daemon thread per open window does it, reading
the monitor's background-measured window (so nothing in ``__main__`` is re-imported).

Example:
    >>> from zeus_core.compat.metric import EnergyHistogram
    >>> from zeus_core.testing import FakeGPUSpec, FakeNVML
    >>> with FakeNVML([FakeGPUSpec.a40()]).install():
    ...     histogram = EnergyHistogram(cpu_indices=[], gpu_indices=[0],
    ...                                 prometheus_url="http://localhost:9091", job="train")
    >>> histogram.gpu_bucket_range
    [50.0, 100.0, 200.0, 500.0, 1000.0]
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Sequence

from zeus_core.exceptions import ZeusError
from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.monitor._power import PowerMonitor
from zeus_core.monitor._prometheus import PrometheusExporter, _import_prometheus, push_registry

__all__ = ["Metric", "EnergyHistogram", "EnergyCumulativeCounter", "PowerGauge"]

logger = logging.getLogger(__name__)


class Metric:
    """What Zeus's metrics share: windows opened and closed by name.

    Example:
        >>> from zeus_core.compat.metric import Metric
        >>> Metric().begin_window("epoch")
        Traceback (most recent call last):
        ...
        NotImplementedError: Metric.begin_window
    """

    def begin_window(self, name: str, sync_execution: bool = True) -> None:
        """Open window ``name``."""
        raise NotImplementedError("Metric.begin_window")

    def end_window(self, name: str, sync_execution: bool = True) -> None:
        """Close window ``name`` and push."""
        raise NotImplementedError("Metric.end_window")


def _where(
    pushgateway_url: str | None, prometheus_url: str | None, job: str | None, what: str
) -> tuple[str, str]:
    """The Pushgateway URL (Zeus 0.16's ``pushgateway_url``, or its docs' ``prometheus_url``) and the job."""
    url = pushgateway_url if pushgateway_url is not None else prometheus_url
    if url is None or job is None:
        raise TypeError(f"{what}: give pushgateway_url= (e.g. 'http://localhost:9091') and job=.")
    return url, job


class _Periodic:
    """Calls ``tick`` every ``period_s`` in a daemon thread until stopped; ``tick`` runs once more at stop."""

    def __init__(self, tick: Callable[[], None], period_s: float, name: str) -> None:
        self._tick = tick
        self._period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._period_s):
            try:
                self._tick()
            except ZeusError as e:  # a missed push is retried at the next period
                logger.warning("%s: %s", self._thread.name, e)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._tick()


class EnergyHistogram(Metric):
    """Energy of each ended window per GPU, CPU package and DRAM, into Prometheus histograms (J), pushed.

    Args:
        cpu_indices: CPU packages to measure (``[]``: none; ``None``: all readable).
        gpu_indices: GPUs to measure (``None``: all).
        pushgateway_url: The Pushgateway, e.g. ``"http://localhost:9091"`` (Zeus's docs call it
            ``prometheus_url``; either keyword is taken).
        job: The ``job`` label of the pushed metrics.
        gpu_bucket_range: Histogram bucket bounds for GPU energy, J.
        cpu_bucket_range: Bucket bounds for CPU energy, J.
        dram_bucket_range: Bucket bounds for DRAM energy, J.

    Example:
        >>> from zeus_core.compat.metric import EnergyHistogram
        >>> EnergyHistogram([], [0], "http://pushgateway:9091", "train").begin_window  # doctest: +SKIP
    """

    def __init__(
        self,
        cpu_indices: Sequence[int] | None,
        gpu_indices: Sequence[int] | None,
        pushgateway_url: str | None = None,
        job: str | None = None,
        gpu_bucket_range: Sequence[float] = (50.0, 100.0, 200.0, 500.0, 1000.0),
        cpu_bucket_range: Sequence[float] = (10.0, 50.0, 100.0, 500.0, 1000.0),
        dram_bucket_range: Sequence[float] = (5.0, 10.0, 20.0, 50.0, 150.0),
        prometheus_url: str | None = None,
    ) -> None:
        self.prometheus_url, self.job = _where(pushgateway_url, prometheus_url, job, "EnergyHistogram")
        self.gpu_bucket_range = [float(b) for b in gpu_bucket_range]
        self.cpu_bucket_range = [float(b) for b in cpu_bucket_range]
        self.dram_bucket_range = [float(b) for b in dram_bucket_range]
        self.monitor = ZeusMonitor(gpu_indices=gpu_indices, cpu_indices=cpu_indices)
        self.exporter = PrometheusExporter(
            self.monitor,
            energy_buckets_j={
                "gpu": self.gpu_bucket_range,
                "cpu": self.cpu_bucket_range,
                "dram": self.dram_bucket_range,
            },
        )

    def begin_window(self, name: str, sync_execution: bool = True) -> None:
        """Open window ``name``."""
        self.monitor.begin_window(name, sync_execution)

    def end_window(self, name: str, sync_execution: bool = True) -> None:
        """Close window ``name``, observe its energy per device and push to the Pushgateway."""
        m = self.monitor.end_window(name, sync_execution)
        self.exporter.observe(name, m)
        top = {
            "gpu": self.gpu_bucket_range[-1],
            "cpu": self.cpu_bucket_range[-1],
            "dram": self.dram_bucket_range[-1],
        }
        for kind, energies in (("gpu", m.gpu_energy), ("cpu", m.cpu_energy), ("dram", m.dram_energy)):
            for index, joules in energies.items():
                if joules > top[kind]:
                    logger.warning(
                        "%s %d used %.1f J in window %r, above its highest bucket.", kind, index, joules, name
                    )
        self.exporter.push(self.prometheus_url, self.job)


class EnergyCumulativeCounter(Metric):
    """Energy of open windows, added to Prometheus counters every ``update_period`` s and pushed.

    Args:
        cpu_indices: CPU packages to measure (``[]``: none; ``None``: all readable).
        gpu_indices: GPUs to measure (``None``: all).
        update_period: Seconds between counter updates and pushes.
        pushgateway_url: The Pushgateway (or ``prometheus_url=``, as Zeus's docs call it).
        job: The ``job`` label.

    Example:
        >>> from zeus_core.compat.metric import EnergyCumulativeCounter
        >>> EnergyCumulativeCounter([], [0], 2, "http://pushgateway:9091", "train")  # doctest: +SKIP
    """

    def __init__(
        self,
        cpu_indices: Sequence[int] | None,
        gpu_indices: Sequence[int] | None,
        update_period: float,
        pushgateway_url: str | None = None,
        job: str | None = None,
        prometheus_url: str | None = None,
    ) -> None:
        prom = _import_prometheus()
        self.update_period = float(update_period)
        self.prometheus_url, self.job = _where(
            pushgateway_url, prometheus_url, job, "EnergyCumulativeCounter"
        )
        self.monitor = ZeusMonitor(gpu_indices=gpu_indices, cpu_indices=cpu_indices)
        self.registry = prom.CollectorRegistry()
        self._counters = {
            kind: prom.Counter(
                f"energy_monitor_{kind}_energy_joules",
                f"{kind.upper()} energy of the window so far, J.",
                ["window", "index"],
                registry=self.registry,
            )
            for kind in ("gpu", "cpu", "dram")
        }
        self._windows: dict[str, tuple[_Periodic, dict[tuple[str, int], float]]] = {}

    def _tick(self, name: str, counted: dict[tuple[str, int], float]) -> None:
        m = self.monitor.read_window(name)
        for kind, energies in (("gpu", m.gpu_energy), ("cpu", m.cpu_energy), ("dram", m.dram_energy)):
            for index, joules in energies.items():
                delta = joules - counted.get((kind, index), 0.0)
                if delta > 0:
                    self._counters[kind].labels(name, str(index)).inc(delta)
                    counted[(kind, index)] = joules
        push_registry(self.prometheus_url, self.job, self.registry, where="EnergyCumulativeCounter")

    def begin_window(self, name: str, sync_execution: bool = False) -> None:
        """Open window ``name`` and start counting its energy every ``update_period`` s."""
        self.monitor.begin_window(name, sync_execution)
        counted: dict[tuple[str, int], float] = {}
        periodic = _Periodic(lambda: self._tick(name, counted), self.update_period, f"zeus-counter-{name}")
        self._windows[name] = (periodic, counted)

    def end_window(self, name: str, sync_execution: bool = False) -> None:
        """Stop counting window ``name`` (its last energy is counted and pushed) and close it."""
        periodic, _ = self._windows.pop(name)
        periodic.stop()
        self.monitor.end_window(name, sync_execution)


class PowerGauge(Metric):
    """GPU power (W) in a Prometheus gauge per open window, set and pushed every ``update_period`` s.

    Args:
        gpu_indices: GPUs to watch (``None``: all).
        update_period: Seconds between samples and pushes.
        pushgateway_url: The Pushgateway (or ``prometheus_url=``, as Zeus's docs call it).
        job: The ``job`` label.

    Example:
        >>> from zeus_core.compat.metric import PowerGauge
        >>> PowerGauge([0], 2, "http://pushgateway:9091", "train")  # doctest: +SKIP
    """

    def __init__(
        self,
        gpu_indices: Sequence[int] | None,
        update_period: float,
        pushgateway_url: str | None = None,
        job: str | None = None,
        prometheus_url: str | None = None,
        **suite_options: Any,
    ) -> None:
        prom = _import_prometheus()
        self.update_period = float(update_period)
        self.prometheus_url, self.job = _where(pushgateway_url, prometheus_url, job, "PowerGauge")
        self.power = PowerMonitor(
            gpu_indices=gpu_indices, interval_s=min(self.update_period, 0.1), **suite_options
        )
        self.registry = prom.CollectorRegistry()
        self._gauge = prom.Gauge(
            "power_monitor_gpu_power_watts", "GPU power draw, W.", ["window", "index"], registry=self.registry
        )
        self._windows: dict[str, _Periodic] = {}

    def _tick(self, name: str) -> None:
        for index, watts in self.power.get_power().items():
            self._gauge.labels(name, str(index)).set(watts)
        push_registry(self.prometheus_url, self.job, self.registry, where="PowerGauge")

    def begin_window(self, name: str, sync_execution: bool = False) -> None:
        """Start sampling power into the gauge of window ``name``."""
        self.power.start()
        self._windows[name] = _Periodic(lambda: self._tick(name), self.update_period, f"zeus-gauge-{name}")

    def end_window(self, name: str, sync_execution: bool = False) -> None:
        """Stop window ``name``'s gauge (after a last sample and push)."""
        self._windows.pop(name).stop()
        if not self._windows:
            self.power.stop()
