"""The batch-size optimizer service: a FastAPI app over :class:`BatchSizeService`.

Routes (JSON bodies; time in s, energy and cost in J):

======  ==========================================  ==================================================
POST    ``/jobs``                                   register a job spec: 201 new, 200 identical, 409
                                                    conflicting (the message names the differing fields)
GET     ``/jobs/{job_id}``                          spec, every trial, counts per status, bandit summary
DELETE  ``/jobs/{job_id}``                          drop a job and its history (204)
POST    ``/jobs/{job_id}/trials``                   start a trial -> ``{trial_number, batch_size}`` (201);
                                                    body ``{"request_id": ...}`` (optional) makes it
                                                    idempotent (200 with the same trial on a repeat)
GET     ``/jobs/{job_id}/trials/{n}``               one trial with its epoch reports
POST    ``/jobs/{job_id}/trials/{n}/epochs``        ``{epoch, time_s, energy_j, metric}`` (cumulative)
                                                    -> ``{stop, reason, cost, threshold}``
POST    ``/jobs/{job_id}/trials/{n}/result``        ``{time_s, energy_j, metric, converged}`` -> the trial
POST    ``/jobs/{job_id}/trials/{n}/abandon``       the client gives up; the trial expires now
GET     ``/health``                                 liveness and schema version (no token needed)
======  ==========================================  ==================================================

Errors are ``{"message": ..., "errors": [{"field", "problem"}]}``: 401 without the token (when one
is set), 404 unknown job or trial, 409 conflict with stored data, 422 invalid request (the
message names each field and its problem). Nothing is written for any of them.

Example:
    >>> import os, tempfile
    >>> app = create_app(os.path.join(tempfile.mkdtemp(), "bso.sqlite3"), token="s3cret")
    >>> app.title
    'Zeus Suite batch-size optimizer'

    Serve it with ``uvicorn.run(app, host="127.0.0.1", port=8000)`` or ``zeus-suite bso-server``.
"""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
import time
from pathlib import Path
from typing import Any, AsyncIterator, Callable

try:
    from fastapi import APIRouter, Body, Depends, FastAPI, Header, Request, Response
    from fastapi import Path as PathParam
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException
except ModuleNotFoundError as _err:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        f"zeus_core.optimizer.batch_size.server needs FastAPI ({_err}); pip install 'zeus-suite[server]'"
    ) from _err

from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.batch_size.api_models import (
    EpochDecision,
    EpochReport,
    ErrorResponse,
    FieldProblem,
    JobSpecModel,
    JobState,
    RegisterResponse,
    TrialAssignment,
    TrialDetail,
    TrialOut,
    TrialRequest,
    TrialResult,
)
from zeus_core.optimizer.batch_size.db import Database
from zeus_core.optimizer.batch_size.service import (
    DEFAULT_TRIAL_TIMEOUT_S,
    BatchSizeService,
    ConflictError,
    InvalidReportError,
    JobNotFoundError,
    TrialNotFoundError,
)
from zeus_core.optimizer.batch_size.spec import JobSpec

__all__ = ["create_app"]

logger = logging.getLogger(__name__)

_SPEC_FIELD = re.compile(r"^JobSpec: (\w+)=")
_TRIAL = PathParam(ge=1, description="trial number (starts at 1)")


def _problem_from_validation(error: dict[str, Any]) -> FieldProblem:
    loc = list(error.get("loc", ()))
    where = loc[0] if loc and loc[0] in ("body", "path", "query", "header") else "body"
    rest = loc[1:] if loc and loc[0] == where else loc
    if error.get("type") == "json_invalid":
        detail = (error.get("ctx") or {}).get("error", "")
        return FieldProblem(
            field="body", problem=f"not valid JSON ({detail})" if detail else "not valid JSON"
        )
    field = ""
    for part in rest:
        field += f"[{part}]" if isinstance(part, int) else (f".{part}" if field else str(part))
    if not field:
        field = where
    elif where != "body":
        field = f"{field} ({where})"
    problem = str(error.get("msg", "invalid"))
    if error.get("type") == "extra_forbidden":
        problem = "unknown field (not part of this request's schema)"
    elif error.get("type") == "missing":
        problem = "required but missing"
    return FieldProblem(field=field, problem=problem)


def _error(
    status: int, message: str, errors: list[FieldProblem] | None = None, **kwargs: Any
) -> JSONResponse:
    body = ErrorResponse(message=message, errors=errors or [])
    return JSONResponse(status_code=status, content=body.model_dump(), **kwargs)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _on_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [_problem_from_validation(e) for e in exc.errors()]
        listing = "; ".join(f"{p.field}: {p.problem}" for p in problems)
        return _error(422, f"{request.method} {request.url.path}: invalid request: {listing}", problems)

    @app.exception_handler(ZeusConfigError)
    async def _on_config(request: Request, exc: ZeusConfigError) -> JSONResponse:
        status = 422
        problems: list[FieldProblem] = []
        if isinstance(exc, (JobNotFoundError, TrialNotFoundError)):
            status = 404
        elif isinstance(exc, ConflictError):
            status = 409
        elif isinstance(exc, InvalidReportError):
            problems = [FieldProblem(field=exc.field, problem=str(exc))]
        else:
            match = _SPEC_FIELD.match(str(exc))
            if match:
                problems = [FieldProblem(field=match.group(1), problem=str(exc))]
        return _error(status, f"{request.method} {request.url.path}: {exc}", problems)

    @app.exception_handler(HTTPException)
    async def _on_http(request: Request, exc: HTTPException) -> JSONResponse:
        return _error(
            exc.status_code, f"{request.method} {request.url.path}: {exc.detail}", headers=exc.headers
        )

    @app.exception_handler(Exception)
    async def _on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("%s %s failed", request.method, request.url.path)
        return _error(
            500,
            f"{request.method} {request.url.path}: internal error ({type(exc).__name__}: {exc}); "
            "nothing was written; see the server log.",
        )


def _token_dependency(token: str) -> Callable[..., Any]:
    expected = f"Bearer {token}".encode()

    async def _check(authorization: str | None = Header(default=None)) -> None:
        if authorization is None:
            raise HTTPException(
                401,
                "missing 'Authorization: Bearer <token>' header; this server requires "
                "its token (--token / ZEUS_BSO_TOKEN).",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if not secrets.compare_digest(authorization.encode(), expected):
            raise HTTPException(
                401,
                "the bearer token does not match this server's token.",
                headers={"WWW-Authenticate": "Bearer"},
            )

    return _check


def create_app(
    database: str | Path | Database,
    *,
    token: str | None = None,
    trial_timeout_s: float = DEFAULT_TRIAL_TIMEOUT_S,
    echo_sql: bool = False,
    clock: Callable[[], float] = time.time,
) -> FastAPI:
    """Build the service's FastAPI app; the schema is created or migrated when it starts.

    Args:
        database: A SQLite file path, a database URL (``sqlite:///...``, ``postgresql://...``) or
            a :class:`Database`.
        token: Shared secret; when set, every ``/jobs`` route needs ``Authorization: Bearer <token>``.
        trial_timeout_s: A running trial without contact for this long expires, s.
        echo_sql: Log every SQL statement.
        clock: Current time in s since the epoch (for tests).

    Returns:
        The app; serve it with uvicorn (``zeus-suite bso-server`` does).

    Raises:
        ZeusConfigError: An unsupported database URL, or ``trial_timeout_s <= 0``.
    """
    db = database if isinstance(database, Database) else Database(database, echo_sql=echo_sql)
    service = BatchSizeService(db, trial_timeout_s=trial_timeout_s, clock=clock)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await db.init_schema()
        logger.info(
            "Batch-size optimizer on %s (trial timeout %.0f s, token %s)",
            db.display_url,
            trial_timeout_s,
            "required" if token else "off",
        )
        try:
            yield
        finally:
            await db.dispose()

    from zeus_core import __version__

    app = FastAPI(title="Zeus Suite batch-size optimizer", version=__version__, lifespan=lifespan)
    app.state.service = service
    _install_error_handlers(app)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "schema_version": await db.schema_version(),
            "database": "sqlite" if db.is_sqlite else "postgresql",
        }

    router = APIRouter(
        dependencies=[Depends(_token_dependency(token))] if token else [],
        responses={c: {"model": ErrorResponse} for c in (401, 404, 409, 422)},
    )

    @router.post("/jobs", status_code=201, response_model=RegisterResponse)
    async def register_job(response: Response, body: JobSpecModel = Body()) -> RegisterResponse:  # type: ignore[valid-type]
        spec = JobSpec.from_dict(body.model_dump())
        created = await service.register(spec)
        response.status_code = 201 if created else 200
        return RegisterResponse(job_id=spec.job_id, created=created, spec=spec.to_dict())

    @router.get("/jobs/{job_id}", response_model=JobState)
    async def read_job(job_id: str) -> JobState:
        return await service.job_state(job_id)

    @router.delete("/jobs/{job_id}", status_code=204)
    async def delete_job(job_id: str) -> Response:
        await service.delete_job(job_id)
        return Response(status_code=204)

    @router.post("/jobs/{job_id}/trials", status_code=201, response_model=TrialAssignment)
    async def start_trial(
        job_id: str, response: Response, body: TrialRequest | None = None
    ) -> TrialAssignment:
        trial, started = await service.new_trial(job_id, body.request_id if body is not None else None)
        if not started:
            response.status_code = 200  # a repeated request id: the trial it started earlier
        return trial

    @router.get("/jobs/{job_id}/trials/{trial_number}", response_model=TrialDetail)
    async def read_trial(job_id: str, trial_number: int = _TRIAL) -> TrialDetail:
        return await service.get_trial(job_id, trial_number)

    @router.post("/jobs/{job_id}/trials/{trial_number}/epochs", response_model=EpochDecision)
    async def report_epoch(job_id: str, body: EpochReport, trial_number: int = _TRIAL) -> EpochDecision:
        return await service.report_epoch(job_id, trial_number, body)

    @router.post("/jobs/{job_id}/trials/{trial_number}/result", response_model=TrialOut)
    async def report_result(job_id: str, body: TrialResult, trial_number: int = _TRIAL) -> TrialOut:
        return await service.report_result(job_id, trial_number, body)

    @router.post("/jobs/{job_id}/trials/{trial_number}/abandon", response_model=TrialOut)
    async def abandon_trial(job_id: str, trial_number: int = _TRIAL) -> TrialOut:
        return await service.abandon(job_id, trial_number)

    app.include_router(router)
    return app
