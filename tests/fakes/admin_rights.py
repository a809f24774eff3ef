"""The process's admin rights as the installed fakes model them (their ``root`` flag).

``zeus_core.device._privileges.has_admin_rights`` asks the operating system; in tests the fake
NVML/amdsmi stand for the machine, so their ``root`` flag decides (tests/conftest.py patches it in;
subprocess helpers call :func:`follow_the_fakes`).
"""

from __future__ import annotations

import sys

__all__ = ["admin_rights_of_installed_fakes", "follow_the_fakes"]


def admin_rights_of_installed_fakes() -> bool:
    """``False`` if an installed fake ``pynvml``/``amdsmi`` was created with ``root=False``."""
    return all(getattr(sys.modules.get(name), "root", True) for name in ("pynvml", "amdsmi"))


def follow_the_fakes() -> None:
    """Make ``has_admin_rights`` follow the fakes in this process (for subprocess helpers)."""
    from zeus_core.device import _privileges as privileges

    privileges.has_admin_rights = admin_rights_of_installed_fakes
