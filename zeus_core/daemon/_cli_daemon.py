"""``zeus-suite daemon``: serve zeusd's API with leases; or ``--check``, ``--status``, ``--issue-token``.

Without a mode option it serves (as root, usually from the systemd unit
``packaging/systemd/zeus-suite-daemon.service``). ``--check`` asks the running daemon what the
calling user may do; ``--status`` lists its devices and open leases; ``--issue-token USER`` prints
a bearer token for TCP clients, signed with ``--signing-key-path`` (zeusd's ``token issue``).
See docs/daemon.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from zeus_core.daemon._config import ApiGroup
from zeus_core.exceptions import ZeusConfigError, ZeusError

__all__ = ["add_arguments", "run", "DEFAULT_SOCKET"]

DEFAULT_SOCKET = "/run/zeus-suite/daemon.sock"
DEFAULT_JOURNAL = "/var/lib/zeus-suite/daemon-journal.sqlite"


def _groups(text: str) -> frozenset[ApiGroup]:
    try:
        return frozenset(ApiGroup(g.strip()) for g in text.split(",") if g.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a comma-separated subset of {[g.value for g in ApiGroup]}"
        ) from None


def _mode(text: str) -> int:
    try:
        return int(text, 8)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give octal permissions, e.g. 660") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``zeus-suite daemon``."""
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="ask the running daemon what you may do, and exit")
    mode.add_argument(
        "--status", action="store_true", help="show the running daemon's devices and open leases"
    )
    mode.add_argument(
        "--issue-token", metavar="USER", help="print a bearer token for USER (TCP clients) and exit"
    )
    parser.add_argument("--json", action="store_true", help="with --check/--status: print JSON")
    parser.add_argument("--socket", metavar="PATH", help=f"Unix socket to serve or ask (default: {DEFAULT_SOCKET}; "  # noqa: E501
                        "--check/--status default to $ZEUSD_SOCK_PATH / $ZEUSD_HOST_PORT)")  # fmt: skip
    parser.add_argument("--socket-permissions", type=_mode, default=0o660, metavar="OCTAL",
                        help="mode of the socket file (default: 660: owner and --socket-group)")  # fmt: skip
    parser.add_argument("--socket-group", metavar="GROUP", help="group of the socket file, e.g. zeus")
    parser.add_argument("--no-socket", action="store_true", help="serve TCP only")
    parser.add_argument("--tcp", metavar="HOST:PORT", help="also serve TCP (requires --signing-key-path)")
    parser.add_argument("--signing-key-path", metavar="FILE", help="HMAC key file of the JWT bearer tokens")
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="grants, sharing, heartbeat (default: /etc/zeus-suite/daemon.toml if present)",
    )
    parser.add_argument(
        "--journal", metavar="FILE", default=DEFAULT_JOURNAL, help="lease journal (default: %(default)s)"
    )
    parser.add_argument("--enable", type=_groups, default=frozenset(ApiGroup), metavar="GROUPS",
                        help="API groups to serve (default: gpu-control,gpu-read,cpu-read)")  # fmt: skip
    parser.add_argument(
        "--gpu-power-poll-hz", type=float, default=20.0, help="stream_power rate for GPUs (default: 20)"
    )
    parser.add_argument(
        "--cpu-power-poll-hz", type=float, default=10.0, help="stream_power rate for CPUs (default: 10)"
    )
    parser.add_argument(
        "--rapl-root", default="/sys/class/powercap", help="the RAPL powercap tree (default: %(default)s)"
    )
    parser.add_argument(
        "--scope", type=_groups, default=frozenset(ApiGroup), help="with --issue-token: scopes"
    )
    parser.add_argument(
        "--expires", default="30d", help="with --issue-token: 1h, 7d, 30d, never (default: 30d)"
    )


def run(args: argparse.Namespace) -> int:
    """Serve, check, show status or issue a token; the exit code."""
    try:
        if args.issue_token:
            return _issue(args)
        if args.check or args.status:
            return _ask(args)
        from zeus_core.daemon._server import ServeOptions, serve

        for name in ("ZEUSD_SOCK_PATH", "ZEUSD_HOST_PORT"):  # the daemon uses the devices, never a daemon
            os.environ.pop(name, None)
        serve(
            ServeOptions(
                socket_path=None if args.no_socket else (args.socket or DEFAULT_SOCKET),
                socket_mode=args.socket_permissions,
                socket_group=args.socket_group,
                tcp=args.tcp,
                signing_key_path=args.signing_key_path,
                config_path=args.config,
                journal_path=args.journal,
                enabled=args.enable,
                gpu_poll_hz=args.gpu_power_poll_hz,
                cpu_poll_hz=args.cpu_power_poll_hz,
                rapl_root=args.rapl_root,
            )
        )
        return 0
    except ZeusError as e:
        print(f"zeus-suite daemon: {e}", file=sys.stderr)
        return 2


def _issue(args: argparse.Namespace) -> int:
    from zeus_core.daemon._tokens import issue_token, parse_expires, read_signing_key

    if not args.signing_key_path:
        raise ZeusConfigError("--issue-token needs --signing-key-path FILE (the daemon's key).")
    key = read_signing_key(args.signing_key_path)
    print(
        issue_token(key, args.issue_token, sorted(g.value for g in args.scope), parse_expires(args.expires))
    )
    return 0


def _endpoint(args: argparse.Namespace) -> Any:
    from zeus_core.device._zeusd import Endpoint

    if args.socket:
        return Endpoint(socket_path=args.socket, token=os.environ.get("ZEUSD_TOKEN") or None)
    return Endpoint.from_env() or Endpoint(socket_path=DEFAULT_SOCKET)


def _ask(args: argparse.Namespace) -> int:
    from zeus_core.device._zeusd import DaemonClient

    endpoint = _endpoint(args)
    client = DaemonClient(endpoint, timeout_s=5.0)
    try:
        info = client.discover()
        if args.check:
            data: dict[str, Any] = {
                "endpoint": endpoint.describe(),
                "leases": client.leases,
                "discover": info,
            }
            perms = client.permissions()
            data["permissions"] = perms if perms is not None else {"whoami": client.whoami()}
        else:
            status, body = client.request("GET", "/leases")
            data = {
                "endpoint": endpoint.describe(),
                "discover": info,
                "leases": body.get("leases") if status == 200 else None,
            }
    except ZeusError as e:
        print(f"zeus-suite daemon: {e}", file=sys.stderr)
        return 1
    finally:
        client.close()
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(_render_check(data) if args.check else _render_status(data))
    return 0


def _render_check(data: dict[str, Any]) -> str:
    info, perms = data["discover"], data["permissions"]
    kind = "zeus-suite daemon (leases)" if data["leases"] else "zeusd (no leases)"
    lines = [f"Daemon at {data['endpoint']}: {kind}, API groups {info['enabled_api_groups']}."]
    if "whoami" in perms:
        who = perms["whoami"]
        lines.append("It does not say per user what is granted (a zeusd): " + (
            f"your token is for {who.get('sub')!r} with scopes {who.get('scopes')}." if who
            else "no token is needed on this socket; the socket's file permissions decide."))  # fmt: skip
        return "\n".join(lines)
    lines.append(f"You are {perms['who']}" + (" (may do everything)." if perms["admin"] else "."))
    for group, v in perms["api_groups"].items():
        lines.append(f"  {group}: " + ("yes" if v["allowed"] else f"no: {v['why']}"))
    for gpu, knobs in perms["gpu_control"].items():
        shown = "; ".join(f"{k} {_ranges(v)}" for k, v in knobs.items()) or "nothing"
        lines.append(f"  GPU {gpu}: may change {shown}")
    share = perms.get("share")
    lines.append(
        "Settings are leased to your process and restored when it ends; "
        + (
            "processes may share GPUs."
            if share is True
            else "another live process asking a different value gets 409."
        )
    )
    return "\n".join(lines)


def _ranges(value: Any) -> str:
    if value == "any":
        return "(any value)"
    return " or ".join(f"{lo:g}-{hi:g}" for lo, hi in value)


def _render_status(data: dict[str, Any]) -> str:
    info = data["discover"]
    gpus = ", ".join(f"{g['id']}: {g['name']}" for g in info["gpus"]) or "none"
    lines = [
        f"Daemon at {data['endpoint']}: API groups {info['enabled_api_groups']}; tokens required: "
        f"{'yes' if info['auth_required'] else 'no'}.",
        f"  GPUs: {gpus}",
        f"  CPUs: {[c['id'] for c in info['cpus']] or 'none'}",
    ]
    leases = data["leases"]
    if leases is None:
        lines.append("  Leases: not kept by this daemon (a zeusd).")
    elif not leases:
        lines.append("  Open leases: none.")
    else:
        lines.append("  Open leases:")
        for lease in leases:
            since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(lease["since"]))
            lines.append(
                f"    #{lease['id']} GPU {lease['gpu_id']} {lease['setting']} = {lease['value']} (restores "
                f"{lease['restores_to']}) since {since}, held by "
                + ("; ".join(lease["holders"]) or "nobody: restore pending")
            )
    return "\n".join(lines)
