"""Run ``zeus-suite daemon`` in a real subprocess on the shared fake NVML, and clients beside it.

:class:`Daemon` starts ``python -m tests.daemon.run_daemon`` in a world-readable temporary folder
(so that a client running as another user can reach the socket and the fake's state), waits until
``/discover`` answers, and can SIGKILL and restart it on the same journal. Every wait polls with a
deadline; nothing sleeps and hopes.
"""

from __future__ import annotations

import functools
import json
import os
import queue
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from tests.daemon.fake_gpus import GPUS_ENV, settings, write_gpus
from zeus_core.device._zeusd import DaemonClient, Endpoint, _UnixConnection

REPO = Path(__file__).resolve().parents[2]
STARTUP_S = 60.0  # a loaded 2-core machine can take a while to import aiohttp + pydantic


def make_rapl(root: Path, package_uj: int = 1_000_000, dram_uj: int = 500_000) -> Path:
    """A RAPL tree with one package and its DRAM (energy in µJ) under ``root``."""
    zone = root / "intel-rapl:0"
    (zone / "intel-rapl:0:0").mkdir(parents=True, exist_ok=True)
    for d, name, uj in ((zone, "package-0", package_uj), (zone / "intel-rapl:0:0", "dram", dram_uj)):
        (d / "name").write_text(f"{name}\n")
        (d / "energy_uj").write_text(f"{uj}\n")
        (d / "max_energy_range_uj").write_text("262143328850\n")
    return root


def wait_for(predicate: Callable[[], Any], timeout_s: float, what: str, interval_s: float = 0.02) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(interval_s)


def raw(sock: str, method: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """One request over the Unix socket with a fresh connection: (status, JSON body or text)."""
    conn = _UnixConnection(sock, timeout=30)
    try:
        conn.request(method, path, headers={"Content-Length": "0", **(headers or {})})
        response = conn.getresponse()
        text = response.read().decode()
    finally:
        conn.close()
    try:
        return response.status, json.loads(text) if text else None
    except json.JSONDecodeError:
        return response.status, text


class Daemon:
    """A daemon subprocess and its folder: socket, journal, fake NVML state, config.

    Args:
        gpus: Fake A40s.
        config: TOML text of the daemon config (None: open daemon).
        args: More command-line options.
    """

    def __init__(self, gpus: int = 1, config: str | None = None, args: tuple[str, ...] = ()) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="zeusd-test-"))
        os.chmod(self.dir, 0o755)
        self.socket = str(self.dir / "d.sock")
        self.journal = self.dir / "journal.sqlite"
        self.state = self.dir / "nvml.json"
        self.log = self.dir / "daemon.log"
        self.gpus = gpus
        write_gpus(self.state, gpus)
        self.config = None
        if config is not None:
            self.config = self.dir / "daemon.toml"
            self.config.write_text(config)
        self.args = args
        self.proc: subprocess.Popen[bytes] | None = None

    # -- environment ----------------------------------------------------------------------------
    def fake_env(self, root: bool) -> dict[str, str]:
        """Environment for a process on this daemon's fake GPUs (``root``: may it write directly)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZEUSD_")}
        env.update(
            PYTHONPATH=str(REPO),
            ZEUS_FAKE_NVML_STATE=str(self.state),
            ZEUS_FAKE_NVML_ROOT="1" if root else "0",
            ZEUS_SUITE_QUIET="1",
            **{GPUS_ENV: str(self.gpus)},
        )
        env.pop("CUDA_VISIBLE_DEVICES", None)
        return env

    def client_env(self) -> dict[str, str]:
        """A client's environment: the fake refuses its writes, ``ZEUSD_SOCK_PATH`` names this daemon."""
        return {**self.fake_env(root=False), "ZEUSD_SOCK_PATH": self.socket}

    # -- life -----------------------------------------------------------------------------------
    def start(self) -> "Daemon":
        """Start (or restart) the daemon and wait until it answers."""
        cmd = [
            sys.executable,
            "-m",
            "tests.daemon.run_daemon",
            "--socket",
            self.socket,
            "--journal",
            str(self.journal),
        ]
        cmd += ["--socket-permissions", "666", "--rapl-root", str(self.dir / "no-rapl"), *self.args]
        if self.config is not None:
            cmd += ["--config", str(self.config)]
        log = open(self.log, "ab")
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=self.fake_env(root=True), stdout=log, stderr=log)
        log.close()
        wait_for(self._answers, STARTUP_S, f"the daemon to answer on {self.socket}:\n{self.read_log()}")
        return self

    def _answers(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"the daemon exited ({self.proc.returncode}):\n{self.read_log()}")
        try:
            return raw(self.socket, "GET", "/discover")[0] == 200
        except OSError:
            return False

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` and wait for the process to end."""
        assert self.proc is not None
        self.proc.send_signal(sig)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM (if running) and remove the folder."""
        if self.proc is not None and self.proc.poll() is None:
            self.kill(signal.SIGTERM)
        shutil.rmtree(self.dir, ignore_errors=True)

    def read_log(self) -> str:
        """The daemon's output so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    # -- looking at it --------------------------------------------------------------------------
    def client(self, token: str | None = None) -> DaemonClient:
        """A client of this daemon in the test process."""
        return DaemonClient(Endpoint(socket_path=self.socket, token=token))

    def settings(self) -> list[tuple[Any, ...]]:
        """Every fake GPU's ``(power_limit_mw, locked_clocks, mem_locked_clocks, persistence)``."""
        return settings(self.state)

    def writes(self) -> list[Any]:
        """Every write to the fake GPUs so far: ``[pid, call, gpu, args...]``."""
        return json.loads(self.state.read_text())["writes"]

    def open_leases(self) -> int:
        """Open leases in the journal, read from the file (as an administrator would)."""
        with sqlite3.connect(self.journal) as db:
            return int(db.execute("SELECT COUNT(*) FROM leases WHERE closed_at IS NULL").fetchone()[0])

    def wait_no_leases(self, timeout_s: float = 5.0) -> None:
        """Poll the journal until it holds no open lease (a restore writes the GPU, then closes the lease)."""
        wait_for(
            lambda: self.open_leases() == 0, timeout_s, f"no open lease in the journal\n{self.read_log()}"
        )

    def wait_settings(
        self, expected: Callable[[list[tuple[Any, ...]]], bool], timeout_s: float, what: str
    ) -> float:
        """Poll the fake state until ``expected(settings)``; the seconds it took."""
        start = time.monotonic()
        wait_for(
            lambda: expected(self.settings()), timeout_s, f"{what} (now {self.settings()})\n{self.read_log()}"
        )
        return time.monotonic() - start


@functools.lru_cache(maxsize=None)
def cannot_run_as(uid: int) -> str | None:
    """Why a client cannot run as ``uid`` (not root, no ``setpriv``, this checkout unreadable), or None."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return "running a client as another user needs root and setpriv (util-linux)"
    cmd = [
        "setpriv",
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        sys.executable,
        "-c",
        "import zeus_core.device",
    ]
    out = subprocess.run(
        cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True
    )
    if out.returncode != 0:
        return f"uid {uid} cannot run this checkout's Python: {out.stderr.strip().splitlines()[-1:]}"
    return None


class Client:
    """``python -m tests.daemon.client ARGS`` on a daemon's fake GPUs; its output lines are read by a thread.

    Args:
        daemon: The daemon (its socket and fake GPUs).
        args: The client's mode and arguments (see tests/daemon/client.py).
        user: Run as this uid (and gid) with ``setpriv``; None: as the test.
        module: The client's module (default: tests/daemon/client.py).
    """

    def __init__(
        self, daemon: Daemon, *args: str, user: int | None = None, module: str = "tests.daemon.client"
    ) -> None:
        cmd = [sys.executable, "-m", module, *args]
        if user is not None:
            cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
        self.proc = subprocess.Popen(
            cmd, cwd=REPO, env=daemon.client_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.pid = self.proc.pid
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.strip())
        self._lines.put(None)

    def expect(self, prefix: str, timeout_s: float = 60.0) -> str:
        """The first line printed that starts with ``prefix``; fails with stderr if the client ends first."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is not None and line.startswith(prefix):
                return line
            if line is None:
                self.proc.kill()
                err = self.proc.stderr.read() if self.proc.stderr else ""
                raise AssertionError(f"the client never printed {prefix!r} (exit {self.proc.wait()}):\n{err}")

    def kill(self) -> None:
        """SIGKILL it and reap it."""
        self.proc.kill()
        self.proc.wait(timeout=30)

    def finish(self, timeout_s: float = 60.0) -> tuple[int, str]:
        """Wait for it to exit: (exit code, stderr)."""
        code = self.proc.wait(timeout=timeout_s)
        return code, self.proc.stderr.read() if self.proc.stderr else ""
