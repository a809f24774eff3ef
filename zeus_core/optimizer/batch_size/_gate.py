"""The service's front door: every request is checked before any of it is read or parsed.

An ASGI middleware; in order, for each HTTP request:

1. **Host** (DNS rebinding): the ``Host`` header must name an allowed host. Without a token the
   service answers only to loopback names (``localhost``, ``127.0.0.1``, ``::1``), so a web page
   whose name an attacker points at 127.0.0.1 gets 400.
2. **Browsers**: a request carrying an ``Origin`` other than the server's own (its ``/docs`` page),
   or marked ``Sec-Fetch-Site: cross-site``/``same-site``, gets 403: a page the user opens cannot
   register jobs or report results, even on loopback without a token. API clients (the suite's,
   Zeus 0.16's, curl) send neither header.
3. **Token** (when one is set): every path but ``/health`` (the API docs and schema included) needs
   it; 401 is sent before the body is read, so unauthenticated clients cannot make the server
   buffer anything.
4. **Content type**: a body sent as anything but JSON (``text/plain``, a form) gets 415. A body
   without a ``Content-Type`` is read as JSON (Zeus 0.16's client sends none).
5. **Body**: a declared ``Content-Length`` above the limit gets 413 at once; a body is read within
   ``body_timeout_s`` (408 past it: a client that stalls mid-body does not hold the connection), and
   413 as soon as it passes the limit.

Every refusal has the service's error shape ``{"message", "errors": [{"field", "problem"}]}``, with
the header or part at fault as the field. docs/optimizers/batch-size-security.md explains the
deployment side (token file, allowed hosts, a proxy, connection limits).

Example:
    >>> async def app(scope, receive, send): ...
    >>> RequestGate(app, token=None, allowed_hosts=None).allowed_hosts
    frozenset({'127.0.0.1', '::1', 'localhost'})
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Awaitable, Callable, Collection, MutableMapping
from urllib.parse import urlsplit

from zeus_core.optimizer.batch_size._auth import authorized

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_BODY_TIMEOUT_S",
    "LOOPBACK_HOSTS",
    "RequestGate",
    "host_name",
]

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
"""Largest request body the service accepts, bytes (1 MiB; a job spec is well under 1 KiB)."""

DEFAULT_BODY_TIMEOUT_S = 30.0
"""Longest time to receive a request's body, s."""

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
"""Host names a service without a token answers to."""

OPEN_PATHS = frozenset({"/health"})
"""Paths served without the token (liveness probes)."""

_Message = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[_Message]]
_Send = Callable[[_Message], Awaitable[None]]
_App = Callable[[MutableMapping[str, Any], _Receive, _Send], Awaitable[None]]
_DOC_PATHS = frozenset({"/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect"})


def host_name(netloc: str) -> str:
    """The host of a ``Host`` header or URL netloc, lower-case, without port or brackets.

    Example:
        >>> host_name("[::1]:8000"), host_name("LocalHost.:80"), host_name("10.0.0.5")
        ('::1', 'localhost', '10.0.0.5')
    """
    text = netloc.strip().rpartition("@")[2]
    if text.startswith("["):
        text = text[1 : text.find("]")] if "]" in text else text[1:]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    return text.rstrip(".").lower()


def _origin_netloc(value: str, scheme: str) -> str:
    parts = urlsplit(value)
    default = {"http": 80, "https": 443}.get(parts.scheme)
    port = parts.port if parts.port is not None else default
    host = (parts.hostname or "").rstrip(".")
    return f"{parts.scheme}://{host}:{port}" if parts.scheme in ("http", "https") and host else ""


class RequestGate:
    """Wraps an ASGI app; see the module docstring.

    Args:
        app: The ASGI app.
        token: The token every path but ``/health`` needs (``None``: none).
        allowed_hosts: Host names the ``Host`` header may carry (``"*"``: any). ``None``: any
            when a token is set, else :data:`LOOPBACK_HOSTS`.
        max_body_bytes: Largest accepted body, bytes (>= 1).
        body_timeout_s: Longest time to receive a body, s.
    """

    def __init__(
        self,
        app: _App,
        *,
        token: str | None,
        allowed_hosts: Collection[str] | None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
    ) -> None:
        self.app = app
        self.token = token
        if allowed_hosts is None:
            allowed_hosts = ["*"] if token else LOOPBACK_HOSTS
        names = frozenset(host_name(h) if h != "*" else "*" for h in allowed_hosts)
        self.allowed_hosts: frozenset[str] | None = None if "*" in names else names
        self.max_body_bytes = int(max_body_bytes)
        self.body_timeout_s = float(body_timeout_s)

    async def __call__(self, scope: MutableMapping[str, Any], receive: _Receive, send: _Send) -> None:
        """Handle one ASGI scope."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await _refuse(scope, send, *refusal)
            return
        body = await self._read_body(scope, receive, send, headers)
        if body is not None:
            await self.app(scope, _replay(body, receive), send)

    def _refusal(
        self, scope: MutableMapping[str, Any], headers: dict[str, str]
    ) -> tuple[int, str, str, list[tuple[bytes, bytes]]] | None:
        """(status, field, problem, extra headers) of the first check that fails, or ``None``."""
        host = headers.get("host", "")
        if self.allowed_hosts is not None and host_name(host) not in self.allowed_hosts:
            return (
                400,
                "Host (header)",
                f"this server does not answer to the host {host[:100]!r} (allowed: "
                f"{sorted(self.allowed_hosts)}); connect by one of those names, or start the server with "
                "--allowed-host NAME",
                [],
            )
        scheme = str(scope.get("scheme", "http"))
        origin = headers.get("origin")
        own = _origin_netloc(f"{scheme}://{host}", scheme)
        if origin is not None and _origin_netloc(origin, scheme) != own:
            return (
                403,
                "Origin (header)",
                f"requests from web pages of another origin ({origin[:100]!r}) are refused: a page "
                "must not drive this service; use the Python client or curl",
                [],
            )
        if headers.get("sec-fetch-site", "").lower() in ("cross-site", "same-site"):
            return (403, "Sec-Fetch-Site (header)", "requests from other web sites are refused", [])
        if self.token is not None and scope.get("path") not in OPEN_PATHS:
            auth = headers.get("authorization")
            if not auth or not authorized(auth, self.token):
                problem = (
                    "missing 'Authorization: Bearer <token>' header; this server requires its token "
                    "(the client: token=... or ZEUS_BSO_TOKEN; Zeus 0.16's client: http://zeus:<token>@host:port)"
                    if not auth
                    else "the token does not match this server's token"
                )
                # A browser opening /docs gets a login prompt (basic auth, any user name, the token as
                # password); API clients are told to send a bearer token.
                doc = scope.get("path") in _DOC_PATHS
                challenge = b'Basic realm="zeus-suite bso-server"' if doc else b"Bearer"
                return (401, "Authorization (header)", problem, [(b"www-authenticate", challenge)])
        declared = headers.get("content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > self.max_body_bytes:
            return (413, "body", self._too_large(f"Content-Length is {int(declared)} bytes"), [])
        kind = headers.get("content-type", "").partition(";")[0].strip().lower()
        if kind and kind != "application/json" and not kind.endswith("+json"):
            return (
                415,
                "Content-Type (header)",
                f"the body is declared as {kind[:100]!r}; send JSON as 'Content-Type: application/json'",
                [],
            )
        return None

    def _too_large(self, what: str) -> str:
        return (
            f"request body too large: {what}, above the limit of {self.max_body_bytes} bytes; "
            "send a smaller body, or raise the server's limit (--max-body-bytes / max_body_bytes)"
        )

    async def _read_body(
        self, scope: MutableMapping[str, Any], receive: _Receive, send: _Send, headers: dict[str, str]
    ) -> bytes | None:
        """The whole body within the limits, or ``None`` after answering 408/413 (or a disconnect)."""
        chunks: list[bytes] = []
        size = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.body_timeout_s
        while True:
            try:
                message = await asyncio.wait_for(receive(), timeout=max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                problem = f"the body did not arrive within {self.body_timeout_s:g} s (--body-timeout)"
                await _refuse(scope, send, 408, "body", problem, [(b"connection", b"close")])
                return None
            if message["type"] != "http.request":  # the client went away
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                problem = self._too_large(f"the body passed {self.max_body_bytes} bytes")
                await _refuse(scope, send, 413, "body", problem, [])
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


async def _refuse(
    scope: MutableMapping[str, Any],
    send: _Send,
    status: int,
    field: str,
    problem: str,
    extra: list[tuple[bytes, bytes]],
) -> None:
    body = json.dumps(
        {
            "message": f"{scope.get('method', '')} {scope.get('path', '')}: {problem}.",
            "errors": [{"field": field, "problem": problem}],
        }
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _replay(body: bytes, receive: _Receive) -> _Receive:
    sent = False

    async def _receive() -> _Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # after the body: wait for the disconnect, as the app expects

    return _receive
