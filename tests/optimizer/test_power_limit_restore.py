"""Original limits come back at interpreter exit and on SIGTERM/SIGINT (subprocesses).

The signal then goes on to the handler that was there before.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.optimizer.plo_support import make_gpus, monitor_of, run_steps
from zeus_core.optimizer.power_limit import Energy, GlobalPowerLimitOptimizer

SCRIPT = Path(__file__).parent / "plo_exit_script.py"


def start(mode: str, log: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), mode, str(log), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO_ROOT,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("READY"), line + proc.stderr.read()  # type: ignore[union-attr]
    return proc


def limits_set(log: Path) -> list[float]:
    return [float(x) for x in log.read_text().split()]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("loop", [(), ("zeus-loop",)], ids=["protocol", "zeus-loop"])
def test_sigterm_restores_then_terminates_as_sigterm(tmp_path: Path, loop: tuple[str, ...]) -> None:
    log = tmp_path / "limits.log"
    proc = start("sigterm", log, *loop)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGTERM, err
    changes = limits_set(log)
    assert changes[0] == 280 and min(changes) < 250 and changes[-1] == 280, changes
    assert "Received SIGTERM: restoring GPU power limits" in err


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigint_restores_then_raises_keyboard_interrupt(tmp_path: Path) -> None:
    log = tmp_path / "limits.log"
    proc = start("sigint", log)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 3 and "INTERRUPTED" in out, err
    changes = limits_set(log)
    assert changes[-1] == 280 and changes.count(280) == 2, changes  # restored exactly once


@pytest.mark.parametrize("loop", [(), ("zeus-loop",)], ids=["protocol", "zeus-loop"])
@pytest.mark.parametrize("mode", ["exit", "crash"])
def test_interpreter_exit_restores(tmp_path: Path, mode: str, loop: tuple[str, ...]) -> None:
    log = tmp_path / "limits.log"
    proc = start(mode, log, *loop)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == (0 if mode == "exit" else 1), err
    assert limits_set(log)[-1] == 280
    assert "Interpreter exit before the end of training: restoring GPU power limits" in err


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="needs the main thread")
def test_the_previous_python_handler_runs_after_the_restore_and_comes_back() -> None:
    calls = []

    def previous(signum, frame) -> None:
        calls.append((signum, gpus[0].get_power_limit()))

    saved = signal.signal(signal.SIGTERM, previous)
    try:
        gpus = make_gpus(1)
        gpus[0].set_power_limit(260)
        plo = GlobalPowerLimitOptimizer(
            monitor_of(gpus), Energy(), warmup_steps=1, profile_steps=2, pl_step=50, early_stopping=None
        )
        plo.on_train_begin()
        run_steps(plo, gpus, 6)
        assert gpus[0].get_power_limit() != 260 and signal.getsignal(signal.SIGTERM) != previous
        signal.raise_signal(signal.SIGTERM)
        assert calls == [(signal.SIGTERM, 260)]  # restored before the previous handler ran
        assert signal.getsignal(signal.SIGTERM) == previous
        plo.on_step_begin()  # the optimizer is inert now: no limit changes
        assert gpus[0].get_power_limit() == 260
        plo.on_train_end()
        assert signal.getsignal(signal.SIGTERM) == previous
    finally:
        signal.signal(signal.SIGTERM, saved)


def test_handlers_are_removed_after_training() -> None:
    before = (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT))
    gpus = make_gpus(1)
    plo = GlobalPowerLimitOptimizer(monitor_of(gpus), Energy())
    plo.on_train_begin()
    plo.on_train_end()
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_training_in_a_worker_thread_restores_without_signal_handlers() -> None:
    gpus = make_gpus(1)
    gpus[0].set_power_limit(230)
    before = signal.getsignal(signal.SIGTERM)
    errors: list[BaseException] = []

    def train() -> None:
        try:
            plo = GlobalPowerLimitOptimizer(
                monitor_of(gpus), Energy(), warmup_steps=1, profile_steps=2, pl_step=50, early_stopping=None
            )
            plo.on_train_begin()
            assert signal.getsignal(signal.SIGTERM) == before
            run_steps(plo, gpus, 20)
            plo.on_train_end()
        except BaseException as e:  # surfaced in the main thread below
            errors.append(e)

    t = threading.Thread(target=train)
    t.start()
    t.join(30)
    assert not errors, errors
    assert gpus[0].get_power_limit() == 230
