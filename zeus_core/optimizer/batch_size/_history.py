"""A job's history as the service reads it: job ids, cached bandits, the bandit off the event loop.

The bandit is a pure function of the job's spec and its ended trials in completion order, and an
ended trial never changes. So the service keeps each job's bandit between requests
(:class:`BanditCache`) and, under the job's row lock, reads only the trials that ended since
(``completion_order >= seen``), instead of every row on every request. The cached bandit is checked
against the locked row (creation time, spec, completions) each time, so several servers on one
database, a deleted and re-registered job, or a failed request all fall back to a rebuild.

Bandit work runs in a worker thread (:func:`off_loop`), so a costly job never stalls ``/health`` or
other jobs' requests.

Example:
    >>> job_id_problem("cifar100"), job_id_problem("..")
    (None, "'..' is a path segment")
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from zeus_core.optimizer.batch_size._api_models import StopReason, TrialStatus
from zeus_core.optimizer.batch_size._bandit import BatchSizeBandit, Observation
from zeus_core.optimizer.batch_size._db import JobRow, TrialRow
from zeus_core.optimizer.batch_size._records import ENDED, observations
from zeus_core.optimizer.batch_size._spec import JobSpec

__all__ = ["job_id_problem", "BanditCache", "off_loop", "expire_stale", "JOB_ID_RULE"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_FORBIDDEN = "/\\?#%"
JOB_ID_RULE = (
    "at most 255 printable characters, without / \\ ? # %, not '.' or '..', and without leading or "
    "trailing spaces"
)
"""What a job id may be (it appears in URL paths, logs and database keys)."""


def job_id_problem(job_id: str) -> str | None:
    """What is wrong with ``job_id`` as a job id (see :data:`JOB_ID_RULE`), or ``None``."""
    if not job_id:
        return "it is empty"
    if len(job_id) > 255:
        return f"it has {len(job_id)} characters"
    bad = sorted({c for c in job_id if c in _FORBIDDEN or not c.isprintable()})
    if bad:
        return f"it holds {bad}"
    if job_id in (".", ".."):
        return f"{job_id!r} is a path segment"
    if job_id != job_id.strip():
        return "it has leading or trailing spaces"
    return None


async def off_loop(fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` in a worker thread, so the event loop keeps serving other requests."""
    return await asyncio.to_thread(functools.partial(fn, *args))


@dataclass
class _Entry:
    created_at: float
    spec_json: str
    bandit: BatchSizeBandit
    seen: int  # completions observed: every ended trial with completion_order < seen


class BanditCache:
    """The bandits of the most recently used jobs (least recently used ones are dropped).

    Args:
        size: Most jobs kept.
    """

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._entries: collections.OrderedDict[str, _Entry] = collections.OrderedDict()
        self.rebuilds = 0  # for tests and benchmarks: how often a bandit was built from every row

    async def bandit(
        self, session: AsyncSession, job: JobRow, spec: JobSpec
    ) -> tuple[BatchSizeBandit, _Entry]:
        """The job's bandit, up to date with what is committed (the job's row must be locked).

        The entry is taken out of the cache while the request uses it; :meth:`put` it back once the
        transaction committed (a request that fails leaves nothing half-updated behind).
        """
        entry = self._entries.pop(job.job_id, None)
        fresh = (
            entry is None
            or entry.created_at != job.created_at
            or entry.spec_json != job.spec_json
            or entry.seen > job.next_completion
        )
        seen = 0 if fresh or entry is None else entry.seen
        rows = list(
            await session.scalars(
                select(TrialRow)
                .where(
                    TrialRow.job_id == job.job_id,
                    TrialRow.status.in_(ENDED),
                    TrialRow.completion_order >= seen,
                )
                .order_by(TrialRow.completion_order)
            )
        )
        new = observations(rows, spec.batch_sizes)
        if fresh or entry is None:
            self.rebuilds += 1
            bandit = await off_loop(BatchSizeBandit, spec, new)
            entry = _Entry(job.created_at, job.spec_json, bandit, job.next_completion)
        else:
            if new:
                await off_loop(_observe_all, entry.bandit, new)
            entry.seen = job.next_completion
        return entry.bandit, entry

    def put(self, job_id: str, entry: _Entry) -> None:
        """Keep ``entry`` for the next request on ``job_id``."""
        self._entries[job_id] = entry
        self._entries.move_to_end(job_id)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def drop(self, job_id: str) -> None:
        """Forget ``job_id`` (deleted)."""
        self._entries.pop(job_id, None)


def _observe_all(bandit: BatchSizeBandit, new: list[Observation]) -> None:
    for obs in new:
        bandit.observe(obs)


async def expire_stale(
    session: AsyncSession, job_id: str | None, now: float, heartbeat_timeout_s: float, trial_timeout_s: float
) -> int:
    """Expire the stale running trials of ``job_id`` (``None``: of every job); returns how many.

    A trial whose client sends heartbeats expires after ``heartbeat_timeout_s`` without a report or
    heartbeat, any other after ``trial_timeout_s`` without contact, s (the rules: ``_service``).
    """
    expired = 0
    # Heartbeat trials first, so that they get the more precise reason.
    for reason, timeout_s, only_heartbeat in (
        (StopReason.HEARTBEAT_TIMEOUT, heartbeat_timeout_s, True),
        (StopReason.TIMEOUT, trial_timeout_s, False),
    ):
        query = update(TrialRow).where(
            TrialRow.status == TrialStatus.RUNNING.value, TrialRow.last_seen_at < now - timeout_s
        )
        if job_id is not None:
            query = query.where(TrialRow.job_id == job_id)
        if only_heartbeat:
            query = query.where(TrialRow.heartbeat.is_(True))
        result = await session.execute(
            query.values(status=TrialStatus.EXPIRED.value, end_reason=reason.value).execution_options(
                synchronize_session="fetch"
            )
        )
        count = int(getattr(result, "rowcount", 0) or 0)
        if count:
            logger.warning(
                "%s: %d trial(s) expired after %.0f s without %s (what they reported is kept)",
                job_id if job_id is not None else "all jobs",
                count,
                timeout_s,
                "a report or heartbeat" if only_heartbeat else "contact",
            )
        expired += count
    return expired
