"""Talk to a zeusd-compatible daemon (``zeus-suite daemon`` or Zeus's ``zeusd``) named by the environment.

Zeus's variables name it, and no other: ``ZEUSD_SOCK_PATH`` (a Unix socket; tried first) or
``ZEUSD_HOST_PORT`` (``host:port`` over TCP, with ``ZEUSD_TOKEN`` as the bearer token). With one
of them set, :mod:`zeus_core.device._discovery` hands out GPUs whose privileged calls go through the
daemon (:mod:`zeus_core.device._zeusd_devices`), so a normal user can set power limits and clocks.

:class:`DaemonClient` is a small HTTP/1.1 client on the standard library (``http.client``; the
device layer needs no extra package), one keep-alive connection per process: a Unix-socket
daemon knows the caller by that connection's peer credentials, so a forked child gets its own.
Over TCP, against a ``zeus-suite daemon``, every request carries a session id
(``X-Zeus-Session``) and a heartbeat thread keeps the session's leases alive while it changes
settings; a process that dies stops heartbeating and the daemon restores its settings.

Example:
    >>> from zeus_core.device._zeusd import Endpoint
    >>> Endpoint.from_env({"ZEUSD_SOCK_PATH": "/run/zeus-suite/daemon.sock"}).describe()
    'ZEUSD_SOCK_PATH=/run/zeus-suite/daemon.sock'
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Iterator, Mapping
from urllib.parse import urlencode

from zeus_core.exceptions import ZeusConfigError, ZeusDeviceError, ZeusError, ZeusPermissionError

__all__ = [
    "ENV_SOCKET",
    "ENV_HOST_PORT",
    "ENV_TOKEN",
    "SESSION_HEADER",
    "Endpoint",
    "DaemonClient",
    "client_for",
    "EventStream",
    "daemon_status",
    "describe_status",
]

ENV_SOCKET = "ZEUSD_SOCK_PATH"
ENV_HOST_PORT = "ZEUSD_HOST_PORT"
ENV_TOKEN = "ZEUSD_TOKEN"
SESSION_HEADER = "X-Zeus-Session"
_START_FIX = (
    "Start it (`sudo systemctl start zeus-suite-daemon`, see docs/daemon.md), or unset "
    f"{ENV_SOCKET}/{ENV_HOST_PORT} to use the devices directly."
)


@dataclass(frozen=True)
class Endpoint:
    """Where the daemon listens: a Unix socket path or ``host:port``, and the token for TCP."""

    socket_path: str | None = None
    host_port: str | None = None
    token: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Endpoint | None":
        """The daemon named by ``ZEUSD_SOCK_PATH`` (first) or ``ZEUSD_HOST_PORT``; None if neither is set."""
        env = os.environ if environ is None else environ
        token = env.get(ENV_TOKEN) or None
        if env.get(ENV_SOCKET):
            return cls(socket_path=env[ENV_SOCKET], token=token)
        if env.get(ENV_HOST_PORT):
            return cls(host_port=env[ENV_HOST_PORT], token=token)
        return None

    @property
    def tcp(self) -> bool:
        """Whether the daemon is reached over TCP."""
        return self.socket_path is None

    def describe(self) -> str:
        """The variable that names it, e.g. ``"ZEUSD_SOCK_PATH=/run/zeus-suite/daemon.sock"``."""
        return f"{ENV_SOCKET}={self.socket_path}" if self.socket_path else f"{ENV_HOST_PORT}={self.host_port}"


class _UnixConnection(http.client.HTTPConnection):
    """``http.client`` over a Unix socket (the host name only fills the Host header)."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def _message(body: Any) -> str:
    """The daemon's words from an error body (``{"error"}``, zeusd's ``{"errors": {id: msg}}`` or text)."""
    if isinstance(body, dict):
        if "error" in body:
            return str(body["error"])
        if isinstance(body.get("errors"), dict):
            return "; ".join(f"GPU {k}: {v}" if k.isdigit() else str(v) for k, v in body["errors"].items())
    return str(body).strip() or "(no message)"


class DaemonClient:
    """An HTTP client of one daemon; thread-safe, one keep-alive connection.

    Args:
        endpoint: Where the daemon listens.
        timeout_s: Socket timeout per request, s.
    """

    def __init__(self, endpoint: Endpoint, timeout_s: float = 30.0) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._conn: http.client.HTTPConnection | None = None
        self._info: dict[str, Any] | None = None
        self._permissions: tuple[float, dict[str, Any] | None] | None = None
        self.session = uuid.uuid4().hex
        self._heartbeat: threading.Thread | None = None
        self._stop = threading.Event()

    # -- transport ------------------------------------------------------------------------------
    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            if self.endpoint.socket_path is not None:
                self._conn = _UnixConnection(self.endpoint.socket_path, self.timeout_s)
            else:
                host, _, port = (self.endpoint.host_port or "").rpartition(":")
                self._conn = http.client.HTTPConnection(
                    host.strip("[]"), int(port or 80), timeout=self.timeout_s
                )
        return self._conn

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Length": "0"}
        if self.endpoint.token:
            headers["Authorization"] = f"Bearer {self.endpoint.token}"
        if self.endpoint.tcp:
            headers[SESSION_HEADER] = self.session
        return headers

    def request(self, method: str, path: str, params: Mapping[str, object] | None = None) -> tuple[int, Any]:
        """Send one request; ``(status, body)`` with the body parsed as JSON where it is JSON.

        Raises:
            ZeusDeviceError: The daemon cannot be reached (the message says which and how to start it).
        """
        url = path + (f"?{urlencode(params)}" if params else "")
        with self._lock:
            for attempt in (1, 2):  # a keep-alive connection the daemon closed: reconnect once
                conn = self._connection()
                try:
                    conn.request(method, url, headers=self._headers())
                    response = conn.getresponse()
                    raw = response.read()
                    break
                except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                    conn.close()
                    self._conn = None
                    if attempt == 2:
                        raise ZeusDeviceError(
                            f"The daemon at {self.endpoint.describe()} closed the connection ({e})."
                        ) from e
                except OSError as e:
                    conn.close()
                    self._conn = None
                    raise ZeusDeviceError(
                        f"Cannot reach the daemon at {self.endpoint.describe()} ({e}). {_START_FIX}"
                    ) from e
        text = raw.decode(errors="replace")
        try:
            return response.status, json.loads(text) if text else None
        except json.JSONDecodeError:
            return response.status, text

    def call(self, method: str, path: str, params: Mapping[str, object] | None = None, what: str = "") -> Any:
        """:meth:`request`, raising for any status but 200.

        Raises:
            ZeusConfigError: 400, a bad value (the daemon's message says which).
            ZeusPermissionError: 401/403/404 (no token, not granted, API group not served).
            ZeusDeviceError: 409 (another process holds the setting), 5xx, or no daemon.
        """
        status, body = self.request(method, path, params)
        if status == 200:
            return body
        where = f"{what or path} through the daemon at {self.endpoint.describe()}"
        message = _message(body)
        if status == 400:
            raise ZeusConfigError(f"{where}: {message}")
        if status == 401:
            raise ZeusPermissionError(
                f"{where}: {message} Set {ENV_TOKEN} to a token from the daemon's administrator "
                "(`zeus-suite daemon --issue-token USER`)."
            )
        if status in (403, 404):
            raise ZeusPermissionError(f"{where}: {message}")
        if status == 409:
            raise ZeusDeviceError(f"{where}: {message}")
        raise ZeusDeviceError(f"{where}: HTTP {status}: {message}")

    # -- what the daemon offers -----------------------------------------------------------------
    def discover(self) -> dict[str, Any]:
        """``/discover`` (asked once per client)."""
        if self._info is None:
            info = self.call("GET", "/discover", what="discover")
            if not isinstance(info, dict) or "gpus" not in info:
                raise ZeusDeviceError(
                    f"{self.endpoint.describe()} does not answer like a zeusd daemon: {info!r}"
                )
            self._info = info
        return self._info

    @property
    def leases(self) -> bool:
        """Whether the daemon keeps leases (a ``zeus-suite daemon``, not a plain zeusd)."""
        return bool(self.discover().get("zeus_suite", {}).get("leases"))

    def permissions(self, max_age_s: float = 2.0) -> dict[str, Any] | None:
        """What this process may do (``/permissions``); None from a daemon without it (zeusd)."""
        now = time.monotonic()
        if self._permissions is not None and now - self._permissions[0] < max_age_s:
            return self._permissions[1]
        status, body = self.request("GET", "/permissions")
        if status == 404 and not self.leases:
            perms = None
        elif status != 200:
            raise ZeusPermissionError(
                f"The daemon at {self.endpoint.describe()} refused /permissions: {_message(body)}"
            )
        else:
            perms = body
        self._permissions = (now, perms)
        return perms

    def whoami(self) -> dict[str, Any] | None:
        """``/auth/whoami`` where the daemon asks for a token; None where it does not."""
        if not self.discover().get("auth_required"):
            return None
        result: dict[str, Any] = self.call("GET", "/auth/whoami", what="whoami")
        return result

    # -- changes --------------------------------------------------------------------------------
    def post(self, path: str, gpu_id: int, what: str, **params: object) -> None:
        """A GPU write (``block=true``); over TCP the session's heartbeat starts with the first one."""
        values = {
            "gpu_ids": str(gpu_id),
            **{k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in params.items()},
        }
        values["block"] = "true"
        self.call("POST", path, values, what=what)
        if self.endpoint.tcp and self._heartbeat is None and self.leases:
            self._start_heartbeat()

    def _start_heartbeat(self) -> None:
        period = float(self.discover().get("zeus_suite", {}).get("heartbeat_s", 10.0))

        def beat() -> None:
            while not self._stop.wait(period):
                try:
                    self.request("POST", "/leases/heartbeat")
                except ZeusError:
                    pass  # the daemon is away; the next beat tries again

        self._heartbeat = threading.Thread(target=beat, name="zeusd-heartbeat", daemon=True)
        self._heartbeat.start()

    def close(self) -> None:
        """Stop the heartbeat and close the connection."""
        self._stop.set()
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


_clients: dict[tuple[int, Endpoint], DaemonClient] = {}
_clients_lock = threading.Lock()


class EventStream:
    """A daemon's Server-Sent Events stream (``/gpu/stream_power``, ...): iterate for its JSON payloads.

    Each stream has its own connection. Iteration ends when the daemon ends the stream, or when
    :meth:`close` is called (from any thread).

    Args:
        endpoint: The daemon.
        path: The route, e.g. ``"/gpu/stream_power"``.
        params: Query parameters, e.g. ``{"gpu_ids": "0,1"}``.
        timeout_s: Connect timeout, s (reading waits as long as the stream is open).

    Raises:
        ZeusPermissionError: 401/403 (no token, or not granted), when iteration starts.
        ZeusDeviceError: The daemon cannot be reached or answered another error.

    Example:
        >>> from zeus_core.device._zeusd import Endpoint, EventStream
        >>> stream = EventStream(Endpoint(host_port="node1:4938"), "/gpu/stream_power")  # doctest: +SKIP
        >>> next(iter(stream))  # doctest: +SKIP
        {'timestamp_ms': 1718000000000, 'gpu_id': 0, 'power_mw': 250000}
    """

    def __init__(
        self,
        endpoint: Endpoint,
        path: str,
        params: Mapping[str, object] | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        self.endpoint = endpoint
        self.path = path
        self._url = path + (f"?{urlencode(params)}" if params else "")
        self._timeout_s = timeout_s
        self._conn: http.client.HTTPConnection | None = None
        self._closed = threading.Event()

    def __iter__(self) -> Iterator[Any]:
        endpoint = self.endpoint
        if endpoint.socket_path is not None:
            conn: http.client.HTTPConnection = _UnixConnection(endpoint.socket_path, self._timeout_s)
        else:
            host, _, port = (endpoint.host_port or "").rpartition(":")
            conn = http.client.HTTPConnection(host.strip("[]"), int(port or 80), timeout=self._timeout_s)
        self._conn = conn
        headers = {"Accept": "text/event-stream"}
        if endpoint.token:
            headers["Authorization"] = f"Bearer {endpoint.token}"
        try:
            conn.request("GET", self._url, headers=headers)
            response = conn.getresponse()
            if response.status != 200:
                body = response.read().decode(errors="replace").strip()[:300]
                what = f"{self.path} from the daemon at {endpoint.describe()}: {response.status} {body}"
                raise (ZeusPermissionError if response.status in (401, 403) else ZeusDeviceError)(what)
            if conn.sock is not None:
                conn.sock.settimeout(None)  # events may be far apart; close() ends the wait
            while not self._closed.is_set():
                line = response.readline()
                if not line:
                    return  # the daemon ended the stream (or close() shut the socket)
                text = line.decode(errors="replace").strip()
                if text.startswith("data:"):
                    yield json.loads(text[5:].strip())
        except OSError as e:
            if self._closed.is_set():
                return
            raise ZeusDeviceError(
                f"Cannot stream {self.path} from the daemon at {endpoint.describe()} ({e})."
            ) from e
        finally:
            conn.close()

    def close(self) -> None:
        """End the stream (iteration returns); safe from another thread and more than once."""
        self._closed.set()
        conn = self._conn
        sock = None if conn is None else conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def client_for(endpoint: Endpoint) -> DaemonClient:
    """This process's client of ``endpoint`` (a forked child gets its own: callers are processes)."""
    key = (os.getpid(), endpoint)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = DaemonClient(endpoint)
        return client


def daemon_status(environ: Mapping[str, str] | None = None, timeout_s: float = 3.0) -> dict[str, Any]:
    """Whether a daemon is configured and reachable, and what it lets this process do (``zeus-suite env``).

    Keys: ``configured``, ``endpoint``, ``reachable``, ``kind`` (``"zeus-suite daemon"`` or ``"zeusd"``),
    ``api_groups``, ``auth_required``, ``leases``, ``may`` (per API group: allowed or why not), ``detail``.
    """
    endpoint = Endpoint.from_env(environ)
    if endpoint is None:
        return {
            "configured": False,
            "endpoint": None,
            "reachable": None,
            "detail": f"not configured (set {ENV_SOCKET} to a daemon's socket to change GPU settings "
            "as a normal user)",
        }
    client = DaemonClient(endpoint, timeout_s=timeout_s)
    out: dict[str, Any] = {"configured": True, "endpoint": endpoint.describe()}
    try:
        info = client.discover()
        out.update(
            reachable=True,
            kind="zeus-suite daemon" if client.leases else "zeusd",
            api_groups=info.get("enabled_api_groups", []),
            auth_required=bool(info.get("auth_required")),
            leases=client.leases,
            gpus=[g.get("id") for g in info.get("gpus", [])],
        )
        perms = client.permissions()
        if perms is not None:
            out["may"] = {g: v["allowed"] or v["why"] for g, v in perms["api_groups"].items()}
            out["who"] = perms.get("who")
        elif out["auth_required"]:
            scopes = (client.whoami() or {}).get("scopes", [])
            out["may"] = {g: g in scopes or "the token lacks this scope" for g in out["api_groups"]}
        out["detail"] = describe_status(out)
    except ZeusError as e:
        out.update(reachable=False, detail=str(e))
    finally:
        client.close()
    return out


def describe_status(status: Mapping[str, Any]) -> str:
    """One line for ``zeus-suite env``, e.g. ``"ZEUSD_SOCK_PATH=... reachable: zeus-suite daemon, ..."``."""
    if not status.get("configured"):
        return str(status.get("detail", "not configured"))
    if not status.get("reachable"):
        return f"{status['endpoint']}: NOT reachable: {status.get('detail', '')}"
    may = status.get("may")
    allowed = sorted(g for g, v in (may or {}).items() if v is True)
    who = f" as {status['who']}" if status.get("who") else ""
    rights = f"; you{who} may use {allowed or 'nothing'}" if may is not None else ""
    leases = "leases" if status.get("leases") else "no leases"
    return (
        f"{status['endpoint']} reachable: {status.get('kind')} ({leases}) serving {status.get('api_groups')} "
        f"for GPUs {status.get('gpus')}{rights}"
    )
