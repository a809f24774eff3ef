"""Zeus's ``zeus.device.gpu``: :func:`get_gpus` and the index-based :class:`GPUs`, in Zeus's units.

Zeus's device layer works in mW, mJ, MHz and whole °C, and its ``GPUs`` object takes the GPU
index as every method's first argument. The suite's devices (:class:`zeus_core.device.GPU`) work
in W and J; :class:`GPU` here converts each reading and setting at this boundary and nowhere else.

Example:
    >>> from zeus_core.compat.device import get_gpus
    >>> from zeus_core.testing import FakeGPUSpec, FakeNVML
    >>> with FakeNVML([FakeGPUSpec.a40()]).install():
    ...     gpus = get_gpus()
    ...     print(gpus.get_name(0), gpus.get_power_management_limit_constraints(0))
    NVIDIA A40 (100000, 300000)
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from zeus_core.compat.device.exception import ZeusGPUHeterogeneousError, ZeusGPUInitError
from zeus_core.device import _base

__all__ = ["GPU", "GPUs", "get_gpus"]

_MILLI = 1000  # Zeus's units: mW, mJ


class GPU:
    """One GPU with Zeus's method names and units (mW, mJ, MHz, °C), over a suite device.

    Args:
        gpu: The suite's GPU object.

    Example:
        >>> from zeus_core.compat.device.gpu import GPU
        >>> from zeus_core.testing import simulated_gpu
        >>> gpu = GPU(simulated_gpu("a40"))
        >>> gpu.set_power_management_limit(250_000)
        >>> gpu.get_power_management_limit(), gpu.get_name()
        (250000, 'NVIDIA A40 (simulated)')
    """

    def __init__(self, gpu: _base.GPU) -> None:
        self.device = gpu
        self.gpu_index = gpu.index

    @property
    def supports_nonblocking_setters(self) -> bool:
        """Whether setters may return before the change is made (never: the suite's setters block)."""
        return False

    def get_name(self) -> str:
        """The GPU's product name."""
        return self.device.name

    def get_power_management_limit_constraints(self) -> tuple[int, int]:
        """Lowest and highest settable power limit, mW."""
        c = self.device.power_limit_constraints()
        return round(c.min_w * _MILLI), round(c.max_w * _MILLI)

    def get_power_management_limit(self) -> int:
        """The power limit now, mW."""
        return round(self.device.get_power_limit() * _MILLI)

    def set_power_management_limit(self, power_limit_mw: int, block: bool = True) -> None:
        """Set the power limit, mW (``block`` is accepted; setting always completes first)."""
        self.device.set_power_limit(power_limit_mw / _MILLI)

    def reset_power_management_limit(self, block: bool = True) -> None:
        """Set the power limit back to the GPU's default."""
        self.device.reset_power_limit()

    def set_persistence_mode(self, enabled: bool, block: bool = True) -> None:
        """Turn persistence mode on or off."""
        self.device.set_persistence_mode(enabled)

    def get_persistence_mode(self) -> bool:
        """Whether persistence mode is on."""
        return self.device.get_persistence_mode()

    def get_supported_memory_clocks(self) -> list[int]:
        """Supported memory clocks, MHz, highest first."""
        return self.device.supported_memory_frequencies()

    def set_memory_locked_clocks(self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True) -> None:
        """Lock the memory clock into ``[min_clock_mhz, max_clock_mhz]``, MHz."""
        self.device.set_locked_memory_frequency(min_clock_mhz, max_clock_mhz)

    def reset_memory_locked_clocks(self, block: bool = True) -> None:
        """Unlock the memory clock."""
        self.device.reset_locked_memory_frequency()

    def get_supported_graphics_clocks(self, memory_clock_mhz: int | None = None) -> list[int]:
        """Supported SM clocks at ``memory_clock_mhz`` (default: the highest), MHz, highest first."""
        return self.device.supported_sm_frequencies(memory_clock_mhz)

    def set_gpu_locked_clocks(self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True) -> None:
        """Lock the SM clock into ``[min_clock_mhz, max_clock_mhz]``, MHz."""
        self.device.set_locked_sm_frequency(min_clock_mhz, max_clock_mhz)

    def reset_gpu_locked_clocks(self, block: bool = True) -> None:
        """Unlock the SM clock."""
        self.device.reset_locked_sm_frequency()

    def reset_locked_clocks(self, gpu: bool = True, memory: bool = True, block: bool = True) -> None:
        """Unlock the SM and/or memory clocks."""
        if gpu:
            self.reset_gpu_locked_clocks()
        if memory:
            self.reset_memory_locked_clocks()

    def get_average_power_usage(self) -> int:
        """Power averaged by the device over about one second, mW."""
        return round(self.device.get_average_power() * _MILLI)

    def get_instant_power_usage(self) -> int:
        """Instant power draw, mW."""
        return round(self.device.get_power() * _MILLI)

    def get_average_memory_power_usage(self) -> int:
        """Memory power averaged by the device, mW (Hopper and newer)."""
        return round(self.device.get_memory_power() * _MILLI)

    def supports_get_total_energy_consumption(self) -> bool:
        """Whether the GPU has an energy counter (NVIDIA Volta and newer)."""
        return self.device.has_energy_counter

    def get_total_energy_consumption(self) -> int:
        """Energy since an arbitrary origin (driver load), mJ."""
        return round(self.device.get_total_energy() * _MILLI)

    def get_gpu_temperature(self) -> int:
        """GPU temperature, whole °C."""
        return round(self.device.get_temperature())


_PER_GPU = frozenset(
    name
    for name, value in vars(GPU).items()
    if callable(value) and name.startswith(("get_", "set_", "reset_"))
) | {"supports_get_total_energy_consumption"}


class GPUs:
    """Zeus's ``GPUs``: this process's GPUs, each method taking the GPU index first.

    Every method of :class:`GPU` is here with a leading ``gpu_index`` argument
    (``gpus.get_instant_power_usage(0)``); :attr:`gpus` holds the per-GPU objects.

    Args:
        gpus: The suite's GPU objects, in index order.

    Example:
        >>> from zeus_core.compat.device.gpu import GPUs
        >>> from zeus_core.testing import simulated_gpu
        >>> gpus = GPUs([simulated_gpu("a40", busy=True)])
        >>> len(gpus), gpus.get_instant_power_usage(0), gpus.supports_get_total_energy_consumption(0)
        (1, 300000, True)
    """

    def __init__(self, gpus: Sequence[_base.GPU]) -> None:
        self._gpus = [GPU(g) for g in gpus]

    @property
    def gpus(self) -> list[GPU]:
        """The per-GPU objects (Zeus's ``GPU``), in index order."""
        return list(self._gpus)

    def __len__(self) -> int:
        return len(self._gpus)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name not in _PER_GPU:
            raise AttributeError(f"'GPUs' object has no attribute {name!r}")

        def by_index(gpu_index: int, *args: Any, **kwargs: Any) -> Any:
            return getattr(self._gpus[gpu_index], name)(*args, **kwargs)

        by_index.__name__ = name
        by_index.__doc__ = getattr(GPU, name).__doc__
        return by_index

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | _PER_GPU)


def get_gpus(ensure_homogeneous: bool = False) -> GPUs:
    """This process's GPUs as Zeus's ``GPUs`` (indices follow ``CUDA_VISIBLE_DEVICES``).

    Raises:
        ZeusGPUInitError: No GPU was found (the message says why).
        ZeusGPUHeterogeneousError: ``ensure_homogeneous`` and the GPUs are of different models.

    Example:
        >>> from zeus_core.compat.device import get_gpus
        >>> from zeus_core.testing import FakeGPUSpec, FakeNVML
        >>> with FakeNVML([FakeGPUSpec.h100()]).install():
        ...     get_gpus().get_average_memory_power_usage(0)  # Hopper meters its memory, mW
        56000
    """
    from zeus_core.device._discovery import discover

    report = discover()
    if not report.gpus:
        reasons = " ".join(m.describe() for m in report.missing) or "no GPU vendor library found a GPU."
        raise ZeusGPUInitError(f"No GPU found: {reasons}")
    names = {g.name for g in report.gpus}
    if ensure_homogeneous and len(names) > 1:
        raise ZeusGPUHeterogeneousError(
            f"get_gpus(ensure_homogeneous=True): GPUs of different models {sorted(names)}."
        )
    return GPUs(report.gpus)
