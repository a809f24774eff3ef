"""Fuzzing the batch-size service through its OpenAPI schema (schemathesis, in-process ASGI app).

Every operation gets generated requests, valid and invalid. Half of the requests that name a job
are pointed at a registered job (``fuzz``) and its first trials, so reports, results, heartbeats
and the Zeus 0.16 routes reach real rows. Each answer must not be a 5xx, must match the schema
(status code, content type, body), invalid data must be refused, and a 422 must name its fields.
After every request the database must hold nothing wrong (:func:`check_stored_state`).
Short by design (CI): about ``MAX_EXAMPLES`` requests per operation.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.python.asgi import get_client  # noqa: E402
from schemathesis.specs.openapi.checks import positive_data_acceptance  # noqa: E402

from tests.batch_size.server_harness import make_spec  # noqa: E402
from zeus_core.optimizer.batch_size._api_models import StopReason, TrialStatus  # noqa: E402
from zeus_core.optimizer.batch_size._server import create_app  # noqa: E402
from zeus_core.optimizer.batch_size._spec import JobSpec  # noqa: E402

MAX_EXAMPLES = int(os.environ.get("ZEUS_FUZZ_EXAMPLES", "12"))
DATABASE = Path(tempfile.mkdtemp(prefix="bso-fuzz-")) / "bso.sqlite3"
APP = create_app(DATABASE, heartbeat_timeout_s=60.0, allowed_hosts=["testserver"])  # the in-process client
SCHEMA = schemathesis.openapi.from_asgi("/openapi.json", APP)
CLIENT = get_client(APP)
SPEC = make_spec("fuzz", max_epochs=4)


def _point_at_the_registered_job(case: Any) -> None:
    """Send about half of the generated requests to the job ``fuzz`` and its trials 1-3."""
    for params in (case.path_parameters, case.query):
        job_id = (params or {}).get("job_id")
        if isinstance(job_id, str) and len(job_id) % 2 == 0:
            params["job_id"] = "fuzz"
            number = (case.path_parameters or {}).get("trial_number")
            if isinstance(number, int) and not isinstance(number, bool) and number >= 1:
                case.path_parameters["trial_number"] = number % 3 + 1
    body = case.body
    if isinstance(body, dict) and isinstance(body.get("job_id"), str) and "trial_number" in body:
        if len(body["job_id"]) % 2 == 0:
            body["job_id"] = "fuzz"


def check_stored_state(path: Path) -> None:
    """What the database holds is consistent: specs parse, trials follow the status rules."""
    with sqlite3.connect(path) as conn:
        conn.row_factory = sqlite3.Row
        for job in conn.execute("SELECT * FROM bso_jobs"):
            spec = JobSpec.from_dict(json.loads(job["spec_json"]))
            trials = conn.execute("SELECT * FROM bso_trials WHERE job_id = ?", (job["job_id"],)).fetchall()
            orders = [t["completion_order"] for t in trials if t["completion_order"] is not None]
            assert len(orders) == len(set(orders)) and all(0 <= o < job["next_completion"] for o in orders)
            for trial in trials:
                _check_trial(conn, spec, job, trial)


def _check_trial(conn: sqlite3.Connection, spec: JobSpec, job: sqlite3.Row, trial: sqlite3.Row) -> None:
    where = f"job {spec.job_id!r} trial {trial['trial_number']}"
    assert trial["batch_size"] in spec.batch_sizes, where
    assert 1 <= trial["trial_number"] < job["next_trial_number"], where
    status = TrialStatus(trial["status"])
    reason = None if trial["end_reason"] is None else StopReason(trial["end_reason"])
    if status is TrialStatus.RUNNING:
        assert reason is None and trial["completion_order"] is None, where
    elif status is TrialStatus.EXPIRED:
        assert trial["completion_order"] is None, where
        assert reason in (StopReason.TIMEOUT, StopReason.HEARTBEAT_TIMEOUT, StopReason.ABANDONED), where
    else:
        assert trial["completion_order"] is not None, where
        assert bool(trial["converged"]) is (status is TrialStatus.CONVERGED), where
    for name in ("time_s", "energy_j", "cost"):
        value = trial[name]
        assert value is None or (math.isfinite(value) and value >= 0), (where, name, value)
    epochs = conn.execute(
        "SELECT epoch, time_s, energy_j, cost FROM bso_epochs WHERE trial_id = ? ORDER BY epoch",
        (trial["id"],),
    ).fetchall()
    assert trial["epochs"] == (epochs[-1]["epoch"] if epochs else 0), where
    for earlier, later in zip(epochs, epochs[1:]):  # cumulative figures never go back
        assert later["time_s"] >= earlier["time_s"] and later["energy_j"] >= earlier["energy_j"], where


def _register_fuzz_job() -> None:
    response = CLIENT.post("/jobs", json=SPEC.to_dict())
    assert response.status_code in (200, 201), response.text


def _names_its_fields(ctx: Any, response: Any, case: Any) -> bool:
    """A 422 says which field is wrong."""
    if response.status_code == 422:
        errors = response.json()["errors"]
        assert errors and all(e["field"] and e["problem"] for e in errors), response.text
    return True


# Valid-looking bodies are refused (422) where the rules span fields (a default batch size must be
# one of the batch sizes) or depend on stored data (epochs in order), which no schema can say;
# every other check (no 5xx, schema conformance, invalid data refused) runs.
@SCHEMA.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_service_api(case: Any) -> None:
    _register_fuzz_job()
    _point_at_the_registered_job(case)
    case.call_and_validate(
        session=CLIENT, excluded_checks=[positive_data_acceptance], additional_checks=[_names_its_fields]
    )
    check_stored_state(DATABASE)
