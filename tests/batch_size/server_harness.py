"""Helpers shared by the batch-size service tests (no tests here).

* ``db_url``: the same tests run on a SQLite file and, when ``ZEUS_TEST_POSTGRES_URL`` is set
  (``export ZEUS_TEST_POSTGRES_URL=$(bash .ci/postgres.sh)``), on a real PostgreSQL server.
* :class:`ThreadServer`: uvicorn serving an app on 127.0.0.1 in a background thread (real HTTP).
* :class:`SubprocessServer`: ``zeus-suite bso-server`` in a child process that a test can kill.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import pytest
import uvicorn

from zeus_core.optimizer.batch_size._db import Base, Database
from zeus_core.optimizer.batch_size._spec import JobSpec

POSTGRES_ENV = "ZEUS_TEST_POSTGRES_URL"
REPO_ROOT = Path(__file__).resolve().parents[2]


def make_spec(job_id: str = "job", **overrides: Any) -> JobSpec:
    """A small job: batch sizes 32..256, default 128, target 0.9, 300 W."""
    kwargs: dict[str, Any] = {"target_metric": 0.9, "max_power_w": 300.0, "seed": 1}
    kwargs.update(overrides)
    return JobSpec(job_id, (32, 64, 128, 256), 128, **kwargs)


def cost(spec: JobSpec, time_s: float, energy_j: float) -> float:
    """The Zeus cost the server computes, J."""
    return spec.eta_knob * energy_j + (1 - spec.eta_knob) * spec.max_power_w * time_s


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def reset_postgres(url: str) -> None:
    """Drop the service's tables so each test starts from an empty database."""

    async def _drop() -> None:
        db = Database(url)
        async with db.engine.begin() as conn:
            await conn.run_sync(Base.metadata.drop_all)
            await conn.exec_driver_sql("DROP TABLE IF EXISTS bso_migration_marker")
        await db.dispose()

    asyncio.run(_drop())


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database URL for the service: a fresh SQLite file, or the emptied PostgreSQL test database."""
    if request.param == "sqlite":
        yield str(tmp_path / "bso.sqlite3")
        return
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(
            f"{POSTGRES_ENV} is not set; run `export {POSTGRES_ENV}=$(bash .ci/postgres.sh)` "
            "to test PostgreSQL"
        )
    reset_postgres(url)
    yield url
    reset_postgres(url)


class ThreadServer:
    """Serve ``app`` with uvicorn on 127.0.0.1 in a daemon thread for the ``with`` block."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        """Base URL of the server."""
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ThreadServer:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start (see the log above)")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=15)


class FakeClock:
    """A settable clock, s since the epoch."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        """The current fake time, s."""
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    """A fake clock for the server (trial timeouts without waiting)."""
    return FakeClock()


class SubprocessServer:
    """``python -m zeus_core._cli bso-server`` in a child process on a free port."""

    def __init__(self, database: str, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.database = database
        self.args = list(args)
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()  # a file, not a pipe: a full pipe would block the server

    @property
    def url(self) -> str:
        """Base URL of the server."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> SubprocessServer:
        """Start it and wait until ``/health`` answers."""
        cmd = [
            sys.executable,
            "-m",
            "zeus_core._cli",
            "bso-server",
            "--database",
            self.database,
            "--port",
            str(self.port),
            *self.args,
        ]
        self.proc = subprocess.Popen(
            cmd, cwd=REPO_ROOT, env=self.env, stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"bso-server exited with {self.proc.returncode}:\n{self.output()}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("bso-server did not answer /health within 60 s")
            time.sleep(0.05)

    def output(self) -> str:
        """Everything the server printed so far."""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no shutdown handler runs, as when a machine dies."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=15)


def run_threads(n: int, fn: Callable[[int], Any]) -> list[Any]:
    """Run ``fn(i)`` for i in 0..n-1 in n threads released at once; re-raise the first error."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n
    errors: list[BaseException] = []

    def _worker(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[i] = fn(i)
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=_worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    if errors:
        raise errors[0]
    return results
