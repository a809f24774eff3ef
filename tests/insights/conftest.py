"""Fixtures of the energy-insight tests: no network, and the console's messages."""

from __future__ import annotations

import logging
import socket
from typing import Iterator

import pytest

from zeus_core import console


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def console_lines(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every message ``zeus_core.console`` shows during the test (rank zero, not quiet)."""
    monkeypatch.delenv("ZEUS_SUITE_QUIET", raising=False)
    monkeypatch.setattr(console, "_seen", set())  # warn_once messages show again
    handler = _Lines()
    logger = logging.getLogger(console.LOGGER_NAME)
    logger.addHandler(handler)
    try:
        yield handler.lines
    finally:
        logger.removeHandler(handler)


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every socket connection fails at once, as on a machine with the network cut off.

    Returns the addresses that something tried to reach.
    """
    return cut_network(monkeypatch)


def cut_network(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Make name lookups and socket connections fail (undone with ``monkeypatch``); the hosts tried."""
    tried: list[object] = []

    def refuse(self: socket.socket, address: object) -> None:
        tried.append(address)
        raise OSError(101, "Network is unreachable (cut off by the test)")

    def no_dns(host: object, *args: object, **kwargs: object) -> list:
        tried.append(host)
        raise socket.gaierror(-3, "Temporary failure in name resolution (cut off by the test)")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", lambda self, address: refuse(self, address))
    return tried
