"""What the vendor GPU backends share: calling their library, and translating its errors once.

Each backend (NVML, amdsmi) describes its library in one :class:`VendorLibrary`: how to read an
error's code, which codes mean "no permission", "not supported" or "bad argument", and how to fix
each. :meth:`VendorLibrary.translate` is the one place a vendor error becomes a Zeus Suite error
(chained with ``from`` by the caller), and :class:`VendorGPU` calls the library through it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Sequence, TypeVar

from zeus_core.device import _privileges as privileges
from zeus_core.device._base import GPU
from zeus_core.device._registry import Unavailable
from zeus_core.device._visibility import parse_visible_devices
from zeus_core.exceptions import (
    ZeusConfigError,
    ZeusDeviceError,
    ZeusError,
    ZeusNotSupportedError,
    ZeusPermissionError,
)

if TYPE_CHECKING:
    from types import ModuleType

__all__ = ["VendorLibrary", "VendorUnavailable", "VendorGPU", "select_visible", "found_or_logged"]

logger = logging.getLogger(__name__)

_G = TypeVar("_G", bound=GPU)


@dataclass(frozen=True)
class VendorLibrary:
    """A vendor's GPU library as the backends see it: its names, error codes and fixes.

    Attributes:
        devices: What its GPUs are called in messages, e.g. ``"NVIDIA GPUs"``.
        health_check: The command that shows the driver works, e.g. ``"nvidia-smi"``.
        module: Import name, e.g. ``"pynvml"``.
        upgrade: How to get a newer one (said when a function is missing).
        error_class: The library's exception class, e.g. ``"NVMLError"``.
        code_of: The error code of one of its exceptions (``None`` when it has none).
        permission_fix: How to get the rights to set limits and clocks.
        label: Name in messages, e.g. ``"NVML"`` (default: ``module``).
        package: The pip package that provides it, e.g. ``"nvidia-ml-py"`` (default: ``module``).
        no_permission: Codes meaning the process lacks the rights.
        not_supported: Codes meaning the GPU or driver cannot do it.
        bad_argument: Codes meaning the argument was rejected.
        not_supported_hint: Said after "does not support it".
        failure_hint: Said after any other failure.
        index_label: What the library's device numbering is called, e.g. ``"NVML"`` or ``"HIP"``.
        other: Further ``(codes, message)`` pairs that raise :class:`ZeusDeviceError` (a lost GPU, ...).

    Example:
        >>> lib = VendorLibrary("VL GPUs", "vl-smi", "vendorlib", "Upgrade it.", "VLError",
        ...                     lambda e: getattr(e, "code", None), "Run as root.",
        ...                     label="VL", no_permission=(4,))
        >>> err = Exception("denied"); err.code = 4
        >>> lib.translate(err, "set_power_limit(200)")
        ZeusPermissionError('set_power_limit(200): VL refused (denied). Run as root.')
    """

    devices: str
    health_check: str
    module: str
    upgrade: str
    error_class: str
    code_of: Callable[[Exception], int | None]
    permission_fix: str
    label: str = ""
    package: str = ""
    no_permission: tuple[int, ...] = ()
    not_supported: tuple[int, ...] = ()
    bad_argument: tuple[int, ...] = ()
    not_supported_hint: str = ""
    failure_hint: str = ""
    index_label: str = ""
    other: tuple[tuple[tuple[int, ...], str], ...] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "label", self.label or self.module)
        object.__setattr__(self, "package", self.package or self.module)

    def translate(self, err: Exception, call: str) -> ZeusError:
        """The Zeus Suite exception for a library error raised by ``call``."""
        code = self.code_of(err)
        if code in self.no_permission:
            return ZeusPermissionError(f"{call}: {self.label} refused ({err}). {self.permission_fix}")
        if code in self.not_supported:
            hint = f" {self.not_supported_hint}" if self.not_supported_hint else ""
            return ZeusNotSupportedError(f"{call}: this GPU or driver does not support it ({err}).{hint}")
        if code in self.bad_argument:
            return ZeusConfigError(
                f"{call}: {self.label} rejected the argument ({err}). Check the value against the "
                "GPU's supported range (`zeus-suite env` shows it)."
            )
        for codes, message in self.other:
            if code in codes:
                return ZeusDeviceError(f"{call}: {message.format(err=err)}")
        hint = f" {self.failure_hint}" if self.failure_hint else ""
        return ZeusDeviceError(f"{call}: {self.label} failed ({err}).{hint}")

    def error_type(self, module: ModuleType) -> type[Exception]:
        """The library's exception class in ``module`` (the real library or a fake of it)."""
        error: type[Exception] = getattr(module, self.error_class)
        return error


class VendorUnavailable(ZeusDeviceError):
    """The vendor's library is missing or failed to start; :attr:`why` holds the reason and fix."""

    def __init__(self, why: Unavailable) -> None:
        super().__init__(why.describe())
        self.why = why


class VendorGPU(GPU):
    """A GPU read and controlled through its vendor's library (the NVML and amdsmi backends).

    Args:
        index: The index the user sees (``cuda:<index>``).
        backend_index: The library's index of the device.
        module: The library's module (the real one, or a fake in tests).
        handle: The library's handle of the device.
    """

    library: ClassVar[VendorLibrary]

    def __init__(self, index: int, backend_index: int, module: ModuleType, handle: Any) -> None:
        super().__init__(index)
        self.backend_index = backend_index
        self._module = module
        self._handle = handle

    def _call(self, call: str, function: str, *args: Any) -> Any:
        """Call ``<library>.<function>(handle, *args)``, translating the library's errors."""
        lib = self.library
        fn = getattr(self._module, function, None)
        if fn is None:
            raise ZeusNotSupportedError(
                f"GPU {self.index}: {call} needs {lib.module}.{function}, which this {lib.package} "
                f"lacks. {lib.upgrade}"
            )
        try:
            return fn(self._handle, *args)
        except lib.error_type(self._module) as e:
            raise lib.translate(e, f"GPU {self.index}: {call}") from e

    def _require_admin_rights(self, call: str) -> None:
        """Raise :class:`ZeusPermissionError` (with the fix) unless this process holds ``CAP_SYS_ADMIN``."""
        if not privileges.has_admin_rights():
            raise ZeusPermissionError(
                f"GPU {self.index}: {call}: this process lacks admin rights. {self.library.permission_fix}"
            )

    def _clock_range(self, call: str, min_mhz: int, max_mhz: int | None) -> tuple[int, int]:
        """``(min_mhz, max_mhz)`` of a clock lock (``max_mhz`` defaults to ``min_mhz``), MHz.

        Raises:
            ZeusConfigError: ``max_mhz`` is below ``min_mhz``.
        """
        upper = min_mhz if max_mhz is None else max_mhz
        if upper < min_mhz:
            raise ZeusConfigError(f"{call} on GPU {self.index}: max_mhz must be >= min_mhz.")
        return int(min_mhz), int(upper)

    def describe(self) -> str:
        """One line, e.g. ``"GPU 0: NVIDIA A40 (NVML 2)"`` when the visible devices remap it."""
        remapped = self.backend_index != self.index
        remap = f" ({self.library.index_label} {self.backend_index})" if remapped else ""
        return f"GPU {self.index}: {self.name}{remap}"


def select_visible(
    library: VendorLibrary,
    variable: str,
    environ: Mapping[str, str],
    backend_indices: Sequence[int],
    uuids: Callable[[], Sequence[str]],
    make: Callable[[int, int], _G],
) -> tuple[list[_G], Unavailable | None]:
    """The GPUs a visible-devices variable selects, in the user's order, or ``[]`` and why none.

    Args:
        library: The vendor's library.
        variable: The variable to read, e.g. ``"CUDA_VISIBLE_DEVICES"`` (unset: every GPU).
        environ: The environment to read it from.
        backend_indices: The library's indices of this machine's GPUs.
        uuids: The GPUs' UUIDs, by position (called only when the variable names UUIDs).
        make: Builds the GPU the user sees as ``cuda:<index>`` from ``(index, backend index)``.

    Raises:
        ZeusConfigError: The variable is malformed or names a MIG slice.
        ZeusDeviceNotFoundError: It names a GPU this machine lacks.
    """
    spec = environ.get(variable)
    count = len(backend_indices)
    chosen = list(backend_indices) if spec is None else parse_visible_devices(spec, count, uuids, variable)
    if spec is not None and not chosen:
        return [], Unavailable(
            library.devices,
            f"{variable}={spec!r} hides all {count} {library.devices[:-1]}(s).",
            f"unset {variable}, or list the GPUs to use (e.g. {variable}=0,1).",
        )
    if not chosen:
        why = f"{library.label} is working but reports no GPUs."
        return [], Unavailable(library.devices, why, f"check `{library.health_check}`.")
    return [make(i, backend) for i, backend in enumerate(chosen)], None


def found_or_logged(found: tuple[list[_G], Unavailable | None]) -> list[_G]:
    """The GPUs a vendor's probe found; when there are none, the reason goes to the log."""
    gpus, why = found
    if why is not None:
        logger.info("No %s: %s", why.what, why.describe())
    return gpus
