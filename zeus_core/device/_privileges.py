"""Whether this process holds the rights that changing GPU settings needs, asked without writing.

NVML and amdsmi refuse power-limit and clock changes without ``CAP_SYS_ADMIN`` (which root has,
unless a container dropped it). The answer comes from the process's effective capabilities
(``CapEff`` in ``/proc/self/status``) on Linux, and from the effective user id elsewhere. It is a
prediction: only a write is certain (``zeus-suite env --check-control`` makes one, and says so).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["has_admin_rights", "CAP_SYS_ADMIN"]

CAP_SYS_ADMIN = 21
"""Bit of ``CAP_SYS_ADMIN`` in Linux capability sets (``linux/capability.h``)."""


def has_admin_rights(status_path: str | Path = "/proc/self/status") -> bool:
    """Whether this process may change GPU power limits and clocks (``CAP_SYS_ADMIN`` or root).

    Args:
        status_path: The process status file to read ``CapEff`` from (Linux).
    """
    try:
        for line in Path(status_path).read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_SYS_ADMIN & 1)
    except (OSError, ValueError, IndexError):
        pass
    geteuid = getattr(os, "geteuid", None)
    return geteuid is not None and geteuid() == 0
