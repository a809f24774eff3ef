"""GPUs and CPUs whose privileged calls go through a zeusd-compatible daemon (``ZEUSD_SOCK_PATH``).

:class:`DaemonGPU` wraps the GPU discovery found: every reading still comes from the device itself
(NVML reads need no privilege, and cost no round trip); setting the power limit or locking clocks is
asked of the daemon, under the daemon's id of that GPU (NVML's index, whatever
``CUDA_VISIBLE_DEVICES`` says). :class:`DaemonCPU` reads RAPL counters through the daemon's
``cpu-read`` group where this process may not read them itself.

:func:`route_gpus` and :func:`daemon_cpus` are what discovery calls; nothing connects until the
first call that needs the daemon. The settings seam (:mod:`zeus_core.settings`), the power-limit
optimizer and the Perseus runtime call these GPUs' methods, so they work for a normal user unchanged.

Example:
    >>> from zeus_core.device._zeusd_devices import route_gpus
    >>> route_gpus([], {"ZEUSD_SOCK_PATH": "/run/zeus-suite/daemon.sock"})
    []
"""

from __future__ import annotations

import logging
from typing import Any, Mapping, Sequence

from zeus_core.device._base import CPU, GPU, Clock, CpuEnergy, PowerLimitConstraints
from zeus_core.device._zeusd import DaemonClient, Endpoint, client_for
from zeus_core.exceptions import ZeusConfigError, ZeusError, ZeusPermissionError

__all__ = ["DaemonGPU", "DaemonCPU", "route_gpus", "daemon_cpus", "daemon_id"]

logger = logging.getLogger(__name__)


def daemon_id(gpu: GPU) -> int:
    """The daemon's id of ``gpu``: its NVML index (or HIP index), not the ``cuda:<i>`` index."""
    return int(getattr(gpu, "nvml_index", getattr(gpu, "hip_index", gpu.index)))


class DaemonGPU(GPU):
    """A GPU read directly and changed through the daemon.

    Args:
        local: The GPU as discovery found it (readings come from it).
        client: The daemon's client.
        gpu_id: The daemon's id of this GPU (default: :func:`daemon_id`).
    """

    def __init__(self, local: GPU, client: DaemonClient, gpu_id: int | None = None) -> None:
        super().__init__(local.index)
        self.local = local
        self.client = client
        self.gpu_id = daemon_id(local) if gpu_id is None else gpu_id
        self.vendor = local.vendor

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the connection: a copy in another process opens its own (callers are processes)."""
        return {
            "local": self.local,
            "endpoint": self.client.endpoint,
            "gpu_id": self.gpu_id,
            "index": self.index,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Rebuild with this process's client of the same daemon."""
        self.__init__(state["local"], client_for(state["endpoint"]), state["gpu_id"])  # type: ignore[misc]

    def __getattr__(self, name: str) -> Any:
        # Vendor attributes (nvml_index, ...) of the wrapped GPU; only reached for names not found here.
        if name == "local":
            raise AttributeError(name)
        return getattr(self.local, name)

    # -- readings: the device itself ------------------------------------------------------------
    @property
    def name(self) -> str:
        """Product name."""
        return self.local.name

    @property
    def uuid(self) -> str:
        """Unique identifier."""
        return self.local.uuid

    @property
    def simulated(self) -> bool:
        """Whether the wrapped GPU is simulated."""
        return self.local.simulated

    @property
    def clock(self) -> Clock:
        """The wrapped GPU's clock."""
        return self.local.clock

    @property
    def has_energy_counter(self) -> bool:
        """Whether the wrapped GPU has an energy counter."""
        return self.local.has_energy_counter

    @property
    def has_instant_power(self) -> bool:
        """Whether :meth:`get_power` is instantaneous."""
        return self.local.has_instant_power

    def power_limit_constraints(self) -> PowerLimitConstraints:
        """Min, max and default power limit, W."""
        return self.local.power_limit_constraints()

    def get_power_limit(self) -> float:
        """Current power limit, W."""
        return self.local.get_power_limit()

    def supported_memory_frequencies(self) -> list[int]:
        """Supported memory clocks, MHz, highest first."""
        return self.local.supported_memory_frequencies()

    def supported_sm_frequencies(self, memory_mhz: int | None = None) -> list[int]:
        """Supported SM clocks, MHz, highest first."""
        return self.local.supported_sm_frequencies(memory_mhz)

    def get_locked_sm_frequency(self) -> tuple[int, int] | None:
        """The locked SM clock range, MHz (raises where the device cannot tell, as NVML)."""
        return self.local.get_locked_sm_frequency()

    def get_total_energy(self) -> float:
        """Energy since an arbitrary origin, J."""
        return self.local.get_total_energy()

    def get_power(self) -> float:
        """Power draw, W."""
        return self.local.get_power()

    # -- changes: through the daemon ------------------------------------------------------------
    def set_power_limit(self, watts: float) -> None:
        """Set the power limit, W, through the daemon; nothing is sent when it already is ``watts``.

        Raises:
            ZeusConfigError: ``watts`` is outside the GPU's range.
            ZeusPermissionError: The daemon refuses (not granted, no token); the message says why.
            ZeusDeviceError: Another process holds a different limit on this GPU (409), or no daemon.
        """
        target_mw = int(round(watts * 1000))
        if int(round(self.local.get_power_limit() * 1000)) == target_mw:
            return
        c = self.power_limit_constraints()
        if not c.min_w * 1000 <= target_mw <= c.max_w * 1000:
            raise ZeusConfigError(
                f"set_power_limit({watts}) on GPU {self.index} ({self.name}): outside the allowed range "
                f"{c.min_w:g}-{c.max_w:g} W. Pick a limit in that range."
            )
        self.client.post(
            "/gpu/set_power_limit",
            self.gpu_id,
            f"GPU {self.index}: set_power_limit({watts})",
            power_limit_mw=target_mw,
        )

    def set_locked_sm_frequency(self, min_mhz: int, max_mhz: int | None = None) -> None:
        """Lock the SM clock into ``[min_mhz, max_mhz]``, MHz, through the daemon."""
        upper = min_mhz if max_mhz is None else max_mhz
        if upper < min_mhz:
            raise ZeusConfigError(
                f"set_locked_sm_frequency({min_mhz}, {max_mhz}) on GPU {self.index}: "
                "max_mhz must be >= min_mhz."
            )
        self.client.post(
            "/gpu/set_gpu_locked_clocks",
            self.gpu_id,
            f"GPU {self.index}: set_locked_sm_frequency({min_mhz}, {max_mhz})",
            min_clock_mhz=int(min_mhz),
            max_clock_mhz=int(upper),
        )

    def reset_locked_sm_frequency(self) -> None:
        """Unlock the SM clock, through the daemon."""
        self.client.post(
            "/gpu/reset_gpu_locked_clocks", self.gpu_id, f"GPU {self.index}: reset_locked_sm_frequency()"
        )

    def check_control_by_writing(self) -> None:
        """Write the current power limit again through the daemon (the certain test; no lease results)."""
        current_mw = int(round(self.local.get_power_limit() * 1000))
        self.client.post(
            "/gpu/set_power_limit",
            self.gpu_id,
            f"GPU {self.index}: check_control_by_writing()",
            power_limit_mw=current_mw,
        )

    def check_control_permission(self) -> None:
        """Ask the daemon, without writing, whether this process may change this GPU.

        Raises:
            ZeusPermissionError: The daemon is unreachable, does not serve ``gpu-control``, does not
                serve this GPU, or does not grant it to this process; the message says which.
        """
        where = f"GPU {self.index}: the daemon at {self.client.endpoint.describe()}"
        try:
            info = self.client.discover()
            if "gpu-control" not in info.get("enabled_api_groups", []):
                raise ZeusPermissionError(
                    f"{where} does not serve gpu-control. Ask its administrator to enable it "
                    "(`--enable gpu-control,gpu-read,cpu-read`)."
                )
            if self.gpu_id not in [g.get("id") for g in info.get("gpus", [])]:
                raise ZeusPermissionError(f"{where} does not serve GPU id {self.gpu_id} (NVML index).")
            self._check_granted(where)
        except ZeusPermissionError:
            raise
        except ZeusError as e:
            raise ZeusPermissionError(str(e)) from e

    def _check_granted(self, where: str) -> None:
        perms = self.client.permissions()
        if perms is not None:
            control = perms["api_groups"].get("gpu-control", {})
            if not control.get("allowed"):
                raise ZeusPermissionError(f"{where}: {control.get('why', 'gpu-control is not granted')}")
            if not perms.get("gpu_control", {}).get(str(self.gpu_id)):
                raise ZeusPermissionError(
                    f"{where}: GPU id {self.gpu_id} is outside what {perms.get('who')} is granted. Run "
                    "`zeus-suite daemon --check` to see what you may change."
                )
            return
        whoami = self.client.whoami()
        if whoami is not None and "gpu-control" not in whoami.get("scopes", []):
            raise ZeusPermissionError(
                f"{where}: the token lacks the gpu-control scope (has {whoami.get('scopes')})."
            )

    def describe(self) -> str:
        """The wrapped GPU's line, noting the daemon."""
        return f"{self.local.describe()} (changes via daemon)"


class DaemonCPU(CPU):
    """A CPU package whose RAPL counters are read through the daemon's ``cpu-read`` group.

    Args:
        index: The package index (the daemon's id).
        has_dram: Whether its DRAM is metered.
        client: The daemon's client.
    """

    vendor = "rapl"

    def __init__(self, index: int, has_dram: bool, client: DaemonClient) -> None:
        super().__init__(index)
        self._has_dram = has_dram
        self.client = client

    @property
    def name(self) -> str:
        """``"package-<index>"``, as RAPL names it."""
        return f"package-{self.index}"

    @property
    def has_dram(self) -> bool:
        """Whether the package's DRAM is metered."""
        return self._has_dram

    def get_energy(self) -> CpuEnergy:
        """Package and DRAM energy, J (the daemon reads µJ)."""
        body = self.client.call(
            "GET",
            "/cpu/get_cumulative_energy",
            {"cpu_ids": str(self.index), "cpu": "true", "dram": "true" if self._has_dram else "false"},
            what=f"CPU {self.index}: get_energy()",
        )
        reading = body[str(self.index)]
        dram = reading.get("dram_energy_uj")
        return CpuEnergy(reading["cpu_energy_uj"] / 1e6, None if dram is None else dram / 1e6)

    def describe(self) -> str:
        """One line naming the package and the daemon."""
        return f"{super().describe()} (via daemon)"


def route_gpus(gpus: Sequence[GPU], environ: Mapping[str, str] | None = None) -> list[GPU]:
    """``gpus``, with privileged calls through the daemon when ``ZEUSD_SOCK_PATH``/``ZEUSD_HOST_PORT`` is set.

    Simulated GPUs are left alone (nothing to be privileged about). Nothing connects here.
    """
    endpoint = Endpoint.from_env(environ)
    if endpoint is None or not gpus:
        return list(gpus)
    client = client_for(endpoint)
    return [g if g.simulated or isinstance(g, DaemonGPU) else DaemonGPU(g, client) for g in gpus]


def daemon_cpus(environ: Mapping[str, str] | None = None) -> list[CPU]:
    """The CPU packages the configured daemon meters (``cpu-read``); ``[]`` without one or on any failure."""
    endpoint = Endpoint.from_env(environ)
    if endpoint is None:
        return []
    client = client_for(endpoint)
    try:
        info = client.discover()
    except ZeusError as e:
        logger.info("No CPU energy through the daemon: %s", e)
        return []
    if "cpu-read" not in info.get("enabled_api_groups", []):
        return []
    return [DaemonCPU(int(c["id"]), bool(c.get("dram_available")), client) for c in info.get("cpus", [])]
