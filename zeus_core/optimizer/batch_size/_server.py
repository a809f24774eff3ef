"""The batch-size optimizer service: a FastAPI app over :class:`BatchSizeService`.

Routes (JSON bodies; time in s, energy and cost in J):

======  ==========================================  ==================================================
POST    ``/jobs``                                   register a job spec: 201 new, 200 identical, 409
                                                    conflicting (the message names the differing fields)
GET     ``/jobs/{job_id}``                          spec, every trial, counts per status, bandit summary,
                                                    budget
GET     ``/jobs/{job_id}/budget``                   cost so far against the default's, budget left
DELETE  ``/jobs/{job_id}``                          drop a job and its history (204)
POST    ``/jobs/{job_id}/trials``                   start a trial -> ``{trial_number, batch_size, budget}``
                                                    (201); body ``{"request_id": ...}`` (optional) makes it
                                                    idempotent (200 with the same trial on a repeat)
GET     ``/jobs/{job_id}/trials/{n}``               one trial with its epoch reports
POST    ``/jobs/{job_id}/trials/{n}/epochs``        ``{epoch, time_s, energy_j, metric}`` (cumulative)
                                                    -> ``{stop, reason, cost, threshold}``
POST    ``/jobs/{job_id}/trials/{n}/result``        ``{time_s, energy_j, metric, converged}`` -> the trial
POST    ``/jobs/{job_id}/trials/{n}/abandon``       the client gives up; the trial expires now
POST    ``/jobs/{job_id}/trials/{n}/heartbeat``     the client is alive (the heartbeat timeout restarts)
GET     ``/health``                                 liveness and schema version (no token needed)
======  ==========================================  ==================================================

Before any route, :mod:`~zeus_core.optimizer.batch_size._gate` checks the Host header (DNS
rebinding), browser origins, the token (every path but ``/health``, the API docs included, before
the body is read), the content type and the body's size and arrival time.

Zeus 0.16's routes are served too (see :mod:`~zeus_core.optimizer.batch_size._zeus_compat`), so
its published client works against this server.

Errors are ``{"message": ..., "errors": [{"field", "problem"}]}``: 400 a body that cannot be
decoded or an unexpected Host, 401 without the token (when one is set; field ``Authorization
(header)``), 403 a request from a web page of another origin, 404 unknown job or trial (``errors``
names ``job_id`` or ``trial_number``), 408 a body that did not arrive in time, 409 conflict with
stored data (``errors`` names each conflicting field), 413 a body above the size limit (refused
before it is parsed), 415 a body that is not JSON, 422 invalid request (the message names each
field, its problem and, for a number out of range, its unit, bound and why; JSON types are not
coerced: ``true`` is not an integer, ``"yes"`` is not a boolean), 500 an internal or database
error (a generic message with a reference; the details are in the server log only). Nothing is
written for any of them. Replies never echo a large body: each problem is clipped and at most 20
are listed.

Example:
    >>> import os, tempfile
    >>> app = create_app(os.path.join(tempfile.mkdtemp(), "bso.sqlite3"), token="0123456789abcdef")
    >>> app.title
    'Zeus Suite batch-size optimizer'

    Serve it with ``uvicorn.run(app, host="127.0.0.1", port=8000)`` or ``zeus-suite bso-server``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets
import time
from pathlib import Path
from typing import Annotated, Any, AsyncIterator, Callable, Collection

try:
    from fastapi import APIRouter, Body, FastAPI, Request, Response
    from fastapi import Path as PathParam
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from fastapi.routing import APIRoute
    from starlette.exceptions import HTTPException
except ModuleNotFoundError as _err:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        f"the batch-size optimizer's service needs FastAPI ({_err}); pip install 'zeus-suite[server]'"
    ) from _err

from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.batch_size._api_models import (
    BudgetOut,
    EpochDecision,
    EpochReport,
    ErrorResponse,
    FieldProblem,
    JobState,
    RegisterResponse,
    TrialAssignment,
    TrialDetail,
    TrialOut,
    TrialRequest,
    TrialResult,
)
from zeus_core.optimizer.batch_size._auth import normalize_token
from zeus_core.optimizer.batch_size._db import Database
from zeus_core.optimizer.batch_size._gate import DEFAULT_BODY_TIMEOUT_S, DEFAULT_MAX_BODY_BYTES, RequestGate
from zeus_core.optimizer.batch_size._limits import MAX_INT, MAX_TRIALS_PER_JOB, explain
from zeus_core.optimizer.batch_size._service import (
    DEFAULT_HEARTBEAT_TIMEOUT_S,
    DEFAULT_TRIAL_TIMEOUT_S,
    BatchSizeService,
    ConflictError,
    InvalidReportError,
    JobNotFoundError,
    TrialNotFoundError,
)
from zeus_core.optimizer.batch_size._zeus_compat import (
    RegisterBody,
    ZeusRegisteredJob,
    add_zeus_routes,
    register_any,
)

__all__ = ["create_app"]

logger = logging.getLogger(__name__)

_SPEC_FIELD = re.compile(r"^JobSpec: (\w+)=")
_TRIAL = PathParam(ge=1, le=MAX_INT, description="trial number (starts at 1)")
_MAX_PROBLEMS = 20  # problems listed in one error reply
_MAX_TEXT = 300  # characters of one field name or problem in an error reply
_BODY_TAGS = ("suite", "zeus")  # union tags of POST /jobs in validation locations


def _clip(text: str, limit: int = _MAX_TEXT) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more characters)"


def _problem_from_validation(error: dict[str, Any]) -> FieldProblem:
    loc = list(error.get("loc", ()))
    where = loc[0] if loc and loc[0] in ("body", "path", "query", "header") else "body"
    rest = loc[1:] if loc and loc[0] == where else loc
    if where == "body" and rest and rest[0] in _BODY_TAGS:
        rest = rest[1:]
    if error.get("type") == "json_invalid":
        detail = (error.get("ctx") or {}).get("error", "")
        return FieldProblem(
            field="body", problem=f"not valid JSON ({detail})" if detail else "not valid JSON"
        )
    return FieldProblem(field=_clip(_field_name(where, rest)), problem=_clip(_problem_text(error, rest)))


def _field_name(where: str, rest: list[Any]) -> str:
    """``batch_sizes[3]``, ``job_id (path)``: the location pydantic gives, as the client wrote it."""
    field = ""
    for part in rest:
        field += f"[{part}]" if isinstance(part, int) else (f".{part}" if field else str(part))
    if not field:
        return where
    return field if where == "body" else f"{field} ({where})"


def _problem_text(error: dict[str, Any], rest: list[Any]) -> str:
    """The message of pydantic, plainer for unknown and missing fields; a bound gets its unit and reason."""
    kind = error.get("type")
    if kind == "extra_forbidden":
        return "unknown field (not part of this request's schema)"
    if kind == "missing":
        return "required but missing"
    problem = str(error.get("msg", "invalid"))
    if kind in _BOUND_ERRORS:
        names = [part for part in rest if isinstance(part, str)]
        note = explain(names[-1]) if names else None
        if note:
            problem = f"{problem} ({note})"
    return problem


_BOUND_ERRORS = frozenset({"less_than_equal", "less_than", "greater_than_equal", "greater_than", "too_long"})


def _error(
    status: int, message: str, errors: list[FieldProblem] | None = None, **kwargs: Any
) -> JSONResponse:
    problems = list(errors or [])
    if len(problems) > _MAX_PROBLEMS:
        more = len(problems) - _MAX_PROBLEMS
        problems = problems[:_MAX_PROBLEMS] + [
            FieldProblem(field="body", problem=f"... and {more} more problems (fix the ones above first)")
        ]
    body = ErrorResponse(message=_clip(message, 4 * _MAX_TEXT), errors=problems)
    return JSONResponse(status_code=status, content=body.model_dump(), **kwargs)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _on_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [_problem_from_validation(e) for e in exc.errors()]
        listing = "; ".join(f"{p.field}: {p.problem}" for p in problems[:3])
        if len(problems) > 3:
            listing += f"; and {len(problems) - 3} more"
        return _error(422, f"{request.method} {request.url.path}: invalid request: {listing}", problems)

    @app.exception_handler(ZeusConfigError)
    async def _on_config(request: Request, exc: ZeusConfigError) -> JSONResponse:
        status = 422
        problems: list[FieldProblem] = []
        if isinstance(exc, (JobNotFoundError, TrialNotFoundError)):
            status = 404
            problems = [FieldProblem(field=exc.field, problem=_clip(str(exc)))]
        elif isinstance(exc, ConflictError):
            status = 409
            problems = [FieldProblem(field=f, problem=_clip(str(exc))) for f in exc.fields]
        elif isinstance(exc, InvalidReportError):
            problems = [FieldProblem(field=exc.field, problem=_clip(str(exc)))]
        else:
            match = _SPEC_FIELD.match(str(exc))
            if match:
                problems = [FieldProblem(field=match.group(1), problem=_clip(str(exc)))]
        return _error(status, f"{request.method} {request.url.path}: {exc}", problems)

    @app.exception_handler(HTTPException)
    async def _on_http(request: Request, exc: HTTPException) -> JSONResponse:
        where = {400: "body", 404: "path", 405: "method"}.get(exc.status_code)
        problems = [FieldProblem(field=where, problem=str(exc.detail))] if where else []
        headers = dict(exc.headers or {})
        if exc.status_code == 405:  # Starlette names only the first matching route's methods
            headers["Allow"] = ", ".join(_allowed_methods(request))
        return _error(
            exc.status_code, f"{request.method} {request.url.path}: {exc.detail}", problems, headers=headers
        )

    @app.exception_handler(Exception)
    async def _on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        # A database error's text holds the SQL statement and its parameters: the log has them,
        # the client gets a reference to find them there.
        reference = secrets.token_hex(4)
        logger.exception("%s %s failed (reference %s)", request.method, request.url.path, reference)
        return _error(
            500,
            f"{request.method} {request.url.path}: internal error (reference {reference}); nothing was "
            "written. The server's log has the details under this reference.",
        )


def _allowed_methods(request: Request) -> list[str]:
    """Every method that some route serves at the request's path."""
    methods: set[str] = set()
    for route in request.app.routes:
        if isinstance(route, APIRoute) and route.path_regex.match(request.url.path):
            methods |= route.methods or set()
    return sorted(methods)


def _sweep_interval_s(service: BatchSizeService) -> float:
    """How often stale trials of every job are expired, s: often enough to honour the timeouts."""
    return min(60.0, max(1.0, min(service.heartbeat_timeout_s, service.trial_timeout_s) / 4))


async def _sweep(service: BatchSizeService, interval_s: float) -> None:
    while True:
        await asyncio.sleep(interval_s)
        try:
            await service.expire_stale_trials()
        except Exception:  # noqa: BLE001 - a failed sweep (database down) must not stop the next ones
            logger.exception("Expiring stale trials failed; trying again in %.0f s", interval_s)


def create_app(
    database: str | Path | Database,
    *,
    token: str | None = None,
    trial_timeout_s: float = DEFAULT_TRIAL_TIMEOUT_S,
    heartbeat_timeout_s: float = DEFAULT_HEARTBEAT_TIMEOUT_S,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    echo_sql: bool = False,
    clock: Callable[[], float] = time.time,
    sweep_interval_s: float | None = None,
    allowed_hosts: Collection[str] | None = None,
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
    max_trials_per_job: int = MAX_TRIALS_PER_JOB,
) -> FastAPI:
    """Build the service's FastAPI app; the schema is created or migrated when it starts.

    Args:
        database: A SQLite file path, a database URL (``sqlite:///...``, ``postgresql://...``) or
            a :class:`Database`.
        token: Shared secret of at least 16 characters; when set, every path but ``/health`` (the
            API docs and schema included) needs ``Authorization: Bearer <token>`` (or basic auth
            with the token as password). ``None``, empty or whitespace-only: no token.
        trial_timeout_s: A running trial without any contact for this long expires, s.
        heartbeat_timeout_s: A running trial whose client sends heartbeats expires after this
            long without a report or heartbeat, s.
        max_body_bytes: Larger request bodies are answered 413 before they are parsed, bytes.
        echo_sql: Log every SQL statement.
        clock: Current time in s since the epoch (for tests).
        sweep_interval_s: How often stale trials of every job are expired, s; default a quarter
            of the shorter timeout, within [1, 60] s.
        allowed_hosts: Host names the ``Host`` header may carry (``"*"``: any); default: any
            with a token, only ``localhost``/``127.0.0.1``/``::1`` without (DNS rebinding).
        body_timeout_s: Longest time to receive a request body, s (408 past it).
        max_trials_per_job: Most trials of one job (409 beyond).

    Returns:
        The app; serve it with uvicorn (``zeus-suite bso-server`` does).

    Raises:
        ZeusConfigError: An unsupported database URL, a non-positive timeout or body limit, or a
            token shorter than 16 characters.
    """
    token = normalize_token(token, where="create_app")
    if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int) or max_body_bytes < 1:
        raise ZeusConfigError(f"create_app: max_body_bytes={max_body_bytes!r} must be an integer >= 1 byte.")
    if not isinstance(body_timeout_s, (int, float)) or not 0 < body_timeout_s < float("inf"):
        raise ZeusConfigError(f"create_app: body_timeout_s={body_timeout_s!r} must be a finite number > 0 s.")
    db = database if isinstance(database, Database) else Database(database, echo_sql=echo_sql)
    service = BatchSizeService(
        db,
        trial_timeout_s=trial_timeout_s,
        heartbeat_timeout_s=heartbeat_timeout_s,
        clock=clock,
        max_trials_per_job=max_trials_per_job,
    )
    interval_s = _sweep_interval_s(service) if sweep_interval_s is None else float(sweep_interval_s)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await db.init_schema()
        logger.info(
            "Batch-size optimizer on %s (trial timeout %.0f s, heartbeat timeout %.0f s, "
            "body limit %d bytes, token %s)",
            db.display_url,
            trial_timeout_s,
            heartbeat_timeout_s,
            max_body_bytes,
            "required" if token else "off",
        )
        sweeper = asyncio.create_task(_sweep(service, interval_s))
        try:
            yield
        finally:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
            await db.dispose()

    from zeus_core import __version__

    app = FastAPI(title="Zeus Suite batch-size optimizer", version=__version__, lifespan=lifespan)
    app.state.service = service
    app.add_middleware(
        RequestGate,
        token=token,
        allowed_hosts=allowed_hosts,
        max_body_bytes=max_body_bytes,
        body_timeout_s=body_timeout_s,
    )
    _install_error_handlers(app)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "schema_version": await db.schema_version(),
            "database": "sqlite" if db.is_sqlite else "postgresql",
        }

    router = APIRouter(  # the token, Host and content type are checked by the RequestGate before this
        strict_content_type=False,  # Zeus 0.16's client posts JSON without a Content-Type header
        responses={c: {"model": ErrorResponse} for c in (400, 401, 403, 404, 408, 409, 413, 415, 422)},
    )
    add_zeus_routes(router, service)  # first: GET /jobs/batch_size before GET /jobs/{job_id}
    _add_routes(router, service)
    app.include_router(router)
    return app


def _add_routes(router: APIRouter, service: BatchSizeService) -> None:
    @router.post("/jobs", status_code=201, response_model=RegisterResponse | ZeusRegisteredJob)
    async def register_job(
        response: Response, body: Annotated[RegisterBody, Body()]
    ) -> RegisterResponse | ZeusRegisteredJob:
        return await register_any(service, body, response)

    @router.get("/jobs/{job_id}", response_model=JobState)
    async def read_job(job_id: str) -> JobState:
        return await service.job_state(job_id)

    @router.get("/jobs/{job_id}/budget", response_model=BudgetOut)
    async def read_budget(job_id: str) -> BudgetOut:
        return await service.job_budget(job_id)

    @router.delete("/jobs/{job_id}", status_code=204)
    async def delete_job(job_id: str) -> Response:
        await service.delete_job(job_id)
        return Response(status_code=204)

    @router.post("/jobs/{job_id}/trials", status_code=201, response_model=TrialAssignment)
    async def start_trial(
        job_id: str, response: Response, body: TrialRequest | None = None
    ) -> TrialAssignment:
        request = body if body is not None else TrialRequest()
        trial, started = await service.new_trial(job_id, request.request_id, heartbeat=request.heartbeat)
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

    @router.post("/jobs/{job_id}/trials/{trial_number}/heartbeat", response_model=TrialOut)
    async def heartbeat(job_id: str, trial_number: int = _TRIAL) -> TrialOut:
        return await service.heartbeat(job_id, trial_number)
