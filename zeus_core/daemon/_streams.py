"""Power polling for ``/gpu/stream_power`` and ``/cpu/stream_power`` (Server-Sent Events), as zeusd does.

A :class:`PowerFeed` polls only while someone listens (zeusd's pollers sleep without subscribers);
each listener has a small queue that keeps the newest samples, so a slow reader skips samples
instead of holding the others back. A stream ends when the client goes away or the daemon stops.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from contextlib import suppress
from typing import Any, Awaitable, Callable

from aiohttp import web

__all__ = ["PowerFeed", "stream_events", "timestamp_ms"]

logger = logging.getLogger(__name__)

Sample = dict[int, Any]


def timestamp_ms() -> int:
    """Unix time, ms."""
    return int(time.time() * 1000)


class PowerFeed:
    """Samples ``read()`` every ``period_s`` while it has listeners.

    Args:
        read: Returns one sample: device id -> reading (devices that failed are left out).
        period_s: Polling period, s.
    """

    def __init__(self, read: Callable[[], Awaitable[Sample]], period_s: float) -> None:
        self._read = read
        self.period_s = period_s
        self._listeners: set[asyncio.Queue[tuple[int, Sample] | None]] = set()
        self._task: asyncio.Task[None] | None = None

    def subscribe(self) -> asyncio.Queue[tuple[int, Sample] | None]:
        """A queue that receives ``(timestamp_ms, sample)`` until ``None`` (the daemon stops)."""
        queue: asyncio.Queue[tuple[int, Sample] | None] = asyncio.Queue(maxsize=8)
        self._listeners.add(queue)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._poll())
        return queue

    def unsubscribe(self, queue: asyncio.Queue[tuple[int, Sample] | None]) -> None:
        """Stop sending to ``queue`` (polling stops with the last listener)."""
        self._listeners.discard(queue)

    async def _poll(self) -> None:
        while self._listeners:
            started = time.monotonic()
            try:
                sample = await self._read()
            except Exception as e:  # a failing device must not end the feed
                logger.warning("Power polling failed: %s", e)
                sample = {}
            item = (timestamp_ms(), sample)
            for queue in list(self._listeners):
                if queue.full():
                    with suppress(asyncio.QueueEmpty):
                        queue.get_nowait()
                queue.put_nowait(item)
            await asyncio.sleep(max(0.0, self.period_s - (time.monotonic() - started)))

    def stop(self) -> None:
        """End every stream (the daemon is stopping)."""
        for queue in list(self._listeners):
            with suppress(asyncio.QueueFull):
                queue.put_nowait(None)
        self._listeners.clear()
        if self._task is not None:
            self._task.cancel()


async def stream_events(
    request: web.Request, feed: PowerFeed, ids: list[int], event: Callable[[int, int, Any], dict[str, Any]]
) -> web.StreamResponse:
    """Answer with SSE: one ``data: {...}`` event per device per sample (``event(ts, id, reading)``)."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    queue = feed.subscribe()
    try:
        while True:
            item = await queue.get()
            if item is None:
                break
            ts, sample = item
            chunk = "".join(f"data: {json.dumps(event(ts, i, sample[i]))}\n\n" for i in ids if i in sample)
            if chunk:
                await response.write(chunk.encode())
    except (ConnectionResetError, ConnectionError):
        pass  # the client went away
    finally:
        feed.unsubscribe(queue)
    return response
