"""Zeus 0.16's batch-size optimizer API on the suite's service, so its published client works.

The client ``zeus.optimizer.batch_size.client.BatchSizeOptimizer`` of ``zeus==0.16`` speaks its
own routes and bodies. The server maps each onto the suite's service where the meaning is the
same (time in s, energy and cost in J):

=======  ==========================  ===========================================================
POST     ``/jobs``                   a body with ``job_id_prefix`` is a Zeus job spec (Zeus field
                                     names, plus ``max_power``, ``number_of_gpus``, ``gpu_model``);
                                     ``job_id: null`` makes the server name the job
                                     ``<prefix>-<8 hex>``. Answer: the spec as registered.
GET      ``/jobs/batch_size``        ``?job_id=`` start a trial -> ``{job_id, batch_size, trial_number}``
POST     ``/report``                 a cumulative epoch report -> ``{stop_train, converged, message}``
PATCH    ``/trials``                 the client process ended: a trial still running is abandoned
DELETE   ``/jobs``                   ``?job_id=`` drop the job and its history
=======  ==========================  ===========================================================

Zeus's client sends its JSON without a ``Content-Type`` header, so these routes (and
``POST /jobs``) read a body without one as JSON. It sends no token either: against a server with
a token, give it ``http://zeus:<token>@host:port`` as the server URL (basic auth; the user name is
not checked).

Field mapping: see :mod:`~zeus_core.optimizer.batch_size._zeus_spec` (``number_of_gpus`` becomes
``reporters``: Zeus's data-parallel example reports each epoch from every rank, each with its own
measurement, so up to that many different reports of one epoch are taken, the first deciding for
all; one more is refused with 409, as a second different report of a single-GPU job is).
``mab_num_explorations`` and ``gpu_model`` are accepted and echoed but not used: the suite's
bandit needs no forced explorations (its noise variance is pooled over arms), and ``max_power``
already carries the number of GPUs. Where the suite is stricter it says so with a 422 naming the Zeus
field (``beta_knob`` must be > 1, a prior mean must be > 0). Decisions are the suite's (see
:mod:`~zeus_core.optimizer.batch_size._service`): a trial that reached the target converges, and
exploration keeps within the suite's budget against the default (``slack`` 0; Zeus's spec has no
such field).
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.batch_size import _limits as limits
from zeus_core.optimizer.batch_size._api_models import (
    EpochReport,
    JobSpecModel,
    RegisterResponse,
    StopReason,
    TrialAssignment,
    TrialOut,
    TrialStatus,
)
from zeus_core.optimizer.batch_size._limits import MAX_INT
from zeus_core.optimizer.batch_size._service import (
    BatchSizeService,
    InvalidReportError,
    TrialNotFoundError,
)
from zeus_core.optimizer.batch_size._spec import JobSpec
from zeus_core.optimizer.batch_size._zeus_spec import zeus_job_id, zeus_job_spec

__all__ = [
    "ZeusJobSpec",
    "ZeusRegisteredJob",
    "ZeusTrialId",
    "ZeusTrainingResult",
    "ZeusReportResponse",
    "RegisterBody",
    "is_zeus_body",
    "to_job_spec",
    "register_zeus_job",
    "add_zeus_routes",
]

_STRICT = ConfigDict(extra="forbid", strict=True)


class ZeusJobSpec(BaseModel):
    """Zeus 0.16's ``JobSpecFromClient``: a job spec with Zeus's field names and the GPU set-up."""

    model_config = _STRICT

    job_id: str | None = Field(default=None, min_length=1, max_length=255)
    job_id_prefix: str = Field(min_length=1, max_length=200)
    batch_sizes: list[int] = Field(min_length=1, max_length=limits.MAX_BATCH_SIZES)
    default_batch_size: int = Field(gt=0, le=MAX_INT)
    eta_knob: float = 0.5
    beta_knob: float | None = 2.0
    target_metric: float = 0.5
    higher_is_better_metric: bool = True
    max_epochs: int = Field(default=100, gt=0, le=limits.MAX_EPOCHS)
    num_pruning_rounds: int = Field(default=2, ge=0)
    window_size: int = Field(default=0, ge=0)
    mab_prior_mean: float = 0.0
    mab_prior_precision: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)
    mab_num_explorations: int = Field(default=2, ge=0, le=MAX_INT)
    mab_seed: int | None = Field(default=None, ge=0, le=limits.MAX_SEED)
    max_power: float = Field(gt=0, allow_inf_nan=False, description="max power limit x number of GPUs, W")
    number_of_gpus: int = Field(gt=0, le=limits.MAX_NUMBER_OF_GPUS)
    gpu_model: str = Field(min_length=1, max_length=200)


class ZeusRegisteredJob(ZeusJobSpec):
    """Answer to a Zeus registration: the spec with its job id (Zeus's ``CreatedJob``)."""

    model_config = ConfigDict(extra="forbid")

    job_id: str
    created: bool


class ZeusTrialId(BaseModel):
    """Zeus 0.16's ``TrialId``: names one trial."""

    model_config = _STRICT

    job_id: str
    batch_size: int = Field(ge=1, le=MAX_INT)
    trial_number: int = Field(ge=1, le=MAX_INT)


class ZeusTrainingResult(ZeusTrialId):
    """Zeus 0.16's ``TrainingResult``: cumulative time (s) and energy (J) after ``current_epoch`` epochs."""

    time: float = Field(ge=0.0, le=limits.MAX_TIME_S, allow_inf_nan=False, description=limits.explain("time"))
    energy: float = Field(
        ge=0.0, le=limits.MAX_ENERGY_J, allow_inf_nan=False, description=limits.explain("energy")
    )
    metric: float = Field(ge=-limits.MAX_METRIC, le=limits.MAX_METRIC, allow_inf_nan=False)
    current_epoch: int = Field(ge=1, le=limits.MAX_EPOCHS)


class ZeusReportResponse(BaseModel):
    """Zeus 0.16's ``ReportResponse``: stop or go on, and whether the trial converged."""

    stop_train: bool
    converged: bool
    message: str


def is_zeus_body(body: Any) -> bool:
    """Whether a ``POST /jobs`` body is a Zeus 0.16 job spec (it has ``job_id_prefix``)."""
    return isinstance(body, dict) and "job_id_prefix" in body


RegisterBody = Annotated[
    Union[Annotated[JobSpecModel, Tag("suite")], Annotated[ZeusJobSpec, Tag("zeus")]],  # type: ignore[valid-type]
    Discriminator(lambda body: "zeus" if is_zeus_body(body) or isinstance(body, ZeusJobSpec) else "suite"),
]
"""Body of ``POST /jobs``: the suite's job spec, or Zeus 0.16's."""


def to_job_spec(zeus: ZeusJobSpec, job_id: str) -> JobSpec:
    """The suite's :class:`JobSpec` with the meaning of a Zeus job spec (see the module docstring).

    Raises:
        InvalidReportError: A value the suite refuses; names the Zeus field.
    """
    fields = zeus.model_dump()
    fields.pop("job_id")
    try:
        return zeus_job_spec(job_id, **fields)
    except ZeusConfigError as err:
        raise InvalidReportError(getattr(err, "zeus_field", "job_id"), str(err)) from err


async def register_zeus_job(service: BatchSizeService, zeus: ZeusJobSpec) -> ZeusRegisteredJob:
    """Register a Zeus job spec; a missing ``job_id`` becomes ``<job_id_prefix>-<8 hex>``.

    Raises:
        InvalidReportError: ``job_id`` does not start with ``job_id_prefix``, or a refused value.
        ConflictError: The job id is registered with a different spec.
    """
    try:
        job_id = zeus_job_id(zeus.job_id, zeus.job_id_prefix)
    except ZeusConfigError as err:
        raise InvalidReportError("job_id", str(err)) from err
    spec = to_job_spec(zeus, job_id)
    created = await service.register(spec)
    echoed = zeus.model_dump() | {"job_id": job_id, "batch_sizes": list(spec.batch_sizes)}
    return ZeusRegisteredJob(**echoed, created=created)


async def register_any(
    service: BatchSizeService, body: Any, response: Response
) -> RegisterResponse | ZeusRegisteredJob:
    """``POST /jobs`` for both bodies: 201 when created, 200 when the identical spec was there."""
    if isinstance(body, ZeusJobSpec):
        zeus = await register_zeus_job(service, body)
        response.status_code = 201 if zeus.created else 200
        return zeus
    spec = JobSpec.from_dict(body.model_dump())
    created = await service.register(spec)
    response.status_code = 201 if created else 200
    return RegisterResponse(job_id=spec.job_id, created=created, spec=spec.to_dict())


def _message(decision_reason: StopReason, trial_number: int, cost: float, threshold: float | None) -> str:
    if decision_reason is StopReason.CONTINUE:
        return "Stop condition not met, keep training"
    if decision_reason is StopReason.TARGET_REACHED:
        return "Train succeeded"
    if decision_reason is StopReason.EARLY_STOP:
        limit = threshold or 0.0
        return f"Cost {cost:.1f} J exceeded the early-stop threshold {limit:.1f} J (beta_knob x best cost)."
    if decision_reason is StopReason.MAX_EPOCHS:
        return "Train failed to converge within max_epochs."
    return f"Result for this trial ({trial_number}) is already reported."


async def _check_batch_size(service: BatchSizeService, trial: ZeusTrialId) -> None:
    stored = await service.get_trial(trial.job_id, trial.trial_number)
    if stored.batch_size != trial.batch_size:
        raise TrialNotFoundError(
            f"job {trial.job_id!r} has no trial {trial.trial_number} with batch size {trial.batch_size} "
            f"(that trial runs batch size {stored.batch_size})."
        )


def add_zeus_routes(router: APIRouter, service: BatchSizeService) -> None:
    """Add Zeus 0.16's trial routes to ``router`` (before the suite's ``/jobs/{job_id}`` routes)."""

    @router.get("/jobs/batch_size", response_model=TrialAssignment, tags=["zeus-0.16"])
    async def zeus_next_batch_size(job_id: str = Query(min_length=1)) -> TrialAssignment:
        trial, _ = await service.new_trial(job_id)
        return trial

    @router.post("/report", response_model=ZeusReportResponse, tags=["zeus-0.16"])
    async def zeus_report(result: ZeusTrainingResult) -> ZeusReportResponse:
        await _check_batch_size(service, result)
        report = EpochReport(
            epoch=result.current_epoch, time_s=result.time, energy_j=result.energy, metric=result.metric
        )
        decision = await service.report_epoch(result.job_id, result.trial_number, report)
        return ZeusReportResponse(
            stop_train=decision.stop,
            converged=decision.stop and decision.status is TrialStatus.CONVERGED,
            message=_message(decision.reason, result.trial_number, decision.cost, decision.threshold),
        )

    @router.patch("/trials", response_model=TrialOut, tags=["zeus-0.16"])
    async def zeus_end_trial(trial: ZeusTrialId) -> TrialOut:
        await _check_batch_size(service, trial)
        return await service.abandon(trial.job_id, trial.trial_number)

    @router.delete("/jobs", status_code=204, tags=["zeus-0.16"])
    async def zeus_delete_job(job_id: str = Query(min_length=1)) -> Response:
        await service.delete_job(job_id)
        return Response(status_code=204)
