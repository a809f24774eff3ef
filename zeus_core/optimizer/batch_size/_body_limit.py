"""ASGI middleware that refuses request bodies above a size limit before anything parses them.

A request whose ``Content-Length`` is above the limit is answered 413 at once, without reading
its body; a body without a length (chunked) is read and counted, and answered 413 as soon as it
passes the limit. Bodies within the limit are handed to the app unchanged. The 413 body has the
service's error shape: ``{"message": ..., "errors": [{"field": "body", "problem": ...}]}``.

Example:
    >>> async def app(scope, receive, send): ...
    >>> BodySizeLimit(app, max_body_bytes=1024).max_body_bytes
    1024
"""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable, MutableMapping

__all__ = ["DEFAULT_MAX_BODY_BYTES", "BodySizeLimit"]

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
"""Largest request body the service accepts, bytes (1 MiB; a job spec is well under 1 KiB)."""

_Message = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[_Message]]
_Send = Callable[[_Message], Awaitable[None]]
_App = Callable[[MutableMapping[str, Any], _Receive, _Send], Awaitable[None]]


class BodySizeLimit:
    """Wraps an ASGI app; see the module docstring.

    Args:
        app: The ASGI app.
        max_body_bytes: Largest accepted body, bytes (>= 1).
    """

    def __init__(self, app: _App, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_body_bytes = int(max_body_bytes)

    async def __call__(self, scope: MutableMapping[str, Any], receive: _Receive, send: _Send) -> None:
        """Handle one ASGI connection scope."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            await self._refuse(scope, send, f"Content-Length is {declared} bytes")
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await self._refuse(scope, send, f"the body passed {self.max_body_bytes} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(b"".join(chunks), receive), send)

    async def _refuse(self, scope: MutableMapping[str, Any], send: _Send, what: str) -> None:
        problem = (
            f"request body too large: {what}, above the limit of {self.max_body_bytes} bytes; "
            "send a smaller body, or raise the server's limit (--max-body-bytes / max_body_bytes)"
        )
        body = json.dumps(
            {
                "message": f"{scope.get('method', '')} {scope.get('path', '')}: {problem}.",
                "errors": [{"field": "body", "problem": problem}],
            }
        ).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: MutableMapping[str, Any]) -> int | None:
    for name, value in scope.get("headers", ()):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:  # the server (h11, httptools) refuses these before us
                return None
    return None


def _replay(body: bytes, receive: _Receive) -> _Receive:
    sent = False

    async def _receive() -> _Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # after the body: wait for the disconnect, as the app expects

    return _receive
