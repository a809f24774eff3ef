"""Many simultaneous trials over real HTTP, and a server killed mid-stream then restarted."""

from __future__ import annotations

import threading
import time

import httpx

from tests.batch_size.server_harness import SubprocessServer, ThreadServer, db_url, make_spec, run_threads  # noqa: F401
from zeus_core.optimizer.batch_size._bandit import BatchSizeBandit, Observation
from zeus_core.optimizer.batch_size._server import create_app

N_TRIALS = 40


def test_forty_simultaneous_trials_get_unique_numbers_and_no_report_is_lost(db_url: str) -> None:
    spec = make_spec()
    with ThreadServer(create_app(db_url)) as server:
        assert httpx.post(server.url + "/jobs", json=spec.to_dict()).status_code == 201

        def one_trial(i: int) -> tuple[int, int]:
            with httpx.Client(base_url=server.url, timeout=60) as http:
                r = http.post("/jobs/job/trials", json={"request_id": f"worker-{i}"})
                assert r.status_code == 201, r.text
                n, b = r.json()["trial_number"], r.json()["batch_size"]
                r = http.post(
                    f"/jobs/job/trials/{n}/epochs",
                    json={"epoch": 1, "time_s": 0.0, "energy_j": 0.001 * i, "metric": 0.1},
                )
                assert r.status_code == 200, r.text
                r = http.post(
                    f"/jobs/job/trials/{n}/result",
                    json={"time_s": 2.0 + i, "energy_j": 200.0 * (i + 1), "converged": i % 3 != 0},
                )
                assert r.status_code == 200 and r.json()["recorded"], r.text
                return n, b

        results = run_threads(N_TRIALS, one_trial)
        state = httpx.get(server.url + "/jobs/job", timeout=30).json()

    numbers = sorted(n for n, _ in results)
    assert numbers == list(range(1, N_TRIALS + 1))
    assert all(b in spec.batch_sizes for _, b in results)
    by_number = {t["trial_number"]: t for t in state["trials"]}
    assert len(by_number) == N_TRIALS
    assert sorted(t["completion_order"] for t in state["trials"]) == list(range(N_TRIALS))
    for i, (n, b) in enumerate(results):  # every worker's own numbers landed on its own trial
        t = by_number[n]
        assert (t["batch_size"], t["time_s"], t["energy_j"]) == (b, 2.0 + i, 200.0 * (i + 1))
        assert t["converged"] is (i % 3 != 0)
    assert state["counts"]["running"] == 0
    assert state["bandit"]["num_observations"] == N_TRIALS
    # While trials overlapped, pruning spread them over the arms instead of piling onto one.
    assert len({b for _, b in results}) >= 2


def test_simultaneous_registrations_create_the_job_once(db_url: str) -> None:
    spec = make_spec()
    with ThreadServer(create_app(db_url)) as server:
        codes = run_threads(
            10, lambda i: httpx.post(server.url + "/jobs", json=spec.to_dict(), timeout=60).status_code
        )
        conflict = httpx.post(server.url + "/jobs", json=make_spec(seed=7).to_dict(), timeout=30)
    assert sorted(codes) == [200] * 9 + [201]
    assert conflict.status_code == 409 and "seed (registered 1, requested 7)" in conflict.json()["message"]


def test_restart_mid_stream_keeps_every_acknowledged_report_and_the_bandit_continues(db_url: str) -> None:
    spec = make_spec(num_pruning_rounds=1)
    first = SubprocessServer(db_url).start()
    acked: dict[int, tuple[int, float]] = {}  # trial number -> (batch size, energy) the server confirmed
    stop = threading.Event()

    def stream() -> None:
        with httpx.Client(base_url=first.url, timeout=10) as http:
            http.post("/jobs", json=spec.to_dict()).raise_for_status()
            i = 0
            while not stop.is_set():
                i += 1
                try:
                    r = http.post("/jobs/job/trials", json={"request_id": f"r{i}"})
                    n, b = r.json()["trial_number"], r.json()["batch_size"]
                    energy = 1000.0 * (1 + (b % 100) / 100) + i
                    r = http.post(
                        f"/jobs/job/trials/{n}/result",
                        json={"time_s": 1.0, "energy_j": energy, "converged": b != 32},
                    )
                    if r.status_code == 200:
                        acked[n] = (b, energy)
                except (httpx.TransportError, ValueError, KeyError):
                    return  # the server died under us

    worker = threading.Thread(target=stream)
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while len(acked) < 8 and time.monotonic() < deadline:
            time.sleep(0.01)
        first.kill()  # SIGKILL while requests are in flight
    finally:
        stop.set()
        worker.join(timeout=30)
        first.kill()
    assert len(acked) >= 8

    second = SubprocessServer(db_url).start()
    try:
        with httpx.Client(base_url=second.url, timeout=10) as http:
            state = http.get("/jobs/job").json()
            trials = {t["trial_number"]: t for t in state["trials"]}
            for n, (b, energy) in acked.items():
                assert trials[n]["batch_size"] == b and trials[n]["energy_j"] == energy
                assert trials[n]["status"] in ("converged", "failed")
            assert sorted(trials) == list(range(1, len(trials) + 1))  # no gap, nothing duplicated
            ended = sorted(
                (t for t in trials.values() if t["completion_order"] is not None),
                key=lambda t: t["completion_order"],
            )
            assert [t["completion_order"] for t in ended] == list(range(len(ended)))
            observations = [Observation(t["batch_size"], t["cost"], t["converged"]) for t in ended]
            pending = [t["batch_size"] for t in trials.values() if t["status"] == "running"]
            expected = BatchSizeBandit(spec, observations).next_batch_size(len(trials) + 1, pending)
            r = http.post("/jobs/job/trials", json={"request_id": "after-restart"})
            assert r.status_code == 201
            assert (r.json()["trial_number"], r.json()["batch_size"]) == (len(trials) + 1, expected)
            # A trial that was started before the crash can still report.
            for n, t in trials.items():
                if t["status"] == "running":
                    r = http.post(
                        f"/jobs/job/trials/{n}/result",
                        json={"time_s": 1.0, "energy_j": 999.0, "converged": True},
                    )
                    assert r.status_code == 200 and r.json()["recorded"]
    finally:
        second.kill()
