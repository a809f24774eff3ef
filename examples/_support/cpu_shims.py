"""CPU shims that let DeepSpeed and Megatron-core pipelines run without a GPU (examples, tests, CI).

Support code of the examples, deliberately outside the installed packages: it patches torch in
*this process*. Call a shim before the framework initialises; on a machine with CUDA it does
nothing, so the examples run unchanged on GPUs. ``torch.distributed.pipelining`` needs none.

Example:
    >>> from _support import cpu_shims
    >>> cpu_shims.megatron_on_cpu()   # before parallel_state.initialize_model_parallel(...)  # doctest: +SKIP
    True
"""

from __future__ import annotations

import os
import sys
from typing import Any

import torch

__all__ = ["deepspeed_on_cpu", "megatron_on_cpu"]


def deepspeed_on_cpu() -> bool:
    """Prepare DeepSpeed for a CPU-only run; returns ``True`` if anything was patched.

    Selects DeepSpeed's CPU accelerator without op builds, and skips the JIT build of its
    shared-memory communication op (minutes of ninja; collectives then use plain gloo). Call
    before ``deepspeed.init_distributed(dist_backend="gloo")``.
    """
    if torch.cuda.is_available():
        return False
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    os.environ.setdefault("DS_BUILD_OPS", "0")
    import deepspeed.comm  # type: ignore[import-untyped]  # noqa: F401  (loads deepspeed.comm.torch)

    # `import deepspeed.comm.torch as m` yields the torch library (the name is shadowed), hence sys.modules.
    setattr(sys.modules["deepspeed.comm.torch"], "build_shm_op", lambda: None)
    return True


def megatron_on_cpu() -> bool:
    """Map Megatron-core's CUDA buffers and syncs to the CPU; returns ``True`` if anything was patched.

    Its schedules allocate ``torch.zeros(..., device="cuda")``, call ``torch.cuda.current_device()``
    and ``torch.cuda.synchronize()`` and (up to 0.9) ``Tensor.cuda()``; all of these are redirected
    to the CPU. Call before ``megatron.core.parallel_state.initialize_model_parallel``. Idempotent.
    """
    if torch.cuda.is_available() or getattr(torch.zeros, "_zeus_cpu_shim", False):
        return False
    torch.cuda.current_device = lambda: "cpu"  # type: ignore[assignment,return-value]
    torch.cuda.synchronize = lambda *args, **kwargs: None  # type: ignore[assignment]
    zeros = torch.zeros

    def cpu_zeros(*args: Any, **kwargs: Any) -> torch.Tensor:
        if str(kwargs.get("device", "")).startswith("cuda"):
            kwargs["device"] = "cpu"
        return zeros(*args, **kwargs)

    cpu_zeros._zeus_cpu_shim = True  # type: ignore[attr-defined]
    torch.zeros = cpu_zeros  # type: ignore[assignment]
    # megatron-core 0.9 moves its token counter with `torch.tensor(0).cuda()`: keep it on the CPU.
    torch.Tensor.cuda = lambda self, *args, **kwargs: self  # type: ignore[method-assign]
    return True
