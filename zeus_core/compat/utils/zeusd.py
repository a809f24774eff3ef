"""Zeus's ``zeus.utils.zeusd``: :class:`ZeusdConfig`, one daemon (``zeusd`` or ``zeus-suite daemon``).

Example:
    >>> from zeus_core.compat.utils.zeusd import ZeusdConfig
    >>> ZeusdConfig.tcp("node1", 4938, gpu_indices=[0, 1]).endpoint
    'node1:4938'
    >>> ZeusdConfig.uds("/run/zeusd/zeusd.sock").endpoint
    '/run/zeusd/zeusd.sock'
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

from zeus_core.device._zeusd import ENV_TOKEN, Endpoint

__all__ = ["ZeusdConfig"]


@dataclass(frozen=True)
class ZeusdConfig:
    """Where a daemon listens, its token, and which of its devices to use.

    Attributes:
        socket_path: Its Unix socket (``None`` over TCP).
        host: Its host over TCP.
        port: Its TCP port.
        token: The JWT for a daemon that asks for one (default: ``ZEUSD_TOKEN``).
        gpu_indices: GPUs to use: ``None`` all, ``[]`` none.
        cpu_indices: CPU packages to use: ``None`` all, ``[]`` none.

    Example:
        >>> from zeus_core.compat.utils.zeusd import ZeusdConfig
        >>> ZeusdConfig.tcp("127.0.0.1", 4938, token="abc").to_endpoint().host_port
        '127.0.0.1:4938'
    """

    socket_path: str | None = None
    host: str | None = None
    port: int | None = None
    token: str | None = None
    gpu_indices: Sequence[int] | None = None
    cpu_indices: Sequence[int] | None = None

    @classmethod
    def tcp(
        cls,
        host: str,
        port: int,
        token: str | None = None,
        gpu_indices: Sequence[int] | None = None,
        cpu_indices: Sequence[int] | None = None,
    ) -> ZeusdConfig:
        """A daemon over TCP (the token defaults to ``ZEUSD_TOKEN``)."""
        return cls(None, host, int(port), token or os.environ.get(ENV_TOKEN), gpu_indices, cpu_indices)

    @classmethod
    def uds(
        cls,
        socket_path: str,
        token: str | None = None,
        gpu_indices: Sequence[int] | None = None,
        cpu_indices: Sequence[int] | None = None,
    ) -> ZeusdConfig:
        """A daemon on a Unix socket."""
        return cls(socket_path, None, None, token or os.environ.get(ENV_TOKEN), gpu_indices, cpu_indices)

    @classmethod
    def from_env(cls) -> ZeusdConfig | None:
        """The daemon named by ``ZEUSD_SOCK_PATH`` (first) or ``ZEUSD_HOST_PORT``, or ``None``.

        Example:
            >>> from zeus_core.compat.utils.zeusd import ZeusdConfig
            >>> ZeusdConfig.from_env() is None  # neither variable set here
            True
        """
        endpoint = Endpoint.from_env()
        if endpoint is None:
            return None
        if endpoint.socket_path is not None:
            return cls.uds(endpoint.socket_path, endpoint.token)
        host, _, port = (endpoint.host_port or "").rpartition(":")
        return cls.tcp(host, int(port), endpoint.token)

    @property
    def endpoint(self) -> str:
        """The identifier of this daemon: its socket path, or ``host:port``."""
        return self.socket_path if self.socket_path is not None else f"{self.host}:{self.port}"

    def to_endpoint(self) -> Endpoint:
        """The suite's :class:`~zeus_core.device._zeusd.Endpoint` for this daemon."""
        if self.socket_path is not None:
            return Endpoint(socket_path=self.socket_path, token=self.token)
        return Endpoint(host_port=f"{self.host}:{self.port}", token=self.token)
