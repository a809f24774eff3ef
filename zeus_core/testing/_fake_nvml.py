"""A faithful fake of ``pynvml`` (nvidia-ml-py) for tests and benchmarks without a GPU.

:class:`FakeNVML` is a module object: put it in ``sys.modules["pynvml"]`` (``with fake.install():``
or ``fake.patch(monkeypatch)``) and code that does ``import pynvml`` talks to it. It exposes the
real NVML function names that Zeus Suite and the published ``zeus`` package call, the real
``NVML_*`` constants and the real ``NVMLError`` classes (taken from the installed nvidia-ml-py, so
``.value`` codes, ``NVMLError_NoPermission`` and ``nvmlExceptionClass`` are the genuine ones).

Behaviour, as on real hardware:

- units are NVML's: power and limits in mW, energy in mJ, clocks in MHz;
- each GPU's energy counter advances by its power draw x time on the fake's clock
  (``clock=``, wall-clock by default); the draw is ``power_w`` capped by the power limit;
- ``nvmlDeviceGetTotalEnergyConsumption`` raises ``NotSupported`` before Volta;
- setters raise ``NoPermission`` unless ``root=True``; out-of-range limits and clocks raise
  ``InvalidArgument``; calls before ``nvmlInit`` raise ``Uninitialized``;
- ``library_found=False`` / ``driver_loaded=False`` make ``nvmlInit`` fail like a machine
  without the driver.

Temperature follows the draw with one thermal time constant: it relaxes exponentially towards
``ambient_c + thermal_resistance_c_per_w x draw`` (``nvmlDeviceGetTemperature(V)``). At
``slowdown_c`` the GPU slows down (``nvmlDeviceGetCurrentClocksEventReasons`` reports
``SwThermalSlowdown``) and draws ``slowdown_power_factor`` of its power until it has cooled by
3 °C; ``leakage_per_c`` makes power grow with temperature. By default there is neither slowdown
(``slowdown_c=None``) nor leakage, so energy follows ``power_w`` exactly; a spec asks for them.

``calls`` counts calls per function name. ``instant=True`` makes the energy counter advance by
a fixed step per read without consulting the clock, for benchmarks that must see the caller's
cost rather than the fake's.

Example:
    >>> from zeus_core.testing import VirtualClock
    >>> fake = FakeNVML([FakeGPUSpec.a40(), FakeGPUSpec.a40()], clock=VirtualClock())
    >>> with fake.install():
    ...     from zeus_core.device._nvidia import nvidia_gpus
    ...     gpus = nvidia_gpus(environ={})
    >>> len(gpus)
    2
"""

from __future__ import annotations

import math
import sys
import time
import types
import uuid as _uuid
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterator, Sequence

import pynvml as _real

from zeus_core.testing._catalogue import GPU_CATALOGUE, Preset, gpu_product

__all__ = ["FakeGPUSpec", "FakeNVML"]

NVMLError = _real.NVMLError
_ARCH = {name: getattr(_real, name) for name in dir(_real) if name.startswith("NVML_DEVICE_ARCH_")}


# What each preset's fake GPU draws before its power limit caps it, W (the product facts come
# from the GPU catalogue).
_DRAW_W = {"a40": 250.0, "a100": 330.0, "h100": 560.0, "v100": 240.0, "p100": 150.0}
_A40 = GPU_CATALOGUE["a40"]


def _nvml_architecture(architecture: str) -> int:
    return int(getattr(_real, f"NVML_DEVICE_ARCH_{architecture.upper()}"))


@dataclass
class FakeGPUSpec:
    """One fake GPU: identity, architecture, power behaviour and clock tables.

    The defaults are an NVIDIA A40; :meth:`preset` (or ``FakeGPUSpec.a40()``, ``.a100()``,
    ``.h100()``, ``.v100()``, ``.p100()``) takes the product facts of a GPU in the catalogue.

    Attributes:
        name: Product name NVML reports.
        arch: ``NVML_DEVICE_ARCH_*`` value; below Volta there is no energy counter.
        min_limit_w / max_limit_w / default_limit_w: Power-limit constraints, W.
        power_w: Power the GPU draws (before the limit caps it), W.
        memory_clocks_mhz: Supported memory clocks, MHz.
        sm_clocks_mhz: Supported graphics clocks at every memory clock, MHz.
        uuid: ``GPU-…`` UUID (derived from the name and position when ``None``).
        instant_power_field: Whether ``NVML_FI_DEV_POWER_INSTANT`` and ``_AVERAGE`` answer (newer drivers).
        memory_power_w: Power of the GPU's memory, W, reported in NVML's memory power scope
            (``None``: the scope does not answer, as before Hopper).
        power_limit_settable: ``False`` makes the limit setter raise ``NotSupported``.
        energy_start_j: Counter value at creation, J.
        ambient_c: Temperature of an idle, cooled-down GPU (and at creation), °C.
        thermal_resistance_c_per_w: Steady-state temperature rise per watt drawn, °C/W.
        thermal_time_constant_s: How fast temperature follows power (1/e of the way per constant), s.
        slowdown_c: Temperature where thermal slowdown starts, °C (released 3 °C below); ``None``:
            the GPU never slows down.
        slowdown_power_factor: Share of its power the GPU draws while slowed down.
        leakage_per_c: Relative power increase per °C above ``ambient_c`` (0: none).

    Example:
        >>> FakeGPUSpec.h100().max_limit_w, FakeGPUSpec.preset("v100", power_w=200.0).power_w
        (700.0, 200.0)
    """

    name: str = _A40.name
    arch: int = _nvml_architecture(_A40.architecture)
    min_limit_w: float = _A40.limits.min_w
    max_limit_w: float = _A40.limits.max_w
    default_limit_w: float = _A40.limits.default_w
    power_w: float = _DRAW_W["a40"]
    memory_clocks_mhz: list[int] = field(default_factory=lambda: list(_A40.memory_clocks_mhz))
    sm_clocks_mhz: list[int] = field(default_factory=lambda: _A40.clocks().clocks_mhz())
    uuid: str | None = None
    instant_power_field: bool = _A40.instant_power_field
    memory_power_w: float | None = None
    power_limit_settable: bool = True
    energy_start_j: float = 123456.0
    ambient_c: float = 30.0
    thermal_resistance_c_per_w: float = 0.09
    thermal_time_constant_s: float = 60.0
    slowdown_c: float | None = None
    slowdown_power_factor: float = 0.8
    leakage_per_c: float = 0.0
    a40: ClassVar[Preset[FakeGPUSpec]] = Preset()
    a100: ClassVar[Preset[FakeGPUSpec]] = Preset()
    h100: ClassVar[Preset[FakeGPUSpec]] = Preset()
    v100: ClassVar[Preset[FakeGPUSpec]] = Preset()
    p100: ClassVar[Preset[FakeGPUSpec]] = Preset()

    @classmethod
    def preset(cls, gpu: str, **kw: Any) -> FakeGPUSpec:
        """A fake of a catalogued GPU (``"a40"``, ``"h100"``, ``"v100"``, ...), with ``kw`` applied."""
        product = gpu_product(gpu)
        clocks = product.sm_clocks
        draw = _DRAW_W.get(product.key, 0.8 * product.limits.max_w)
        facts: dict[str, Any] = dict(
            name=product.name,
            arch=_nvml_architecture(product.architecture),
            min_limit_w=product.limits.min_w,
            max_limit_w=product.limits.max_w,
            default_limit_w=product.limits.default_w,
            power_w=draw,
            # Hopper and newer meter their memory (HBM: about a tenth of the board's draw)
            memory_power_w=0.1 * draw if product.architecture in ("hopper", "blackwell") else None,
            memory_clocks_mhz=list(product.memory_clocks_mhz),
            sm_clocks_mhz=[] if clocks is None else clocks.clocks_mhz(),
            instant_power_field=product.instant_power_field,
        )
        return cls(**{**facts, **kw})


class FakeDevice:
    """A fake GPU's state; also the opaque handle NVML returns for it."""

    def __init__(self, spec: FakeGPUSpec, index: int, now: float) -> None:
        self.spec = spec
        self.index = index
        self.uuid = spec.uuid or f"GPU-{_uuid.uuid5(_uuid.NAMESPACE_DNS, f'{spec.name}-{index}')}"
        self.power_limit_mw = int(spec.default_limit_w * 1000)
        self.power_w = spec.power_w
        self.locked_clocks: tuple[int, int] | None = None
        self.locked_memory_clocks: tuple[int, int] | None = None
        self.persistence_mode = False
        self.has_counter = spec.arch >= _real.NVML_DEVICE_ARCH_VOLTA
        self.energy_mj = spec.energy_start_j * 1000.0
        self.instant_mj = int(self.energy_mj)  # the counter in instant mode (see FakeNVML)
        self._last = now
        self.temperature_c = spec.ambient_c
        self.slowed_down = False

    def draw_w(self) -> float:
        """Current draw, W: ``power_w`` (with leakage and slowdown) capped by the power limit."""
        return min(self.power_w * self._thermal_factor(), self.power_limit_mw / 1000.0)

    def accumulate(self, now: float) -> None:
        """Advance the energy counter (and the temperature) to ``now``."""
        self.energy_mj += self.draw_w() * (now - self._last) * 1000.0
        self._advance_thermal(now - self._last)
        self._last = now

    def _thermal_factor(self) -> float:
        spec = self.spec
        leak = 1.0 + spec.leakage_per_c * max(0.0, self.temperature_c - spec.ambient_c)
        return leak * (spec.slowdown_power_factor if self.slowed_down else 1.0)

    def _advance_thermal(self, dt: float) -> None:
        """Temperature relaxes towards ambient + R x draw, in steps short against the time constant."""
        spec = self.spec
        tau = max(spec.thermal_time_constant_s, 1e-9)
        while dt > 0:
            h = min(dt, tau / 50.0)
            target = spec.ambient_c + spec.thermal_resistance_c_per_w * self.draw_w()
            self.temperature_c = target + (self.temperature_c - target) * math.exp(-h / tau)
            if spec.slowdown_c is not None and self.temperature_c >= spec.slowdown_c:
                self.slowed_down = True
            elif spec.slowdown_c is None or self.temperature_c <= spec.slowdown_c - 3.0:
                self.slowed_down = False
            dt -= h

    def clock_event_mask(self) -> int:
        """NVML clock-event reasons now: thermal slowdown when hot, power cap when the limit bites."""
        mask = _real.nvmlClocksEventReasonSwThermalSlowdown if self.slowed_down else 0
        if self.power_w * self._thermal_factor() > self.power_limit_mw / 1000.0:
            mask |= _real.nvmlClocksEventReasonSwPowerCap
        return mask

    def __repr__(self) -> str:
        return f"<FakeDevice {self.index} {self.spec.name}>"


class _Value:
    __slots__ = ("uiVal", "ullVal", "dVal", "sllVal", "ulVal")

    def __init__(self, v: int) -> None:
        self.uiVal = self.ullVal = self.ulVal = self.sllVal = v
        self.dVal = float(v)


class _FieldValue:
    __slots__ = ("fieldId", "scopeId", "nvmlReturn", "value", "valueType", "timestamp", "latencyUsec")

    def __init__(self, field_id: int, scope: int, ret: int, value: int, ts: int) -> None:
        self.fieldId, self.scopeId, self.nvmlReturn = field_id, scope, ret
        self.value = _Value(value)
        self.valueType = _real.NVML_VALUE_TYPE_UNSIGNED_INT
        self.timestamp, self.latencyUsec = ts, 0


class FakeNVML(types.ModuleType):
    """A fake ``pynvml`` module over fake GPUs.

    Args:
        gpus: The fake GPUs, in NVML index order.
        clock: Time source for the energy counters, s (default ``time.time``).
        root: Whether setters are permitted.
        instant: Energy reads advance the counter by ``instant_step_mj`` instead of reading the clock.
        instant_step_mj: Counter step per read in instant mode, mJ.
        library_found: ``False``: ``nvmlInit`` raises ``LibraryNotFound`` (no driver installed).
        driver_loaded: ``False``: ``nvmlInit`` raises ``DriverNotLoaded``.

    Attributes:
        devices: The :class:`FakeDevice` states (also the handles), by NVML index.
        calls: Number of calls per NVML function name.

    Example:
        >>> from zeus_core.testing import FakeGPUSpec, FakeNVML, VirtualClock
        >>> clock = VirtualClock()
        >>> fake = FakeNVML([FakeGPUSpec.h100(power_w=500.0)], clock=clock)
        >>> with fake.install():
        ...     from zeus_core import NVIDIAGPU
        ...     gpu = NVIDIAGPU(0)
        ...     start = gpu.get_total_energy()
        ...     clock.advance(2.0)
        ...     gpu.get_total_energy() - start
        1000.0
        >>> fake.calls["nvmlDeviceGetTotalEnergyConsumption"]
        2
    """

    def __init__(
        self,
        gpus: Sequence[FakeGPUSpec] = (),
        *,
        clock: Callable[[], float] = time.time,
        root: bool = True,
        instant: bool = False,
        instant_step_mj: int = 1000,
        library_found: bool = True,
        driver_loaded: bool = True,
    ) -> None:
        super().__init__("pynvml", "Fake pynvml (zeus_core/testing/_fake_nvml.py)")
        for name in dir(_real):  # the genuine constants and error classes
            if name.startswith(("NVML_", "NVMLError")) or name == "nvmlExceptionClass":
                setattr(self, name, getattr(_real, name))
        self.clock = clock
        self.root = root
        self.instant = instant
        self.instant_step_mj = instant_step_mj
        self.library_found = library_found
        self.driver_loaded = driver_loaded
        now = clock()
        self.devices = [FakeDevice(spec, i, now) for i, spec in enumerate(gpus)]
        self.calls: defaultdict[str, int] = defaultdict(int)
        self.init_count = 0
        self.driver_version = "550.54.15"
        if instant:  # an instance attribute shadows the clock-driven method
            setattr(self, "nvmlDeviceGetTotalEnergyConsumption", self._instant_energy_reader(instant_step_mj))

    # -- test helpers (not NVML) ----------------------------------------------------------------
    @contextmanager
    def install(self) -> Iterator["FakeNVML"]:
        """Make ``import pynvml`` return this fake inside the ``with`` block."""
        saved = sys.modules.get("pynvml")
        sys.modules["pynvml"] = self
        try:
            yield self
        finally:
            if saved is None:
                sys.modules.pop("pynvml", None)
            else:
                sys.modules["pynvml"] = saved

    def patch(self, monkeypatch: Any) -> "FakeNVML":
        """Install with pytest's ``monkeypatch`` (undone after the test)."""
        monkeypatch.setitem(sys.modules, "pynvml", self)
        return self

    def set_power(self, index: int, watts: float) -> None:
        """Change what GPU ``index`` draws from now on, W."""
        dev = self.devices[index]
        dev.accumulate(self.clock())
        dev.power_w = watts

    def total_calls(self) -> int:
        """Calls to every NVML function so far."""
        return sum(self.calls.values())

    def reset_calls(self) -> None:
        """Zero the call counters."""
        self.calls.clear()

    # -- internals --------------------------------------------------------------------------------
    def _instant_energy_reader(self, step_mj: int) -> Callable[[Any], int]:
        calls = self.calls
        key = "nvmlDeviceGetTotalEnergyConsumption"

        def nvmlDeviceGetTotalEnergyConsumption(handle: Any) -> int:
            calls[key] += 1
            if not handle.has_counter:
                raise NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)
            handle.instant_mj += step_mj
            return handle.instant_mj

        return nvmlDeviceGetTotalEnergyConsumption

    def _dev(self, handle: Any) -> FakeDevice:
        if self.init_count <= 0:
            raise NVMLError(_real.NVML_ERROR_UNINITIALIZED)
        if not isinstance(handle, FakeDevice) or handle not in self.devices:
            raise NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)
        return handle

    def _require_root(self) -> None:
        if not self.root:
            raise NVMLError(_real.NVML_ERROR_NO_PERMISSION)

    # -- library ----------------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] += 1
        if not self.library_found:
            raise NVMLError(_real.NVML_ERROR_LIBRARY_NOT_FOUND)
        if not self.driver_loaded:
            raise NVMLError(_real.NVML_ERROR_DRIVER_NOT_LOADED)
        self.init_count += 1

    def nvmlInitWithFlags(self, flags: int) -> None:
        self.nvmlInit()

    def nvmlShutdown(self) -> None:
        self.calls["nvmlShutdown"] += 1
        if self.init_count <= 0:
            raise NVMLError(_real.NVML_ERROR_UNINITIALIZED)
        self.init_count -= 1

    def _nvmlGetFunctionPointer(self, name: str) -> Any:  # published zeus checks that this exists
        if not hasattr(self, name):
            raise NVMLError(_real.NVML_ERROR_FUNCTION_NOT_FOUND)
        return getattr(self, name)

    def nvmlSystemGetDriverVersion(self) -> str:
        self.calls["nvmlSystemGetDriverVersion"] += 1
        if self.init_count <= 0:
            raise NVMLError(_real.NVML_ERROR_UNINITIALIZED)
        return self.driver_version

    def nvmlDeviceGetCount(self) -> int:
        self.calls["nvmlDeviceGetCount"] += 1
        if self.init_count <= 0:
            raise NVMLError(_real.NVML_ERROR_UNINITIALIZED)
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeDevice:
        self.calls["nvmlDeviceGetHandleByIndex"] += 1
        if self.init_count <= 0:
            raise NVMLError(_real.NVML_ERROR_UNINITIALIZED)
        if not 0 <= index < len(self.devices):
            raise NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)
        return self.devices[index]

    # -- identity ---------------------------------------------------------------------------------
    def nvmlDeviceGetName(self, handle: Any) -> str:
        self.calls["nvmlDeviceGetName"] += 1
        return self._dev(handle).spec.name

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        self.calls["nvmlDeviceGetUUID"] += 1
        return self._dev(handle).uuid

    def nvmlDeviceGetArchitecture(self, handle: Any) -> int:
        self.calls["nvmlDeviceGetArchitecture"] += 1
        return self._dev(handle).spec.arch

    def nvmlDeviceGetC2cModeInfoV(self, handle: Any) -> Any:
        self.calls["nvmlDeviceGetC2cModeInfoV"] += 1
        self._dev(handle)
        raise NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)  # not a Grace Hopper superchip

    # -- energy and power -------------------------------------------------------------------------
    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        self.calls["nvmlDeviceGetTotalEnergyConsumption"] += 1
        dev = self._dev(handle)
        if not dev.has_counter:
            raise NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)
        dev.accumulate(self.clock())
        return int(dev.energy_mj)

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        self.calls["nvmlDeviceGetPowerUsage"] += 1
        return int(self._dev(handle).draw_w() * 1000)

    def nvmlDeviceGetFieldValues(self, handle: Any, field_ids: Sequence[Any]) -> list[_FieldValue]:
        self.calls["nvmlDeviceGetFieldValues"] += 1
        dev = self._dev(handle)
        ts = int(self.clock() * 1e6)
        out = []
        for f in field_ids:
            fid, scope = f if isinstance(f, tuple) else (f, 0)
            power_field = fid in (_real.NVML_FI_DEV_POWER_INSTANT, _real.NVML_FI_DEV_POWER_AVERAGE)
            memory = dev.spec.memory_power_w
            if power_field and dev.spec.instant_power_field and scope in (0, _real.NVML_POWER_SCOPE_GPU):
                out.append(_FieldValue(fid, scope, _real.NVML_SUCCESS, int(dev.draw_w() * 1000), ts))
            elif (
                fid == _real.NVML_FI_DEV_POWER_AVERAGE
                and scope == _real.NVML_POWER_SCOPE_MEMORY
                and memory is not None
            ):
                out.append(_FieldValue(fid, scope, _real.NVML_SUCCESS, int(memory * 1000), ts))
            else:
                out.append(_FieldValue(fid, scope, _real.NVML_ERROR_NOT_SUPPORTED, 0, ts))
        return out

    # -- temperature and clock events ---------------------------------------------------------------
    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        self.calls["nvmlDeviceGetTemperature"] += 1
        return self._temperature(handle, sensor)

    def nvmlDeviceGetTemperatureV(self, handle: Any, sensor: int, version: Any = None) -> int:
        self.calls["nvmlDeviceGetTemperatureV"] += 1
        return self._temperature(handle, sensor)

    def _temperature(self, handle: Any, sensor: int) -> int:
        dev = self._dev(handle)
        if sensor != _real.NVML_TEMPERATURE_GPU:
            raise NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)
        dev.accumulate(self.clock())
        return int(round(dev.temperature_c))  # NVML reports whole degrees

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        self.calls["nvmlDeviceGetCurrentClocksEventReasons"] += 1
        dev = self._dev(handle)
        dev.accumulate(self.clock())
        return dev.clock_event_mask()

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Any) -> int:
        self.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] += 1
        dev = self._dev(handle)
        dev.accumulate(self.clock())
        return dev.clock_event_mask()

    # -- power limit ------------------------------------------------------------------------------
    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle: Any) -> list[int]:
        self.calls["nvmlDeviceGetPowerManagementLimitConstraints"] += 1
        spec = self._dev(handle).spec
        return [int(spec.min_limit_w * 1000), int(spec.max_limit_w * 1000)]

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle: Any) -> int:
        self.calls["nvmlDeviceGetPowerManagementDefaultLimit"] += 1
        return int(self._dev(handle).spec.default_limit_w * 1000)

    def nvmlDeviceGetPowerManagementLimit(self, handle: Any) -> int:
        self.calls["nvmlDeviceGetPowerManagementLimit"] += 1
        return self._dev(handle).power_limit_mw

    def nvmlDeviceGetPowerManagementMode(self, handle: Any) -> int:
        self.calls["nvmlDeviceGetPowerManagementMode"] += 1
        settable = self._dev(handle).spec.power_limit_settable
        return _real.NVML_FEATURE_ENABLED if settable else _real.NVML_FEATURE_DISABLED

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> int:
        self.calls["nvmlDeviceGetEnforcedPowerLimit"] += 1
        return self._dev(handle).power_limit_mw

    def nvmlDeviceSetPowerManagementLimit(self, handle: Any, limit_mw: int) -> None:
        self.calls["nvmlDeviceSetPowerManagementLimit"] += 1
        dev = self._dev(handle)
        if not dev.spec.power_limit_settable:
            raise NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)
        self._require_root()
        if not isinstance(limit_mw, int) or not (
            dev.spec.min_limit_w * 1000 <= limit_mw <= dev.spec.max_limit_w * 1000
        ):
            raise NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)
        dev.accumulate(self.clock())
        dev.power_limit_mw = limit_mw

    # -- clocks -----------------------------------------------------------------------------------
    def nvmlDeviceGetSupportedMemoryClocks(self, handle: Any) -> list[int]:
        self.calls["nvmlDeviceGetSupportedMemoryClocks"] += 1
        return list(self._dev(handle).spec.memory_clocks_mhz)

    def nvmlDeviceGetSupportedGraphicsClocks(self, handle: Any, memory_mhz: int) -> list[int]:
        self.calls["nvmlDeviceGetSupportedGraphicsClocks"] += 1
        spec = self._dev(handle).spec
        if memory_mhz not in spec.memory_clocks_mhz:
            raise NVMLError(_real.NVML_ERROR_NOT_FOUND)
        return list(spec.sm_clocks_mhz)

    def nvmlDeviceSetGpuLockedClocks(self, handle: Any, min_mhz: int, max_mhz: int) -> None:
        self.calls["nvmlDeviceSetGpuLockedClocks"] += 1
        dev = self._dev(handle)
        self._require_root()
        clocks = dev.spec.sm_clocks_mhz
        if min_mhz > max_mhz or min_mhz < min(clocks) or max_mhz > max(clocks):
            raise NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)
        dev.locked_clocks = (min_mhz, max_mhz)

    def nvmlDeviceResetGpuLockedClocks(self, handle: Any) -> None:
        self.calls["nvmlDeviceResetGpuLockedClocks"] += 1
        dev = self._dev(handle)
        self._require_root()
        dev.locked_clocks = None

    def nvmlDeviceSetMemoryLockedClocks(self, handle: Any, min_mhz: int, max_mhz: int) -> None:
        self.calls["nvmlDeviceSetMemoryLockedClocks"] += 1
        dev = self._dev(handle)
        self._require_root()
        clocks = dev.spec.memory_clocks_mhz
        if min_mhz > max_mhz or min_mhz < min(clocks) or max_mhz > max(clocks):
            raise NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)
        dev.locked_memory_clocks = (min_mhz, max_mhz)

    def nvmlDeviceResetMemoryLockedClocks(self, handle: Any) -> None:
        self.calls["nvmlDeviceResetMemoryLockedClocks"] += 1
        dev = self._dev(handle)
        self._require_root()
        dev.locked_memory_clocks = None

    # -- persistence mode -------------------------------------------------------------------------
    def nvmlDeviceGetPersistenceMode(self, handle: Any) -> int:
        self.calls["nvmlDeviceGetPersistenceMode"] += 1
        enabled = self._dev(handle).persistence_mode
        return _real.NVML_FEATURE_ENABLED if enabled else _real.NVML_FEATURE_DISABLED

    def nvmlDeviceSetPersistenceMode(self, handle: Any, mode: int) -> None:
        self.calls["nvmlDeviceSetPersistenceMode"] += 1
        dev = self._dev(handle)
        self._require_root()
        if mode not in (_real.NVML_FEATURE_ENABLED, _real.NVML_FEATURE_DISABLED):
            raise NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)
        dev.persistence_mode = mode == _real.NVML_FEATURE_ENABLED
