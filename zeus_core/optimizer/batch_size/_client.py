"""Client of the batch-size optimizer service, for the training script (sync, httpx).

One :class:`BatchSizeOptimizer` per training run: it registers the job on first use, asks for the
batch size of a new trial, reports cumulative time (s) and energy (J) after each epoch (the server
answers whether to stop), and reports the trial's result. Every call is safe to retry (a new trial
carries a request id), so transient network errors are retried with a back-off.

What it did: each trial's start prints (on rank zero, through :mod:`zeus_core.console`) the
batch size and where the job stands against its default: the cumulative cost so far, the
default's over the same recurrences (measured or estimated) and the exploration budget left;
:attr:`BatchSizeOptimizer.last_budget` holds it, :meth:`BatchSizeOptimizer.budget` asks again.

Heartbeats: while a trial runs, the client posts a heartbeat every third of the server's
heartbeat timeout (kept within [1 s, 1 h], whatever the server says) from a background thread
(``heartbeat=False`` turns that off; then only the server's much longer trial timeout applies).
So a trial whose process died is closed after the heartbeat timeout, while one in a long epoch is
not.

Secrets: the token (``token=``, env ``ZEUS_BSO_TOKEN``, or the file named by
``ZEUS_BSO_TOKEN_FILE``) and a password in the server URL (``http://zeus:<token>@host``) never
appear in messages, logs or exceptions: the URL is shown as ``http://zeus:***@host``.

Distributed jobs: call every method on every rank. Only global rank 0 talks to the server; the
answer (or the error) is broadcast with ``torch.distributed`` so all ranks agree. Pass job-wide
totals (e.g. :func:`zeus_core._distributed.reduce_measurement`). With ``distributed=False`` each
process talks to the server on its own instead, as Zeus's client does: one rank starts the trial
and the others :meth:`~BatchSizeOptimizer.join_trial` it (the job's spec then says how many
processes report each epoch, ``JobSpec.reporters``).

Example:
    >>> from zeus_core.optimizer.batch_size import JobSpec
    >>> spec = JobSpec("cifar100-shufflenet", (256, 512, 1024), 1024, target_metric=0.6, max_power_w=300.0)
    >>> bso = BatchSizeOptimizer("http://127.0.0.1:8000", spec)
    >>> bso.trial_number is None
    True

    In the training script::

        with BatchSizeOptimizer("http://127.0.0.1:8000", spec) as bso:
            batch_size = bso.get_batch_size()
            for epoch in range(1, spec.max_epochs + 1):
                ...  # train one epoch, evaluate
                if bso.on_epoch_end(epoch, time_s=elapsed, energy_j=energy, metric=accuracy):
                    break
            converged = accuracy >= spec.target_metric
            bso.report(time_s=elapsed, energy_j=energy, metric=accuracy, converged=converged)
"""

from __future__ import annotations

import logging
import os
import re
import time
import uuid
from types import TracebackType
from typing import Any, Callable, Mapping
from urllib.parse import quote

from zeus_core import _distributed as distributed
from zeus_core import console
from zeus_core.exceptions import ZeusConfigError, ZeusError, ZeusPermissionError
from zeus_core.optimizer.batch_size._auth import normalize_token
from zeus_core.optimizer.batch_size._heartbeat import HeartbeatSender, heartbeat_interval
from zeus_core.optimizer.batch_size._spec import JobSpec

__all__ = ["ZeusServerError", "BatchSizeOptimizer"]

logger = logging.getLogger(__name__)

_RETRY_STATUS = (502, 503, 504)


class ZeusServerError(ZeusError, RuntimeError):
    """The batch-size optimizer server could not be reached, or failed (5xx).

    Example:
        >>> issubclass(ZeusServerError, RuntimeError)
        True
    """


class BatchSizeOptimizer:
    """Talks to ``zeus-suite bso-server`` for one recurring job.

    Args:
        server_url: Base URL of the service, e.g. ``http://127.0.0.1:8000``.
        job_spec: The job (a :class:`JobSpec` or its ``to_dict()``).
        token: Shared token of the server; default env ``ZEUS_BSO_TOKEN``, else the content of
            the file named by env ``ZEUS_BSO_TOKEN_FILE``.
        timeout_s: Timeout of one HTTP request, s.
        retries: Extra attempts after a connection error, timeout or 502/503/504.
        retry_backoff_s: Wait before the first retry, s (doubles each time).
        heartbeat: Send heartbeats while a trial runs (see the module docstring).
        distributed: ``True``: only rank 0 talks to the server and broadcasts the answers (call
            every method on every rank). ``False``: this process talks to the server itself.

    Attributes:
        trial_number: Number of the current (or last) trial; ``None`` before the first.
        batch_size: Its batch size; ``None`` before the first trial.
        stop_reason: Why the server last said to stop (``early_stop``, ``max_epochs``,
            ``target_reached``, ``trial_ended``), or ``None``.
        last_result: The stored trial returned by the last :meth:`report`.
        last_decision: The server's answer to the last :meth:`on_epoch_end` (``stop``, ``reason``,
            ``status``, ``cost`` J, ...), or ``None``.
        last_budget: The job's cost against its default's when the current trial was handed out
            (``cost_j``, ``default_cost_j``, ``remaining_j``, ... in J; see :meth:`budget`).

    Raises:
        ZeusConfigError: A malformed ``server_url``, ``job_spec``, token or timing option.

    Example:
        >>> spec = JobSpec("job", (32, 64), 64, target_metric=0.9, max_power_w=300.0)
        >>> bso = BatchSizeOptimizer("http://127.0.0.1:8000", spec)
        >>> bso.trial_number is None, bso.last_budget is None
        (True, True)
    """

    def __init__(
        self,
        server_url: str,
        job_spec: JobSpec | Mapping[str, Any],
        *,
        token: str | None = None,
        timeout_s: float = 30.0,
        retries: int = 3,
        retry_backoff_s: float = 0.5,
        heartbeat: bool = True,
        distributed: bool = True,
    ) -> None:
        if not isinstance(server_url, str) or not server_url.startswith(("http://", "https://")):
            raise ZeusConfigError(
                f"BatchSizeOptimizer: server_url={server_url!r} must be an http(s) URL such as http://127.0.0.1:8000."
            )
        if isinstance(job_spec, Mapping):
            job_spec = JobSpec.from_dict(job_spec)
        if not isinstance(job_spec, JobSpec):
            raise ZeusConfigError(
                f"BatchSizeOptimizer: job_spec must be a JobSpec, got {type(job_spec).__name__}."
            )
        if not timeout_s > 0:
            raise ZeusConfigError(f"BatchSizeOptimizer: timeout_s={timeout_s!r} must be > 0 s.")
        if not isinstance(retries, int) or retries < 0:
            raise ZeusConfigError(f"BatchSizeOptimizer: retries={retries!r} must be an integer >= 0.")
        if not retry_backoff_s >= 0:
            raise ZeusConfigError(f"BatchSizeOptimizer: retry_backoff_s={retry_backoff_s!r} must be >= 0 s.")
        self.server_url = server_url.rstrip("/")
        self.job_spec = job_spec
        given = token if token is not None else _token_from_env()
        self._token = normalize_token(given, where="BatchSizeOptimizer")
        self._shown_url = _redact(self.server_url, self._token)
        self.heartbeat = bool(heartbeat)
        self.distributed = bool(distributed)
        self._heartbeat: HeartbeatSender | None = None
        self.timeout_s = float(timeout_s)
        self.retries = retries
        self.retry_backoff_s = float(retry_backoff_s)
        self._job_path = "/jobs/" + quote(job_spec.job_id, safe="")
        self._http: Any = None
        self._registered = False
        self._running = False  # a trial is handed out and the server has not ended it
        self.trial_number: int | None = None
        self.batch_size: int | None = None
        self.stop_reason: str | None = None
        self.last_result: dict[str, Any] | None = None
        self.last_decision: dict[str, Any] | None = None
        self.last_budget: dict[str, Any] | None = None

    # ------------------------------------------------------------ the API
    def register(self) -> bool:
        """Register the job (idempotent); ``True`` if this call created it.

        Raises:
            ZeusConfigError: The server holds this job id with a different spec (409).
        """
        created = self._on_rank_zero(
            lambda: self._post("register", "/jobs", self.job_spec.to_dict())["created"]
        )
        self._registered = True
        return bool(created)

    def get_batch_size(self) -> int:
        """The batch size of the current trial, starting one (and registering the job) if needed.

        Repeated calls during one trial return the same batch size; after :meth:`report`, or once
        the server said to stop, the next call starts a new trial.
        """
        if self._running and self.batch_size is not None:
            return self.batch_size
        if not self._registered:
            self.register()
        body = {"request_id": uuid.uuid4().hex, "heartbeat": self.heartbeat}
        trial = self._on_rank_zero(lambda: self._post("get_batch_size", f"{self._job_path}/trials", body))
        self.trial_number, self.batch_size = int(trial["trial_number"]), int(trial["batch_size"])
        self._running, self.stop_reason, self.last_result = True, None, None
        self.last_budget = trial.get("budget")
        self._start_heartbeat(trial.get("heartbeat_timeout_s"))
        console.info(
            f"batch-size optimizer: {self.job_spec.job_id} trial {self.trial_number}: batch size "
            f"{self.batch_size} ({trial.get('phase')}){_describe(self.last_budget)}"
        )
        return self.batch_size

    def join_trial(self, trial_number: int, batch_size: int) -> None:
        """Take part in a trial that another process started (a data-parallel rank that did not ask).

        Its epochs are then reported from here too (``distributed=False``; see ``JobSpec.reporters``).

        Example:
            >>> spec = JobSpec("job", (32, 64), 64, target_metric=0.9, max_power_w=600.0, reporters=2)
            >>> rank1 = BatchSizeOptimizer("http://127.0.0.1:8000", spec, distributed=False)
            >>> rank1.join_trial(trial_number=3, batch_size=64)  # told by rank 0
            >>> rank1.trial_number, rank1.batch_size
            (3, 64)
        """
        self.trial_number, self.batch_size = int(trial_number), int(batch_size)
        self._running, self.stop_reason, self.last_result = True, None, None

    def on_epoch_end(self, epoch: int, time_s: float, energy_j: float, metric: float | None = None) -> bool:
        """Report progress after an epoch; ``True`` means stop training now.

        Args:
            epoch: Epochs completed (1 after the first).
            time_s: Time since the trial began, s (cumulative).
            energy_j: Energy since the trial began, J (cumulative, all GPUs of the job).
            metric: Validation metric after this epoch, if evaluated.

        Returns:
            Whether to stop: the target was reached, the cost passed ``beta_knob`` × the best
            cost, or ``max_epochs`` ran out (see :attr:`stop_reason`).
        """
        number = self._current("on_epoch_end")
        if not self._running:
            return True
        body = {"epoch": epoch, "time_s": time_s, "energy_j": energy_j, "metric": metric}
        decision = self._on_rank_zero(
            lambda: self._post("on_epoch_end", f"{self._job_path}/trials/{number}/epochs", body)
        )
        self.last_decision = decision
        if decision["stop"]:
            self._stop_heartbeat()
            self._running, self.stop_reason = False, str(decision["reason"])
            logger.info(
                "%s trial %d: stop after epoch %d (%s, cost %.1f J)",
                self.job_spec.job_id,
                number,
                epoch,
                self.stop_reason,
                decision["cost"],
            )
        return bool(decision["stop"])

    def report(
        self, time_s: float, energy_j: float, metric: float | None = None, *, converged: bool
    ) -> dict[str, Any]:
        """Report the trial's result; the next :meth:`get_batch_size` starts a new trial.

        Args:
            time_s: Total time of the trial, s.
            energy_j: Total energy of the trial, J.
            metric: Final validation metric, if any.
            converged: Whether the trial reached the target metric.

        Returns:
            The trial as the server stored it (``recorded`` is ``False`` when the server had
            already ended it after an epoch report, and kept that outcome).
        """
        number = self._current("report")
        self._stop_heartbeat()
        body = {"time_s": time_s, "energy_j": energy_j, "metric": metric, "converged": converged}
        out = self._on_rank_zero(
            lambda: self._post("report", f"{self._job_path}/trials/{number}/result", body)
        )
        self._running, self.last_result = False, out
        self.batch_size = None
        return out

    def abandon(self) -> None:
        """Tell the server the current trial will not finish (it stops counting as pending)."""
        if self.trial_number is None or not self._running:
            return
        number = self.trial_number
        self._stop_heartbeat()
        self._on_rank_zero(lambda: self._post("abandon", f"{self._job_path}/trials/{number}/abandon", None))
        self._running, self.batch_size = False, None

    def job_state(self) -> dict[str, Any]:
        """The job's spec, trials, bandit summary and budget as the server sees them."""
        return self._on_rank_zero(lambda: self._send("job_state", "GET", self._job_path, None))

    def budget(self) -> dict[str, Any]:
        """Where the job stands against its default, J (``GET /jobs/{job_id}/budget``).

        Returns:
            ``cost_j`` (cumulative cost of the finished trials), ``default_cost_j`` (the default's
            over the same recurrences: ``measured_recurrences`` measured, ``estimated_recurrences``
            at ``default_recurrence_cost_j`` each), ``slack``, ``uncharged_j`` and ``remaining_j``
            (what exploration may still cost; ``None`` without a budget).

        Example:
            >>> bso.budget()["remaining_j"]  # doctest: +SKIP
            1532.5
        """
        path = f"{self._job_path}/budget"
        return self._on_rank_zero(lambda: self._send("budget", "GET", path, None))

    def close(self) -> None:
        """Stop heartbeats and close the HTTP connection pool (the trial is left as it is)."""
        self._stop_heartbeat()
        if self._http is not None:
            self._http.close()
            self._http = None

    def __enter__(self) -> BatchSizeOptimizer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if exc_type is not None and self._running:
                try:
                    self.abandon()
                except ZeusError as err:
                    logger.warning("Could not abandon trial %s after an error: %s", self.trial_number, err)
        finally:
            self.close()

    # ----------------------------------------------------------- plumbing
    def _start_heartbeat(self, timeout_s: Any) -> None:
        self._stop_heartbeat()
        if not self.heartbeat or not distributed.is_rank_zero() or not timeout_s:
            return
        path = f"{self._job_path}/trials/{self.trial_number}/heartbeat"
        self._heartbeat = HeartbeatSender(
            self.server_url, path, self._headers(), heartbeat_interval(timeout_s), timeout_s=self.timeout_s
        ).start()

    def _stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token}"} if self._token else {}

    def _current(self, call: str) -> int:
        if self.trial_number is None or (not self._running and self.batch_size is None):
            raise ZeusConfigError(
                f"BatchSizeOptimizer.{call}: no trial is running; call get_batch_size() first."
            )
        return self.trial_number

    def _on_rank_zero(self, fn: Callable[[], Any]) -> Any:
        if not self.distributed or distributed.world_size() == 1:
            return fn()
        box: tuple[str, Any] | None = None
        if distributed.is_rank_zero():
            try:
                box = ("ok", fn())
            except ZeusError as err:
                box = ("error", err)
        box = distributed.broadcast_object(box)
        if box[0] == "error":
            raise box[1]
        return box[1]

    def _client(self) -> Any:
        if self._http is None:
            try:
                import httpx
            except ModuleNotFoundError as err:
                raise ModuleNotFoundError(
                    f"BatchSizeOptimizer needs httpx ({err}); pip install 'zeus-suite[server]'"
                ) from err
            self._http = httpx.Client(
                base_url=self.server_url, headers=self._headers(), timeout=self.timeout_s
            )
        return self._http

    def _post(self, call: str, path: str, body: Any) -> Any:
        return self._send(call, "POST", path, body)

    def _send(self, call: str, method: str, path: str, body: Any) -> Any:
        import httpx

        client = self._client()
        delay = self.retry_backoff_s
        problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(delay)
                delay *= 2
            try:
                response = client.request(method, path, json=body)
            except httpx.TransportError as err:
                problem = self._hide(f"{type(err).__name__}: {err}")
                logger.debug("%s %s failed (%s); attempt %d", method, path, problem, attempt + 1)
                continue
            if response.status_code in _RETRY_STATUS:
                problem = self._hide(f"HTTP {response.status_code}: {_message(response)}")
                continue
            return self._parse(call, response)
        raise ZeusServerError(
            f"BatchSizeOptimizer.{call}: cannot reach the batch-size optimizer server at {self._shown_url} "
            f"({problem}; tried {self.retries + 1} times). "
            "Start it with `zeus-suite bso-server` or check server_url."
        ) from None

    def _parse(self, call: str, response: Any) -> Any:
        code = response.status_code
        if code < 400:
            return None if code == 204 or not response.content else response.json()
        message = self._hide(_message(response))
        where = f"BatchSizeOptimizer.{call}: server at {self._shown_url} answered {code}"
        if code in (401, 403):
            raise ZeusPermissionError(f"{where}: {message} Pass token=... or set ZEUS_BSO_TOKEN.")
        if code < 500:
            raise ZeusConfigError(f"{where}: {message}")
        raise ZeusServerError(f"{where}: {message}")

    def _hide(self, text: str) -> str:
        """``text`` without the token or the URL's password (an error may quote either)."""
        return _redact(text, self._token)

    def __repr__(self) -> str:
        return f"BatchSizeOptimizer({self._shown_url!r}, job_id={self.job_spec.job_id!r})"


def _token_from_env() -> str | None:
    """``ZEUS_BSO_TOKEN``, else the content of the file named by ``ZEUS_BSO_TOKEN_FILE``."""
    if os.environ.get("ZEUS_BSO_TOKEN") is not None or not os.environ.get("ZEUS_BSO_TOKEN_FILE"):
        return os.environ.get("ZEUS_BSO_TOKEN")
    path = os.environ["ZEUS_BSO_TOKEN_FILE"]
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except (OSError, UnicodeDecodeError) as err:
        raise ZeusConfigError(
            f"BatchSizeOptimizer: cannot read ZEUS_BSO_TOKEN_FILE={path!r}: {err}."
        ) from err


def _redact(text: str, token: str | None) -> str:
    """``text`` with ``token`` and every URL password (``scheme://user:secret@``) replaced by ``***``."""
    text = re.sub(r"([A-Za-z][A-Za-z0-9+.-]*://[^:@/\s]*):[^@/\s]*@", r"\1:***@", text)
    return text.replace(token, "***") if token else text


def _describe(budget: Mapping[str, Any] | None) -> str:
    """``; cost so far ... J against the default's ... J, exploration budget left ... J``, or ``""``."""
    if not budget or budget.get("cost_j") is None or budget.get("default_cost_j") is None:
        return ""
    text = f"; cost so far {budget['cost_j']:,.0f} J against the default's {budget['default_cost_j']:,.0f} J"
    if budget.get("slack") is None:
        return text + " (no exploration budget)"
    remaining = budget.get("remaining_j")
    return text + ("" if remaining is None else f", exploration budget left {remaining:,.0f} J")


def _message(response: Any) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text.strip()[:500] or response.reason_phrase
    if isinstance(data, dict) and "message" in data:
        return str(data["message"])
    return str(data)[:500]
