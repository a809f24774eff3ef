"""Issue 18 (service part): strict types, 404s that name the id, the body size limit, tokens."""

from __future__ import annotations

import base64
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from tests.batch_size.server_harness import SubprocessServer, ThreadServer, db_url, make_spec  # noqa: F401
from zeus_core._cli import main as cli_main
from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.batch_size._client import BatchSizeOptimizer
from zeus_core.optimizer.batch_size._server import create_app

SPEC = make_spec()
TOKEN = "0123456789abcdef0123"


@pytest.fixture
def http(db_url: str) -> Iterator[httpx.Client]:
    with ThreadServer(create_app(db_url)) as server:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            yield client


def _start(http: httpx.Client) -> int:
    assert http.post("/jobs", json=SPEC.to_dict()).status_code == 201
    r = http.post("/jobs/job/trials")
    assert r.status_code == 201, r.text
    return int(r.json()["trial_number"])


def _fields(r: httpx.Response) -> list[str]:
    return [e["field"] for e in r.json()["errors"]]


# ------------------------------------------------------------------------------ strict validation
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"batch_sizes": [True, 64]}, "batch_sizes[0]"),
        ({"batch_sizes": [32.0, 64]}, "batch_sizes[0]"),
        ({"default_batch_size": "128"}, "default_batch_size"),
        ({"max_epochs": True}, "max_epochs"),
        ({"higher_is_better": "yes"}, "higher_is_better"),
        ({"higher_is_better": 1}, "higher_is_better"),
        ({"target_metric": "0.9"}, "target_metric"),
        ({"eta_knob": False}, "eta_knob"),
        ({"job_id": 7}, "job_id"),
    ],
)
def test_job_spec_types_are_not_coerced(http: httpx.Client, change: dict[str, Any], field: str) -> None:
    r = http.post("/jobs", json=SPEC.to_dict() | change)
    assert r.status_code == 422, r.text
    assert field in _fields(r)
    assert http.get("/jobs/job").status_code == 404  # nothing stored


def test_an_integer_is_a_valid_number(http: httpx.Client) -> None:
    r = http.post("/jobs", json=SPEC.to_dict() | {"target_metric": 1, "max_power_w": 300})
    assert r.status_code == 201, r.text
    r = http.post("/jobs/job/trials")
    r = http.post("/jobs/job/trials/1/epochs", json={"epoch": 1, "time_s": 10, "energy_j": 2000, "metric": 0})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    ("route", "body", "field"),
    [
        ("result", {"time_s": 1.0, "energy_j": 1.0, "metric": 0.5, "converged": "yes"}, "converged"),
        ("result", {"time_s": 1.0, "energy_j": 1.0, "metric": 0.5, "converged": 1}, "converged"),
        ("result", {"time_s": "1", "energy_j": 1.0, "converged": True}, "time_s"),
        ("epochs", {"epoch": True, "time_s": 1.0, "energy_j": 1.0}, "epoch"),
        ("epochs", {"epoch": 1.0, "time_s": 1.0, "energy_j": 1.0}, "epoch"),
        ("epochs", {"epoch": 1, "time_s": 1.0, "energy_j": True}, "energy_j"),
        ("epochs", {"epoch": 1, "time_s": 1.0, "energy_j": 1.0, "metric": "0.5"}, "metric"),
    ],
)
def test_reports_with_wrong_types_are_refused_and_change_nothing(
    http: httpx.Client, route: str, body: dict[str, Any], field: str
) -> None:
    n = _start(http)
    r = http.post(f"/jobs/job/trials/{n}/{route}", json=body)
    assert r.status_code == 422, r.text
    assert field in _fields(r)
    trial = http.get(f"/jobs/job/trials/{n}").json()
    assert trial["status"] == "running" and trial["epochs"] == 0 and trial["epoch_reports"] == []


def test_trial_request_fields_are_strict(http: httpx.Client) -> None:
    _start(http)
    assert http.post("/jobs/job/trials", json={"request_id": 5}).status_code == 422
    assert http.post("/jobs/job/trials", json={"heartbeat": "true"}).status_code == 422


# ------------------------------------------------------------------------------------ 404 errors
def test_unknown_job_and_trial_name_the_missing_id(http: httpx.Client) -> None:
    r = http.get("/jobs/nope")
    assert r.status_code == 404
    [problem] = r.json()["errors"]
    assert problem["field"] == "job_id" and "'nope'" in problem["problem"]
    r = http.post("/jobs/nope/trials/3/epochs", json={"epoch": 1, "time_s": 1.0, "energy_j": 1.0})
    assert r.status_code == 404 and _fields(r) == ["job_id"]
    _start(http)
    r = http.post("/jobs/job/trials/7/result", json={"time_s": 1.0, "energy_j": 1.0, "converged": True})
    assert r.status_code == 404
    [problem] = r.json()["errors"]
    assert problem["field"] == "trial_number" and "no trial 7" in problem["problem"]
    r = http.get("/no/such/route")
    assert r.status_code == 404 and r.json()["errors"][0]["field"] == "path"


# ------------------------------------------------------------------------------- body size limit
def test_an_8_mb_body_is_refused_quickly_while_health_answers(tmp_path: Path) -> None:
    body = b'{"job_id": "job", "batch_sizes": [' + b"1, " * (8 * 1024 * 1024 // 3) + b"1]}"
    with ThreadServer(create_app(tmp_path / "bso.sqlite3")) as server:
        health: list[float] = []
        done = threading.Event()

        def _poll() -> None:
            with httpx.Client(base_url=server.url, timeout=10) as c:
                while not done.is_set():
                    start = time.monotonic()
                    assert c.get("/health").status_code == 200
                    health.append(time.monotonic() - start)
                    time.sleep(0.01)

        poller = threading.Thread(target=_poll)
        poller.start()
        try:
            with httpx.Client(base_url=server.url, timeout=30) as c:
                for headers, content in (
                    ({"Content-Type": "application/json"}, body),  # with Content-Length
                    (
                        {"Content-Type": "application/json"},
                        iter([body[i : i + 65536] for i in range(0, len(body), 65536)]),
                    ),
                ):
                    start = time.monotonic()
                    r = c.post("/jobs", content=content, headers=headers)
                    elapsed = time.monotonic() - start
                    assert r.status_code == 413, r.text[:300]
                    assert elapsed < 2.0
                    assert len(r.content) < 1000  # the reply does not echo the body
                    assert r.json()["errors"][0]["field"] == "body"
                    assert "--max-body-bytes" in r.json()["message"]
                assert c.get("/jobs/job").status_code == 404
        finally:
            done.set()
            poller.join()
        assert health and max(health) < 1.0


def test_the_limit_is_configurable_and_bodies_within_it_pass(tmp_path: Path) -> None:
    with ThreadServer(create_app(tmp_path / "bso.sqlite3", max_body_bytes=400)) as server:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            assert c.post("/jobs", json=SPEC.to_dict()).status_code == 201
            padded = SPEC.to_dict() | {"job_id": "j" * 300}
            assert c.post("/jobs", json=padded).status_code == 413
    with pytest.raises(ZeusConfigError, match="max_body_bytes"):
        create_app(tmp_path / "bso.sqlite3", max_body_bytes=0)


def test_validation_replies_stay_small_for_large_bad_bodies(http: httpx.Client) -> None:
    r = http.post("/jobs", json=SPEC.to_dict() | {"batch_sizes": ["x" * 20] * 1000})
    assert r.status_code == 422
    assert len(r.content) < 20_000
    errors = r.json()["errors"]
    assert len(errors) == 21 and "and 980 more problems" in errors[-1]["problem"]
    r = http.post("/jobs", json=SPEC.to_dict() | {"batch_sizes": ["x" * 20] * 20000})
    assert r.status_code == 422 and len(r.content) < 5_000  # one problem: above 1024 batch sizes
    assert r.json()["errors"][0]["field"] == "batch_sizes" and "1024" in r.json()["errors"][0]["problem"]
    huge_id = SPEC.to_dict() | {"job_id": "a/" * 100_000}
    r = http.post("/jobs", json=huge_id)
    assert r.status_code == 422 and len(r.content) < 5_000


# ------------------------------------------------------------------------------------------ token
@pytest.mark.parametrize("token", ["", "   ", "\t\n"])
def test_an_empty_token_is_no_token(tmp_path: Path, token: str) -> None:
    with ThreadServer(create_app(tmp_path / "bso.sqlite3", token=token)) as server:
        assert httpx.post(server.url + "/jobs", json=SPEC.to_dict()).status_code == 201


def test_short_tokens_are_refused_naming_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ZeusConfigError, match="at least 16.*openssl rand -hex 16"):
        create_app(tmp_path / "bso.sqlite3", token="s3cret")
    with pytest.raises(ZeusConfigError, match="at least 16"):
        BatchSizeOptimizer("http://127.0.0.1:1", SPEC, token="short")


@pytest.mark.parametrize("args", [["--token", ""], ["--token", "   "], []])
def test_server_refuses_an_empty_token_off_loopback(
    args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's command with ZEUS_BSO_TOKEN unset passes an empty --token: refused."""
    monkeypatch.setenv("ZEUS_BSO_TOKEN", "")
    assert cli_main(["bso-server", "--host", "0.0.0.0", "--port", "1", *args]) == 2
    err = capsys.readouterr().err
    assert "refusing to listen on '0.0.0.0' without a token" in err and "openssl rand -hex 16" in err


def test_server_refuses_a_short_token(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["bso-server", "--host", "0.0.0.0", "--port", "1", "--token", "abc"]) == 2
    assert "the token has 3 characters; use at least 16" in capsys.readouterr().err


def test_basic_auth_carries_the_token(tmp_path: Path) -> None:
    with ThreadServer(create_app(tmp_path / "bso.sqlite3", token=TOKEN)) as server:
        good = base64.b64encode(f"zeus:{TOKEN}".encode()).decode()
        bad = base64.b64encode(b"zeus:wrong-token-0123456789").decode()
        url = server.url + "/jobs"
        assert (
            httpx.post(url, json=SPEC.to_dict(), headers={"Authorization": f"Basic {bad}"}).status_code == 401
        )
        assert httpx.post(url, json=SPEC.to_dict(), headers={"Authorization": "Basic %%%"}).status_code == 401
        assert (
            httpx.post(url, json=SPEC.to_dict(), headers={"Authorization": f"Basic {good}"}).status_code
            == 201
        )
        # The userinfo of a URL becomes basic auth in httpx (what Zeus 0.16's client uses).
        with_token = server.url.replace("http://", f"http://zeus:{TOKEN}@")
        assert httpx.get(with_token + "/jobs/job").status_code == 200


def test_the_command_passes_its_limits_to_the_server(tmp_path: Path) -> None:
    server = SubprocessServer(
        str(tmp_path / "bso.sqlite3"), "--max-body-bytes", "500", "--heartbeat-timeout", "42"
    ).start()
    try:
        assert httpx.post(server.url + "/jobs", json=SPEC.to_dict()).status_code == 201
        assert (
            httpx.post(server.url + "/jobs", json=SPEC.to_dict() | {"job_id": "j" * 600}).status_code == 413
        )
        trial = httpx.post(server.url + "/jobs/job/trials", json={"heartbeat": True}).json()
        assert trial["heartbeat_timeout_s"] == 42.0
    finally:
        server.kill()
