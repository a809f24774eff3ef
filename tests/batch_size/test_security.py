"""Issue 30 (service part): the batch-size service tried as an attacker would.

Each test failed on the code before issue 30: bounds at the edges (1e300, 1e-300, NaN, huge lists)
that made every later request on a job answer 500, values stored by older versions, the token
checked only after the body was read, no read timeout or connection cap, non-JSON bodies and
foreign Host headers accepted, database errors echoed, the bandit on the event loop and rebuilt
from every row, job ids such as ``..``, 409/401 replies without a field, secrets in messages and
an unchecked heartbeat interval.
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.batch_size.server_harness import SubprocessServer, ThreadServer, db_url, make_spec  # noqa: F401
from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.batch_size import _heartbeat
from zeus_core.optimizer.batch_size._api_models import EpochReport
from zeus_core.optimizer.batch_size._client import BatchSizeOptimizer, ZeusServerError
from zeus_core.optimizer.batch_size._db import Database, JobRow, TrialRow, normalize_url
from zeus_core.optimizer.batch_size._limits import MAX_COST_J
from zeus_core.optimizer.batch_size._server import create_app
from zeus_core.optimizer.batch_size._service import BatchSizeService

SPEC = make_spec()
TOKEN = "0123456789abcdef0123"
EDGES = [1e300, -1e300, 1e-300, 0.0, -0.0, 1e308, 5e-324, math.nan, math.inf, -math.inf, 2**63, -(2**63)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadServer]:
    app = create_app(tmp_path_factory.mktemp("bso") / "bso.sqlite3", max_trials_per_job=100_000)
    with ThreadServer(app) as s:
        yield s


@pytest.fixture
def http(db_url: str) -> Iterator[httpx.Client]:
    with ThreadServer(create_app(db_url)) as s:
        with httpx.Client(base_url=s.url, timeout=30) as client:
            yield client


def _post(client: httpx.Client, path: str, body: dict[str, Any]) -> httpx.Response:
    # json.dumps writes NaN/Infinity, as a hostile client may; httpx's json= would refuse them.
    return client.post(path, content=json.dumps(body), headers={"Content-Type": "application/json"})


def _no_500_on_the_job(client: httpx.Client, job_id: str) -> None:
    """Every request a client makes on ``job_id`` answers below 500."""
    r = client.post(f"/jobs/{job_id}/trials")
    assert r.status_code < 500, r.text
    for path in (f"/jobs/{job_id}", f"/jobs/{job_id}/budget"):
        r = client.get(path)
        assert r.status_code < 500, r.text
        json.dumps(r.json(), allow_nan=False)  # every number in the reply is finite


_counter = iter(range(10**9))


# -------------------------------------------------------------------------------- bounded inputs
_SPEC_FIELDS = ["max_power_w", "prior_std", "prior_mean", "beta_knob", "slack", "eta_knob", "target_metric"]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(field=st.sampled_from(_SPEC_FIELDS), value=st.sampled_from(EDGES) | st.floats())
def test_no_spec_value_makes_a_later_request_fail(server: ThreadServer, field: str, value: float) -> None:
    job_id = f"spec-{next(_counter)}"
    body = make_spec(job_id, prior_mean=1000.0, prior_std=100.0).to_dict() | {field: value}
    if field == "prior_mean":
        body["prior_std"] = 100.0
    with httpx.Client(base_url=server.url, timeout=30) as client:
        r = _post(client, "/jobs", body)
        if r.status_code == 422:  # refused: the problem names the field, and for a bound its reason
            problem = r.json()["errors"][0]
            assert problem["field"] == field, r.text
            return
        assert r.status_code == 201, r.text
        _no_500_on_the_job(client, job_id)
        trial = client.post(f"/jobs/{job_id}/trials").json()["trial_number"]
        r = client.post(
            f"/jobs/{job_id}/trials/{trial}/result", json={"time_s": 1.0, "energy_j": 1e3, "converged": True}
        )
        assert r.status_code == 200, r.text
        _no_500_on_the_job(client, job_id)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    time_s=st.sampled_from(EDGES) | st.floats(min_value=0),
    energy_j=st.sampled_from(EDGES) | st.floats(min_value=0),
    metric=st.sampled_from([*EDGES, None]),
)
def test_no_report_makes_a_later_request_fail(
    server: ThreadServer, time_s: float, energy_j: float, metric: Any
) -> None:
    job_id = f"report-{next(_counter)}"
    with httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.post("/jobs", json=make_spec(job_id).to_dict()).status_code == 201
        for _ in range(3):  # a few costs, so the bandit's pooled variance and walk see them
            trial = client.post(f"/jobs/{job_id}/trials").json()["trial_number"]
            epoch = {"epoch": 1, "time_s": time_s, "energy_j": energy_j, "metric": metric}
            r = _post(client, f"/jobs/{job_id}/trials/{trial}/epochs", epoch)
            if r.status_code == 422:
                fields = [e["field"] for e in r.json()["errors"]]
                assert set(fields) <= {"time_s", "energy_j", "metric"}, r.text
                if any(
                    e["field"] in ("time_s", "energy_j") and "at most" in e["problem"]
                    for e in r.json()["errors"]
                ):
                    assert "J" in r.text or " s" in r.text  # the unit and the bound are named
            result = {"time_s": time_s, "energy_j": energy_j, "metric": metric, "converged": True}
            r = _post(client, f"/jobs/{job_id}/trials/{trial}/result", result)
            assert r.status_code in (200, 422), r.text
            _no_500_on_the_job(client, job_id)


def test_the_reported_poisons_are_refused_naming_the_bound(server: ThreadServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for field, value in (("prior_std", 1e-300), ("max_power_w", 1e308), ("beta_knob", 1e308)):
            body = make_spec(f"poison-{field}", prior_mean=10.0, prior_std=1.0).to_dict() | {field: value}
            r = client.post("/jobs", json=body)
            assert r.status_code == 422, (field, r.text)
            [problem] = r.json()["errors"]
            assert problem["field"] == field and (
                "within" in problem["problem"] or "at most" in problem["problem"]
            )
        assert client.post("/jobs", json=make_spec("poison-energy").to_dict()).status_code == 201
        trial = client.post("/jobs/poison-energy/trials").json()["trial_number"]
        r = client.post(
            f"/jobs/poison-energy/trials/{trial}/result",
            json={"time_s": 1.0, "energy_j": 1e300, "converged": True},
        )
        assert r.status_code == 422
        assert r.json()["errors"][0]["field"] == "energy_j" and "280 GWh" in r.json()["errors"][0]["problem"]


def test_huge_lists_are_refused_before_any_work(server: ThreadServer) -> None:
    sizes = list(range(1, 100_001))
    body = make_spec("huge").to_dict() | {"batch_sizes": sizes, "default_batch_size": 1}
    with httpx.Client(base_url=server.url, timeout=30) as client:
        start = time.monotonic()
        r = client.post("/jobs", json=body)
        assert r.status_code == 422 and time.monotonic() - start < 5.0
        assert r.json()["errors"][0]["field"] == "batch_sizes" and "1024" in r.text


def test_values_stored_before_the_bounds_are_made_safe(tmp_path: Path) -> None:
    """A database written by an older version holds a 1e300 J cost and a 1e-300 J prior std."""

    async def _scenario() -> None:
        db = Database(tmp_path / "bso.sqlite3")
        await db.init_schema()
        service = BatchSizeService(db)
        await service.register(make_spec("old", prior_mean=100.0, prior_std=1.0))
        async with db.transaction() as session:
            job = await session.get(JobRow, "old")
            assert job is not None
            spec = json.loads(job.spec_json) | {"prior_std": 1e-300, "max_power_w": 1e308, "beta_knob": 1e308}
            job.spec_json = json.dumps(spec)
            for i, (b, c) in enumerate(((128, 1e300), (64, 1e-300), (256, 1e300), (128, 5.0))):
                session.add(
                    TrialRow(
                        job_id="old", trial_number=i + 1, batch_size=b, status="converged",
                        end_reason="reported", created_at=0.0, last_seen_at=0.0, ended_at=0.0,
                        completion_order=i, epochs=2, time_s=1.0, energy_j=c, cost=c, converged=True,
                    )
                )  # fmt: skip
            job.next_trial_number, job.next_completion = 5, 4
        trial, _ = await service.new_trial("old")
        await service.report_epoch("old", trial.trial_number, EpochReport(epoch=1, time_s=1.0, energy_j=1.0))
        state = await service.job_state("old")
        json.dumps(state.model_dump(mode="json"), allow_nan=False)
        budget = await service.job_budget("old")
        assert all(math.isfinite(v) for v in budget.model_dump().values() if isinstance(v, float))
        assert budget.cost_j <= 4 * MAX_COST_J
        await db.dispose()

    asyncio.run(_scenario())


# ------------------------------------------------------------------------------------ job ids, 409
@pytest.mark.parametrize(
    "job_id", [".", "..", "a%2Fb", "a%b", " job", "job ", "a/b", "a\x00b", "", "x" * 256]
)
def test_job_ids_that_are_not_url_safe_are_refused(http: httpx.Client, job_id: str) -> None:
    r = http.post("/jobs", json=make_spec().to_dict() | {"job_id": job_id})
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"] == "job_id"


def test_a_nul_in_a_path_id_is_a_404_without_the_database(http: httpx.Client) -> None:
    # On PostgreSQL this was a 500 whose body held the SQL statement and its parameters.
    for path in ("/jobs/a%00b", "/jobs/a%00b/budget", "/jobs/a%00b/trials/1"):
        r = http.get(path)
        assert r.status_code == 404, r.text
        assert "SELECT" not in r.text and r.json()["errors"][0]["field"] == "job_id"


def test_conflicts_name_each_field(http: httpx.Client) -> None:
    assert http.post("/jobs", json=SPEC.to_dict()).status_code == 201
    r = http.post("/jobs", json=SPEC.to_dict() | {"max_epochs": 7, "eta_knob": 0.1})
    assert r.status_code == 409
    assert {e["field"] for e in r.json()["errors"]} == {"max_epochs", "eta_knob"}
    trial = http.post("/jobs/job/trials").json()["trial_number"]
    result = {"time_s": 1.0, "energy_j": 10.0, "converged": True}
    assert http.post(f"/jobs/job/trials/{trial}/result", json=result).status_code == 200
    r = http.post(f"/jobs/job/trials/{trial}/result", json=result | {"energy_j": 11.0})
    assert r.status_code == 409 and [e["field"] for e in r.json()["errors"]] == ["energy_j"]


def test_the_history_a_job_keeps_is_capped(tmp_path: Path) -> None:
    with ThreadServer(create_app(tmp_path / "bso.sqlite3", max_trials_per_job=3)) as s:
        with httpx.Client(base_url=s.url, timeout=30) as client:
            assert client.post("/jobs", json=SPEC.to_dict()).status_code == 201
            for _ in range(3):
                assert client.post("/jobs/job/trials").status_code == 201
            r = client.post("/jobs/job/trials")
            assert r.status_code == 409 and r.json()["errors"][0]["field"] == "job_id"
            assert "--max-trials-per-job 3" in r.text


# ------------------------------------------------------------------------- database errors, 500
def test_database_errors_get_a_generic_500(
    http: httpx.Client, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    from sqlalchemy.exc import DBAPIError

    async def _broken(self: Any, job_id: str) -> Any:
        raise DBAPIError(
            "SELECT secret_column FROM bso_jobs WHERE job_id = $1", ("hunter2",), Exception("boom")
        )

    assert http.post("/jobs", json=SPEC.to_dict()).status_code == 201
    monkeypatch.setattr(BatchSizeService, "job_budget", _broken)
    r = http.get("/jobs/job/budget")
    assert r.status_code == 500
    assert "secret_column" not in r.text and "hunter2" not in r.text and "boom" not in r.text
    reference = r.json()["message"].split("reference ")[1][:8]
    assert any(reference in rec.getMessage() for rec in caplog.records)  # the log has the details


# ---------------------------------------------------------------------------- the event loop
def test_a_costly_bandit_does_not_stall_health(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from zeus_core.optimizer.batch_size._bandit import BatchSizeBandit

    original = BatchSizeBandit.summary

    def _slow(self: BatchSizeBandit) -> Any:
        time.sleep(2.0)  # stands for a costly bandit (the 100,000-size spec took 58 s of CPU)
        return original(self)

    monkeypatch.setattr(BatchSizeBandit, "summary", _slow)
    with ThreadServer(create_app(tmp_path / "bso.sqlite3")) as s:
        with httpx.Client(base_url=s.url, timeout=30) as client:
            assert client.post("/jobs", json=SPEC.to_dict()).status_code == 201
            slow = threading.Thread(target=lambda: httpx.get(s.url + "/jobs/job", timeout=30))
            slow.start()
            time.sleep(0.3)
            start = time.monotonic()
            assert client.get("/health").status_code == 200
            waited = time.monotonic() - start
            slow.join()
    assert waited < 1.0, f"/health waited {waited:.2f} s behind the bandit"


def test_requests_read_only_the_trials_that_ended_since(tmp_path: Path) -> None:
    async def _scenario() -> int:
        db = Database(tmp_path / "bso.sqlite3")
        await db.init_schema()
        service = BatchSizeService(db)
        await service.register(SPEC)
        for _ in range(6):
            trial, _ = await service.new_trial("job")
            await service.report_epoch(
                "job", trial.trial_number, EpochReport(epoch=1, time_s=1.0, energy_j=5.0)
            )
            await service.job_budget("job")
        rebuilds = service.bandits.rebuilds
        fresh = BatchSizeService(db)  # a second server on the same database agrees with the cached one
        assert (await fresh.job_state("job")).bandit == (await service.job_state("job")).bandit
        await db.dispose()
        return rebuilds

    assert asyncio.run(_scenario()) == 1


# ------------------------------------------------------------------------- the gate: raw sockets
def _raw(port: int, request: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(request)
    return sock


def _status(sock: socket.socket, timeout_s: float) -> int:
    sock.settimeout(timeout_s)
    data = sock.recv(4096)
    return int(data.split(b" ", 2)[1])


def test_the_token_is_checked_before_the_body_is_read(tmp_path: Path) -> None:
    with ThreadServer(create_app(tmp_path / "bso.sqlite3", token=TOKEN)) as s:
        head = b"POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        sock = _raw(s.port, head + b"Content-Length: 1000000\r\n\r\n{")  # never sends the rest
        start = time.monotonic()
        assert _status(sock, 5.0) == 401
        assert time.monotonic() - start < 2.0
        sock.close()
        for path in ("/docs", "/openapi.json", "/redoc"):
            r = httpx.get(s.url + path)
            assert r.status_code == 401 and r.json()["errors"][0]["field"] == "Authorization (header)"
        r = httpx.get(s.url + "/health")
        assert r.status_code == 200


def test_a_stalled_body_is_cut_off(tmp_path: Path) -> None:
    with ThreadServer(create_app(tmp_path / "bso.sqlite3", body_timeout_s=0.5)) as s:
        head = b"POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        sock = _raw(s.port, head + b'Content-Length: 100\r\n\r\n{"job')
        start = time.monotonic()
        assert _status(sock, 5.0) == 408
        assert time.monotonic() - start < 2.0
        sock.close()


def test_connections_are_capped_and_stalled_ones_let_go(tmp_path: Path) -> None:
    database = str(tmp_path / "bso.sqlite3")
    server = SubprocessServer(database, "--max-connections", "4", "--body-timeout", "1").start()
    try:
        head = b"POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        stalled = [_raw(server.port, head + b"Content-Length: 50\r\n\r\n{") for _ in range(12)]
        start = time.monotonic()
        statuses = [_status(sock, 5.0) for sock in stalled]
        # Past the cap a connection is answered 503 at once; those within it are cut off after 1 s.
        assert set(statuses) <= {503, 408} and statuses.count(408) <= 4 and statuses.count(503) >= 8
        assert time.monotonic() - start < 4.0
        for sock in stalled:
            sock.close()
        time.sleep(0.3)
        assert httpx.get(server.url + "/health", timeout=5).status_code == 200
    finally:
        server.kill()


@pytest.mark.parametrize(
    ("headers", "status", "field"),
    [
        ({"Content-Type": "text/plain"}, 415, "Content-Type (header)"),
        ({"Content-Type": "application/x-www-form-urlencoded"}, 415, "Content-Type (header)"),
        ({"Content-Type": "multipart/form-data; boundary=x"}, 415, "Content-Type (header)"),
        ({"Content-Type": "application/json", "Host": "evil.example"}, 400, "Host (header)"),
        ({"Content-Type": "application/json", "Host": "attacker.test:8000"}, 400, "Host (header)"),
        ({"Content-Type": "text/plain", "Origin": "http://evil.example"}, 403, "Origin (header)"),
        ({"Content-Type": "application/json", "Origin": "null"}, 403, "Origin (header)"),
    ],
)
def test_a_web_page_cannot_drive_a_loopback_server(
    http: httpx.Client, headers: dict[str, str], status: int, field: str
) -> None:
    r = http.post("/jobs", content=json.dumps(SPEC.to_dict()), headers=headers)
    assert r.status_code == status, r.text
    assert r.json()["errors"][0]["field"] == field
    assert http.get("/jobs/job").status_code == 404  # nothing was registered


def test_json_without_a_content_type_still_works(http: httpx.Client) -> None:
    # Zeus 0.16's client posts JSON without a Content-Type header.
    r = http.post("/jobs", content=json.dumps(SPEC.to_dict()), headers={"Content-Type": ""})
    assert r.status_code == 201, r.text


def test_401_names_the_header(tmp_path: Path) -> None:
    with ThreadServer(create_app(tmp_path / "bso.sqlite3", token=TOKEN)) as s:
        for headers in ({}, {"Authorization": "Bearer wrong-token-0000000000"}):
            r = httpx.post(s.url + "/jobs", json=SPEC.to_dict(), headers=headers)
            assert r.status_code == 401 and r.json()["errors"][0]["field"] == "Authorization (header)"
        r = httpx.post(
            s.url + "/jobs",
            json=SPEC.to_dict(),
            headers={"Authorization": f"Bearer {TOKEN}", "Host": "any.example"},
        )
        assert r.status_code == 201  # with a token any Host is fine (behind a proxy, a cluster name)


# ------------------------------------------------------------------------------ client secrets
def test_the_client_never_shows_the_token_or_a_password(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "s3cret-token-in-the-url-0123"
    client = BatchSizeOptimizer(f"http://zeus:{secret}@127.0.0.1:1", SPEC, token=secret, retries=0)
    with pytest.raises(ZeusServerError) as info:
        client.register()
    assert secret not in str(info.value) and secret not in repr(client)
    assert "zeus:***@127.0.0.1" in str(info.value)
    with pytest.raises(ZeusConfigError) as bad_url:
        normalize_url("mysql://bso:hunter2@db/bso")
    assert "hunter2" not in str(bad_url.value) and "bso:***@db" in str(bad_url.value)


def test_the_token_can_come_from_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    server = SubprocessServer(str(tmp_path / "bso.sqlite3"), "--token-file", str(token_file)).start()
    try:
        assert server.proc is not None
        cmdline = Path(f"/proc/{server.proc.pid}/cmdline").read_bytes()
        assert TOKEN.encode() not in cmdline  # not visible in `ps`
        monkeypatch.delenv("ZEUS_BSO_TOKEN", raising=False)
        monkeypatch.setenv("ZEUS_BSO_TOKEN_FILE", str(token_file))
        with BatchSizeOptimizer(server.url, make_spec("from-file")) as client:
            client.register()
        assert httpx.post(server.url + "/jobs", json=SPEC.to_dict()).status_code == 401
    finally:
        server.kill()


# ----------------------------------------------------------------------------------- heartbeat
def test_the_heartbeat_interval_from_the_server_is_bounded() -> None:
    assert _heartbeat.heartbeat_interval(0.003) == _heartbeat.MIN_INTERVAL_S == 1.0
    assert _heartbeat.heartbeat_interval(1e308) == _heartbeat.MAX_INTERVAL_S
    assert _heartbeat.heartbeat_interval(math.nan) == _heartbeat.heartbeat_interval("x") == 60.0
    assert _heartbeat.heartbeat_interval(180.0) == 60.0
    sender = _heartbeat.HeartbeatSender("http://127.0.0.1:1", "/x", {}, 1e308)
    assert sender.interval_s == _heartbeat.MAX_INTERVAL_S


# --------------------------------------------------------------------------------- the docs page
def test_the_security_notes_state_the_bounds_the_code_enforces() -> None:
    from zeus_core.optimizer.batch_size import _limits as limits

    page = (Path(__file__).resolve().parents[2] / "docs/optimizers/batch-size-security.md").read_text()
    for figure in (
        f"0 to {limits.MAX_TIME_S:g} s",
        f"0 to {limits.MAX_ENERGY_J:g} J",
        f"at most {limits.MAX_METRIC:g}",
        f"at most {limits.MAX_EPOCHS}",
        f"at most {limits.MAX_BATCH_SIZES} per job",
        f"{limits.MIN_MAX_POWER_W:g} to {limits.MAX_MAX_POWER_W:g} W",
        f"at least {limits.MIN_PRIOR_STD_J:g} J",
        f"at most {limits.MAX_BETA:g}",
        f"0 to {limits.MAX_SLACK:g}",
        f"at most {limits.MAX_WINDOW_SIZE} and {limits.MAX_PRUNING_ROUNDS}",
        f"default {limits.MAX_TRIALS_PER_JOB}",
    ):
        assert figure in page, figure
