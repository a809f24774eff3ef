"""The batch-size service over real HTTP (uvicorn on 127.0.0.1), on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from typing import Any, Iterator

import httpx
import pytest

from tests.batch_size.server_harness import FakeClock, ThreadServer, clock, cost, db_url, make_spec  # noqa: F401
from zeus_core.optimizer.batch_size._bandit import BatchSizeBandit, Observation
from zeus_core.optimizer.batch_size._server import create_app

SPEC = make_spec()


@pytest.fixture
def http(db_url: str, clock: FakeClock) -> Iterator[httpx.Client]:
    """An HTTP client on a fresh server (trial timeout 100 s on a fake clock)."""
    with ThreadServer(create_app(db_url, trial_timeout_s=100.0, clock=clock)) as server:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            yield client


def _register(http: httpx.Client, spec: Any = SPEC) -> None:
    r = http.post("/jobs", json=spec.to_dict())
    assert r.status_code in (200, 201), r.text


def _trial(http: httpx.Client, job: str = "job", **body: Any) -> dict[str, Any]:
    r = http.post(f"/jobs/{job}/trials", json=body or None)
    assert r.status_code in (200, 201), r.text
    return r.json()


def _epoch(
    http: httpx.Client, n: int, epoch: int, time_s: float, energy_j: float, metric: float | None
) -> dict:
    r = http.post(
        f"/jobs/job/trials/{n}/epochs",
        json={"epoch": epoch, "time_s": time_s, "energy_j": energy_j, "metric": metric},
    )
    assert r.status_code == 200, r.text
    return r.json()


def _result(
    http: httpx.Client, n: int, time_s: float, energy_j: float, converged: bool, metric: float = 0.5
) -> dict:
    r = http.post(
        f"/jobs/job/trials/{n}/result",
        json={"time_s": time_s, "energy_j": energy_j, "metric": metric, "converged": converged},
    )
    assert r.status_code == 200, r.text
    return r.json()


def test_register_new_identical_and_conflicting(http: httpx.Client) -> None:
    r = http.post("/jobs", json=SPEC.to_dict())
    assert r.status_code == 201 and r.json()["created"] is True
    assert r.json()["spec"] == SPEC.to_dict()
    r = http.post("/jobs", json=SPEC.to_dict())
    assert r.status_code == 200 and r.json()["created"] is False
    # Omitted optional fields take JobSpec's defaults, so this is the same spec.
    minimal = {
        k: SPEC.to_dict()[k]
        for k in ("job_id", "batch_sizes", "default_batch_size", "target_metric", "max_power_w", "seed")
    }
    assert http.post("/jobs", json=minimal).status_code == 200
    other = make_spec(eta_knob=0.3, max_epochs=50)
    r = http.post("/jobs", json=other.to_dict())
    assert r.status_code == 409
    message = r.json()["message"]
    assert "eta_knob (registered 0.5, requested 0.3)" in message and "max_epochs" in message
    assert "batch_sizes" not in message
    assert http.get("/jobs/job").json()["spec"] == SPEC.to_dict()


def test_trial_lifecycle_target_reached_early_stop_and_max_epochs(http: httpx.Client) -> None:
    spec = make_spec(max_epochs=3)
    _register(http, spec)
    t1 = _trial(http)
    assert (t1["trial_number"], t1["batch_size"], t1["phase"]) == (1, 128, "pruning")
    d = _epoch(http, 1, 1, 10.0, 2000.0, 0.5)
    assert (d["stop"], d["reason"], d["status"]) == (False, "continue", "running")
    assert d["cost"] == pytest.approx(cost(spec, 10.0, 2000.0)) and d["threshold"] is None
    d = _epoch(http, 1, 2, 20.0, 4000.0, 0.95)
    assert (d["stop"], d["reason"], d["status"]) == (True, "target_reached", "converged")
    best = cost(spec, 20.0, 4000.0)
    # The client's result after the server ended the trial: the stored outcome stands.
    out = _result(http, 1, 21.0, 4100.0, True, 0.95)
    assert out["recorded"] is False and out["cost"] == pytest.approx(best) and out["time_s"] == 20.0

    # Pruning continues downwards; the bandit rebuilt locally agrees with the server.
    local = BatchSizeBandit(spec, [Observation(128, best, True)])
    t2 = _trial(http)
    assert t2["batch_size"] == local.next_batch_size(2) == 64
    # Epoch 1 costs 2800 J of the 10000 J threshold: continue. At epoch 2 the cost (8400 J) is under
    # the threshold but one more epoch like the last (5600 J) would pass it: stop one epoch early.
    d = _epoch(http, 2, 1, 8.0, 3200.0, 0.3)
    assert d["stop"] is False and d["threshold"] == pytest.approx(2 * best)
    d = _epoch(http, 2, 2, 24.0, 9600.0, 0.4)
    assert (d["stop"], d["reason"], d["status"]) == (True, "early_stop", "failed")
    assert d["cost"] == pytest.approx(8400.0) and d["cost"] < d["threshold"]
    # Further epochs of an ended trial are told to stop and not stored.
    d = _epoch(http, 2, 3, 32.0, 12800.0, 0.5)
    assert (d["stop"], d["reason"]) == (True, "trial_ended")
    detail = http.get("/jobs/job/trials/2").json()
    assert [e["epoch"] for e in detail["epoch_reports"]] == [1, 2]
    assert detail["end_reason"] == "early_stop" and detail["converged"] is False

    t3 = _trial(http)
    assert t3["trial_number"] == 3
    for epoch in (1, 2):
        assert _epoch(http, 3, epoch, epoch * 1.0, epoch * 10.0, 0.1)["stop"] is False
    d = _epoch(http, 3, 3, 3.0, 30.0, 0.1)
    assert (d["stop"], d["reason"]) == (True, "max_epochs")

    state = http.get("/jobs/job").json()
    assert [t["status"] for t in state["trials"]] == ["converged", "failed", "failed"]
    assert [t["completion_order"] for t in state["trials"]] == [0, 1, 2]
    assert state["counts"] == {"running": 0, "converged": 1, "failed": 2, "expired": 0}
    assert state["bandit"]["num_observations"] == 3
    assert state["bandit"]["best_converged_cost"] == pytest.approx(best)


def test_reports_are_idempotent_and_never_recorded_twice(http: httpx.Client) -> None:
    _register(http)
    first = _trial(http, request_id="req-1")
    again = http.post("/jobs/job/trials", json={"request_id": "req-1"})
    assert again.status_code == 200 and again.json() == first  # a retried start: same trial
    d1 = _epoch(http, 1, 1, 5.0, 500.0, 0.2)
    assert _epoch(http, 1, 1, 5.0, 500.0, 0.2) == d1
    r = http.post(
        "/jobs/job/trials/1/epochs", json={"epoch": 1, "time_s": 6.0, "energy_j": 500.0, "metric": 0.2}
    )
    assert r.status_code == 409 and "time_s (stored 5.0, sent 6.0)" in r.json()["message"]
    out = _result(http, 1, 50.0, 5000.0, True)
    assert out["status"] == "converged" and out["recorded"] is True
    assert _result(http, 1, 50.0, 5000.0, True) == out  # a retried result
    r = http.post("/jobs/job/trials/1/result", json={"time_s": 50.0, "energy_j": 5000.0, "converged": False})
    assert r.status_code == 409 and "converged (stored True, sent False)" in r.json()["message"]
    state = http.get("/jobs/job").json()
    assert len(state["trials"]) == 1 and state["bandit"]["num_observations"] == 1
    assert len(http.get("/jobs/job/trials/1").json()["epoch_reports"]) == 1


BAD_REQUESTS = [
    ("POST", "/jobs", {**SPEC.to_dict(), "batch_sizes": "abc"}, 422, "batch_sizes"),
    ("POST", "/jobs", {**SPEC.to_dict(), "batch_sizes": [32, "x"]}, 422, "batch_sizes[1]"),
    (
        "POST",
        "/jobs",
        {k: v for k, v in SPEC.to_dict().items() if k != "target_metric"},
        422,
        "target_metric",
    ),
    ("POST", "/jobs", {**SPEC.to_dict(), "eta": 0.5}, 422, "eta"),
    ("POST", "/jobs", {**SPEC.to_dict(), "eta_knob": 1.5}, 422, "eta_knob"),
    ("POST", "/jobs", {**SPEC.to_dict(), "default_batch_size": 100}, 422, "default_batch_size"),
    ("POST", "/jobs", {**SPEC.to_dict(), "job_id": "a/b"}, 422, "job_id"),
    ("POST", "/jobs", b"{not json", 422, "body"),
    ("POST", "/jobs/job/trials/1/epochs", {"epoch": 2, "time_s": 1.0, "energy_j": -5.0}, 422, "energy_j"),
    ("POST", "/jobs/job/trials/1/epochs", {"epoch": 0, "time_s": 1.0, "energy_j": 5.0}, 422, "epoch"),
    (
        "POST",
        "/jobs/job/trials/x/epochs",
        {"epoch": 2, "time_s": 1.0, "energy_j": 5.0},
        422,
        "trial_number (path)",
    ),
    ("POST", "/jobs/job/trials/1/epochs", {"epoch": 2, "time_s": 1.0, "energy_j": 500.0}, 422, "time_s"),
    ("POST", "/jobs/job/trials/1/result", {"time_s": 1.0, "energy_j": 5.0}, 422, "converged"),
    ("POST", "/jobs/job/trials", {"request_id": ""}, 422, "request_id"),
    ("POST", "/jobs/nope/trials", None, 404, None),
    ("POST", "/jobs/job/trials/9/epochs", {"epoch": 2, "time_s": 30.0, "energy_j": 5000.0}, 404, None),
    ("GET", "/jobs/nope", None, 404, None),
]


def test_bad_requests_get_4xx_naming_the_field_and_write_nothing(http: httpx.Client) -> None:
    _register(http)
    _trial(http)
    _epoch(http, 1, 1, 10.0, 1000.0, 0.1)
    before = http.get("/jobs/job").json()
    before_detail = http.get("/jobs/job/trials/1").json()
    for method, path, body, status, field in BAD_REQUESTS:
        kwargs: dict[str, Any] = {"content": body} if isinstance(body, bytes) else {"json": body}
        r = http.request(method, path, headers={"content-type": "application/json"}, **kwargs)
        assert r.status_code == status, (path, body, r.text)
        payload = r.json()
        assert payload["message"].startswith(f"{method} {path}")
        if field is not None:
            assert field in [e["field"] for e in payload["errors"]], (path, payload)
            assert f"{field}:" in payload["message"] or f"{field}=" in payload["message"], payload
    assert http.get("/jobs/job").json() == before
    assert http.get("/jobs/job/trials/1").json() == before_detail


def test_stale_trials_expire_and_a_late_report_still_counts(http: httpx.Client, clock: FakeClock) -> None:
    _register(http)
    assert _trial(http)["batch_size"] == 128
    # 128 is pending, so pruning hands out the other direction's first arm.
    assert _trial(http)["batch_size"] == BatchSizeBandit(SPEC).next_batch_size(2, pending=[128]) == 256
    clock.now += 101.0  # both trials are silent for longer than the 100 s timeout
    t3 = _trial(http)
    assert t3["batch_size"] == 128  # nothing pending any more: the frontier again
    state = http.get("/jobs/job").json()
    assert [(t["status"], t["end_reason"]) for t in state["trials"][:2]] == [("expired", "timeout")] * 2
    late = _result(http, 1, 40.0, 4000.0, True)
    assert (late["status"], late["recorded"], late["completion_order"]) == ("converged", True, 0)
    r = http.post("/jobs/job/trials/3/abandon")
    assert r.status_code == 200 and (r.json()["status"], r.json()["end_reason"]) == ("expired", "abandoned")
    counts = http.get("/jobs/job").json()["counts"]
    assert counts == {"running": 0, "converged": 1, "failed": 0, "expired": 2}


def test_progress_refreshes_the_timeout(http: httpx.Client, clock: FakeClock) -> None:
    _register(http)
    _trial(http)
    for epoch in (1, 2, 3):
        clock.now += 60.0
        _epoch(http, 1, epoch, epoch * 60.0, epoch * 100.0, 0.1)
    clock.now += 60.0
    assert http.get("/jobs/job/trials/1").json()["status"] == "running"


def test_delete_job_removes_its_history(http: httpx.Client) -> None:
    _register(http)
    _trial(http)
    assert http.delete("/jobs/job").status_code == 204
    assert http.get("/jobs/job").status_code == 404
    assert http.post("/jobs", json=make_spec(eta_knob=0.2).to_dict()).status_code == 201


def test_token_auth(db_url: str) -> None:
    with ThreadServer(create_app(db_url, token="s3cret-0123456789abcdef")) as server:
        with httpx.Client(base_url=server.url) as http:
            r = http.get("/jobs/job")
            assert r.status_code == 401 and "Authorization: Bearer" in r.json()["message"]
            assert r.headers["www-authenticate"] == "Bearer"
            r = http.post("/jobs", json=SPEC.to_dict(), headers={"Authorization": "Bearer wrong"})
            assert r.status_code == 401 and "does not match" in r.json()["message"]
            assert http.get("/health").status_code == 200
            ok = {"Authorization": "Bearer s3cret-0123456789abcdef"}
            assert http.get("/jobs/job", headers=ok).status_code == 404  # authorised; job not there
            assert http.post("/jobs", json=SPEC.to_dict(), headers=ok).status_code == 201
            state = http.get("/jobs/job", headers=ok).json()
            assert state["trials"] == []


def test_bandit_over_http_matches_the_bandit_rebuilt_locally(http: httpx.Client) -> None:
    """Twelve sequential trials: every batch size equals the local bandit's choice for that history."""
    _register(http)
    costs = {32: 9000.0, 64: 5000.0, 128: 4000.0, 256: 4500.0}
    observations: list[Observation] = []
    for n in range(1, 13):
        b = _trial_as_the_local_bandit_chooses(http, n, observations)
        energy = costs[b] * (1 + 0.01 * n)  # time 0: cost = eta × energy
        converged = b != 32
        _result(http, n, 0.0, energy, converged)
        observations.append(Observation(b, cost(SPEC, 0.0, energy), converged))
    summary = _summary_of_the_local_bandit(http, observations)
    # The default's neighbours were tried; 32, predicted costlier still, never fitted the budget.
    assert {o.batch_size for o in observations} == {64, 128, 256}
    assert summary["budget"]["measured_recurrences"] >= 1 and summary["budget"]["slack"] == 0.0


def _trial_as_the_local_bandit_chooses(http: httpx.Client, n: int, observations: list[Observation]) -> int:
    """Start trial ``n``; its batch size must be the local bandit's choice for the same history."""
    t = _trial(http)
    assert t["trial_number"] == n
    assert t["batch_size"] == BatchSizeBandit(SPEC, observations).next_batch_size(n)
    return t["batch_size"]


def _summary_of_the_local_bandit(http: httpx.Client, observations: list[Observation]) -> dict[str, Any]:
    """The server's bandit summary, checked equal to the local bandit's for the same history."""
    summary = http.get("/jobs/job").json()["bandit"]
    assert summary == json.loads(json.dumps(BatchSizeBandit(SPEC, observations).summary()))
    return summary


def test_epochs_reported_per_epoch_reach_the_bandit(http: httpx.Client) -> None:
    """The last epoch reported is the trial's epoch count in the bandit's epochs-to-target model."""
    _register(http)
    per_epoch = {32: 1500.0, 64: 1300.0, 128: 1000.0, 256: 1100.0}
    observations: list[Observation] = []
    for n in range(1, 9):
        b = _trial_as_the_local_bandit_chooses(http, n, observations)
        epochs = 3 + n % 2
        for e in range(1, epochs + 1):
            assert not _epoch(http, n, e, 0.0, per_epoch[b] * e, 0.5)["stop"]
        energy = per_epoch[b] * epochs
        assert _result(http, n, 0.0, energy, True)["epochs"] == epochs
        observations.append(Observation(b, cost(SPEC, 0.0, energy), True, epochs=epochs))
    summary = _summary_of_the_local_bandit(http, observations)
    without_epochs = [Observation(o.batch_size, o.cost, True) for o in observations]
    assert summary != json.loads(json.dumps(BatchSizeBandit(SPEC, without_epochs).summary()))


def test_a_restarted_server_keeps_the_budget(db_url: str) -> None:
    """Stop the server and start another on the same database: same budget, same conservative choice."""
    observations: list[Observation] = []
    costs = {128: 4000.0, 64: 5000.0, 256: 4500.0}
    with ThreadServer(create_app(db_url)) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        _register(http)
        for n in range(1, 4):
            b = _trial_as_the_local_bandit_chooses(http, n, observations)
            _result(http, n, 0.0, 2 * costs[b], True)  # time 0: cost = eta × energy
            observations.append(Observation(b, costs[b], True))
        assert [o.batch_size for o in observations] == [128, 64, 256]  # the default, its neighbours
        before = http.get("/jobs/job/budget").json()
    # 1,000 J and 500 J over the default's 4,000 J: 32 (predicted 6,250 J) does not fit.
    assert before["remaining_j"] == pytest.approx(-1500.0) and before["measured_recurrences"] == 1
    with ThreadServer(create_app(db_url)) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        assert http.get("/jobs/job/budget").json() == before
        assert http.get("/jobs/job").json()["budget"] == before
        trial = _trial(http)
        assert trial["batch_size"] == 128 and trial["budget"] == before  # the safe arm, not 32
        assert trial["batch_size"] == BatchSizeBandit(SPEC, observations).next_batch_size(4)
