"""The ``BatchSizeOptimizer`` client against a real server on 127.0.0.1 (SQLite and PostgreSQL)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from tests.batch_size.server_harness import REPO_ROOT, ThreadServer, db_url, free_port, make_spec  # noqa: F401
from zeus_core.exceptions import ZeusConfigError, ZeusPermissionError
from zeus_core.optimizer.batch_size._client import BatchSizeOptimizer, ZeusServerError
from zeus_core.optimizer.batch_size._server import create_app

SPEC = make_spec(max_epochs=5)
TOKEN = "test-token-0123456789abcdef"


@pytest.fixture
def server(db_url: str) -> Iterator[ThreadServer]:
    with ThreadServer(create_app(db_url)) as s:
        yield s


@pytest.fixture
def sqlite_server(tmp_path: Path) -> Iterator[ThreadServer]:
    with ThreadServer(create_app(tmp_path / "bso.sqlite3", token=TOKEN)) as s:
        yield s


def test_training_loop_protocol(server: ThreadServer, capsys: pytest.CaptureFixture[str]) -> None:
    with BatchSizeOptimizer(server.url, SPEC) as bso:
        assert bso.trial_number is None
        assert bso.get_batch_size() == 128  # registers the job, starts trial 1 at the default
        assert bso.last_budget is not None and bso.last_budget["default_recurrence_cost_j"] is None
        assert "trial 1: batch size 128 (pruning); cost so far 0 J" in capsys.readouterr().err
        assert bso.get_batch_size() == 128 and bso.trial_number == 1  # cached while it runs
        assert bso.on_epoch_end(1, time_s=10.0, energy_j=2000.0, metric=0.5) is False
        assert bso.on_epoch_end(2, time_s=20.0, energy_j=4000.0, metric=0.95) is True
        assert bso.stop_reason == "target_reached"
        assert bso.on_epoch_end(3, time_s=30.0, energy_j=6000.0, metric=0.95) is True  # no request needed
        stored = bso.report(time_s=20.5, energy_j=4100.0, metric=0.95, converged=True)
        assert stored["recorded"] is False and stored["status"] == "converged" and stored["time_s"] == 20.0

        assert bso.get_batch_size() == 64 and bso.trial_number == 2  # the next recurrence: a new trial
        # Where the job stands against its default: one recurrence, measured at the default.
        default_cost = 0.5 * 4000.0 + 0.5 * 300.0 * 20.0
        assert bso.last_budget["cost_j"] == pytest.approx(default_cost)
        assert bso.last_budget["default_cost_j"] == pytest.approx(default_cost)
        assert bso.last_budget["remaining_j"] == pytest.approx(0.0) and bso.last_budget["slack"] == 0.0
        printed = capsys.readouterr().err
        assert "trial 2: batch size 64 (pruning)" in printed and "exploration budget left 0 J" in printed
        out = bso.report(time_s=5.0, energy_j=700.0, metric=0.2, converged=False)
        assert out["recorded"] is True and out["status"] == "failed"
        with pytest.raises(ZeusConfigError, match="no trial is running; call get_batch_size"):
            bso.report(time_s=5.0, energy_j=700.0, converged=False)

        state = bso.job_state()
        budget = bso.budget()
    assert [t["status"] for t in state["trials"]] == ["converged", "failed"]
    # The failed exploration is charged: the job is now over its default by that trial's cost.
    assert budget == state["budget"]
    assert budget["remaining_j"] == pytest.approx(-(0.5 * 700.0 + 0.5 * 300.0 * 5.0))
    assert state["bandit"]["num_observations"] == 2
    assert bso.register() is False  # closed clients reopen; the job is already there


def test_error_inside_the_with_block_abandons_the_trial(server: ThreadServer) -> None:
    with pytest.raises(RuntimeError, match="training crashed"):
        with BatchSizeOptimizer(server.url, SPEC) as bso:
            bso.get_batch_size()
            raise RuntimeError("training crashed")
    state = BatchSizeOptimizer(server.url, SPEC).job_state()
    assert [(t["status"], t["end_reason"]) for t in state["trials"]] == [("expired", "abandoned")]
    assert BatchSizeOptimizer(server.url, SPEC).get_batch_size() == 128  # no longer pending


def test_epoch_report_before_a_trial_is_a_clear_error(sqlite_server: ThreadServer) -> None:
    bso = BatchSizeOptimizer(sqlite_server.url, SPEC, token=TOKEN)
    with pytest.raises(
        ZeusConfigError, match=r"on_epoch_end: no trial is running; call get_batch_size\(\) first"
    ):
        bso.on_epoch_end(1, 1.0, 1.0)


def test_unreachable_server_names_the_url_and_the_fix() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    bso = BatchSizeOptimizer(url, SPEC, retries=2, retry_backoff_s=0.01, timeout_s=2)
    start = time.monotonic()
    with pytest.raises(ZeusServerError) as info:
        bso.get_batch_size()
    message = str(info.value)
    assert f"cannot reach the batch-size optimizer server at {url}" in message
    assert "ConnectError" in message and "tried 3 times" in message and "zeus-suite bso-server" in message
    assert time.monotonic() - start < 10


def test_token(sqlite_server: ThreadServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZEUS_BSO_TOKEN", raising=False)
    with pytest.raises(
        ZeusPermissionError, match="answered 401: .*Authorization: Bearer.*set ZEUS_BSO_TOKEN"
    ):
        BatchSizeOptimizer(sqlite_server.url, SPEC).get_batch_size()
    with pytest.raises(ZeusPermissionError, match="does not match"):
        BatchSizeOptimizer(sqlite_server.url, SPEC, token="not-the-token-0123456789").get_batch_size()
    monkeypatch.setenv("ZEUS_BSO_TOKEN", TOKEN)
    assert BatchSizeOptimizer(sqlite_server.url, SPEC).get_batch_size() == 128


def test_conflicting_spec_and_bad_reports_raise_config_errors(sqlite_server: ThreadServer) -> None:
    bso = BatchSizeOptimizer(sqlite_server.url, SPEC, token=TOKEN)
    bso.get_batch_size()
    bso.on_epoch_end(1, time_s=10.0, energy_j=100.0)
    with pytest.raises(ZeusConfigError, match="answered 422: .*time_s=5.0 is less than the 10.0 s"):
        bso.on_epoch_end(2, time_s=5.0, energy_j=200.0)
    other = BatchSizeOptimizer(sqlite_server.url, make_spec(max_epochs=5, eta_knob=0.9), token=TOKEN)
    with pytest.raises(ZeusConfigError, match=r"answered 409: .*eta_knob \(registered 0.5, requested 0.9\)"):
        other.get_batch_size()


def test_constructor_validates_and_accepts_a_spec_dict() -> None:
    with pytest.raises(ZeusConfigError, match="must be an http"):
        BatchSizeOptimizer("127.0.0.1:8000", SPEC)
    with pytest.raises(ZeusConfigError, match="timeout_s"):
        BatchSizeOptimizer("http://x", SPEC, timeout_s=0)
    with pytest.raises(ZeusConfigError, match="eta_knob"):
        BatchSizeOptimizer("http://x", {**SPEC.to_dict(), "eta_knob": 2.0})
    assert BatchSizeOptimizer("http://x/", SPEC.to_dict()).job_spec == SPEC


@pytest.mark.slow
def test_two_ranks_share_one_trial(sqlite_server: ThreadServer, tmp_path: Path) -> None:
    """torch.distributed (gloo, 2 processes): only rank 0 talks to the server; both ranks agree."""
    script = Path(__file__).with_name("client_worker.py")
    env = {**os.environ, "BSO_URL": sqlite_server.url, "BSO_OUT": str(tmp_path), "ZEUS_BSO_TOKEN": TOKEN}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--master_port",
        str(free_port()),
        str(script),
    ]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [(tmp_path / f"rank{r}.txt").read_text().split() for r in (0, 1)]
    assert lines[0] == lines[1]  # same trial number, batch size, stop decision, and error on both ranks
    trial_number, batch_size, stopped, error = lines[0]
    assert (trial_number, batch_size, stopped, error) == ("1", "128", "True", "ZeusConfigError")
    state = BatchSizeOptimizer(sqlite_server.url, SPEC, token=TOKEN).job_state()
    assert len(state["trials"]) == 1 and state["trials"][0]["status"] == "converged"
