"""PowerMonitor: power timelines of GPUs (and CPU packages) sampled in the background.

:class:`~zeus_core.monitor._energy.ZeusMonitor` uses it for GPUs without an energy counter; it
also serves ``zeus-suite power`` and anyone who wants a power trace of a run.
"""

from __future__ import annotations

import csv
import logging
import threading
import time
import weakref
from pathlib import Path
from typing import Sequence

import numpy as np

from zeus_core.device._base import CPU, GPU, Clock, wall_clock
from zeus_core.exceptions import ZeusConfigError, ZeusDeviceNotFoundError, ZeusNotSupportedError

__all__ = ["PowerMonitor", "POWER_DOMAINS", "supported_power_domains"]

POWER_DOMAINS = ("device_instant", "device_average", "memory_average")
"""What a GPU's power can be read as (Zeus's power domains): instant board power, board power
averaged by the device (about 1 s on NVIDIA), and memory power averaged by the device (Hopper+)."""

_READERS = {
    "device_instant": "get_power",
    "device_average": "get_average_power",
    "memory_average": "get_memory_power",
}


def supported_power_domains(gpus: Sequence[GPU]) -> list[str]:
    """The power domains every one of ``gpus`` reports (one read of each), in :data:`POWER_DOMAINS` order.

    Example:
        >>> from zeus_core.testing import simulated_gpu
        >>> supported_power_domains([simulated_gpu("a40")])
        ['device_instant']
    """
    supported = []
    for domain in POWER_DOMAINS:
        try:
            for gpu in gpus:
                getattr(gpu, _READERS[domain])()
        except ZeusNotSupportedError:
            continue
        supported.append(domain)
    return supported


logger = logging.getLogger(__name__)

_BYTES_PER_SAMPLE = 16  # two float64: time (s) and value


class _Ring:
    """A fixed-capacity series of ``(t, value)`` samples; the oldest are dropped when full.

    Times never decrease: a sample no later than the newest one replaces the newest value.
    Not thread-safe on its own (the monitor's lock guards it).
    """

    def __init__(self, capacity: int) -> None:
        self._t = np.empty(capacity)
        self._v = np.empty(capacity)
        self._start = 0
        self._n = 0
        self.dropped = 0  # samples evicted so far

    def __len__(self) -> int:
        return self._n

    def append(self, t: float, value: float) -> None:
        cap = len(self._t)
        if self._n:
            last = (self._start + self._n - 1) % cap
            if t <= self._t[last]:
                self._v[last] = value
                return
        pos = (self._start + self._n) % cap
        self._t[pos] = t
        self._v[pos] = value
        if self._n < cap:
            self._n += 1
        else:
            self._start = (self._start + 1) % cap
            self.dropped += 1

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Copies of the times and values, oldest first."""
        end = self._start + self._n
        if end <= len(self._t):
            return self._t[self._start : end].copy(), self._v[self._start : end].copy()
        wrap = end - len(self._t)
        return (
            np.concatenate((self._t[self._start :], self._t[:wrap])),
            np.concatenate((self._v[self._start :], self._v[:wrap])),
        )


def _integrate(t: np.ndarray, w: np.ndarray, start: float, end: float) -> float:
    """Trapezoid integral of the power samples ``(t, w)`` over ``[start, end]``, J.

    Power at the bounds is interpolated linearly; before the first and after the last sample
    the first/last sample holds.
    """
    lo = max(int(np.searchsorted(t, start, side="right")) - 1, 0)  # last sample at or before start
    hi = int(np.searchsorted(t, end, side="left")) + 1  # first sample at or after end
    t, w = t[lo:hi], w[lo:hi]
    inner = t[(t > start) & (t < end)]
    xs = np.concatenate(([start], inner, [end]))
    ys = np.interp(xs, t, w)
    return float(np.sum((ys[1:] + ys[:-1]) * 0.5 * np.diff(xs)))


def _cumulative_at(t: np.ndarray, e: np.ndarray, x: float) -> float:
    """A cumulative energy series (J) at time ``x``.

    Linear between samples; beyond them, extended with the first/last interval's average power.
    """
    if len(t) == 1:
        return float(e[0])
    if x < t[0]:
        return float(e[0] - (e[1] - e[0]) / (t[1] - t[0]) * (t[0] - x))
    if x > t[-1]:
        return float(e[-1] + (e[-1] - e[-2]) / (t[-1] - t[-2]) * (x - t[-1]))
    return float(np.interp(x, t, e))


def _run(ref: "weakref.ref[PowerMonitor]", stop: threading.Event, interval_s: float) -> None:
    """Sampling loop; holds only a weak reference so an abandoned monitor stops its thread."""
    deadline = time.monotonic()
    while True:
        deadline += interval_s
        delay = deadline - time.monotonic()
        if delay < 0:  # fell behind (slow reads, suspended process): skip, do not burst
            deadline = time.monotonic()
            delay = 0.0
        if stop.wait(delay):
            return
        monitor = ref()
        if monitor is None:
            return
        monitor._sample(raise_errors=False)
        del monitor


class PowerMonitor:
    """Samples the power of GPUs (and CPU packages) in a background thread, W, on one clock.

    CPU and DRAM power come from their energy counters (average power between samples); each series
    keeps the newest ``capacity`` samples (16 bytes each). GPU power is sampled in each of
    ``domains`` (:data:`POWER_DOMAINS`; instant board power by default). docs/measuring.md has the
    details.

    Args:
        gpus: GPUs to sample. ``None``: this machine's GPUs.
        gpu_indices: Of those, the indices to sample (``cuda:<i>``). ``None``: all.
        cpus: CPU packages to sample as well. ``None`` or ``[]``: none.
        interval_s: Sampling period, s.
        capacity: Samples kept per series (at least 2).
        clock: Time source, s. Default: the GPUs' shared clock, else wall-clock time.
        domains: GPU power domains to sample (:data:`POWER_DOMAINS`; see
            :func:`supported_power_domains` for what the GPUs report).

    Raises:
        ZeusConfigError: ``interval_s``, ``capacity`` or ``domains`` is invalid, or the GPUs use
            different clocks.
        ZeusDeviceNotFoundError: A requested GPU index does not exist.

    Example:
        >>> from zeus_core import PowerMonitor, SimulatedGPU, PhysicalModel, VirtualClock
        >>> clock = VirtualClock()
        >>> pm = PowerMonitor(gpus=[SimulatedGPU(PhysicalModel.a40(), clock=clock, busy=True)])
        >>> pm.sample_now(); clock.advance(2.0); pm.sample_now()
        >>> pm.get_energy(0.0, 2.0)  # GPU index -> J
        {0: 600.0}
        >>> pm.get_power_timeline()  # GPU index -> [(t s, W)]
        {0: [(0.0, 300.0), (2.0, 300.0)]}
    """

    def __init__(
        self,
        gpus: Sequence[GPU] | None = None,
        gpu_indices: Sequence[int] | None = None,
        *,
        cpus: Sequence[CPU] | None = None,
        interval_s: float = 0.1,
        capacity: int = 36_000,
        clock: Clock | None = None,
        domains: Sequence[str] = ("device_instant",),
    ) -> None:
        unknown = [d for d in domains if d not in POWER_DOMAINS]
        if unknown or not domains:
            raise ZeusConfigError(
                f"PowerMonitor(domains={list(domains)}): choose one or more of {list(POWER_DOMAINS)}."
            )
        if not interval_s > 0:
            raise ZeusConfigError(f"PowerMonitor(interval_s={interval_s}): the sampling period must be > 0.")
        if capacity < 2:
            raise ZeusConfigError(f"PowerMonitor(capacity={capacity}): keep at least 2 samples per device.")
        if gpus is None:
            from zeus_core.device._discovery import get_gpus

            gpus = get_gpus()
        self.gpus: list[GPU] = _select(list(gpus), gpu_indices)
        self.cpus: list[CPU] = list(cpus or [])
        if clock is None:
            clocks = {id(g.clock): g.clock for g in self.gpus}
            if len(clocks) > 1:
                raise ZeusConfigError(
                    "PowerMonitor: the GPUs run on different clocks (e.g. simulated GPUs with separate "
                    "VirtualClocks). Give them one shared clock, or pass clock=."
                )
            clock = next(iter(clocks.values()), wall_clock)
        self.clock: Clock = clock
        self.interval_s = float(interval_s)
        self.capacity = int(capacity)
        self.simulated = any(g.simulated for g in self.gpus) or any(c.simulated for c in self.cpus)
        self.domains: tuple[str, ...] = tuple(dict.fromkeys(domains))
        self._gpu_power = {d: {g.index: _Ring(capacity) for g in self.gpus} for d in self.domains}
        self._cpu_energy = {c.index: _Ring(capacity) for c in self.cpus}
        self._dram_energy = {c.index: _Ring(capacity) for c in self.cpus if c.has_dram}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing: set[str] = set()
        self._warned_evicted: set[str] = set()

    # -- sampling -------------------------------------------------------------------------------
    def start(self) -> None:
        """Take one sample now, then keep sampling every ``interval_s`` in a daemon thread.

        Calling it while running does nothing.

        Raises:
            ZeusDeviceError: A device could not be read (the thread is not started).
        """
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self.sample_now()
            self._stop = threading.Event()
            self._thread = threading.Thread(
                target=_run,
                args=(weakref.ref(self), self._stop, self.interval_s),
                name="zeus-power-monitor",
                daemon=True,
            )
            self._thread.start()
        logger.debug(
            "PowerMonitor sampling %d GPU(s), %d CPU(s) every %.3f s",
            len(self.gpus),
            len(self.cpus),
            self.interval_s,
        )

    def stop(self) -> None:
        """Stop the sampling thread and wait for it (idempotent). Samples stay queryable."""
        self._stop.set()
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    @property
    def running(self) -> bool:
        """Whether the sampling thread is running."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def sample_now(self) -> None:
        """Sample every device once, synchronously (thread-safe).

        Raises:
            Exception: The first error of a device read (after the other devices were sampled).
        """
        self._sample(raise_errors=True)

    def _sample(self, raise_errors: bool) -> None:
        first_error: Exception | None = None
        with self._lock:
            for domain, rings in self._gpu_power.items():
                reader = _READERS[domain]
                for gpu in self.gpus:
                    device = f"gpu{gpu.index}" + ("" if domain == "device_instant" else f" ({domain})")
                    try:
                        t = self.clock()
                        rings[gpu.index].append(t, getattr(gpu, reader)())
                        self._failing.discard(device)
                    except Exception as e:  # one failing device must not stop the others
                        first_error = first_error or e
                        self._note_failure(device, e, raise_errors)
            for cpu in self.cpus:
                try:
                    t = self.clock()
                    energy = cpu.get_energy()
                    self._cpu_energy[cpu.index].append(t, energy.cpu_j)
                    if energy.dram_j is not None and cpu.index in self._dram_energy:
                        self._dram_energy[cpu.index].append(t, energy.dram_j)
                    self._failing.discard(f"cpu{cpu.index}")
                except Exception as e:
                    first_error = first_error or e
                    self._note_failure(f"cpu{cpu.index}", e, raise_errors)
        if raise_errors and first_error is not None:
            raise first_error

    def _note_failure(self, device: str, error: Exception, raising: bool) -> None:
        if raising:
            return  # the caller gets the error itself
        if device not in self._failing:  # once per failure streak
            logger.warning("PowerMonitor: reading %s failed, its samples are missing: %s", device, error)
        self._failing.add(device)

    # -- queries --------------------------------------------------------------------------------
    def _rings(self, call: str, domain: str) -> dict[int, _Ring]:
        rings = self._gpu_power.get(domain)
        if rings is None:
            raise ZeusConfigError(
                f"PowerMonitor.{call}(domain={domain!r}): this monitor samples {list(self.domains)}; "
                f"create it with domains=[..., {domain!r}] to sample that one."
            )
        return rings

    def get_power_timeline(
        self, start: float | None = None, end: float | None = None, domain: str = "device_instant"
    ) -> dict[int, list[tuple[float, float]]]:
        """GPU power samples with ``start <= t <= end``: GPU index -> ``[(t s, W)]``, oldest first.

        Raises:
            ZeusConfigError: ``domain`` is not sampled by this monitor.
        """
        rings = self._rings("get_power_timeline", domain)
        with self._lock:
            series = {i: r.arrays() for i, r in rings.items()}
        return {i: _window(t, w, start, end) for i, (t, w) in series.items()}

    def get_power(self, time: float | None = None, domain: str = "device_instant") -> dict[int, float]:
        """Each GPU's power at ``time`` (the nearest sample; ``None``: the newest), W.

        GPUs without a sample yet are left out.

        Raises:
            ZeusConfigError: ``domain`` is not sampled by this monitor.
        """
        rings = self._rings("get_power", domain)
        with self._lock:
            series = {i: r.arrays() for i, r in rings.items()}
        out = {}
        for i, (t, w) in series.items():
            if len(t):
                k = len(t) - 1 if time is None else int(np.argmin(np.abs(t - time)))
                out[i] = float(w[k])
        return out

    def get_energy(self, start: float, end: float, domain: str | None = None) -> dict[int, float]:
        """Energy of each GPU over ``[start, end]`` (clock seconds), J.

        Trapezoid integration of the samples of ``domain`` (``None``: instant power where sampled,
        else the device's average), with power linearly interpolated at the bounds; before the
        first and after the last sample, that sample's power holds.

        Raises:
            ZeusConfigError: ``end < start``, a GPU has no sample yet (call :meth:`start` or
                :meth:`sample_now` first), or ``domain`` is not sampled.
        """
        _check_span("get_energy", start, end)
        if domain is None:
            domain = "device_instant" if "device_instant" in self.domains else "device_average"
        rings = self._rings("get_energy", domain)
        with self._lock:
            series = {i: (r.arrays(), r.dropped) for i, r in rings.items()}
        out = {}
        for i, ((t, w), dropped) in series.items():
            self._check_series(f"GPU {i}", t, dropped, start)
            out[i] = _integrate(t, w, start, end)
        return out

    def get_cpu_power_timeline(
        self, start: float | None = None, end: float | None = None
    ) -> dict[int, list[tuple[float, float]]]:
        """CPU package power: index -> ``[(t s, W)]``, each the average since the previous sample."""
        return self._derived_power(self._cpu_energy, start, end)

    def get_dram_power_timeline(
        self, start: float | None = None, end: float | None = None
    ) -> dict[int, list[tuple[float, float]]]:
        """DRAM power per package with a DRAM domain: index -> ``[(t s, W)]`` (see CPU timeline)."""
        return self._derived_power(self._dram_energy, start, end)

    def get_cpu_energy(self, start: float, end: float) -> dict[int, float]:
        """Energy of each CPU package over ``[start, end]``, J (counter values interpolated).

        Raises:
            ZeusConfigError: ``end < start``, or a package has no sample yet.
        """
        return self._counter_energy(self._cpu_energy, "CPU", start, end)

    def get_dram_energy(self, start: float, end: float) -> dict[int, float]:
        """Energy of each package's DRAM over ``[start, end]``, J.

        Raises:
            ZeusConfigError: ``end < start``, or a package has no sample yet.
        """
        return self._counter_energy(self._dram_energy, "DRAM", start, end)

    def _counter_energy(
        self, rings: dict[int, _Ring], kind: str, start: float, end: float
    ) -> dict[int, float]:
        _check_span(f"get_{kind.lower()}_energy", start, end)
        with self._lock:
            series = {i: (r.arrays(), r.dropped) for i, r in rings.items()}
        out = {}
        for i, ((t, e), dropped) in series.items():
            self._check_series(f"{kind} {i}", t, dropped, start)
            out[i] = _cumulative_at(t, e, end) - _cumulative_at(t, e, start)
        return out

    def _derived_power(
        self, rings: dict[int, _Ring], start: float | None, end: float | None
    ) -> dict[int, list[tuple[float, float]]]:
        with self._lock:
            series = {i: r.arrays() for i, r in rings.items()}
        out: dict[int, list[tuple[float, float]]] = {}
        for i, (t, e) in series.items():
            if len(t) < 2:
                out[i] = []
                continue
            out[i] = _window(t[1:], np.diff(e) / np.diff(t), start, end)
        return out

    def _check_series(self, device: str, t: np.ndarray, dropped: int, start: float) -> None:
        if len(t) == 0:
            raise ZeusConfigError(
                f"PowerMonitor: {device} has no power sample yet. Call start() or sample_now() first."
            )
        if dropped and start < t[0] and device not in self._warned_evicted:
            self._warned_evicted.add(device)
            logger.warning(
                "PowerMonitor: %s's samples before t=%.3f s were dropped (capacity=%d); energy before it "
                "is extrapolated. Raise capacity for windows this long.",
                device,
                t[0],
                self.capacity,
            )

    # -- export ---------------------------------------------------------------------------------
    def to_csv(self, path: str | Path) -> Path:
        """Write every kept sample as ``time_s,device,power_w,simulated`` rows, oldest first.

        ``device`` is ``gpu<i>`` (``gpu<i>_<domain>`` for the other power domains), ``cpu<i>`` or
        ``dram<i>``; ``simulated`` is 1 for simulated devices. CPU and DRAM rows hold the average power
        since the previous sample.

        Returns:
            The path written.
        """
        path = Path(path)
        rows: list[tuple[float, str, float, int]] = []
        sim_gpu = {g.index: int(g.simulated) for g in self.gpus}
        sim_cpu = {c.index: int(c.simulated) for c in self.cpus}
        for domain in self.domains:
            suffix = "" if domain == "device_instant" else f"_{domain}"
            for i, samples in self.get_power_timeline(domain=domain).items():
                rows += [(t, f"gpu{i}{suffix}", w, sim_gpu[i]) for t, w in samples]
        derived = {"cpu": self.get_cpu_power_timeline(), "dram": self.get_dram_power_timeline()}
        for prefix, timeline in derived.items():
            for i, samples in timeline.items():
                rows += [(t, f"{prefix}{i}", w, sim_cpu[i]) for t, w in samples]
        rows.sort(key=lambda r: r[0])
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["time_s", "device", "power_w", "simulated"])
            writer.writerows((repr(t), d, repr(w), s) for t, d, w, s in rows)
        return path

    # -- lifetime -------------------------------------------------------------------------------
    def __enter__(self) -> "PowerMonitor":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _window(
    t: np.ndarray, v: np.ndarray, start: float | None, end: float | None
) -> list[tuple[float, float]]:
    mask = np.ones(len(t), dtype=bool)
    if start is not None:
        mask &= t >= start
    if end is not None:
        mask &= t <= end
    return [(float(a), float(b)) for a, b in zip(t[mask], v[mask])]


def _check_span(call: str, start: float, end: float) -> None:
    if end < start:
        raise ZeusConfigError(f"PowerMonitor.{call}(start={start}, end={end}): end is before start.")


def _select(gpus: list[GPU], indices: Sequence[int] | None) -> list[GPU]:
    if indices is None:
        return gpus
    by_index = {g.index: g for g in gpus}
    missing = [i for i in indices if i not in by_index]
    if missing:
        raise ZeusDeviceNotFoundError(
            f"PowerMonitor(gpu_indices={list(indices)}): no GPU {missing[0]}; this process sees GPUs "
            f"{sorted(by_index)} (indices follow CUDA_VISIBLE_DEVICES)."
        )
    return [by_index[i] for i in dict.fromkeys(indices)]
