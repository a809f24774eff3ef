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
import threading
from typing import Any, Mapping

__all__ = ["HeartbeatSender"]

logger = logging.getLogger(__name__)


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
        self.interval_s = float(interval_s)
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
