"""Zeus's ``zeus.monitor.power_streaming``: live power of many nodes' daemons, streamed over SSE.

:class:`PowerStreamingClient` connects to each daemon (``zeus-suite daemon`` or Zeus's ``zeusd``)
given as a :class:`~zeus_core.compat.utils.zeusd.ZeusdConfig`, streams ``/gpu/stream_power`` and
``/cpu/stream_power`` in one thread per daemon and device kind, and keeps each device's newest
sample, timestamped on this machine's clock (the daemon's clock offset is measured with
``/time``). Streams reconnect after a failure; 401 and 403 end them.

Example:
    >>> from zeus_core.compat.monitor.power_streaming import CpuPowerReading, PowerReadings
    >>> PowerReadings(1718000000.0, {0: 250.0}, {0: CpuPowerReading(80.0, 12.5)}).gpu_power_w
    {0: 250.0}
"""

from __future__ import annotations

import asyncio
import copy
import logging
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Iterator, Sequence

from zeus_core.compat.utils.zeusd import ZeusdConfig
from zeus_core.device._zeusd import DaemonClient, EventStream
from zeus_core.exceptions import ZeusConfigError, ZeusPermissionError

__all__ = ["CpuPowerReading", "PowerReadings", "PowerStreamingClient"]

logger = logging.getLogger(__name__)


@dataclass
class CpuPowerReading:
    """A CPU package's power and its DRAM's, W (``dram_w`` is ``None`` without a DRAM domain).

    Example:
        >>> from zeus_core.compat.monitor.power_streaming import CpuPowerReading
        >>> CpuPowerReading(cpu_w=80.0).dram_w is None
        True
    """

    cpu_w: float
    dram_w: float | None = None


@dataclass
class PowerReadings:
    """The newest readings of one daemon: when (Unix s, this machine's clock) and per device, W.

    Example:
        >>> from zeus_core.compat.monitor.power_streaming import PowerReadings
        >>> PowerReadings(0.0).cpu_power_w
        {}
    """

    timestamp_s: float
    gpu_power_w: dict[int, float] = field(default_factory=dict)
    cpu_power_w: dict[int, CpuPowerReading] = field(default_factory=dict)


def _chosen(kind: str, asked: Sequence[int] | None, available: list[int], server: str) -> list[int]:
    if asked is None:
        return available
    missing = sorted(set(asked) - set(available))
    if missing:
        raise ZeusConfigError(
            f"PowerStreamingClient: {server} has no {kind} {missing}; it serves {available}."
        )
    return list(asked)


class PowerStreamingClient:
    """Streams the power of every daemon's devices; SSE connections start on construction.

    Args:
        servers: One :class:`ZeusdConfig` per daemon (``gpu_indices``/``cpu_indices``: ``None``
            all, ``[]`` none, a list those).
        reconnect_delay_s: Wait before reconnecting a failed stream, s.

    Raises:
        ZeusConfigError: A daemon listed twice, or indices it does not serve.
        ZeusDeviceError: A daemon cannot be reached.

    Example:
        >>> from zeus_core.compat.monitor.power_streaming import PowerStreamingClient
        >>> from zeus_core.compat.utils.zeusd import ZeusdConfig
        >>> client = PowerStreamingClient([ZeusdConfig.tcp("node1", 4938)])  # doctest: +SKIP
        >>> client.get_power()["node1:4938"].gpu_power_w  # doctest: +SKIP
        {0: 251.3, 1: 248.7}
        >>> client.stop()  # doctest: +SKIP
    """

    def __init__(self, servers: Sequence[ZeusdConfig], reconnect_delay_s: float = 1.0) -> None:
        names = [s.endpoint for s in servers]
        if len(set(names)) != len(names):
            raise ZeusConfigError(f"PowerStreamingClient: a daemon is listed twice in {names}.")
        self.reconnect_delay_s = float(reconnect_delay_s)
        self._lock = threading.Condition()
        self._readings: dict[str, PowerReadings] = {}
        self._version = 0
        self._stop = threading.Event()
        self._streams: list[EventStream] = []
        self._threads: list[threading.Thread] = []
        for server in servers:
            self._start(server)

    def _start(self, server: ZeusdConfig) -> None:
        endpoint = server.to_endpoint()
        client = DaemonClient(endpoint, timeout_s=10.0)
        info = client.discover()
        offsets = []
        for _ in range(5):  # median of round trips: this machine's clock minus the daemon's, s
            before = time.time()
            daemon_ms = client.call("GET", "/time")["timestamp_ms"]
            offsets.append((before + time.time()) / 2 - daemon_ms / 1000.0)
        client.close()
        offset = statistics.median(offsets)
        gpus = _chosen("GPUs", server.gpu_indices, [g["id"] for g in info.get("gpus", [])], server.endpoint)
        cpus = _chosen("CPUs", server.cpu_indices, [c["id"] for c in info.get("cpus", [])], server.endpoint)
        self._readings[server.endpoint] = PowerReadings(timestamp_s=0.0)
        for kind, ids in (("gpu", gpus), ("cpu", cpus)):
            if ids:
                args = (server, kind, ",".join(map(str, ids)), offset)
                thread = threading.Thread(
                    target=self._stream, args=args, name=f"zeus-stream-{kind}-{server.endpoint}", daemon=True
                )
                self._threads.append(thread)
                thread.start()

    def _stream(self, server: ZeusdConfig, kind: str, ids: str, offset_s: float) -> None:
        while not self._stop.is_set():
            stream = EventStream(server.to_endpoint(), f"/{kind}/stream_power", {f"{kind}_ids": ids})
            self._streams.append(stream)
            try:
                for event in stream:
                    self._store(server.endpoint, kind, event, offset_s)
            except ZeusPermissionError as e:
                logger.error("PowerStreamingClient: %s refused the %s stream: %s", server.endpoint, kind, e)
                return
            except Exception as e:  # the daemon restarted or the network failed: reconnect
                logger.warning(
                    "PowerStreamingClient: %s %s stream failed (%s); reconnecting.", server.endpoint, kind, e
                )
            self._stop.wait(self.reconnect_delay_s)

    def _store(self, endpoint: str, kind: str, event: dict[str, Any], offset_s: float) -> None:
        with self._lock:
            readings = self._readings[endpoint]
            readings.timestamp_s = event["timestamp_ms"] / 1000.0 + offset_s
            if kind == "gpu":
                readings.gpu_power_w[int(event["gpu_id"])] = event["power_mw"] / 1000.0
            else:
                dram = event.get("dram_mw")
                readings.cpu_power_w[int(event["cpu_id"])] = CpuPowerReading(
                    event["cpu_mw"] / 1000.0, None if dram is None else dram / 1000.0
                )
            self._version += 1
            self._lock.notify_all()

    def get_power(self) -> dict[str, PowerReadings]:
        """The newest readings of every daemon (a copy): endpoint -> :class:`PowerReadings`."""
        with self._lock:
            return copy.deepcopy(self._readings)

    def _wait_for_update(self, seen: int) -> int | None:
        with self._lock:
            while self._version == seen and not self._stop.is_set():
                self._lock.wait(0.5)
            return None if self._stop.is_set() else self._version

    def __iter__(self) -> Iterator[dict[str, PowerReadings]]:
        """Each time new readings arrive, a snapshot (:meth:`get_power`); ends after :meth:`stop`."""
        seen = self._version
        while True:
            version = self._wait_for_update(seen)
            if version is None:
                return
            seen = version
            yield self.get_power()

    async def __aiter__(self) -> AsyncIterator[dict[str, PowerReadings]]:
        """As iteration, without blocking the event loop."""
        seen = self._version
        while True:
            version = await asyncio.to_thread(self._wait_for_update, seen)
            if version is None:
                return
            seen = version
            yield self.get_power()

    def stop(self) -> None:
        """Close every stream and end iteration (idempotent)."""
        self._stop.set()
        with self._lock:
            self._lock.notify_all()
        for stream in list(self._streams):
            stream.close()
        for thread in self._threads:
            thread.join(timeout=5.0)
