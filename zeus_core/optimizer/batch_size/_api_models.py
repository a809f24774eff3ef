"""Request and response bodies of the batch-size optimizer service (pydantic 2).

The job-spec body is generated from :class:`~zeus_core.optimizer.batch_size._spec.JobSpec`'s fields,
types and defaults, so the API and the dataclass cannot drift apart; unknown fields are rejected.
Units: time in s, energy and cost in J.

Example:
    >>> EpochReport(epoch=1, time_s=12.5, energy_j=3000.0, metric=0.41).epoch
    1
"""

from __future__ import annotations

import dataclasses
import typing
from enum import Enum
from typing import Annotated, Any

try:
    from pydantic import BaseModel, ConfigDict, Field, create_model
except ModuleNotFoundError as _err:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        f"the batch-size optimizer's service needs pydantic ({_err}); pip install 'zeus-suite[server]'"
    ) from _err

from zeus_core.optimizer.batch_size import _limits as limits
from zeus_core.optimizer.batch_size._spec import JobSpec

__all__ = [
    "TrialStatus",
    "StopReason",
    "JobSpecModel",
    "RegisterResponse",
    "TrialRequest",
    "BudgetOut",
    "TrialAssignment",
    "EpochReport",
    "EpochDecision",
    "TrialResult",
    "TrialOut",
    "EpochOut",
    "TrialDetail",
    "JobState",
    "FieldProblem",
    "ErrorResponse",
]

_Seconds = Annotated[
    float,
    Field(ge=0.0, le=limits.MAX_TIME_S, allow_inf_nan=False, description=limits.explain("time_s")),
]
_Joules = Annotated[
    float,
    Field(ge=0.0, le=limits.MAX_ENERGY_J, allow_inf_nan=False, description=limits.explain("energy_j")),
]
_Metric = Annotated[
    float | None,
    Field(
        default=None,
        ge=-limits.MAX_METRIC,
        le=limits.MAX_METRIC,
        allow_inf_nan=False,
        description=limits.explain("metric"),
    ),
]
_REQUEST_ID = r"^[!-~]{1,64}$"
"""A request id: 1 to 64 printable ASCII characters without spaces (a UUID, a hash)."""


class TrialStatus(str, Enum):
    """Lifecycle of a trial. ``running`` -> ``converged`` | ``failed`` | ``expired``.

    ``expired`` (no contact for the trial timeout, no heartbeat for the heartbeat timeout, or
    abandoned) returns to ``running`` if its client reports again; only ``converged`` and
    ``failed`` trials feed the bandit.
    """

    RUNNING = "running"
    CONVERGED = "converged"
    FAILED = "failed"
    EXPIRED = "expired"


class StopReason(str, Enum):
    """Why an epoch report says to stop (``continue`` when it does not), or how a trial ended."""

    CONTINUE = "continue"
    TARGET_REACHED = "target_reached"
    EARLY_STOP = "early_stop"
    MAX_EPOCHS = "max_epochs"
    TRIAL_ENDED = "trial_ended"
    REPORTED = "reported"
    TIMEOUT = "timeout"
    HEARTBEAT_TIMEOUT = "heartbeat_timeout"
    ABANDONED = "abandoned"


_STRICT = ConfigDict(extra="forbid", strict=True)
"""Request bodies: unknown fields are refused, and JSON types are not coerced (``true`` is not 1,
``"yes"`` is not a boolean, ``"1.5"`` is not a number; an integer is a valid number)."""


def _job_spec_model() -> type[BaseModel]:
    hints = typing.get_type_hints(JobSpec)
    field_defs: dict[str, Any] = {}
    for f in dataclasses.fields(JobSpec):
        default = ... if f.default is dataclasses.MISSING else f.default
        hint = hints[f.name]
        if f.name == "batch_sizes":  # JSON has arrays, not tuples; a huge list is refused before it is read
            hint = Annotated[list[int], Field(max_length=limits.MAX_BATCH_SIZES)]
        elif f.name == "job_id":
            hint = Annotated[str, Field(min_length=1, max_length=255)]
        field_defs[f.name] = (hint, default)
    return create_model(
        "JobSpecModel",
        __config__=_STRICT,
        __doc__="A job spec (see JobSpec for every field's meaning, unit and default).",
        **field_defs,
    )


JobSpecModel: type[BaseModel] = _job_spec_model()
"""Request body of ``POST /jobs``: exactly :class:`JobSpec`'s fields (required ones without default)."""


class RegisterResponse(BaseModel):
    """Answer to ``POST /jobs``: ``created`` is False when an identical spec was already registered."""

    job_id: str
    created: bool
    spec: dict[str, Any]


class TrialRequest(BaseModel):
    """Optional body of ``POST /jobs/{job_id}/trials``.

    ``request_id`` makes the call idempotent: asking again with the same id returns the same
    trial instead of starting another (the client sends one per trial, so retries are safe).
    ``heartbeat`` says the client will send heartbeats while the trial runs, so the server may
    expire the trial after the (short) heartbeat timeout instead of the (long) trial timeout.
    """

    model_config = _STRICT

    request_id: str | None = Field(default=None, min_length=1, max_length=64, pattern=_REQUEST_ID)
    heartbeat: bool = Field(default=False, description="the client sends heartbeats during the trial")


class BudgetOut(BaseModel):
    """A job's cumulative cost against its default's, and the exploration budget left (J).

    The default is the default batch size as the job ran before: measured on the recurrences it
    completed, estimated (``default_recurrence_cost_j`` each) on the others. See
    docs/optimizers/batch-size.md.

    Attributes:
        cost_j: Cumulative Zeus cost of the job's finished trials, J (``None`` only if the sum
            overflowed, as for every total here).
        default_cost_j: The default's cumulative cost over the same recurrences, J.
        measured_recurrences: Recurrences whose default cost was measured.
        estimated_recurrences: Recurrences whose default cost was estimated.
        default_recurrence_cost_j: The default's cost of one recurrence, J (``None``: not measured yet).
        slack: The job's ``slack`` (``None``: no budget).
        uncharged_j: Part of ``cost_j`` the budget leaves out (the default batch size's one-time
            overhead), J.
        remaining_j: ``(1 + slack) × default_cost_j − (cost_j − uncharged_j)``, J: what exploration
            may still cost (negative: over budget, exploring waits); ``None`` without a budget.
    """

    cost_j: float | None
    default_cost_j: float | None
    measured_recurrences: int
    estimated_recurrences: int
    default_recurrence_cost_j: float | None
    slack: float | None
    uncharged_j: float | None
    remaining_j: float | None


class TrialAssignment(BaseModel):
    """A trial handed to a client: run the job once with ``batch_size``.

    Attributes:
        heartbeat_timeout_s: A trial started with ``heartbeat`` expires after this long without
            any report or heartbeat, s; send heartbeats well within it (the client: every third).
        budget: The job's cost against its default's when the trial was handed out.
    """

    job_id: str
    trial_number: int
    batch_size: int
    phase: str
    heartbeat_timeout_s: float
    budget: BudgetOut | None = None


class EpochReport(BaseModel):
    """Body of ``POST /jobs/{job_id}/trials/{n}/epochs``: progress after ``epoch`` epochs."""

    model_config = _STRICT

    epoch: int = Field(ge=1, le=limits.MAX_EPOCHS, description="epochs completed (1 after the first epoch)")
    time_s: _Seconds
    energy_j: _Joules
    metric: _Metric = None


class EpochDecision(BaseModel):
    """Whether the trial must stop after this epoch, and why.

    Attributes:
        cost: Zeus cost of the trial so far, J.
        threshold: Early-stop threshold (``beta_knob`` × best converged cost), J, if any.
    """

    job_id: str
    trial_number: int
    epoch: int
    stop: bool
    reason: StopReason
    cost: float
    threshold: float | None
    status: TrialStatus


class TrialResult(BaseModel):
    """Body of ``POST /jobs/{job_id}/trials/{n}/result``: the finished trial's totals."""

    model_config = _STRICT

    time_s: _Seconds
    energy_j: _Joules
    metric: _Metric = None
    converged: bool


class TrialOut(BaseModel):
    """One trial as stored (times since the epoch in s, energy and cost in J)."""

    model_config = ConfigDict(from_attributes=True)

    job_id: str
    trial_number: int
    batch_size: int
    status: TrialStatus
    end_reason: StopReason | None
    completion_order: int | None
    epochs: int
    time_s: float | None
    energy_j: float | None
    metric: float | None
    cost: float | None
    converged: bool | None
    created_at: float
    last_seen_at: float
    ended_at: float | None
    heartbeat: bool = Field(default=False, description="the client sends heartbeats")
    recorded: bool = Field(
        default=True, description="False when this request's values were not stored (the trial had ended)"
    )


class EpochOut(BaseModel):
    """One stored epoch report (cumulative time in s, energy and cost in J) and its decision."""

    model_config = ConfigDict(from_attributes=True)

    epoch: int
    time_s: float
    energy_j: float
    metric: float | None
    cost: float
    stop: bool
    reason: StopReason
    created_at: float


class TrialDetail(TrialOut):
    """Answer to ``GET /jobs/{job_id}/trials/{n}``: the trial and its epoch reports in order."""

    epoch_reports: list[EpochOut]


class JobState(BaseModel):
    """Answer to ``GET /jobs/{job_id}``: the spec, every trial, the bandit's state and the budget."""

    job_id: str
    spec: dict[str, Any]
    created_at: float
    trials: list[TrialOut]
    counts: dict[str, int]
    bandit: dict[str, Any]
    budget: BudgetOut


class FieldProblem(BaseModel):
    """One invalid field of a request: where it is and what is wrong."""

    field: str
    problem: str


class ErrorResponse(BaseModel):
    """Body of every 4xx/5xx answer."""

    message: str
    errors: list[FieldProblem] = Field(default_factory=list)
