"""Start the daemon: config, devices, journal (restoring what dead clients left), listeners, and stop cleanly.

Order at start, so that nothing is served before the GPUs are back where they belong: read the
config and signing key, check privileges (``gpu-control`` and ``cpu-read`` need root, as in
zeusd), find the devices, open the journal and take over its open leases (restoring those whose
holders died while the daemon was down), then listen on the Unix socket (and TCP) and tell systemd
``READY=1``. On SIGTERM/SIGINT the listeners close; leases of live clients stay in the journal and
are taken over at the next start.
"""

from __future__ import annotations

import asyncio
import grp
import logging
import os
import signal
import socket
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from zeus_core.daemon._app import DaemonState, build_app
from zeus_core.daemon._config import ApiGroup, load_config
from zeus_core.daemon._hardware import Hardware
from zeus_core.daemon._journal import Journal
from zeus_core.daemon._leases import LeaseBook
from zeus_core.daemon._policy import Policy
from zeus_core.daemon._routes import cpu_power_mw, read_cpu_energy
from zeus_core.daemon._streams import PowerFeed
from zeus_core.daemon._tokens import read_signing_key
from zeus_core.exceptions import ZeusConfigError, ZeusPermissionError

__all__ = ["ServeOptions", "serve", "unix_listener", "parse_host_port", "VERSION"]

logger = logging.getLogger("zeus_core.daemon")

VERSION = "1"
"""The daemon's own protocol version, in ``/discover``'s ``zeus_suite`` object."""


@dataclass
class ServeOptions:
    """What ``zeus-suite daemon`` was asked to do (see its ``--help`` for each option)."""

    socket_path: str | None = "/run/zeus-suite/daemon.sock"
    socket_mode: int = 0o660
    socket_group: str | None = None
    tcp: str | None = None
    signing_key_path: str | None = None
    config_path: str | None = None
    journal_path: str = "/var/lib/zeus-suite/daemon-journal.sqlite"
    enabled: frozenset[ApiGroup] = frozenset(ApiGroup)
    gpu_poll_hz: float = 20.0
    cpu_poll_hz: float = 10.0
    rapl_root: str = "/sys/class/powercap"


def parse_host_port(text: str) -> tuple[str, int]:
    """``"HOST:PORT"`` (``"[::1]:4938"`` for IPv6) -> (host, port).

    Raises:
        ZeusConfigError: Not HOST:PORT.
    """
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ZeusConfigError(f"--tcp {text!r}: give HOST:PORT, e.g. 127.0.0.1:4938 or [::1]:4938.")
    return host.strip("[]"), int(port)


def unix_listener(path: str, mode: int, group: str | None) -> socket.socket:
    """A listening Unix socket at ``path`` with ``mode`` and ``group``; a stale socket file is replaced.

    Raises:
        ZeusConfigError: ``path`` is another kind of file, a live daemon listens there, or the group
            does not exist.
    """
    p = Path(path)
    if p.exists() or p.is_symlink():
        if not stat.S_ISSOCK(p.lstat().st_mode):
            raise ZeusConfigError(f"{path} exists and is not a socket. Remove it, or pick another --socket.")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(path)
            except ConnectionRefusedError:
                logger.warning("Removing stale socket file %s.", path)
                p.unlink()
            except OSError as e:
                raise ZeusConfigError(
                    f"Cannot tell whether {path} is live ({e}). Inspect and remove it."
                ) from e
            else:
                raise ZeusConfigError(
                    f"Another process is listening on {path}. Stop it, or pick another --socket."
                )
    gid = -1
    if group is not None:
        try:
            gid = int(group) if group.isdigit() else grp.getgrnam(group).gr_gid
        except KeyError:
            raise ZeusConfigError(
                f"--socket-group {group!r}: no such group. Create it: `sudo groupadd {group}`."
            ) from None
    p.parent.mkdir(parents=True, exist_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    os.chown(path, -1, gid)
    os.chmod(path, mode)
    return sock


def _check_privileges(enabled: frozenset[ApiGroup]) -> None:
    from zeus_core.device import _privileges as privileges

    needs_root = sorted(g.value for g in enabled & {ApiGroup.GPU_CONTROL, ApiGroup.CPU_READ})
    if needs_root and not privileges.has_admin_rights():
        raise ZeusPermissionError(
            f"The API groups {needs_root} need root (CAP_SYS_ADMIN), and this daemon lacks it. Run it as "
            "root (the systemd unit does), or serve reads only: --enable gpu-read."
        )


def _sd_notify(message: str) -> None:
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        try:
            s.connect(address)
            s.sendall(message.encode())
        except OSError as e:
            logger.warning("Could not notify systemd (%s).", e)


def _feeds(
    hardware: Hardware, options: ServeOptions, state_ref: list[DaemonState]
) -> tuple[PowerFeed, PowerFeed]:
    async def gpu_sample() -> dict[int, int]:
        gpus = hardware.gpus
        results = await asyncio.gather(*(g.call(g.power_mw) for g in gpus), return_exceptions=True)
        return {g.id: r for g, r in zip(gpus, results) if isinstance(r, int)}

    previous: dict[int, tuple[float, dict[str, int | None]]] = {}

    async def cpu_sample() -> dict[int, dict[str, int | None]]:
        now = time.monotonic()
        energy = await read_cpu_energy(state_ref[0], [c.id for c in hardware.cpus])
        out = {}
        for i, reading in energy.items():
            if i in previous:
                out[i] = cpu_power_mw(previous[i][1], reading, now - previous[i][0])
            previous[i] = (now, reading)
        return out

    return PowerFeed(gpu_sample, 1.0 / options.gpu_poll_hz), PowerFeed(cpu_sample, 1.0 / options.cpu_poll_hz)


async def _prepare(options: ServeOptions) -> DaemonState:
    """Config, key, privileges, devices, journal (its dead clients' leases restored): the shared state."""
    config = load_config(options.config_path)
    source = options.config_path or ("/etc/zeus-suite/daemon.toml" if config.grants else "no config file")
    key = read_signing_key(options.signing_key_path) if options.signing_key_path else None
    if options.tcp and key is None:
        raise ZeusConfigError(
            "--tcp needs tokens: pass --signing-key-path FILE (make one with "
            "`openssl rand -base64 32 > FILE`, `chmod 600 FILE`) and give clients tokens from "
            "`zeus-suite daemon --issue-token USER`."
        )
    if not options.socket_path and not options.tcp:
        raise ZeusConfigError("Give --socket PATH, --tcp HOST:PORT, or both.")
    _check_privileges(options.enabled)
    hardware = Hardware.discover(options.enabled, options.rapl_root)
    book = LeaseBook(hardware, Journal(options.journal_path), config)
    await book.recover()  # before listening: what dead clients left behind is back first
    state_ref: list[DaemonState] = []
    gpu_feed, cpu_feed = _feeds(hardware, options, state_ref)
    policy = Policy(config, options.enabled, source)
    state = DaemonState(
        hardware,
        config,
        policy,
        book,
        options.enabled,
        key,
        gpu_feed,
        cpu_feed,
        1.0 / options.cpu_poll_hz,
        VERSION,
    )
    state_ref.append(state)
    return state


def _sites(runner: web.AppRunner, options: ServeOptions) -> list[web.BaseSite]:
    sites: list[web.BaseSite] = []
    if options.socket_path:
        sock = unix_listener(options.socket_path, options.socket_mode, options.socket_group)
        sites.append(web.SockSite(runner, sock, shutdown_timeout=2.0, backlog=512))
    if options.tcp:
        host, port = parse_host_port(options.tcp)
        sites.append(web.TCPSite(runner, host, port, shutdown_timeout=2.0))
    return sites


async def _run(options: ServeOptions) -> None:
    state = await _prepare(options)
    runner = web.AppRunner(build_app(state), handle_signals=False, access_log=None)
    await runner.setup()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    expiry = loop.create_task(state.book.expire_sessions())
    try:
        for site in _sites(runner, options):
            await site.start()
        where = ", ".join(filter(None, [options.socket_path, options.tcp]))
        who = "open to the socket's users" if state.config.open else f"grants from {state.policy.source}"
        logger.info(
            "zeus-suite daemon serving %d GPU(s), %d CPU(s) on %s; API groups %s; %s; journal %s "
            "(%d open lease(s)).",
            len(state.hardware.gpus),
            len(state.hardware.cpus),
            where,
            sorted(g.value for g in options.enabled),
            who,
            options.journal_path,
            state.book.journal.count_open(),
        )
        _sd_notify("READY=1")
        await stop.wait()
    finally:
        _sd_notify("STOPPING=1")
        expiry.cancel()
        state.gpu_feed.stop()
        state.cpu_feed.stop()
        await runner.cleanup()
        await state.book.close()
        state.book.journal.close()
        state.hardware.close()
        if options.socket_path:
            Path(options.socket_path).unlink(missing_ok=True)
        logger.info(
            "zeus-suite daemon stopped; the leases of live clients stay in the journal for the next start."
        )


def serve(options: ServeOptions) -> None:
    """Run the daemon until SIGTERM or SIGINT.

    Raises:
        ZeusConfigError: A bad option, config file, signing key or socket path.
        ZeusPermissionError: ``gpu-control``/``cpu-read`` enabled without root.
    """
    asyncio.run(_run(options))
