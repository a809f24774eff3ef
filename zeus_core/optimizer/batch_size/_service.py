"""What the batch-size optimizer service does, one database transaction per call (no HTTP here).

Every call locks the job's row first (``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite serialises
whole transactions), expires stale trials, brings the job's :class:`BatchSizeBandit` up to date
with the trials that ended since it was last used (:mod:`~zeus_core.optimizer.batch_size._history`:
the bandit is what its finished trials in completion order make it, rebuilt when in doubt), and
then reads or writes; the bandit's work runs off the event loop. So two trials started at the
same moment get distinct trial numbers, each sees the other as pending, and a restarted server
continues from exactly what was committed.

Rules:

* **Trial numbers** start at 1 and are never reused. A request id (sent by the client) makes
  starting a trial idempotent: retrying returns the same trial. A job has at most
  ``max_trials_per_job`` trials (409 beyond: register the job anew), which bounds the history the
  bandit reads.
* **Epoch reports** carry cumulative time (s) and energy (J). The answer says stop when the
  metric reached the target (the trial ends ``converged``), or when
  :meth:`BatchSizeBandit.should_stop` says so, given the cost so far and the last epoch's cost as
  a look-ahead (the trial ends ``failed``: ``early_stop`` or ``max_epochs``). Reporting the same
  epoch again returns the stored decision; a report for an ended trial returns ``stop`` with
  reason ``trial_ended`` and writes nothing.
* **Results**: the first result of a running trial is stored. Sending the identical result
  again returns it (a retry); a different one is a conflict (409). A result for a trial that the
  server already ended (target reached, early stop, max epochs) returns the stored outcome with
  ``recorded = False``: the bandit already used it.
* **Epochs** of a finished trial, for the bandit's epochs-to-target model, are the last epoch
  reported; a trial reported without epoch reports counts its epochs as not known.
* **Expiry**: a running trial with no contact for ``trial_timeout_s`` becomes ``expired``
  (reason ``timeout``); one whose client sends heartbeats (it asked for the trial with
  ``heartbeat``, or sent one) expires sooner, after ``heartbeat_timeout_s`` without a report or
  heartbeat (reason ``heartbeat_timeout``). An expired trial leaves the pending set and does not
  feed the bandit (a crashed client says nothing about its batch size), but keeps everything it
  reported. If its client reports (or sends a heartbeat) later, the trial is revived and the
  report counts. Expiry runs at the start of every call on the job, and over all jobs in
  :meth:`BatchSizeService.expire_stale_trials` (the server calls it periodically).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Callable

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.batch_size._api_models import (
    BudgetOut,
    EpochDecision,
    EpochReport,
    JobState,
    StopReason,
    TrialAssignment,
    TrialDetail,
    TrialOut,
    TrialResult,
    TrialStatus,
)
from zeus_core.optimizer.batch_size._bandit import BatchSizeBandit
from zeus_core.optimizer.batch_size._db import Database, EpochRow, JobRow, TrialRow
from zeus_core.optimizer.batch_size._history import (
    JOB_ID_RULE,
    BanditCache,
    expire_stale,
    job_id_problem,
    off_loop,
)
from zeus_core.optimizer.batch_size._limits import MAX_TRIALS_PER_JOB
from zeus_core.optimizer.batch_size._records import (
    ENDED,
    ConflictError,
    InvalidReportError,
    JobNotFoundError,
    TrialNotFoundError,
    budget_out,
    check_progress,
    check_progress_values,
    check_same_epoch,
    decision,
    finite_cost,
    reached,
    spec_of,
    trial_out,
)
from zeus_core.optimizer.batch_size._spec import JobSpec

__all__ = [
    "DEFAULT_TRIAL_TIMEOUT_S",
    "DEFAULT_HEARTBEAT_TIMEOUT_S",
    "JobNotFoundError",
    "TrialNotFoundError",
    "ConflictError",
    "InvalidReportError",
    "BatchSizeService",
]

logger = logging.getLogger(__name__)

DEFAULT_TRIAL_TIMEOUT_S = 6 * 3600.0
"""Default time without contact after which a running trial expires, s."""

DEFAULT_HEARTBEAT_TIMEOUT_S = 180.0
"""Default time without a report or heartbeat after which a running trial whose client sends
heartbeats expires, s. The suite's client sends one every third of it."""

RESERVED_JOB_IDS = frozenset({"batch_size"})
"""Job ids that a route would shadow (``GET /jobs/batch_size`` is Zeus 0.16's "next batch size")."""


class BatchSizeService:
    """The service's operations on a :class:`Database`.

    Args:
        db: The database (schema already initialised).
        trial_timeout_s: Time without contact after which a running trial expires, s (> 0).
        heartbeat_timeout_s: Time without a report or heartbeat after which a running trial
            whose client sends heartbeats expires, s (> 0).
        clock: Returns the current time in s since the epoch (tests inject a fake one).
        max_trials_per_job: Most trials of one job (>= 1); starting one more is a conflict (409).

    Example:
        >>> import asyncio, os, tempfile
        >>> async def demo():
        ...     db = Database(os.path.join(tempfile.mkdtemp(), "bso.sqlite3"))
        ...     await db.init_schema()
        ...     svc = BatchSizeService(db)
        ...     await svc.register(JobSpec("j", (32, 64), 64, target_metric=0.9, max_power_w=300.0))
        ...     trial, _ = await svc.new_trial("j")
        ...     await db.dispose()
        ...     return trial.trial_number, trial.batch_size
        >>> asyncio.run(demo())
        (1, 64)
    """

    def __init__(
        self,
        db: Database,
        *,
        trial_timeout_s: float = DEFAULT_TRIAL_TIMEOUT_S,
        heartbeat_timeout_s: float = DEFAULT_HEARTBEAT_TIMEOUT_S,
        clock: Callable[[], float] = time.time,
        max_trials_per_job: int = MAX_TRIALS_PER_JOB,
    ) -> None:
        if (
            isinstance(max_trials_per_job, bool)
            or not isinstance(max_trials_per_job, int)
            or max_trials_per_job < 1
        ):
            raise ZeusConfigError(
                f"BatchSizeService: max_trials_per_job={max_trials_per_job!r} must be an integer >= 1."
            )
        for name, value in (
            ("trial_timeout_s", trial_timeout_s),
            ("heartbeat_timeout_s", heartbeat_timeout_s),
        ):
            if not isinstance(value, (int, float)) or not value > 0 or value == float("inf"):
                raise ZeusConfigError(f"BatchSizeService: {name}={value!r} must be a finite number > 0 s.")
        self.db = db
        self.trial_timeout_s = float(trial_timeout_s)
        self.heartbeat_timeout_s = float(heartbeat_timeout_s)
        self.max_trials_per_job = max_trials_per_job
        self._clock = clock
        self.bandits = BanditCache()

    # ----------------------------------------------------------------- jobs
    async def register(self, spec: JobSpec) -> bool:
        """Register a job; idempotent for an identical spec.

        Returns:
            ``True`` when the job was created, ``False`` when the same spec was already there.

        Raises:
            ConflictError: The job id is registered with a different spec (names the fields).
            InvalidReportError: The job id holds a character that cannot appear in a URL path.
        """
        problem = job_id_problem(spec.job_id)
        if problem is not None:
            raise InvalidReportError(
                "job_id", f"job_id={spec.job_id[:300]!r}: {problem}; a job id is {JOB_ID_RULE}."
            )
        if spec.job_id in RESERVED_JOB_IDS:
            raise InvalidReportError(
                "job_id",
                f"job_id={spec.job_id!r} is reserved (a route of the Zeus 0.16 API); choose another.",
            )
        try:
            return await self._register_once(spec)
        except IntegrityError:  # the same job id was inserted concurrently: compare with that one
            return await self._register_once(spec)

    async def _register_once(self, spec: JobSpec) -> bool:
        async with self.db.transaction() as session:
            job = await session.get(JobRow, spec.job_id, with_for_update=True)
            if job is None:
                session.add(
                    JobRow(
                        job_id=spec.job_id,
                        spec_json=json.dumps(spec.to_dict()),
                        created_at=self._clock(),
                        next_trial_number=1,
                        next_completion=0,
                    )
                )
                await session.flush()
                logger.info("Registered job %s (batch sizes %s)", spec.job_id, list(spec.batch_sizes))
                return True
            stored = json.loads(job.spec_json)
            wanted = spec.to_dict()
            diff = [k for k in wanted if stored.get(k) != wanted[k]]
            if diff:
                parts = ", ".join(
                    f"{k} (registered {stored.get(k)!r}, requested {wanted[k]!r})" for k in diff
                )
                raise ConflictError(
                    f"job {spec.job_id!r} is already registered with a different spec: {parts}. "
                    f"Use another job_id, or DELETE /jobs/{spec.job_id} first (this drops its history).",
                    diff,
                )
            return False

    async def delete_job(self, job_id: str) -> None:
        """Delete a job with all its trials and epoch reports."""
        async with self.db.transaction() as session:
            job = await self._lock_job(session, job_id)
            await session.delete(job)
        self.bandits.drop(job_id)
        logger.info("Deleted job %s", job_id)

    async def job_state(self, job_id: str) -> JobState:
        """The job's spec, every trial in trial-number order, counts per status, and the bandit summary."""
        async with self.db.transaction() as session:
            job = await self._lock_job(session, job_id)
            await self._expire_stale(session, job_id)
            trials = list(
                (
                    await session.scalars(
                        select(TrialRow).where(TrialRow.job_id == job_id).order_by(TrialRow.trial_number)
                    )
                )
            )
            spec = spec_of(job)
            bandit, entry = await self.bandits.bandit(session, job, spec)
            summary, budget = await off_loop(lambda: (bandit.summary(), budget_out(bandit)))
            counts = {s.value: 0 for s in TrialStatus}
            for t in trials:
                counts[t.status] += 1
            state = JobState(
                job_id=job_id,
                spec=spec.to_dict(),
                created_at=job.created_at,
                trials=[trial_out(t) for t in trials],
                counts=counts,
                bandit=summary,
                budget=budget,
            )
        self.bandits.put(job_id, entry)
        return state

    async def job_budget(self, job_id: str) -> BudgetOut:
        """The job's cumulative cost against its default's, and the exploration budget left (J)."""
        async with self.db.transaction() as session:
            job = await self._lock_job(session, job_id)
            await self._expire_stale(session, job_id)
            bandit, entry = await self.bandits.bandit(session, job, spec_of(job))
            budget = await off_loop(budget_out, bandit)
        self.bandits.put(job_id, entry)
        return budget

    # --------------------------------------------------------------- trials
    async def new_trial(
        self, job_id: str, request_id: str | None = None, *, heartbeat: bool = False
    ) -> tuple[TrialAssignment, bool]:
        """Start a trial: assign the next trial number and the bandit's batch size, atomically.

        Args:
            job_id: A registered job.
            request_id: Client-chosen id; a repeated id returns the trial it started.
            heartbeat: The client will send heartbeats (the heartbeat timeout applies).

        Returns:
            The trial, and whether it was started by this call (``False`` for a repeated request id).

        Raises:
            ConflictError: The job has ``max_trials_per_job`` trials already.
        """
        async with self.db.transaction() as session:
            job = await self._lock_job(session, job_id)
            await self._expire_stale(session, job_id)
            spec = spec_of(job)
            bandit, entry = await self.bandits.bandit(session, job, spec)
            started = await self._start_trial(session, job, bandit, request_id, heartbeat)
        self.bandits.put(job_id, entry)
        return started

    async def _start_trial(
        self,
        session: AsyncSession,
        job: JobRow,
        bandit: BatchSizeBandit,
        request_id: str | None,
        heartbeat: bool,
    ) -> tuple[TrialAssignment, bool]:
        job_id = job.job_id
        if request_id is not None:
            t = await session.scalar(
                select(TrialRow).where(TrialRow.job_id == job_id, TrialRow.request_id == request_id)
            )
            if t is not None:
                return await off_loop(self._assignment, job_id, t.trial_number, t.batch_size, bandit), False
        number = job.next_trial_number
        if number > self.max_trials_per_job:
            raise ConflictError(
                f"job {job_id!r} has {number - 1} trials, this server's most per job "
                f"(--max-trials-per-job {self.max_trials_per_job}); register the job under a new job_id "
                f"(its history starts afresh), or DELETE /jobs/{job_id} first.",
                ["job_id"],
            )
        pending = list(
            await session.scalars(
                select(TrialRow.batch_size).where(
                    TrialRow.job_id == job_id, TrialRow.status == TrialStatus.RUNNING.value
                )
            )
        )
        batch_size = await off_loop(bandit.next_batch_size, number, pending)
        job.next_trial_number = number + 1
        now = self._clock()
        session.add(
            TrialRow(
                job_id=job_id,
                trial_number=number,
                request_id=request_id,
                batch_size=batch_size,
                status=TrialStatus.RUNNING.value,
                created_at=now,
                last_seen_at=now,
                epochs=0,
                heartbeat=heartbeat,
            )
        )
        budget = await off_loop(bandit.budget)
        logger.info(
            "%s trial %d: batch size %d (%s; %d pending); cost so far %.1f J, default's %.1f J, "
            "budget left %.1f J",
            job_id,
            number,
            batch_size,
            bandit.phase.value,
            len(pending),
            budget.cost_j,
            budget.default_cost_j,
            budget.remaining_j,
        )
        return await off_loop(self._assignment, job_id, number, batch_size, bandit), True

    def _assignment(
        self, job_id: str, number: int, batch_size: int, bandit: BatchSizeBandit
    ) -> TrialAssignment:
        return TrialAssignment(
            job_id=job_id,
            trial_number=number,
            batch_size=batch_size,
            phase=bandit.phase.value,
            heartbeat_timeout_s=self.heartbeat_timeout_s,
            budget=budget_out(bandit),
        )

    async def heartbeat(self, job_id: str, trial_number: int) -> TrialOut:
        """The trial's client is alive: refresh its contact time (reviving it if it had expired).

        From now on the heartbeat timeout applies to the trial. An ended trial is left as is; its
        status tells the client to stop sending heartbeats.
        """
        async with self.db.transaction() as session:
            await self._lock_job(session, job_id)
            await self._expire_stale(session, job_id)
            trial = await self._trial(session, job_id, trial_number)
            if trial.status not in ENDED:
                self._revive(trial)
                trial.last_seen_at = self._clock()
                trial.heartbeat = True
            return trial_out(trial)

    async def expire_stale_trials(self) -> int:
        """Expire the stale running trials of every job (see the module rules); returns how many."""
        async with self.db.transaction() as session:
            return await self._expire_stale(session, None)

    async def get_trial(self, job_id: str, trial_number: int) -> TrialDetail:
        """One trial as stored, with its epoch reports."""
        async with self.db.transaction() as session:
            await self._lock_job(session, job_id)
            await self._expire_stale(session, job_id)
            trial = await self._trial(session, job_id, trial_number)
            await session.refresh(trial, ["epoch_reports"])
            return TrialDetail.model_validate(trial)

    async def report_epoch(self, job_id: str, trial_number: int, report: EpochReport) -> EpochDecision:
        """Record a trial's progress and decide whether it must stop (see the module rules)."""
        async with self.db.transaction() as session:
            job = await self._lock_job(session, job_id)
            await self._expire_stale(session, job_id)
            spec = spec_of(job)
            trial = await self._trial(session, job_id, trial_number)
            cost = finite_cost(spec, report.time_s, report.energy_j)
            previous = list(
                await session.scalars(
                    select(EpochRow).where(EpochRow.trial_id == trial.id).order_by(EpochRow.epoch)
                )
            )
            same = next((e for e in previous if e.epoch == report.epoch), None)
            if same is not None:
                if check_same_epoch(same, report, spec.reporters):
                    same.reports = (same.reports or 1) + 1  # another rank's view: the first report decides
                return decision(
                    job_id, trial, same.epoch, same.stop, StopReason(same.reason), same.cost, None
                )
            if trial.status in ENDED:
                return decision(job_id, trial, report.epoch, True, StopReason.TRIAL_ENDED, cost, None)
            last = previous[-1] if previous else None
            if last is not None:
                check_progress(last, report)
            self._revive(trial)
            bandit, entry = await self.bandits.bandit(session, job, spec)
            threshold = await off_loop(bandit.early_stop_threshold)
            last_epoch, last_cost = (last.epoch, last.cost) if last is not None else (0, 0.0)
            per_epoch = (cost - last_cost) / (report.epoch - last_epoch)
            if reached(spec, report.metric):
                stop, reason = True, StopReason.TARGET_REACHED
            elif await off_loop(bandit.should_stop, cost, report.epoch, per_epoch):
                stop = True
                reason = StopReason.MAX_EPOCHS if report.epoch >= spec.max_epochs else StopReason.EARLY_STOP
            else:
                stop, reason = False, StopReason.CONTINUE
            now = self._clock()
            trial.epochs = report.epoch
            trial.last_seen_at = now
            trial.time_s, trial.energy_j, trial.metric, trial.cost = (
                report.time_s,
                report.energy_j,
                report.metric,
                cost,
            )
            if stop:
                self._finish(
                    job, trial, converged=reason is StopReason.TARGET_REACHED, reason=reason, now=now
                )
            session.add(
                EpochRow(
                    trial_id=trial.id,
                    epoch=report.epoch,
                    time_s=report.time_s,
                    energy_j=report.energy_j,
                    metric=report.metric,
                    cost=cost,
                    stop=stop,
                    reason=reason.value,
                    created_at=now,
                )
            )
            logger.debug(
                "%s trial %d epoch %d: cost %.1f J -> %s",
                job_id,
                trial_number,
                report.epoch,
                cost,
                reason.value,
            )
            answer = decision(job_id, trial, report.epoch, stop, reason, cost, threshold)
        self.bandits.put(job_id, entry)
        return answer

    async def report_result(self, job_id: str, trial_number: int, result: TrialResult) -> TrialOut:
        """Record a trial's final result (see the module rules for repeats and ended trials)."""
        async with self.db.transaction() as session:
            job = await self._lock_job(session, job_id)
            await self._expire_stale(session, job_id)
            spec = spec_of(job)
            trial = await self._trial(session, job_id, trial_number)
            if trial.status in ENDED:
                if trial.end_reason != StopReason.REPORTED.value:
                    logger.info(
                        "%s trial %d was already ended by the server (%s); keeping the stored result",
                        job_id,
                        trial_number,
                        trial.end_reason,
                    )
                    return trial_out(trial, recorded=False)
                stored = {
                    "time_s": trial.time_s,
                    "energy_j": trial.energy_j,
                    "metric": trial.metric,
                    "converged": trial.converged,
                }
                diff = [k for k, v in result.model_dump().items() if stored[k] != v]
                if diff:
                    parts = ", ".join(
                        f"{k} (stored {stored[k]!r}, sent {getattr(result, k)!r})" for k in diff
                    )
                    raise ConflictError(
                        f"trial {trial_number} of job {job_id!r} already has a result that differs "
                        f"in {parts}; "
                        "a trial's result is recorded once. Start a new trial for a new run.",
                        diff,
                    )
                return trial_out(trial)
            if trial.time_s is not None and trial.energy_j is not None:
                check_progress_values(
                    trial.time_s, trial.energy_j, trial.epochs, result.time_s, result.energy_j
                )
            self._revive(trial)
            now = self._clock()
            trial.time_s, trial.energy_j, trial.metric = result.time_s, result.energy_j, result.metric
            trial.cost = finite_cost(spec, result.time_s, result.energy_j)
            trial.last_seen_at = now
            self._finish(job, trial, converged=result.converged, reason=StopReason.REPORTED, now=now)
            logger.info(
                "%s trial %d (batch size %d): %s, cost %.1f J",
                job_id,
                trial_number,
                trial.batch_size,
                trial.status,
                trial.cost,
            )
            return trial_out(trial)

    async def abandon(self, job_id: str, trial_number: int) -> TrialOut:
        """Mark a running trial ``expired`` now (its client gave up); an ended trial is left as is."""
        async with self.db.transaction() as session:
            await self._lock_job(session, job_id)
            trial = await self._trial(session, job_id, trial_number)
            if trial.status == TrialStatus.RUNNING.value:
                trial.status, trial.end_reason = TrialStatus.EXPIRED.value, StopReason.ABANDONED.value
                trial.last_seen_at = self._clock()
                logger.info("%s trial %d abandoned by its client", job_id, trial_number)
            return trial_out(trial)

    # -------------------------------------------------------------- helpers
    async def _lock_job(self, session: AsyncSession, job_id: str) -> JobRow:
        if job_id_problem(job_id) is not None:  # never registered; and never sent to the database
            raise JobNotFoundError(f"job {job_id[:300]!r} is not registered: a job id is {JOB_ID_RULE}.")
        job = await session.get(JobRow, job_id, with_for_update=True)
        if job is None:
            raise JobNotFoundError(f"job {job_id!r} is not registered; POST its spec to /jobs first.")
        return job

    async def _trial(self, session: AsyncSession, job_id: str, trial_number: int) -> TrialRow:
        trial = await session.scalar(
            select(TrialRow).where(TrialRow.job_id == job_id, TrialRow.trial_number == trial_number)
        )
        if trial is None:
            count = await session.scalar(
                select(func.count()).select_from(TrialRow).where(TrialRow.job_id == job_id)
            )
            raise TrialNotFoundError(
                f"job {job_id!r} has no trial {trial_number} ({count} trials so far); "
                f"start one with POST /jobs/{job_id}/trials."
            )
        return trial

    async def _expire_stale(self, session: AsyncSession, job_id: str | None) -> int:
        """Expire stale running trials of ``job_id`` (``None``: of every job); returns how many."""
        return await expire_stale(
            session, job_id, self._clock(), self.heartbeat_timeout_s, self.trial_timeout_s
        )

    @staticmethod
    def _revive(trial: TrialRow) -> None:
        if trial.status == TrialStatus.EXPIRED.value:
            logger.warning(
                "%s trial %d reported after it expired (%s); counting it again",
                trial.job_id,
                trial.trial_number,
                trial.end_reason,
            )
            trial.status, trial.end_reason = TrialStatus.RUNNING.value, None

    @staticmethod
    def _finish(job: JobRow, trial: TrialRow, *, converged: bool, reason: StopReason, now: float) -> None:
        trial.status = TrialStatus.CONVERGED.value if converged else TrialStatus.FAILED.value
        trial.converged = converged
        trial.end_reason = reason.value
        trial.ended_at = now
        trial.completion_order = job.next_completion
        job.next_completion += 1
