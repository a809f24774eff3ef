"""The service's records: stored rows as the bandit and the API read them, and report checks.

A report that contradicts what is stored (the same epoch with other values, a second different
result) is a :class:`ConflictError` (HTTP 409); one that is impossible (time or energy going
backwards, epochs out of order, a cost that overflows) is an :class:`InvalidReportError` (HTTP
422) naming the field. Either way nothing is written.
"""

from __future__ import annotations

import json
import math
from typing import Any, Sequence

from zeus_core._cost import zeus_cost
from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.batch_size._api_models import (
    BudgetOut,
    EpochDecision,
    EpochReport,
    StopReason,
    TrialOut,
    TrialStatus,
)
from zeus_core.optimizer.batch_size._bandit import BatchSizeBandit, Observation
from zeus_core.optimizer.batch_size._db import EpochRow, JobRow, TrialRow
from zeus_core.optimizer.batch_size._limits import clamp_cost, clamp_spec_dict
from zeus_core.optimizer.batch_size._spec import JobSpec

__all__ = [
    "JobNotFoundError",
    "TrialNotFoundError",
    "ConflictError",
    "InvalidReportError",
    "finite_cost",
    "check_same_epoch",
    "check_progress",
    "check_progress_values",
    "ENDED",
    "trial_out",
    "spec_of",
    "reached",
    "budget_out",
    "observations",
    "decision",
]

ENDED = (TrialStatus.CONVERGED.value, TrialStatus.FAILED.value)
"""Statuses of a trial that ended; only these feed the bandit."""


class JobNotFoundError(ZeusConfigError):
    """The job id is not registered (HTTP 404).

    Attributes:
        field: The request field that holds the missing id (``job_id``).
    """

    field = "job_id"


class TrialNotFoundError(ZeusConfigError):
    """The job has no trial with that number (HTTP 404).

    Attributes:
        field: The request field that holds the missing id (``trial_number``).
    """

    field = "trial_number"


class ConflictError(ZeusConfigError):
    """The request contradicts what is stored (HTTP 409); nothing was written.

    Attributes:
        fields: The request fields that conflict (the 409 names each).
    """

    def __init__(self, message: str, fields: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.fields = tuple(fields)


class InvalidReportError(ZeusConfigError):
    """A report's value is impossible given what is stored (HTTP 422); nothing was written.

    Attributes:
        field: The offending field of the request body.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def finite_cost(spec: JobSpec, time_s: float, energy_j: float) -> float:
    """The Zeus cost of a report, J; refuses figures so large that the cost overflows."""
    cost = zeus_cost(energy_j, time_s, spec.eta_knob, spec.max_power_w)
    if not math.isfinite(cost):
        raise InvalidReportError(
            "energy_j",
            f"time_s={time_s!r} s and energy_j={energy_j!r} J give an infinite cost; "
            "report the trial's real cumulative time (s) and energy (J).",
        )
    return cost


def check_same_epoch(stored: EpochRow, report: EpochReport, reporters: int = 1) -> bool:
    """Whether a repeated epoch report is another reporter's view of the epoch (else a plain retry).

    A report with the stored values is a retry (``False``). One with other values is taken as
    another rank's report of the same epoch while fewer than ``reporters`` were taken (``True``:
    the caller counts it); beyond that it is refused (409).
    """
    sent: dict[str, Any] = report.model_dump()
    have = {"time_s": stored.time_s, "energy_j": stored.energy_j, "metric": stored.metric}
    diff = [k for k in have if have[k] != sent[k]]
    if not diff:
        return False
    if (stored.reports or 1) < reporters:
        return True
    parts = ", ".join(f"{k} (stored {have[k]!r}, sent {sent[k]!r})" for k in diff)
    taken = f" by all {reporters} reporters of this job" if reporters > 1 else ""
    raise ConflictError(
        f"epoch {stored.epoch} of this trial was already reported{taken} with different values: {parts}.",
        diff,
    )


def check_progress(last: EpochRow, report: EpochReport) -> None:
    """Refuse an epoch report out of order (409) or going back in time or energy (422)."""
    if report.epoch < last.epoch:
        raise ConflictError(
            f"epoch {report.epoch} arrived after epoch {last.epoch}; report epochs in increasing order.",
            ["epoch"],
        )
    check_progress_values(last.time_s, last.energy_j, last.epoch, report.time_s, report.energy_j)


def check_progress_values(
    time_s: float, energy_j: float, epoch: int, new_time_s: float, new_energy_j: float
) -> None:
    """Refuse cumulative time or energy lower than what was reported at ``epoch`` (422)."""
    for name, old, new, unit in (
        ("time_s", time_s, new_time_s, "s"),
        ("energy_j", energy_j, new_energy_j, "J"),
    ):
        if new < old:
            raise InvalidReportError(
                name,
                f"{name}={new!r} is less than the {old!r} {unit} reported at epoch {epoch}; "
                "time_s and energy_j are cumulative since the trial began.",
            )


def trial_out(trial: TrialRow, *, recorded: bool = True) -> TrialOut:
    """A trial row as the API returns it (``recorded=False``: this request's values were not stored)."""
    out = TrialOut.model_validate(trial)
    return out if recorded else out.model_copy(update={"recorded": False})


def spec_of(job: JobRow) -> JobSpec:
    """The job's spec, from its stored JSON (numbers stored before today's bounds are clamped into them)."""
    data = json.loads(job.spec_json)
    try:
        return JobSpec.from_dict(data)
    except ZeusConfigError:
        return JobSpec.from_dict(clamp_spec_dict(data))


def reached(spec: JobSpec, metric: float | None) -> bool:
    """Whether ``metric`` reached the spec's target (``None``: not evaluated)."""
    if metric is None:
        return False
    return metric >= spec.target_metric if spec.higher_is_better else metric <= spec.target_metric


def budget_out(bandit: BatchSizeBandit) -> BudgetOut:
    """The bandit's exploration budget as the API returns it."""
    return BudgetOut.model_validate(bandit.budget().to_dict())


def observations(trials: Sequence[TrialRow], batch_sizes: Sequence[int] | None = None) -> list[Observation]:
    """The ended trials as the bandit's observations, in completion order.

    Stored costs are made safe (:func:`~zeus_core.optimizer.batch_size._limits.clamp_cost`: rows
    written before the bounds may hold 1e300 J), and trials of a batch size the spec does not
    list (``batch_sizes``, when given) are left out.
    """
    ended = sorted((t for t in trials if t.status in ENDED), key=lambda t: t.completion_order or 0)
    allowed = None if batch_sizes is None else set(batch_sizes)
    # ``epochs`` is the last epoch reported through on_epoch_end (0 when none was).
    return [
        Observation(t.batch_size, clamp_cost(t.cost), bool(t.converged), epochs=max(0, int(t.epochs or 0)))
        for t in ended
        if allowed is None or t.batch_size in allowed
    ]


def decision(
    job_id: str,
    trial: TrialRow,
    epoch: int,
    stop: bool,
    reason: StopReason,
    cost: float,
    threshold: float | None,
) -> EpochDecision:
    """An epoch report's answer."""
    return EpochDecision(
        job_id=job_id,
        trial_number=trial.trial_number,
        epoch=epoch,
        stop=stop,
        reason=reason,
        cost=cost,
        threshold=threshold,
        status=TrialStatus(trial.status),
    )
