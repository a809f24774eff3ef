"""Background heartbeats of the batch-size client, so the server can tell a slow epoch from a dead client.

While a trial runs, :class:`HeartbeatSender` posts ``/jobs/{job_id}/trials/{n}/heartbeat`` every
``interval_s`` from a daemon thread with its own HTTP connection. A failed heartbeat is logged and
retried at the next tick (the next epoch report also counts as contact); the thread stops when
asked, or when the server answers that the trial has ended.

Example:
    >>> sender = HeartbeatSender("http://127.0.0.1:8000", "/jobs/j/trials/1/heartbeat", {}, 60.0)
    >>> sender.interval_s
    60.0
"""

from __future__ import annotations

import logging
import math
import threading
from typing import Any, Mapping

__all__ = ["HeartbeatSender", "heartbeat_interval", "MIN_INTERVAL_S", "MAX_INTERVAL_S"]

logger = logging.getLogger(__name__)

MIN_INTERVAL_S = 1.0
"""Shortest time between two heartbeats, s, whatever the server asks (no flood of requests)."""

MAX_INTERVAL_S = 3600.0
"""Longest time between two heartbeats, s (a huge figure must not stop them, or the thread)."""

DEFAULT_INTERVAL_S = 60.0
"""Interval when the server's heartbeat timeout is not a usable number, s."""


def heartbeat_interval(server_timeout_s: object) -> float:
    """A third of the server's heartbeat timeout, within [:data:`MIN_INTERVAL_S`, :data:`MAX_INTERVAL_S`], s.

    Example:
        >>> [heartbeat_interval(t) for t in (180.0, 0.003, 1e308, "x")]
        [60.0, 1.0, 3600.0, 60.0]
    """
    if isinstance(server_timeout_s, bool) or not isinstance(server_timeout_s, (int, float)):
        return DEFAULT_INTERVAL_S
    if math.isnan(server_timeout_s):
        return DEFAULT_INTERVAL_S
    return float(min(max(server_timeout_s / 3, MIN_INTERVAL_S), MAX_INTERVAL_S))


class HeartbeatSender:
    """Posts heartbeats for one trial from a daemon thread.

    Args:
        server_url: Base URL of the service.
        path: The trial's heartbeat route.
        headers: HTTP headers (the token).
        interval_s: Time between heartbeats, s (> 0).
        timeout_s: Timeout of one request, s.
    """

    def __init__(
        self,
        server_url: str,
        path: str,
        headers: Mapping[str, str],
        interval_s: float,
        timeout_s: float = 10.0,
    ) -> None:
        self.server_url = server_url
        self.path = path
        self.headers = dict(headers)
        self.interval_s = min(max(float(interval_s), MIN_INTERVAL_S), MAX_INTERVAL_S)
        self.timeout_s = float(timeout_s)
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"bso-heartbeat {path}", daemon=True)

    def start(self) -> HeartbeatSender:
        """Start sending; returns ``self``."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sending and wait for the thread (at most one request timeout)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.timeout_s + 1.0)

    def _run(self) -> None:
        import httpx

        with httpx.Client(base_url=self.server_url, headers=self.headers, timeout=self.timeout_s) as http:
            while not self._stop.wait(self.interval_s):
                if not self._beat(http):
                    return

    def _beat(self, http: Any) -> bool:
        """One heartbeat; whether to go on."""
        import httpx

        try:
            response = http.post(self.path)
        except httpx.TransportError as err:
            logger.debug("heartbeat %s failed (%s); next in %.0f s", self.path, err, self.interval_s)
            return True
        if response.status_code >= 400:
            logger.debug("heartbeat %s answered %d", self.path, response.status_code)
            return response.status_code >= 500  # 4xx (job deleted, token changed) will not heal
        self.sent += 1
        return response.json().get("status") in ("running", "expired")
