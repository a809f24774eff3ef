"""Fixtures of the daemon tests: daemons in subprocesses on the shared fake NVML, stopped after each test."""

from __future__ import annotations

from typing import Callable, Iterator

import pytest

from tests.daemon.harness import Daemon


@pytest.fixture
def start_daemon() -> Iterator[Callable[..., Daemon]]:
    """``start_daemon(gpus=1, config=None, args=())``: a running daemon, stopped after the test."""
    daemons: list[Daemon] = []

    def start(gpus: int = 1, config: str | None = None, args: tuple[str, ...] = ()) -> Daemon:
        daemon = Daemon(gpus, config, args)
        daemons.append(daemon)
        return daemon.start()

    yield start
    for daemon in daemons:
        daemon.stop()


@pytest.fixture(scope="module")
def _module_daemon() -> Iterator[Daemon]:
    daemon = Daemon(gpus=1).start()
    yield daemon
    daemon.stop()


@pytest.fixture
def daemon(_module_daemon: Daemon) -> Iterator[Daemon]:
    """A one-GPU daemon shared by a test module; each test must leave it as it found it (checked)."""
    yield _module_daemon
    _module_daemon.wait_settings(
        lambda s: s == [(300000, None, None, False)], 5.0, "the GPU back after the test"
    )
    _module_daemon.wait_no_leases()


@pytest.fixture(autouse=True)
def _no_daemon_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ZEUSD_SOCK_PATH", "ZEUSD_HOST_PORT", "ZEUSD_TOKEN"):
        monkeypatch.delenv(name, raising=False)
