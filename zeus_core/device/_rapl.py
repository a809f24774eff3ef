"""CPU package and DRAM energy from Linux RAPL (``/sys/class/powercap``), also on AMD CPUs.

Counters wrap around after minutes under load, so each :class:`RaplCPU` reads them often enough in
a small daemon thread that no wrap is missed; kernels from 5.10 on need root to read them, and the
error says how. docs/measuring.md describes the layout and the wraparound.
"""

from __future__ import annotations

import logging
import re
import threading
import weakref
from pathlib import Path

from zeus_core.device._base import CPU, CpuEnergy
from zeus_core.exceptions import ZeusDeviceError, ZeusPermissionError

__all__ = ["DEFAULT_SYSFS_ROOT", "RaplCPU", "rapl_cpus"]

logger = logging.getLogger(__name__)

DEFAULT_SYSFS_ROOT = "/sys/class/powercap"
"""Where Linux exposes the powercap (RAPL) zones."""

_ZONE_RE = re.compile(r"^intel-rapl:(\d+)$")
_MAX_POWER_W = 1000.0  # generous upper bound of a package's (or its DRAM's) power draw, W
_POLLS_PER_WRAP = 4  # background reads per shortest possible wrap period
_MAX_POLL_INTERVAL_S = 60.0
_MIN_POLL_INTERVAL_S = 0.01
_UJ_PER_J = 1_000_000


def _permission_error(path: Path, err: OSError) -> ZeusPermissionError:
    root = path.parent
    while root.name.startswith("intel-rapl") and root.parent != root:
        root = root.parent
    return ZeusPermissionError(
        f"Reading RAPL counter {str(path)!r} failed: {err.strerror or err}. Since Linux 5.10 the RAPL "
        "energy counters are readable by root only (CVE-2020-8694). Fix: run as root, or grant read "
        f"access with `sudo chmod a+r {root}/intel-rapl:*/energy_uj` (again after each reboot, e.g. from "
        "a udev rule or systemd unit), or skip CPU measurement with ZeusMonitor(cpu_indices=[])."
    )


def _read_text(path: Path) -> str:
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip()
    except PermissionError as e:
        raise _permission_error(path, e) from e
    except (OSError, UnicodeDecodeError) as e:
        raise ZeusDeviceError(
            f"Reading RAPL file {str(path)!r} failed: {e}. The powercap tree looks broken; "
            "check `ls -l` on it, or skip CPU measurement with ZeusMonitor(cpu_indices=[])."
        ) from e


def _read_uint(path: Path) -> int:
    text = _read_text(path)
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ZeusDeviceError(
            f"RAPL file {str(path)!r} holds {text[:40]!r}, not a non-negative integer (µJ). The powercap "
            "tree looks broken; skip CPU measurement with ZeusMonitor(cpu_indices=[])."
        )
    return value


class _Counter:
    """One ``energy_uj`` file, extended past its wraparound. Thread-safe."""

    def __init__(self, zone_dir: Path) -> None:
        self.path = zone_dir / "energy_uj"
        self.range_uj = _read_uint(zone_dir / "max_energy_range_uj")
        if self.range_uj == 0:
            raise ZeusDeviceError(
                f"RAPL file {str(zone_dir / 'max_energy_range_uj')!r} says the counter range is 0 µJ; "
                "this zone cannot be metered. Skip CPU measurement with ZeusMonitor(cpu_indices=[])."
            )
        self._lock = threading.Lock()
        self._last_raw: int | None = None
        self._wraps = 0

    def read_j(self) -> float:
        """The counter in J since its origin, with every wraparound seen so far added."""
        with self._lock:  # read inside the lock: a concurrent read must not look like a wrap
            raw = _read_uint(self.path)
            if self._last_raw is not None and raw < self._last_raw:
                self._wraps += 1
                logger.debug("RAPL counter %s wrapped around (%d -> %d µJ)", self.path, self._last_raw, raw)
            self._last_raw = raw
            return (raw + self._wraps * self.range_uj) / _UJ_PER_J


def _poll(counters: list[_Counter], stop: threading.Event, interval_s: float) -> None:
    """Background loop: read every counter each ``interval_s`` so that no wraparound is missed."""
    failing: set[Path] = set()
    while not stop.wait(interval_s):
        for counter in counters:
            try:
                counter.read_j()
                failing.discard(counter.path)
            except (ZeusDeviceError, ZeusPermissionError) as e:
                if counter.path not in failing:  # warn once per failure streak
                    failing.add(counter.path)
                    logger.warning("Background RAPL read failed (wraparounds may be missed): %s", e)


class RaplCPU(CPU):
    """One CPU package (top-level RAPL zone ``intel-rapl:<index>``) and its DRAM sub-zone if any.

    Reading the counters for the first time starts a daemon thread that keeps reading them often
    enough to see every wraparound; :meth:`close` (or garbage collection) stops it.

    Args:
        index: The zone number ``N`` of ``intel-rapl:N``.
        zone_dir: The zone's directory.
        poll_interval_s: Period of the background reads, s. Default: a quarter of the time the
            smallest counter range lasts at 1000 W, between 0.01 and 60 s.

    Raises:
        ZeusPermissionError: A file of the zone exists but may not be read.
        ZeusDeviceError: A file is missing or malformed.

    Example:
        >>> cpus = rapl_cpus()  # doctest: +SKIP
        >>> e = cpus[0].get_energy()  # doctest: +SKIP
        >>> e.cpu_j, e.dram_j  # J since an arbitrary origin  # doctest: +SKIP
        (81234.5, 10234.1)
    """

    vendor = "rapl"

    def __init__(self, index: int, zone_dir: str | Path, *, poll_interval_s: float | None = None) -> None:
        super().__init__(index)
        zone_dir = Path(zone_dir)
        self.zone_dir = zone_dir
        self._name = _read_text(zone_dir / "name") or f"package-{index}"
        self._package = _Counter(zone_dir)
        dram_dir = _find_dram(zone_dir)
        self._dram = _Counter(dram_dir) if dram_dir is not None else None
        counters = [c for c in (self._package, self._dram) if c is not None]
        if poll_interval_s is None:
            shortest_s = min(c.range_uj for c in counters) / _UJ_PER_J / _MAX_POWER_W
            poll_interval_s = shortest_s / _POLLS_PER_WRAP
            poll_interval_s = min(_MAX_POLL_INTERVAL_S, max(_MIN_POLL_INTERVAL_S, poll_interval_s))
        if poll_interval_s <= 0:
            raise ZeusDeviceError(f"RaplCPU(poll_interval_s={poll_interval_s}): must be > 0 s.")
        self.poll_interval_s = float(poll_interval_s)
        self._counters = counters
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._thread_lock = threading.Lock()
        weakref.finalize(self, self._stop.set)  # the thread holds no reference to self

    @property
    def name(self) -> str:
        """The zone's name, e.g. ``"package-0"``."""
        return self._name

    @property
    def has_dram(self) -> bool:
        """Whether the package has a ``dram`` sub-zone."""
        return self._dram is not None

    def get_energy(self) -> CpuEnergy:
        """Package and DRAM energy since an arbitrary origin, J, wraparounds included.

        Raises:
            ZeusPermissionError: The counter is not readable by this process.
            ZeusDeviceError: The counter file is missing or malformed.
        """
        self._ensure_poller()
        cpu_j = self._package.read_j()
        dram_j = self._dram.read_j() if self._dram is not None else None
        return CpuEnergy(cpu_j=cpu_j, dram_j=dram_j)

    def poll(self) -> None:
        """Read every counter now (what the background thread does), to record any wraparound."""
        for counter in self._counters:
            counter.read_j()

    def _ensure_poller(self) -> None:
        thread = self._thread
        if thread is not None and thread.is_alive():
            return
        with self._thread_lock:
            if self._stop.is_set() or (self._thread is not None and self._thread.is_alive()):
                return
            # Not alive: never started, or lost across fork(); (re)start it.
            self._thread = threading.Thread(
                target=_poll,
                args=(self._counters, self._stop, self.poll_interval_s),
                name=f"zeus-rapl-{self.index}",
                daemon=True,
            )
            self._thread.start()
            logger.debug(
                "Started RAPL wraparound poller for %s every %.3f s", self.zone_dir, self.poll_interval_s
            )

    @property
    def polling(self) -> bool:
        """Whether the background wraparound thread is running."""
        return self._thread is not None and self._thread.is_alive()

    def close(self) -> None:
        """Stop the background thread (idempotent). Later reads still work but may miss a wrap."""
        self._stop.set()
        with self._thread_lock:
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def __enter__(self) -> "RaplCPU":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def describe(self) -> str:
        """One line naming the package and its source, e.g. ``"CPU 0: package-0 + DRAM (RAPL)"``."""
        return f"{super().describe()} (RAPL)"

    def __repr__(self) -> str:
        return f"RaplCPU(index={self.index}, zone_dir={str(self.zone_dir)!r}, dram={self.has_dram})"


def _find_dram(zone_dir: Path) -> Path | None:
    """The sub-zone of ``zone_dir`` whose ``name`` file says ``dram``, if any."""
    prefix = zone_dir.name + ":"
    candidates = [p for p in zone_dir.iterdir() if p.name.startswith(prefix) and p.is_dir()]
    if not candidates:  # flat layout: sub-zones only as siblings under the powercap root
        candidates = [p for p in zone_dir.parent.glob(f"{prefix}*") if p.is_dir()]
    for sub in sorted(candidates, key=lambda p: p.name):
        name_file = sub / "name"
        if name_file.exists() and _read_text(name_file) == "dram":
            return sub
    return None


def rapl_cpus(
    sysfs_root: str | Path = DEFAULT_SYSFS_ROOT, *, poll_interval_s: float | None = None
) -> list[RaplCPU]:
    """Every CPU package that RAPL meters, ordered by zone number.

    Args:
        sysfs_root: The powercap directory (tests point it at a temporary tree; containers may
            bind-mount the host's ``/sys/class/powercap`` elsewhere).
        poll_interval_s: Background wraparound read period, s (default: derived from the ranges).

    Returns:
        One :class:`RaplCPU` per ``intel-rapl:N`` zone; ``[]`` when the machine has no RAPL.

    Raises:
        ZeusPermissionError: The zones exist but their counters are unreadable (kernel >= 5.10
            without root); the message says how to grant access.
        ZeusDeviceError: A zone's files are missing or malformed.

    Example:
        >>> [c.describe() for c in rapl_cpus()]  # doctest: +SKIP
        ['CPU 0: package-0 + DRAM (RAPL)', 'CPU 1: package-1 + DRAM (RAPL)']
    """
    root = Path(sysfs_root)
    if not root.is_dir():
        logger.debug("No RAPL: %s does not exist", root)
        return []
    zones = []
    for entry in root.iterdir():
        match = _ZONE_RE.match(entry.name)
        if match is not None and entry.is_dir():
            zones.append((int(match.group(1)), entry))
    cpus = [RaplCPU(index, path, poll_interval_s=poll_interval_s) for index, path in sorted(zones)]
    for cpu in cpus:  # fail now, not in the middle of a measurement, when counters are root-only
        cpu.poll()
    return cpus
