"""Waiting for queued GPU work before a timestamp, in PyTorch, JAX or CuPy.

Frameworks queue GPU work and return at once; a window that must count exactly the work
dispatched inside it waits for the queue to drain at both edges. A framework that this process
never imported has queued nothing, so nothing is imported here and nothing is waited for.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any, Callable, Sequence

from zeus_core.exceptions import ZeusConfigError

__all__ = ["SYNC_FRAMEWORKS", "check_sync_framework", "synchronizer", "sync_execution"]

SYNC_FRAMEWORKS = ("torch", "jax", "cupy")
"""The frameworks whose queued GPU work a monitor can wait for."""


def check_sync_framework(sync_with: object, where: str = "ZeusMonitor") -> None:
    """Refuse an unknown framework, or CuPy where it cannot be imported.

    Raises:
        ZeusConfigError: ``sync_with`` is not one of :data:`SYNC_FRAMEWORKS` or ``None``, or it is
            ``"cupy"`` and CuPy is not installed.
    """
    if sync_with is not None and sync_with not in SYNC_FRAMEWORKS:
        raise ZeusConfigError(
            f"{where}(sync_execution_with={sync_with!r}): use 'torch', 'jax', 'cupy' or None."
        )
    if sync_with == "cupy" and "cupy" not in sys.modules and importlib.util.find_spec("cupy") is None:
        raise ZeusConfigError(
            f"{where}(sync_execution_with='cupy'): CuPy is not installed, so there is no CuPy work to wait "
            "for. Install the CuPy build for your CUDA (e.g. pip install cupy-cuda12x), or pass the "
            "framework you use ('torch', 'jax') or None."
        )


def synchronizer(gpu_indices: Sequence[int], sync_with: str | None) -> Callable[[], None] | None:
    """The function that waits for ``sync_with``'s queued work on ``gpu_indices``, or ``None``.

    ``None`` when there is nothing to wait for: no framework, no GPU, or the framework was never
    imported in this process (PyTorch, JAX) or sees no CUDA device.
    """
    indices = list(gpu_indices)
    if not indices or sync_with is None:
        return None
    if sync_with == "torch":
        torch = sys.modules.get("torch")
        if torch is None or not torch.cuda.is_available():
            return None

        def sync_torch() -> None:
            for i in indices:
                torch.cuda.synchronize(i)

        return sync_torch
    if sync_with == "jax":
        jax = sys.modules.get("jax")
        if jax is None:
            return None
        gpus = [d for d in jax.devices() if d.platform in ("gpu", "cuda", "rocm")]
        chosen = [gpus[i] for i in indices if i < len(gpus)]
        if not chosen:
            return None

        def sync_jax() -> None:
            for d in chosen:
                jax.device_put(0.0, device=d).block_until_ready()

        return sync_jax
    cupy: Any = sys.modules.get("cupy") or importlib.import_module("cupy")  # importable: checked at creation
    if cupy.cuda.runtime.getDeviceCount() == 0:
        return None

    def sync_cupy() -> None:
        for i in indices:
            cupy.cuda.Device(i).synchronize()

    return sync_cupy


def sync_execution(gpu_devices: Sequence[int], sync_with: str | None = "torch") -> None:
    """Wait until the GPU work ``sync_with`` queued on ``gpu_devices`` has run (Zeus's function).

    Args:
        gpu_devices: GPU indices as the framework numbers them (``cuda:<i>``).
        sync_with: ``"torch"``, ``"jax"`` or ``"cupy"``.

    Raises:
        ZeusConfigError: An unknown framework, or CuPy that is not installed.

    Example:
        >>> from zeus_core.monitor._sync import sync_execution
        >>> sync_execution([0], sync_with="torch")  # no CUDA work queued here: returns at once
    """
    check_sync_framework(sync_with, "sync_execution")
    wait = synchronizer(gpu_devices, sync_with)
    if wait is not None:
        wait()
