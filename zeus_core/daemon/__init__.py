"""``zeus-suite daemon``: a privileged daemon that serves Zeus's zeusd HTTP API, with leases.

It lets training run as a normal user: power limits, locked clocks and persistence mode are changed
by the daemon on a client's behalf, and each change is *leased* to the process that asked, so the
value comes back when that process ends, even by SIGKILL or the OOM killer, and even across a
restart of the daemon (a SQLite journal). Zeus's own client (``ZeusdClient``, ``ZeusdNVIDIAGPU``) and
Zeus Suite's device layer (``ZEUSD_SOCK_PATH``) talk to it unchanged. See docs/daemon.md.

Example:
    >>> from zeus_core.daemon import parse_config
    >>> parse_config("share = true").shares(0)
    True
"""

from __future__ import annotations

from typing import Any

from zeus_core.daemon._config import ApiGroup, DaemonConfig, Grant, Knob, load_config, parse_config
from zeus_core.daemon._tokens import issue_token, parse_expires, read_signing_key, verify_token

__all__ = [
    "ApiGroup",
    "Knob",
    "Grant",
    "DaemonConfig",
    "parse_config",
    "load_config",
    "issue_token",
    "verify_token",
    "parse_expires",
    "read_signing_key",
    "serve",
]


def serve(**options: Any) -> None:
    """Run the daemon until SIGTERM/SIGINT; ``options`` are ``zeus-suite daemon``'s (see its ``--help``).

    Example:
        >>> from zeus_core.daemon import serve
        >>> serve(socket_path="/run/zeus-suite/daemon.sock", socket_group="zeus")  # doctest: +SKIP
    """
    from zeus_core.daemon._server import ServeOptions
    from zeus_core.daemon._server import serve as _serve

    _serve(ServeOptions(**options))
