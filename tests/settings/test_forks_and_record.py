"""Issue 30: forked children, every terminating signal, restore order, and the per-GPU record.

Real subprocesses on a fake NVML whose settings persist in a file shared by processes and whose
write log names the writing pid (tests/fakes/persistent_nvml.py). The administrator's limit is
280 W (neither min, max nor default), so only a true restore gives it back.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.fakes.persistent_nvml import DELAY_ENV, STATE_ENV, read_state, write_state
from zeus_core import _restore_hooks
from zeus_core.settings import SettingsGuard
from zeus_core.testing import PhysicalModel, SimulatedGPU

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork, POSIX signals, /proc")

ADMIN_W = 280.0
CHILD = [sys.executable, "-m", "tests.settings.record_child"]
main_thread_only = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(), reason="signal handlers need the main thread"
)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    path = tmp_path / "nvml.json"
    write_state(path, power_limit_w=ADMIN_W)
    return path


def env_for(state: Path, **extra: str) -> dict[str, str]:
    run_dir = state.parent / "run"  # this test's own per-GPU record directory
    return {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        STATE_ENV: str(state),
        DELAY_ENV: "0",
        "ZEUS_SUITE_RUN_DIR": str(run_dir),
        **extra,
    }


def start(state: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    """Start the child and read its first line (``READY <pid>`` or ``BUSY ...``) into ``.first``."""
    proc = subprocess.Popen(
        [*CHILD, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_for(state, **env),
        cwd=REPO_ROOT,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)),  # SIGQUIT: no core file
    )
    assert proc.stdout is not None
    proc.first = proc.stdout.readline()  # type: ignore[attr-defined]
    return proc


def stop(state: Path, proc: subprocess.Popen[str]) -> tuple[str, str]:
    """End a ``hold`` child cleanly (its restore runs) and return its output."""
    Path(f"{state}.stop-{proc.pid}").touch()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "DONE" in out, err
    return out, err


def limit_w(state: Path) -> float:
    return read_state(state)["gpus"][0]["power_limit_mw"] / 1000


def writers(state: Path) -> set[int]:
    return {w[0] for w in read_state(state)["writes"]}


# -- forked children ------------------------------------------------------------------------------
def test_forked_children_never_restore_the_parents_limit(state: Path) -> None:
    pytest.importorskip("torch")
    proc = start(state, "forks")
    out, err = proc.communicate(timeout=120)
    out = proc.first + out  # type: ignore[attr-defined]
    assert proc.returncode == 0 and "DONE" in out, out + err
    steps = {line.split()[1]: float(line.split()[2]) for line in out.splitlines() if line.startswith("STEP")}
    # Each child used to write 280 W back while the parent trained on, believing 200 W was set.
    assert steps == {"pool": 200.0, "terminate": 200.0, "fork-exit": 200.0, "dataloader": 200.0}, out + err
    assert writers(state) == {proc.pid}, read_state(state)["writes"]  # only the parent wrote
    workers = [json.loads(line.split(" ", 1)[1]) for line in out.splitlines() if line.startswith("WORKER")]
    assert len(workers) == 2 and all(w["pid"] != proc.pid for w in workers)
    # DataLoader workers get the handlers that were there before the library's, and nothing armed.
    assert all(w["sigterm_default"] and w["sighup_default"] and w["armed"] == [] for w in workers), workers
    assert limit_w(state) == ADMIN_W


# -- every signal that ends the process ---------------------------------------------------------
SIGNALS = [signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM]


def test_every_terminating_signal_restores_then_ends_the_process(tmp_path: Path) -> None:
    procs = {}
    for sig in SIGNALS:  # one child per signal, side by side, each on its own fake GPU
        path = tmp_path / sig.name / "nvml.json"
        path.parent.mkdir()
        write_state(path, power_limit_w=ADMIN_W)
        procs[sig] = (path, start(path, "hold", "200"))
    for sig, (path, proc) in procs.items():
        assert proc.first.startswith("READY"), proc.first + proc.stderr.read()  # type: ignore[attr-defined,union-attr]
        assert limit_w(path) == 200.0
        proc.send_signal(sig)
    for sig, (path, proc) in procs.items():
        _, err = proc.communicate(timeout=30)
        assert limit_w(path) == ADMIN_W, (sig.name, err)  # was left at 200 W
        assert proc.returncode == -sig, (sig.name, proc.returncode, err)  # then the default action
        assert f"Received {sig.name}: restoring GPU power limits" in err


@main_thread_only
def test_a_programs_own_handler_is_left_alone_and_defaults_come_back() -> None:
    calls: list[int] = []
    saved = signal.signal(signal.SIGUSR1, lambda s, f: calls.append(s))  # e.g. Slurm's USR1@ checkpoint
    gpu = SimulatedGPU(PhysicalModel.a40())
    try:
        with SettingsGuard([gpu]) as guard:
            guard.set_power_limit(gpu, 200)
            assert signal.getsignal(signal.SIGHUP) not in (signal.SIG_DFL, None)  # ours: restore, then die
            assert signal.SIGUSR1 not in _restore_hooks.handled_signals()
            signal.raise_signal(signal.SIGUSR1)
            assert calls == [signal.SIGUSR1] and gpu.get_power_limit() == 200.0 and guard.armed
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_DFL  # put back once nothing is armed
    finally:
        signal.signal(signal.SIGUSR1, saved)


# -- restore order --------------------------------------------------------------------------------
@main_thread_only
def test_nested_guards_and_two_optimizers_unwind_newest_first_on_a_signal() -> None:
    gpu = SimulatedGPU(PhysicalModel.a40())
    gpu.set_power_limit(ADMIN_W)
    outer, inner = SettingsGuard([gpu], what="outer"), SettingsGuard([gpu], what="inner")
    saved = signal.signal(signal.SIGTERM, lambda s, f: None)  # the program's handler keeps it running
    try:
        outer.record()
        gpu.set_power_limit(250)  # the first optimizer's limit
        inner.record()  # a second optimizer (or a nested guard) finds 250 W
        gpu.set_power_limit(200)
        signal.raise_signal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, saved)
    assert gpu.get_power_limit() == ADMIN_W  # first in, first out left 250 W
    assert not outer.armed and not inner.armed


def test_nested_guards_unwind_newest_first_at_exit() -> None:
    gpu = SimulatedGPU(PhysicalModel.a40())
    gpu.set_power_limit(ADMIN_W)
    guards = [SettingsGuard([gpu], what=f"guard {i}") for i in range(3)]
    for watts, guard in zip((250, 200, 150), guards):
        guard.record()
        gpu.set_power_limit(watts)
    _restore_hooks._at_exit()  # what atexit runs
    assert gpu.get_power_limit() == ADMIN_W


# -- one GPU, several processes ----------------------------------------------------------------------
def test_a_second_process_is_refused_and_a_sharer_leaves_the_true_original(state: Path) -> None:
    first = start(state, "hold", "200")
    assert first.first.startswith("READY"), first.first  # type: ignore[attr-defined]
    refused = start(state, "hold", "150")
    _, err = refused.communicate(timeout=30)
    assert refused.returncode == 5, err
    assert f"held by pid {first.pid}" in refused.first and "ZEUS_SUITE_SHARE_GPUS=1" in refused.first  # type: ignore[attr-defined]
    assert limit_w(state) == 200.0 and refused.pid not in writers(state)

    sharer = start(state, "hold", "150", ZEUS_SUITE_SHARE_GPUS="1")
    assert sharer.first.startswith("READY"), sharer.first + sharer.stderr.read()  # type: ignore[attr-defined,union-attr]
    assert limit_w(state) == 150.0
    stop(state, first)  # the sharer still holds the GPU: the first one leaves its value
    assert limit_w(state) == 150.0
    _, err = stop(state, sharer)  # the last one out puts back the true original
    assert limit_w(state) == ADMIN_W, err  # the sharer had recorded 200 W and wrote it back
    assert "sharing its power limit" in err
    assert not list((state.parent / "run").glob("gpu-*.json"))  # nothing left in the record


def test_after_a_sigkill_the_record_names_the_original_and_the_next_run_restores_it(state: Path) -> None:
    killed = start(state, "hold", "200")
    assert killed.first.startswith("READY")  # type: ignore[attr-defined]
    killed.kill()
    _, err = killed.communicate(timeout=30)
    assert "power limit before Zeus Suite changes it: 280 W" in err and "nvidia-smi -i 0 -pl 280" in err
    assert limit_w(state) == 200.0  # nothing can run on SIGKILL
    (record,) = (state.parent / "run").glob("gpu-*.json")
    entry = json.loads(record.read_text())["settings"]["power_limit"]
    assert entry["original"] == ADMIN_W and entry["restore_with"] == "nvidia-smi -i 0 -pl 280"
    assert oct(os.stat(state.parent / "run").st_mode & 0o777) == "0o700"

    nxt = start(state, "hold", "150")
    assert nxt.first.startswith("READY")  # type: ignore[attr-defined]
    _, err = stop(state, nxt)
    assert f"pid {killed.pid}" in err and "ended without restoring" in err
    assert limit_w(state) == ADMIN_W  # it used to record 200 W and put that back


def test_os_exit_cannot_restore_but_the_record_lets_the_next_run_do_it(state: Path) -> None:
    gone = start(state, "os-exit", "200")
    assert gone.first.startswith("READY")  # type: ignore[attr-defined]
    _, err = gone.communicate(timeout=30)
    assert gone.returncode == 0 and "power limit before Zeus Suite changes it: 280 W" in err
    assert limit_w(state) == 200.0  # os._exit runs no Python code: nothing can restore
    nxt = start(state, "hold", "150")
    assert nxt.first.startswith("READY")  # type: ignore[attr-defined]
    _, err = stop(state, nxt)
    assert "ended without restoring" in err
    assert limit_w(state) == ADMIN_W


def test_an_unsafe_run_directory_is_refused(state: Path, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    proc = start(state, "hold", "200", ZEUS_SUITE_RUN_DIR=str(shared))
    assert proc.first.startswith("READY")  # type: ignore[attr-defined]
    _, err = stop(state, proc)
    assert "is writable by others" in err and not list(shared.iterdir())
    assert limit_w(state) == ADMIN_W
