"""The aiohttp application: zeusd's routes, who is calling (peer credentials or token), and the gate.

Every request passes :func:`gate` first, in zeusd's order: a path of a disabled API group is 404;
over TCP a bearer token is required (except ``/discover`` and ``/time``), 401 when missing or bad,
403 when its scopes lack the path's group; over the Unix socket the caller is its peer credentials
and the config's grants decide (403). Then the handler runs; a :class:`Refusal` anywhere becomes
``{"error": message}`` with its status, per-GPU failures become zeusd's ``{"errors": {id: message}}``
with the worst status. Refusals are logged with who asked; tokens never are.

Beyond zeusd: ``GET /permissions`` (what the caller may do; ``zeus-suite daemon --check``),
``GET /leases`` (open leases) and ``POST /leases/heartbeat`` (TCP sessions). ``/discover`` adds a
``zeus_suite`` object that zeusd clients ignore.
"""

from __future__ import annotations

import logging
import re
import socket
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from aiohttp import web

from zeus_core.daemon._config import ApiGroup, DaemonConfig
from zeus_core.daemon._hardware import Hardware
from zeus_core.daemon._leases import Holder, LeaseBook, RequestErrors
from zeus_core.daemon._peers import peer_credentials, peer_process, process_command, process_groups
from zeus_core.daemon._policy import Policy, Principal, Refusal, user_name
from zeus_core.daemon._streams import PowerFeed, timestamp_ms
from zeus_core.daemon._tokens import TokenError, verify_token

__all__ = [
    "DaemonState",
    "STATE",
    "PRINCIPAL",
    "SESSION_HEADER",
    "build_app",
    "error",
    "errors",
    "required_group",
    "holder_for",
]

audit = logging.getLogger("zeus_core.daemon.audit")

SESSION_HEADER = "X-Zeus-Session"
"""Over TCP, names the client's session: its changes are leased and held by heartbeats."""
_SESSION = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_OPEN_PATHS = ("/discover", "/time")
_GROUP_ORDER = (ApiGroup.GPU_CONTROL, ApiGroup.GPU_READ, ApiGroup.CPU_READ)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class DaemonState:
    """Everything the handlers share."""

    hardware: Hardware
    config: DaemonConfig
    policy: Policy
    book: LeaseBook
    enabled: frozenset[ApiGroup]
    signing_key: bytes | None
    gpu_feed: PowerFeed
    cpu_feed: PowerFeed
    cpu_period_s: float
    version: str


STATE = web.AppKey("state", DaemonState)
PRINCIPAL = "zeus_principal"


def error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    """Zeusd's request-level error: ``{"error": message}``."""
    return web.json_response({"error": message}, status=status, headers=headers)


def errors(per_device: dict[int, tuple[int, str]]) -> web.Response:
    """Zeusd's per-device errors: ``{"errors": {"<id>": message}}`` with the worst status."""
    status = max(s for s, _ in per_device.values())
    return web.json_response(
        {"errors": {str(i): m for i, (_, m) in sorted(per_device.items())}}, status=status
    )


def required_group(path: str) -> ApiGroup | None:
    """The API group a path belongs to (zeusd's rule, plus the lease paths); None: always served."""
    if path.startswith(("/gpu/set_", "/gpu/reset_")) or path == "/leases/heartbeat":
        return ApiGroup.GPU_CONTROL
    if path.startswith("/gpu/") or path == "/leases":
        return ApiGroup.GPU_READ
    if path.startswith("/cpu/"):
        return ApiGroup.CPU_READ
    return None


def _tcp_principal(request: web.Request, state: DaemonState) -> Principal:
    """The token's subject and scopes (401 without a valid token)."""
    header = request.headers.get("Authorization", "")
    challenge = {"WWW-Authenticate": 'Bearer realm="zeusd"'}
    if not header.startswith("Bearer "):
        raise _Unauthorized(
            "Authentication required. Provide an Authorization: Bearer <token> header.", challenge
        )
    assert state.signing_key is not None
    try:
        claims = verify_token(header[len("Bearer ") :], state.signing_key)
    except TokenError as e:
        raise _Unauthorized(str(e), challenge) from None
    peer = request.transport.get_extra_info("peername") if request.transport else None
    remote = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else ""
    return Principal(
        "tcp", subject=claims.sub, scopes=frozenset(claims.scopes), remote=remote, exp=claims.exp
    )


class _Unauthorized(Refusal):
    def __init__(self, message: str, headers: dict[str, str]) -> None:
        super().__init__(401, message)
        self.headers = headers


def _principal(request: web.Request, state: DaemonState) -> Principal | None:
    sock = request.transport.get_extra_info("socket") if request.transport is not None else None
    if sock is None:
        raise Refusal(400, "The connection closed before the request was handled.")
    if sock.family == socket.AF_UNIX:
        if request.path.startswith("/auth/"):
            raise Refusal(
                404,
                "Authentication is not enabled on this listener: Unix-socket callers are identified by "
                "their user id (peer credentials), not by a token.",
            )
        creds = peer_credentials(sock)
        gids = process_groups(creds.pid, creds.gid) if state.policy.uses_groups else frozenset({creds.gid})
        return Principal("unix", uid=creds.uid, gid=creds.gid, gids=gids, pid=creds.pid)
    if request.path in _OPEN_PATHS:
        return None
    return _tcp_principal(request, state)


@web.middleware
async def gate(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Zeusd's checks in zeusd's order, then the handler; refusals become error replies."""
    state = request.app[STATE]
    group = required_group(request.path)
    if group is not None and group not in state.enabled:
        return error(404, f"API group '{group.value}' is not enabled on this server.")
    who: Principal | None = None
    try:
        who = _principal(request, state)
        request[PRINCIPAL] = who
        if group is not None and who is not None:
            state.policy.check_group(who, group)
        return await handler(request)
    except Refusal as r:
        if r.status in (401, 403) or request.method == "POST":
            audit.warning(
                "Refused %s %s for %s: %s",
                request.method,
                request.path,
                who.describe() if who else "an unauthenticated caller",
                r.message,
            )
        return error(r.status, r.message, getattr(r, "headers", None))
    except RequestErrors as e:
        if request.method == "POST":
            audit.warning("Refused %s %s for %s: %s", request.method, request.path, who and who.describe(), e)
        return errors(e.errors)


async def holder_for(request: web.Request, who: Principal, book: LeaseBook) -> Holder | None:
    """Who a change belongs to: the calling process (Unix socket), the TCP session, or None (unleased).

    Raises:
        Refusal: 400 when the calling process has already ended, or the session name is malformed.
    """
    if who.via == "unix":
        sock = request.transport.get_extra_info("socket") if request.transport is not None else None
        peer = peer_process(sock) if sock is not None else None
        if peer is None:
            raise Refusal(
                400, "The calling process ended before its change could be leased; nothing changed."
            )
        pid, uid = peer.creds.pid, peer.creds.uid

        def describe() -> str:  # only for a holder the book does not know yet
            command = process_command(pid)
            return f"pid {pid} ({user_name(uid)}, uid {uid}" + (f": {command})" if command else ")")

        return book.process_holder(peer, describe)
    session = request.headers.get(SESSION_HEADER)
    if session is None:
        return None
    if not _SESSION.fullmatch(session):
        raise Refusal(
            400, f"{SESSION_HEADER} must be 1-64 characters of A-Z a-z 0-9 _ . : - (got {session!r})."
        )
    return book.session_holder(who.subject or "", session, f"session {session!r} of {who.describe()}")


# -- always-served routes ---------------------------------------------------------------------------
async def discover(request: web.Request) -> web.Response:
    """``GET /discover``: devices, enabled groups, whether this listener needs a token, ``zeus_suite``."""
    state = request.app[STATE]
    sock = request.transport.get_extra_info("socket") if request.transport is not None else None
    tcp = sock is not None and sock.family != socket.AF_UNIX
    return web.json_response(
        {
            "gpus": [
                {
                    "id": g.id,
                    "name": g.name,
                    "pci_address": g.pci_address,
                    "cumulative_energy_available": g.cumulative_energy_available,
                }
                for g in state.hardware.gpus
            ],
            "cpus": [{"id": c.id, "dram_available": c.dram_available} for c in state.hardware.cpus],
            "enabled_api_groups": [g.value for g in _GROUP_ORDER if g in state.enabled],
            "auth_required": tcp,
            "zeus_suite": {
                "version": state.version,
                "leases": True,
                "heartbeat_s": state.config.heartbeat_s,
                "lease_ttl_s": state.config.lease_ttl_s,
                "session_header": SESSION_HEADER,
            },
        }
    )


async def time_now(request: web.Request) -> web.Response:
    """``GET /time``: daemon time, Unix ms."""
    return web.json_response({"timestamp_ms": timestamp_ms()})


async def whoami(request: web.Request) -> web.Response:
    """``GET /auth/whoami`` (TCP): the token's subject, scopes and expiry."""
    who: Principal = request[PRINCIPAL]
    body: dict[str, Any] = {"sub": who.subject, "scopes": [s.value for s in _GROUP_ORDER if s in who.scopes]}
    if who.exp is not None:
        body["exp"] = who.exp
    return web.json_response(body)


async def permissions(request: web.Request) -> web.Response:
    """``GET /permissions``: what the caller may do (``zeus-suite daemon --check``)."""
    state = request.app[STATE]
    who: Principal | None = request[PRINCIPAL]
    if who is None:  # pragma: no cover - /permissions is not an open path
        raise Refusal(401, "Authentication required.")
    body = state.policy.summary(who, [g.id for g in state.hardware.gpus])
    body["share"] = state.config.share
    body["heartbeat_s"] = state.config.heartbeat_s
    return web.json_response(body)


async def leases(request: web.Request) -> web.Response:
    """``GET /leases``: the open leases."""
    return web.json_response({"leases": request.app[STATE].book.snapshot()})


async def heartbeat(request: web.Request) -> web.Response:
    """``POST /leases/heartbeat``: a TCP session says it is alive (renews its leases)."""
    state = request.app[STATE]
    who: Principal = request[PRINCIPAL]
    session = request.headers.get(SESSION_HEADER)
    if who.via == "unix":
        return web.json_response(
            {"held": True, "note": "Unix-socket leases follow the process; no heartbeat."}
        )
    if session is None:
        raise Refusal(400, f"Send the {SESSION_HEADER} header that your changes carried.")
    return web.json_response(
        {"held": state.book.heartbeat(who.subject or "", session), "lease_ttl_s": state.config.lease_ttl_s}
    )


def build_app(state: DaemonState) -> web.Application:
    """The application with every route of the enabled groups (the others answer 404 in :func:`gate`)."""
    from zeus_core.daemon import _routes

    app = web.Application(middlewares=[gate], client_max_size=64 * 1024)
    app[STATE] = state
    app.router.add_get("/discover", discover)
    app.router.add_get("/time", time_now)
    app.router.add_get("/auth/whoami", whoami)
    app.router.add_get("/permissions", permissions)
    app.router.add_get("/leases", leases)
    app.router.add_post("/leases/heartbeat", heartbeat)
    _routes.add_routes(app)
    return app
