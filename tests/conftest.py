"""Shared fixtures. No test needs a GPU; the measured data is bundled with the package."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

# The per-GPU settings record (zeus_core/_settings_record.py) of this test session: fake GPUs have
# the same UUIDs in every process, so sessions running side by side must not see each other's.
os.environ.setdefault("ZEUS_SUITE_RUN_DIR", tempfile.mkdtemp(prefix="zeus-suite-run-"))


@pytest.fixture(autouse=True)
def _admin_rights_follow_the_fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake NVML/amdsmi stands for the machine, the process's rights included (its ``root`` flag)."""
    from tests.fakes.admin_rights import admin_rights_of_installed_fakes
    from zeus_core.device import _privileges as privileges

    monkeypatch.setattr(privileges, "has_admin_rights", admin_rights_of_installed_fakes)


@pytest.fixture
def shared_data() -> Path:
    """The folder of the bundled measured data (``zeus_nsdi23/``, ``power_limit_profiles/``, ``perseus/``)."""
    from zeus_core import data

    return data.path("zeus_nsdi23").parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (for torch.distributed rendezvous)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_command(script: str | Path, *args: str, nproc: int = 2) -> list[str]:
    """A ``torch.distributed.run`` command line for ``nproc`` local processes on a free port."""
    import sys

    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        str(nproc),
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(free_port()),
        str(script),
        *args,
    ]
