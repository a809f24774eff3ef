"""Issue 18's fault tests: real subprocesses, real signals, a fake NVML whose settings persist.

An administrator's 280 W limit (neither min, max nor default) must be what the fake GPU holds when
the process that lowered it is gone, however it went: a second Ctrl-C 0.2 s into the restore,
SIGTERM then SIGINT, SIGTERM while ``on_train_end`` restores, ``kill -9`` of ``zeus-suite measure``
around it. Every set call takes 0.5 s, so the signals land inside the restore.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.fakes.persistent_nvml import DELAY_ENV, STATE_ENV, read_state, sets_started, write_state

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX signals, prctl")

ADMIN_W = 280.0
SLOW_SET_S = 0.5


def child_env(state: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT), STATE_ENV: str(state), DELAY_ENV: str(SLOW_SET_S)}


CHILD = [sys.executable, "-m", "tests.settings.fault_child"]


def start(
    state: Path, *args: str, expect: str = "READY", wrap: tuple[str, ...] = ()
) -> subprocess.Popen[str]:
    """Start the fault child (inside ``wrap``, e.g. ``zeus-suite measure --``) and wait for its first line."""
    proc = subprocess.Popen(
        [*wrap, *CHILD, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(state),
        cwd=REPO_ROOT,
    )
    assert proc.stdout is not None
    proc.first_line = line = proc.stdout.readline()  # type: ignore[attr-defined]
    assert line.startswith(expect), line + proc.stderr.read()  # type: ignore[union-attr]
    return proc


def signal_inside_the_restore(proc: subprocess.Popen[str], state: Path, first: int, second: int) -> None:
    """Send ``first``; once the restore's slow set call has begun, send ``second`` into it."""
    before = sets_started(state)
    proc.send_signal(first)
    deadline = time.monotonic() + 20
    while sets_started(state) == before and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # well inside the 0.5 s call
    proc.send_signal(second)


def limit_w(state: Path) -> float:
    return read_state(state)["gpus"][0]["power_limit_mw"] / 1000


@pytest.fixture
def state(tmp_path: Path) -> Path:
    path = tmp_path / "nvml.json"
    write_state(path, power_limit_w=ADMIN_W)
    return path


def test_a_second_ctrl_c_during_the_restore_waits_for_it(state: Path) -> None:
    proc = start(state, "plo-wait")
    assert limit_w(state) < 250
    signal_inside_the_restore(proc, state, signal.SIGINT, signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert limit_w(state) == ADMIN_W, err
    assert proc.returncode == 3 and "INTERRUPTED" in out, err  # one KeyboardInterrupt, after the restore
    assert "Received SIGINT: restoring GPU power limits" in err


def test_sigterm_then_sigint_restores_then_ends_by_sigterm(state: Path) -> None:
    proc = start(state, "plo-wait")
    signal_inside_the_restore(proc, state, signal.SIGTERM, signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert limit_w(state) == ADMIN_W, err
    assert proc.returncode == -signal.SIGTERM, err  # the first signal's default action, after the restore


def test_sigterm_while_on_train_end_restores(state: Path) -> None:
    proc = start(state, "plo-train-end", expect="RESTORING")
    before = int(proc.first_line.split()[1])  # type: ignore[attr-defined]
    while sets_started(state) == before and proc.poll() is None:
        time.sleep(0.01)
    time.sleep(0.2)  # inside on_train_end's 0.5 s set call
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert limit_w(state) == ADMIN_W, err  # was 100 W when the restore could be cut short
    assert proc.returncode == -signal.SIGTERM and "RESTORED" not in out, err  # TERM handled after it


def test_sigkill_of_measure_takes_the_child_and_its_restore_runs(state: Path) -> None:
    measure_cmd = (sys.executable, "-m", "zeus_core._cli", "measure", "--simulate", "--cpu-indices", "--")
    measure = start(state, "plo-wait", wrap=measure_cmd)
    child = int(measure.first_line.split()[1])  # type: ignore[attr-defined]
    measure.kill()
    measure.wait(timeout=10)
    deadline = time.monotonic() + 20
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child), "the measured command outlived `zeus-suite measure`"
    assert limit_w(state) == ADMIN_W  # it got SIGTERM, so its own restore ran


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not reaped by its new parent, counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def run_env(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys; from tests.fakes.persistent_nvml import install_from_env; install_from_env(); "
        "from zeus_core._cli import main; sys.exit(main(sys.argv[1:]))"
    )
    env = {**child_env(state), DELAY_ENV: "0", "COLUMNS": "250"}
    return subprocess.run(
        [sys.executable, "-c", code, "env", "--sysfs-root", str(state.parent / "no-rapl"), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=60,
    )


def test_env_writes_nothing_and_check_control_writes_only_the_current_value(state: Path) -> None:
    r = run_env(state, "--json")
    assert r.returncode == 0, r.stderr
    assert read_state(state)["writes"] == []  # it used to write the limit as a permission check
    (gpu,) = json.loads(r.stdout)["gpus"]
    assert gpu["control"] == "yes" and gpu["control_checked_by"] == "query"
    table = run_env(state)
    assert "checked without writing" in table.stdout and read_state(state)["writes"] == []
    r = run_env(state, "--check-control")
    assert "checked by writing" in r.stdout, r.stdout + r.stderr
    writes = read_state(state)["writes"]
    assert [w[1:] for w in writes] == [["nvmlDeviceSetPowerManagementLimit", 0, 280_000]]
    assert limit_w(state) == ADMIN_W


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_perseus_puts_back_the_administrators_locked_clocks(tmp_path: Path, sig: signal.Signals) -> None:
    log = tmp_path / "clocks.jsonl"
    proc = start(tmp_path / "unused.json", "perseus-sim", str(log))
    time.sleep(1.0)  # the worker is busy changing clocks (each change takes 0.5 s)
    sent = time.time()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    states = [json.loads(line) for line in log.read_text().splitlines()]
    assert states[0]["locked"] == [1200, 1200] and len(states) >= 3, (
        states
    )  # the admin's lock, then the plan's
    assert states[-1]["locked"] == [1200, 1200], (states, err)  # locked as the administrator left it
    assert states[-1]["thread"] == "MainThread"  # the restore, by the signal handler
    assert all(s["thread"] == "MainThread" for s in states if s["t"] > states[-1]["t"] - 1e-9)
    # The worker stopped at once: at most the change in flight, then the 0.5 s restore itself.
    assert states[-1]["t"] - sent < 2 * SLOW_SET_S + 1.0, states
    assert proc.returncode in (-sig, 1), err  # SIGTERM's default action; KeyboardInterrupt uncaught


def test_perseus_on_nvidia_says_it_cannot_read_locked_clocks_and_unlocks(state: Path) -> None:
    write_state(state, power_limit_w=ADMIN_W, locked_clocks=(1200, 1200))
    proc = start(state, "perseus-nvml")
    assert read_state(state)["gpus"][0]["locked_clocks"] == [900, 900]
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGTERM, err
    assert read_state(state)["gpus"][0]["locked_clocks"] is None  # NVML cannot say 1200 MHz was there
    assert "cannot report its locked SM clocks" in err and "nvidia-smi -i <gpu> -lgc" in err
