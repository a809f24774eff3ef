"""Package-level contracts: light import, exports, the error tree, the protocol fan-out."""

from __future__ import annotations

import subprocess
import sys

import pytest

import zeus_core
from zeus_core.callback import CallbackList, TrainingCallback, TrainingProtocol
from zeus_core.exceptions import (
    ZeusConfigError,
    ZeusDeviceError,
    ZeusError,
    ZeusNotSupportedError,
    ZeusPermissionError,
    ZeusWindowError,
)


def test_import_is_light() -> None:
    code = (
        "import sys, zeus_core, zeus_integrations, zeus_core._cli;"
        "heavy = [m for m in ('torch', 'lightning', 'transformers', 'trl', 'accelerate', 'fastapi',"
        " 'matplotlib', 'sqlalchemy', 'pynvml', 'deepspeed') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("name", sorted(set(zeus_core.__all__) - {"__version__"}))
def test_every_export_resolves(name: str) -> None:
    assert getattr(zeus_core, name) is not None


def test_error_tree_matches_builtin_reactions() -> None:
    assert issubclass(ZeusWindowError, ValueError) and issubclass(ZeusWindowError, ZeusConfigError)
    assert issubclass(ZeusPermissionError, PermissionError)
    assert issubclass(ZeusNotSupportedError, RuntimeError) and issubclass(
        ZeusNotSupportedError, ZeusDeviceError
    )
    assert all(issubclass(e, ZeusError) for e in (ZeusConfigError, ZeusPermissionError, ZeusDeviceError))


def test_callback_list_reaches_every_train_end_even_if_one_raises() -> None:
    ended: list[str] = []

    class Failing(TrainingCallback):
        def on_train_end(self) -> None:
            ended.append("failing")
            raise RuntimeError("restore failed")

    class Fine(TrainingCallback):
        def on_train_end(self) -> None:
            ended.append("fine")

    callbacks = CallbackList([Fine(), Failing()])
    assert isinstance(callbacks, TrainingProtocol)
    with pytest.raises(RuntimeError, match="restore failed"):
        callbacks.on_train_end()
    assert ended == ["failing", "fine"]


def test_cli_lists_every_subcommand() -> None:
    out = subprocess.run([sys.executable, "-m", "zeus_core._cli", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for command in ("env", "measure", "power", "metrics", "plan", "bso-server", "report", "reproduce"):
        assert command in out.stdout
