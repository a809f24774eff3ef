"""Issue 18 (service part): trials whose client stopped reporting close after the heartbeat timeout."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from tests.batch_size.server_harness import REPO_ROOT, FakeClock, ThreadServer, clock, db_url, make_spec  # noqa: F401
from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.batch_size._client import BatchSizeOptimizer
from zeus_core.optimizer.batch_size._server import create_app

SPEC = make_spec()


@pytest.fixture
def http(db_url: str, clock: FakeClock) -> Iterator[httpx.Client]:
    """Heartbeat timeout 30 s, trial timeout 1000 s, on a fake clock."""
    app = create_app(db_url, trial_timeout_s=1000.0, heartbeat_timeout_s=30.0, clock=clock)
    with ThreadServer(app) as server:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            assert client.post("/jobs", json=SPEC.to_dict()).status_code == 201
            yield client


def _trial(http: httpx.Client, n: int) -> dict:
    r = http.get(f"/jobs/job/trials/{n}")
    assert r.status_code == 200, r.text
    return r.json()


def test_silent_heartbeat_trials_expire_keeping_their_reports(http: httpx.Client, clock: FakeClock) -> None:
    beating = http.post("/jobs/job/trials", json={"heartbeat": True}).json()
    plain = http.post("/jobs/job/trials").json()
    assert beating["heartbeat_timeout_s"] == 30.0
    n, m = beating["trial_number"], plain["trial_number"]
    epoch = {"epoch": 1, "time_s": 100.0, "energy_j": 20_000.0, "metric": 0.5}
    assert http.post(f"/jobs/job/trials/{n}/epochs", json=epoch).json()["stop"] is False
    clock.now += 20
    assert http.post(f"/jobs/job/trials/{n}/heartbeat").json()["status"] == "running"
    clock.now += 25  # 25 s since the heartbeat: alive
    assert _trial(http, n)["status"] == "running"
    clock.now += 10  # 35 s: gone
    trial = _trial(http, n)
    assert (trial["status"], trial["end_reason"]) == ("expired", "heartbeat_timeout")
    # What it reported is kept.
    assert trial["epochs"] == 1 and trial["energy_j"] == 20_000.0 and trial["cost"] > 0
    assert [e["epoch"] for e in trial["epoch_reports"]] == [1]
    # It no longer counts as pending, and does not feed the bandit.
    state = http.get("/jobs/job").json()
    assert state["counts"] == {"running": 1, "converged": 0, "failed": 0, "expired": 1}
    # The trial without heartbeats only has the (long) trial timeout.
    assert _trial(http, m)["status"] == "running"
    # A late report revives the heartbeat trial and counts.
    later = {"epoch": 2, "time_s": 200.0, "energy_j": 40_000.0, "metric": 0.6}
    assert http.post(f"/jobs/job/trials/{n}/epochs", json=later).json()["status"] == "running"
    clock.now += 1000
    trial = _trial(http, m)
    assert (trial["status"], trial["end_reason"]) == ("expired", "timeout")


def test_a_heartbeat_switches_a_trial_to_the_heartbeat_timeout_and_revives_it(
    http: httpx.Client, clock: FakeClock
) -> None:
    n = http.post("/jobs/job/trials").json()["trial_number"]
    clock.now += 40
    assert _trial(http, n)["status"] == "running"  # no heartbeat promised: the trial timeout applies
    out = http.post(f"/jobs/job/trials/{n}/heartbeat").json()
    assert out["heartbeat"] is True and out["status"] == "running"
    clock.now += 31
    assert _trial(http, n)["end_reason"] == "heartbeat_timeout"
    assert http.post(f"/jobs/job/trials/{n}/heartbeat").json()["status"] == "running"  # revived
    r = http.post(f"/jobs/job/trials/{n}/result", json={"time_s": 1.0, "energy_j": 1.0, "converged": True})
    assert r.json()["status"] == "converged"
    assert http.post(f"/jobs/job/trials/{n}/heartbeat").json()["status"] == "converged"  # ended: unchanged
    assert http.post("/jobs/job/trials/99/heartbeat").status_code == 404


def test_the_sweeper_expires_trials_without_any_request(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "bso.sqlite3"
    app = create_app(path, heartbeat_timeout_s=30.0, clock=clock, sweep_interval_s=0.05)
    with ThreadServer(app) as server:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            http.post("/jobs", json=SPEC.to_dict())
            http.post("/jobs/job/trials", json={"heartbeat": True})
        clock.now += 31
        deadline = time.monotonic() + 20
        status = None
        while time.monotonic() < deadline:
            with sqlite3.connect(path) as conn:
                status = conn.execute("SELECT status, end_reason FROM bso_trials").fetchone()
            if status[0] == "expired":
                break
            time.sleep(0.05)
        assert status == ("expired", "heartbeat_timeout")


def test_timeouts_are_validated(tmp_path: Path) -> None:
    with pytest.raises(ZeusConfigError, match="heartbeat_timeout_s=0 must be a finite number > 0 s"):
        create_app(tmp_path / "bso.sqlite3", heartbeat_timeout_s=0)


_DYING_CLIENT = """
import sys, time
from tests.batch_size.server_harness import make_spec
from zeus_core.optimizer.batch_size._client import BatchSizeOptimizer
bso = BatchSizeOptimizer(sys.argv[1], make_spec())
bso.get_batch_size()
bso.on_epoch_end(1, time_s=10.0, energy_j=3000.0, metric=0.3)
print("ready", flush=True)
time.sleep(600)
"""


@pytest.mark.slow
def test_the_client_sends_heartbeats_and_a_killed_client_is_noticed(tmp_path: Path) -> None:
    """Real clock: a client killed with SIGKILL stops its heartbeats; its trial closes in seconds."""
    app = create_app(tmp_path / "bso.sqlite3", heartbeat_timeout_s=3.0, sweep_interval_s=0.2)
    with ThreadServer(app) as server:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        proc = subprocess.Popen(
            [sys.executable, "-c", _DYING_CLIENT, server.url], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
            time.sleep(4.5)  # longer than the timeout: only heartbeats (every 1 s) keep it running
            trial = httpx.get(server.url + "/jobs/job/trials/1").json()
            assert trial["status"] == "running" and trial["heartbeat"] is True
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            trial = httpx.get(server.url + "/jobs/job/trials/1").json()
            if trial["status"] != "running":
                break
            time.sleep(0.2)
        assert (trial["status"], trial["end_reason"]) == ("expired", "heartbeat_timeout")
        assert trial["epochs"] == 1 and trial["energy_j"] == 3000.0  # kept


def _heartbeat_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("bso-heartbeat")}


def test_heartbeats_refresh_the_trial_and_stop_when_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from zeus_core.optimizer.batch_size import _heartbeat

    monkeypatch.setattr(_heartbeat, "MIN_INTERVAL_S", 0.1)  # the client's floor is 1 s: a faster test
    before = _heartbeat_threads()  # other tests' clients that were never closed
    app = create_app(tmp_path / "bso.sqlite3", heartbeat_timeout_s=0.3)
    with ThreadServer(app) as server:
        with BatchSizeOptimizer(server.url, SPEC) as bso:
            bso.get_batch_size()
            time.sleep(0.6)
            trial = httpx.get(server.url + "/jobs/job/trials/1").json()
            assert trial["heartbeat"] is True and trial["last_seen_at"] > trial["created_at"]
            assert len(_heartbeat_threads() - before) == 1
            bso.report(time_s=1.0, energy_j=1.0, metric=0.95, converged=True)
            assert _heartbeat_threads() - before == set()
        with BatchSizeOptimizer(server.url, SPEC, heartbeat=False) as quiet:
            quiet.get_batch_size()
            assert _heartbeat_threads() - before == set()
            assert httpx.get(server.url + "/jobs/job/trials/2").json()["heartbeat"] is False
