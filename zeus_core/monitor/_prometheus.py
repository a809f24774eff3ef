"""Prometheus export of a ZeusMonitor's devices and windows: a pull endpoint and Pushgateway pushes.

Device values are read when Prometheus scrapes (no sampling thread); finished windows go into
histograms. docs/measuring.md lists the metrics.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence

from zeus_core.exceptions import ZeusConfigError

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from zeus_core.monitor._energy import WindowHandle, ZeusMonitor
    from zeus_core.monitor._measurement import Measurement

__all__ = [
    "PrometheusExporter",
    "MetricsServer",
    "push_registry",
    "DEFAULT_ENERGY_BUCKETS_J",
    "DEFAULT_TIME_BUCKETS_S",
]

logger = logging.getLogger(__name__)


def _one_two_five(first: float, count: int) -> tuple[float, ...]:
    """``count`` bucket bounds stepping 1, 2.5, 5 per decade from ``first`` (1, 2.5, 5, 10, 25, ...)."""
    bounds = (first * m * 10**k for k in range(count // 3 + 1) for m in (1.0, 2.5, 5.0))
    return tuple(float(f"{b:.6g}") for b in bounds)[:count]


DEFAULT_ENERGY_BUCKETS_J: tuple[float, ...] = _one_two_five(1.0, 22)
"""Default upper bounds of the window-energy histogram buckets, J (a training step to a long run)."""

DEFAULT_TIME_BUCKETS_S: tuple[float, ...] = _one_two_five(0.01, 22)
"""Default upper bounds of the window-time histogram buckets, s (10 ms to about a day)."""

_INSTALL_HINT = "pip install 'zeus-suite[prometheus]'"
_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def _import_prometheus() -> Any:
    """The ``prometheus_client`` module, or a ``ModuleNotFoundError`` naming the extra to install."""
    try:
        import prometheus_client
        import prometheus_client.metrics_core
    except ImportError as e:
        raise ModuleNotFoundError(
            f"Prometheus export needs the prometheus_client package, which is not installed: {_INSTALL_HINT}",
            name="prometheus_client",
        ) from e
    return prometheus_client


def _zeus_prefix(namespace: str) -> str:
    """Prefix of the metrics Zeus also publishes: none by default, so their names are Zeus's own.

    Zeus (``zeus.metric``) names them without a namespace; a namespace other than the default
    ``"zeus"`` prefixes them too, so two exporters can share one registry.
    """
    return "" if namespace in ("zeus", "") else f"{namespace}_"


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _check_buckets(arg: str, buckets: Sequence[float]) -> tuple[float, ...]:
    values = tuple(float(b) for b in buckets)
    increasing = all(a < b for a, b in zip(values, values[1:]))
    if not values or not increasing or any(not math.isfinite(b) or b <= 0 for b in values):
        raise ZeusConfigError(
            f"PrometheusExporter({arg}={list(buckets)}): give a non-empty, strictly increasing list of "
            "finite bucket bounds > 0 (the +Inf bucket is added automatically)."
        )
    return values


class _DeviceCollector:
    """Reads the monitor's devices at every scrape (the ``prometheus_client`` Collector protocol)."""

    def __init__(self, monitor: ZeusMonitor, namespace: str, families: Any) -> None:
        self._monitor = monitor
        self._prefix = f"{namespace}_" if namespace else ""
        self._zeus = _zeus_prefix(namespace)
        self._core = families  # prometheus_client.metrics_core
        self._lock = threading.Lock()  # one scrape at a time: device reads need not be thread-safe
        self._names: dict[object, str] = {}  # device -> name label, once read
        self._errors: dict[tuple[str, str], int] = {}

    def _families(self) -> dict[str, Any]:
        counter, gauge, p = self._core.CounterMetricFamily, self._core.GaugeMetricFamily, self._prefix
        gpu, cpu = ["gpu", "name", "simulated"], ["cpu", "name", "simulated"]
        return {
            "gpu_energy": counter(
                f"{p}gpu_energy_joules",
                "GPU energy counter since an arbitrary "
                "origin (e.g. driver load), J; absent for GPUs without one.",
                labels=gpu,
                unit="joules",
            ),
            "gpu_power": gauge(  # Zeus's PowerGauge name and index label
                f"{self._zeus}power_monitor_gpu_power_watts",
                "GPU power draw when scraped, W.",
                labels=["index", "name", "simulated"],
                unit="watts",
            ),
            "gpu_limit": gauge(
                f"{p}gpu_power_limit_watts", "GPU power limit when scraped, W.", labels=gpu, unit="watts"
            ),
            "cpu_energy": counter(
                f"{p}cpu_energy_joules", "CPU package energy counter (RAPL), J.", labels=cpu, unit="joules"
            ),
            "dram_energy": counter(
                f"{p}dram_energy_joules",
                "DRAM energy counter of a CPU package (RAPL), J.",
                labels=cpu,
                unit="joules",
            ),
            "errors": counter(
                f"{p}read_errors",
                "Device readings that failed and were left out of a scrape.",
                labels=["device", "reading"],
            ),
        }

    def describe(self) -> Iterable[Any]:
        """The metric families without samples (lets a registry check names without reading devices)."""
        return list(self._families().values())

    def collect(self) -> Iterable[Any]:
        """Read every device of the monitor now; a failing reading is left out and counted."""
        with self._lock:
            fam = self._families()
            for gpu in self._monitor.gpus:
                labels = [str(gpu.index), self._name(gpu, f"gpu{gpu.index}"), _flag(gpu.simulated)]
                device = f"gpu{gpu.index}"
                if self._read(device, "has_energy_counter", lambda: gpu.has_energy_counter):
                    energy = self._read(device, "energy", gpu.get_total_energy)
                    if energy is not None:
                        fam["gpu_energy"].add_metric(labels, float(energy))
                for key, what, read in (
                    ("gpu_power", "power", gpu.get_power),
                    ("gpu_limit", "power_limit", gpu.get_power_limit),
                ):
                    value = self._read(device, what, read)
                    if value is not None:
                        fam[key].add_metric(labels, float(value))
            for cpu in self._monitor.cpus:
                reading = self._read(f"cpu{cpu.index}", "energy", cpu.get_energy)
                if reading is None:
                    continue
                labels = [str(cpu.index), self._name(cpu, f"cpu{cpu.index}"), _flag(cpu.simulated)]
                fam["cpu_energy"].add_metric(labels, float(reading.cpu_j))
                if reading.dram_j is not None:
                    fam["dram_energy"].add_metric(labels, float(reading.dram_j))
            for (device, what), count in sorted(self._errors.items()):
                fam["errors"].add_metric([device, what], float(count))
        return list(fam.values())

    def _name(self, device: Any, label: str) -> str:
        name = self._names.get(device)
        if name is None:
            name = self._read(label, "name", lambda: device.name)
            if name is None:
                return "unknown"  # not cached: tried again at the next scrape
            self._names[device] = name = str(name)
        return name

    def _read(self, device: str, what: str, read: Callable[[], Any]) -> Any:
        """``read()``, or ``None`` when it raises (warned once per device and reading, then counted)."""
        try:
            return read()
        except Exception as e:  # a scrape must survive any device failure
            key = (device, what)
            if key not in self._errors:
                logger.warning(
                    "Prometheus scrape: reading %s of %s failed: %s. The reading is left out of every "
                    "scrape in which it fails and counted in read_errors_total (warned once).",
                    what,
                    device,
                    e,
                )
            self._errors[key] = self._errors.get(key, 0) + 1
            return None


class MetricsServer:
    """A running ``/metrics`` HTTP endpoint started by :meth:`PrometheusExporter.serve`.

    Attributes:
        addr: The address it listens on.
        port: The TCP port it listens on (the one the OS picked when ``serve(port=0)``).
        url: ``http://<addr>:<port>/metrics``.

    Example:
        >>> from zeus_core import PrometheusExporter, ZeusMonitor
        >>> with PrometheusExporter(ZeusMonitor(gpus=[], cpu_indices=[])).serve(0) as server:
        ...     server.url.startswith("http://127.0.0.1:")
        True
    """

    def __init__(self, httpd: Any, thread: threading.Thread, addr: str) -> None:
        self._httpd = httpd
        self._thread = thread
        self.addr = addr
        self.port: int = httpd.server_address[1]
        host = f"[{addr}]" if ":" in addr else addr
        self.url = f"http://{host}:{self.port}/metrics"
        self._closed = False

    def close(self) -> None:
        """Stop serving and free the port. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5.0)

    def __enter__(self) -> "MetricsServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PrometheusExporter:
    """Exports a :class:`~zeus_core.monitor.ZeusMonitor`'s devices and windows to Prometheus.

    Device values are read when Prometheus scrapes :meth:`serve`'s endpoint (no background process,
    thread or sampling); :meth:`push` sends the same metrics to a Pushgateway for batch jobs. Metrics
    Zeus also publishes keep Zeus's names, so its dashboards keep working (docs/measuring.md lists them).

    Args:
        monitor: The monitor whose ``gpus`` and ``cpus`` are read at each scrape.
        registry: Where the metrics are registered. ``None``: a new registry of this exporter's
            own (pass ``prometheus_client.REGISTRY`` to join the process-wide default one).
        namespace: Prefix of the metric names Zeus does not publish (``""`` for none); any value
            other than ``"zeus"`` and ``""`` also prefixes Zeus's names.
        energy_buckets_j: Upper bounds of the window-energy histogram buckets, J; or a mapping
            ``{"gpu": ..., "cpu": ..., "dram": ...}`` of bounds per device kind (kinds left out get
            the default).
        time_buckets_s: Upper bounds of the window-time histogram buckets, s.

    Raises:
        ModuleNotFoundError: ``prometheus_client`` is not installed (the message gives the pip command).
        ZeusConfigError: A bad namespace or bucket list, ``monitor`` is not a ZeusMonitor, or the
            registry already holds metrics with these names.

    Example:
        >>> from zeus_core import PhysicalModel, PrometheusExporter, SimulatedGPU, VirtualClock, ZeusMonitor
        >>> clock = VirtualClock()
        >>> gpu = SimulatedGPU(PhysicalModel.a40(), clock=clock, busy=True)
        >>> exporter = PrometheusExporter(ZeusMonitor(gpus=[gpu], cpu_indices=[]))
        >>> with exporter.window("epoch"):
        ...     clock.advance(10.0)  # train_one_epoch()
        >>> server = exporter.serve(0)  # any free port; e.g. serve(9400) for http://127.0.0.1:9400/metrics
        >>> from urllib.request import urlopen
        >>> text = urlopen(server.url).read().decode()
        >>> [line for line in text.splitlines() if line.startswith("zeus_gpu_energy")]
        ['zeus_gpu_energy_joules_total{gpu="0",name="NVIDIA A40 (simulated)",simulated="true"} 3000.0']
        >>> exporter.push("pushgateway:9091", job="nightly-train")  # batch jobs  # doctest: +SKIP
        >>> exporter.close()  # stops the server
    """

    def __init__(
        self,
        monitor: ZeusMonitor,
        registry: CollectorRegistry | None = None,
        namespace: str = "zeus",
        *,
        energy_buckets_j: Sequence[float] | Mapping[str, Sequence[float]] = DEFAULT_ENERGY_BUCKETS_J,
        time_buckets_s: Sequence[float] = DEFAULT_TIME_BUCKETS_S,
    ) -> None:
        prom = _import_prometheus()
        if not isinstance(namespace, str) or (namespace and not _NAME_RE.match(namespace)):
            raise ZeusConfigError(
                f"PrometheusExporter(namespace={namespace!r}): use letters, digits and underscores, "
                "not starting with a digit (e.g. 'zeus'), or '' for no prefix."
            )
        if not (hasattr(monitor, "gpus") and hasattr(monitor, "cpus")):
            raise ZeusConfigError(
                f"PrometheusExporter(monitor={monitor!r}): expected a ZeusMonitor (its gpus and cpus are "
                "read at each scrape). Create one with ZeusMonitor(...) and pass it."
            )
        per_kind = energy_buckets_j if isinstance(energy_buckets_j, Mapping) else {}
        unknown = sorted(set(per_kind) - {"gpu", "cpu", "dram"})
        if unknown:
            raise ZeusConfigError(
                f"PrometheusExporter(energy_buckets_j=...): unknown device kinds {unknown}; "
                "use 'gpu', 'cpu', 'dram'."
            )
        energy_buckets = {
            kind: _check_buckets(
                "energy_buckets_j",
                per_kind.get(kind, DEFAULT_ENERGY_BUCKETS_J) if per_kind else energy_buckets_j,  # type: ignore[arg-type]
            )
            for kind in ("gpu", "cpu", "dram")
        }
        time_buckets = _check_buckets("time_buckets_s", time_buckets_s)
        self.monitor = monitor
        self.registry = registry if registry is not None else prom.CollectorRegistry()
        self._prom = prom
        self._servers: list[MetricsServer] = []
        self._registered: list[Any] = []
        try:
            self._register(_DeviceCollector(monitor, namespace, prom.metrics_core))
            # Zeus's EnergyHistogram names: one histogram per device kind, labels window and index.
            self._energy = {
                kind: self._register(
                    prom.Histogram(
                        f"{_zeus_prefix(namespace)}energy_monitor_{kind}_energy_joules",
                        f"{kind.upper()} energy of a finished measurement window, J.",
                        ["window", "index", "simulated", *(["estimated"] if kind == "gpu" else [])],
                        unit="joules",
                        registry=None,
                        buckets=energy_buckets[kind],
                    )
                )
                for kind in ("gpu", "cpu", "dram")
            }
            self._time = self._register(
                prom.Histogram(
                    "window_time_seconds",
                    "Duration of a finished measurement window, s.",
                    ["window", "simulated"],
                    namespace=namespace,
                    unit="seconds",
                    registry=None,
                    buckets=time_buckets,
                )
            )
        except ValueError as e:  # prometheus_client: "Duplicated timeseries in CollectorRegistry"
            self._unregister()
            raise ZeusConfigError(
                f"PrometheusExporter(namespace={namespace!r}): the registry already has these metrics "
                f"({e}). close() the other exporter first, or give this one another namespace or registry."
            ) from e

    def _register(self, collector: Any) -> Any:
        self.registry.register(collector)
        self._registered.append(collector)
        return collector

    def _unregister(self) -> None:
        for collector in self._registered:
            try:
                self.registry.unregister(collector)
            except KeyError:
                pass
        self._registered.clear()

    # -- windows --------------------------------------------------------------------------------
    @staticmethod
    def _check_window(call: str, window: object) -> None:
        if not isinstance(window, str) or not window:
            raise ZeusConfigError(
                f"PrometheusExporter.{call}(window={window!r}): the window name must be a non-empty "
                "string; it becomes the 'window' label (e.g. 'epoch' or 'step')."
            )

    def observe(self, window: str, measurement: Measurement) -> None:
        """Record a finished window's energy per device (J) and its duration (s) in the histograms.

        Args:
            window: Window name, the ``window`` label (use a few fixed names such as ``"step"``,
                not one per step: each distinct name makes new time series).
            measurement: What :meth:`ZeusMonitor.end_window` returned.

        Raises:
            ZeusConfigError: ``window`` is not a non-empty string.
        """
        self._check_window("observe", window)
        sim = _flag(measurement.simulated)
        for i, energy in measurement.gpu_energy.items():
            estimated = _flag(i in measurement.estimated_gpus)
            self._energy["gpu"].labels(window, str(i), sim, estimated).observe(energy)
        for kind, energies in (("cpu", measurement.cpu_energy), ("dram", measurement.dram_energy)):
            for i, energy in (energies or {}).items():  # None: not measured (Zeus's shape)
                self._energy[kind].labels(window, str(i), sim).observe(energy)
        self._time.labels(window, sim).observe(measurement.time)

    @contextmanager
    def window(self, name: str, sync_execution: bool = True) -> Iterator[WindowHandle]:
        """Measure a ``with`` block in a monitor window and :meth:`observe` it when the block ends.

        The window is observed even when the block raises (its energy was spent all the same).

        Args:
            name: Window name (also the ``window`` label).
            sync_execution: Passed to :meth:`ZeusMonitor.window`.

        Raises:
            ZeusConfigError: ``name`` is not a non-empty string.
            ZeusWindowError: A window with this name is already open on the monitor.
        """
        self._check_window("window", name)
        handle: WindowHandle | None = None
        try:
            with self.monitor.window(name, sync_execution) as handle:
                yield handle
        finally:
            if handle is not None and handle.measurement is not None:
                self.observe(name, handle.measurement)

    # -- export ---------------------------------------------------------------------------------
    def serve(self, port: int, addr: str = "127.0.0.1") -> MetricsServer:
        """Serve ``/metrics`` over HTTP from a daemon thread; values are read at each scrape.

        Args:
            port: TCP port, 0-65535; 0 lets the OS pick a free one (see ``MetricsServer.port``).
            addr: Address to listen on. The default answers only this machine; ``"0.0.0.0"``
                (or ``"::"``) answers every network interface.

        Returns:
            The running server; ``close()`` it (or :meth:`close` this exporter) to stop it.

        Raises:
            ZeusConfigError: ``port`` is out of range, ``addr`` is empty, or the address cannot be
                listened on (the port is taken, or the address is not this machine's).
        """
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ZeusConfigError(
                f"PrometheusExporter.serve(port={port!r}): the port must be an integer in 0-65535 "
                "(e.g. 9400; 0 lets the OS pick a free one)."
            )
        if not isinstance(addr, str) or not addr.strip():
            raise ZeusConfigError(
                f"PrometheusExporter.serve(addr={addr!r}): give an address to listen on, such as "
                "'127.0.0.1' (this machine only) or '0.0.0.0' (every interface)."
            )
        try:
            httpd, thread = self._prom.start_http_server(port, addr=addr, registry=self.registry)
        except OSError as e:
            raise ZeusConfigError(
                f"PrometheusExporter.serve(port={port}, addr={addr!r}): cannot listen there "
                f"({e.strerror or e}). Pick another port (0 for any free one) or stop the process that "
                "holds it, and use an address of this machine."
            ) from e
        server = MetricsServer(httpd, thread, addr)
        self._servers.append(server)
        logger.debug("Serving Prometheus metrics at %s", server.url)
        return server

    def push(
        self,
        gateway: str,
        job: str,
        grouping_key: Mapping[str, str] | None = None,
        timeout_s: float | None = 30.0,
    ) -> None:
        """Send the current metrics to a Prometheus Pushgateway (HTTP PUT, replacing the group).

        Device values are read now; window histograms hold everything observed so far.

        Args:
            gateway: Pushgateway address, e.g. ``"localhost:9091"`` or ``"https://pushgw:9091"``.
            job: The ``job`` label, e.g. ``"nightly-train"``.
            grouping_key: Further labels identifying this pusher, e.g. ``{"instance": "node3"}``.
            timeout_s: Give up connecting after this long, s (``None``: never).

        Raises:
            ZeusConfigError: An empty ``gateway`` or ``job``, a bad grouping key, or the
                Pushgateway could not be reached or refused the metrics.
        """
        push_registry(gateway, job, self.registry, grouping_key, timeout_s, where="PrometheusExporter.push")

    # -- lifetime -------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop every server :meth:`serve` started and remove this exporter's metrics from the registry.

        The monitor is left open (it belongs to the caller). Idempotent.
        """
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()
        self._unregister()

    def __enter__(self) -> "PrometheusExporter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def push_registry(
    gateway: str,
    job: str,
    registry: CollectorRegistry,
    grouping_key: Mapping[str, str] | None = None,
    timeout_s: float | None = 30.0,
    *,
    where: str = "push_registry",
) -> None:
    """Send a registry's metrics to a Prometheus Pushgateway (HTTP PUT, replacing the group).

    Args:
        gateway: Pushgateway address, e.g. ``"localhost:9091"`` or ``"https://pushgw:9091"``.
        job: The ``job`` label.
        registry: The metrics to send.
        grouping_key: Further labels identifying the pusher.
        timeout_s: Give up connecting after this long, s (``None``: never).
        where: The caller, for messages.

    Raises:
        ZeusConfigError: An empty ``gateway`` or ``job``, a bad grouping key, or the Pushgateway
            could not be reached or refused the metrics.

    Example:
        >>> from prometheus_client import CollectorRegistry
        >>> from zeus_core.monitor._prometheus import push_registry
        >>> push_registry("", "train", CollectorRegistry())  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        zeus_core.exceptions.ZeusConfigError: push_registry(gateway=''): give the Pushgateway address, ...
    """
    prom = _import_prometheus()
    if not isinstance(gateway, str) or not gateway.strip():
        raise ZeusConfigError(
            f"{where}(gateway={gateway!r}): give the Pushgateway address, e.g. "
            "'localhost:9091' or 'http://pushgateway:9091'."
        )
    scheme = gateway.split("://", 1)[0].lower() if "://" in gateway else "http"
    if scheme not in ("http", "https"):
        raise ZeusConfigError(
            f"{where}(gateway={gateway!r}): the Pushgateway speaks http or https, "
            f"not {scheme!r}; write e.g. 'http://pushgateway:9091'."
        )
    if not isinstance(job, str) or not job.strip():
        raise ZeusConfigError(f"{where}(job={job!r}): give a non-empty job name, e.g. job='nightly-train'.")
    key = dict(grouping_key or {})
    for name, value in key.items():
        if not isinstance(name, str) or not _NAME_RE.match(name) or name == "job":
            raise ZeusConfigError(
                f"{where}(grouping_key={key!r}): {name!r} is not a usable label name; "
                "use letters, digits and underscores (not 'job', which the job argument sets)."
            )
        if not isinstance(value, str):
            raise ZeusConfigError(
                f"{where}(grouping_key={key!r}): the value of {name!r} must be a "
                f"string, not {type(value).__name__}; write e.g. {{{name!r}: str(...)}}."
            )
    if timeout_s is not None and not timeout_s > 0:
        raise ZeusConfigError(f"{where}(timeout_s={timeout_s!r}): must be > 0 s, or None to wait forever.")
    try:
        prom.push_to_gateway(gateway, job=job, registry=registry, grouping_key=key, timeout=timeout_s)
    except (OSError, ValueError) as e:  # urllib's URLError and HTTPError are OSErrors
        raise ZeusConfigError(
            f"{where}(gateway={gateway!r}, job={job!r}): the Pushgateway did not "
            f"take the metrics ({e}). Check that a Pushgateway runs at that address and port."
        ) from e
