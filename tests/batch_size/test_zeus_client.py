"""Zeus 0.16's published batch-size client (``pip install zeus==0.16.0``) against our server.

The client runs unchanged: it finds its GPU through ``pynvml`` (our faithful fake of NVML, an
A40), measures energy with Zeus's own ``ZeusMonitor``, and talks HTTP to our server on 127.0.0.1.
Only two things are bent for a machine without a GPU: ``torch.cuda.synchronize`` (nothing runs on
the fake GPU, so there is nothing to wait for), and the ``atexit`` hook with which the client ends
its trial, which the test calls itself instead of at interpreter exit.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

import httpx
import pytest

from tests.batch_size.server_harness import ThreadServer
from zeus_core.optimizer.batch_size._server import create_app
from zeus_core.testing._fake_nvml import FakeGPUSpec, FakeNVML

pytest.importorskip("zeus.optimizer.batch_size.client", reason="needs zeus==0.16 (the published client)")

TOKEN = "zeus-compat-token-0123456789"


class ZeusEnv:
    """The ``zeus`` modules, imported afresh against the fake NVML, and the client's exit hooks."""

    def __init__(self, client: ModuleType, common: ModuleType, monitor: Any) -> None:
        self.client = client
        self.common = common
        self.monitor_cls = monitor
        self.exit_hooks: list[Callable[[], None]] = []

    def job(self, **overrides: Any) -> Any:
        kwargs: dict[str, Any] = {
            "job_id": "mnist-zeus",
            "job_id_prefix": "mnist",
            "batch_sizes": [256, 32, 64, 128],  # unsorted, as Zeus allows
            "default_batch_size": 128,
            "target_metric": 0.9,
            "max_epochs": 3,
            "mab_seed": 7,
        }
        kwargs.update(overrides)
        return self.common.JobSpec(**kwargs)

    def optimizer(self, url: str, job: Any) -> Any:
        return self.client.BatchSizeOptimizer(self.monitor_cls(gpu_indices=[0]), url, job)

    def run_exit_hooks(self) -> None:
        hooks = list(self.exit_hooks)
        self.exit_hooks.clear()  # in place: the patched atexit.register appends to this list
        for hook in hooks:
            hook()


@pytest.fixture
def zeus(monkeypatch: pytest.MonkeyPatch) -> Iterator[ZeusEnv]:
    import zeus.device.gpu as zeus_gpu
    import zeus.device.gpu.nvidia as zeus_nvidia
    import zeus.monitor.energy as energy
    import zeus.optimizer.batch_size.client as client
    import zeus.optimizer.batch_size.common as common

    fake = FakeNVML([FakeGPUSpec.a40()]).patch(monkeypatch)
    monkeypatch.setattr(zeus_nvidia, "pynvml", fake)
    monkeypatch.setattr(zeus_gpu, "_gpus", None)  # Zeus caches the GPUs it found
    zeus_nvidia.nvml_is_available.cache_clear()
    monkeypatch.setattr(energy, "sync_execution_fn", lambda *args, **kwargs: None)
    env = ZeusEnv(client, common, energy.ZeusMonitor)
    monkeypatch.setattr(client.atexit, "register", env.exit_hooks.append)
    yield env
    zeus_nvidia.nvml_is_available.cache_clear()


def _epoch(bso: Any, metric: float) -> None:
    time.sleep(0.05)  # the fake A40 draws power while "training"
    bso.on_evaluate(metric)


def test_zeus_client_runs_two_trials_against_our_server(zeus: ZeusEnv, tmp_path: Path) -> None:
    with ThreadServer(create_app(tmp_path / "bso.sqlite3")) as server:
        # Trial 1: the default batch size reaches the target in its second epoch.
        bso = zeus.optimizer(server.url, zeus.job())
        assert bso.job.job_id == "mnist-zeus" and bso.job.batch_sizes == [32, 64, 128, 256]
        assert bso.get_batch_size() == 128 and bso.trial_number == 1
        bso.on_train_begin()
        _epoch(bso, 0.5)
        assert not bso.training_finished
        _epoch(bso, 0.95)
        assert bso.training_finished
        zeus.run_exit_hooks()  # PATCH /trials at exit: the trial has ended, nothing changes

        # Trial 2 (a new run of the job): pruning goes down from the default; it never converges.
        bso = zeus.optimizer(server.url, zeus.job())  # registering the identical spec again: 200
        assert bso.get_batch_size() == 64 and bso.trial_number == 2
        bso.on_train_begin()
        _epoch(bso, 0.1)
        _epoch(bso, 0.2)
        with pytest.raises(zeus.client.ZeusBSOTrainFailError, match="max_epochs"):
            _epoch(bso, 0.3)
        zeus.run_exit_hooks()

        # Trial 3: the process ends mid-training; its exit hook abandons the trial.
        bso = zeus.optimizer(server.url, zeus.job())
        bso.get_batch_size()
        bso.on_train_begin()
        _epoch(bso, 0.1)
        zeus.run_exit_hooks()

        state = httpx.get(server.url + "/jobs/mnist-zeus").json()
        spec = state["spec"]
        assert spec["max_power_w"] == 300.0 and spec["num_pruning_rounds"] == 2 and spec["seed"] == 7
        assert spec["window_size"] == 0 and spec["prior_mean"] is None
        trials = {t["trial_number"]: t for t in state["trials"]}
        assert (trials[1]["status"], trials[1]["end_reason"], trials[1]["epochs"]) == (
            "converged",
            "target_reached",
            2,
        )
        assert (trials[2]["status"], trials[2]["end_reason"], trials[2]["epochs"]) == (
            "failed",
            "max_epochs",
            3,
        )
        assert (trials[3]["status"], trials[3]["end_reason"], trials[3]["epochs"]) == (
            "expired",
            "abandoned",
            1,
        )
        # Energy was measured by Zeus's monitor on the fake A40 and stored as reported.
        assert all(t["energy_j"] > 0 and t["time_s"] > 0 for t in trials.values())
        assert state["bandit"]["phase"] == "pruning"


def test_zeus_registration_rules(zeus: ZeusEnv, tmp_path: Path) -> None:
    with ThreadServer(create_app(tmp_path / "bso.sqlite3")) as server:
        named = zeus.optimizer(server.url, zeus.job(job_id=None))  # the server names the job
        assert named.job.job_id.startswith("mnist-") and len(named.job.job_id) == len("mnist-") + 8
        zeus.optimizer(server.url, zeus.job())
        with pytest.raises(zeus.client.ZeusBSORuntimError, match="409.*eta_knob"):
            zeus.optimizer(server.url, zeus.job(eta_knob=0.2))
        with pytest.raises(zeus.client.ZeusBSORuntimError, match="422.*beta_knob.*must be > 1"):
            zeus.optimizer(server.url, zeus.job(job_id="mnist-b", beta_knob=0.5))
        prior = zeus.optimizer(
            server.url, zeus.job(job_id="mnist-p", mab_prior_mean=5000.0, mab_prior_precision=1e-6)
        )
        spec = httpx.get(f"{server.url}/jobs/{prior.job.job_id}").json()["spec"]
        assert spec["prior_mean"] == 5000.0 and spec["prior_std"] == pytest.approx(1000.0)
        r = httpx.get(server.url + "/jobs/batch_size", params={"job_id": "nope"})
        assert r.status_code == 404 and r.json()["errors"][0]["field"] == "job_id"
        r = httpx.post(
            server.url + "/report",
            json={
                "job_id": "mnist-zeus",
                "batch_size": 32,
                "trial_number": 1,
                "time": 1.0,
                "energy": 1.0,
                "metric": 0.1,
                "current_epoch": 1,
            },
        )
        assert r.status_code == 404 and r.json()["errors"][0]["field"] == "trial_number"


def test_zeus_client_reaches_a_server_with_a_token_through_basic_auth(zeus: ZeusEnv, tmp_path: Path) -> None:
    with ThreadServer(create_app(tmp_path / "bso.sqlite3", token=TOKEN)) as server:
        with pytest.raises(zeus.client.ZeusBSORuntimError, match="401"):
            zeus.optimizer(server.url, zeus.job())
        url = server.url.replace("http://", f"http://zeus:{TOKEN}@")
        bso = zeus.optimizer(url, zeus.job())
        assert bso.get_batch_size() == 128
        bso.on_train_begin()
        _epoch(bso, 0.95)
        assert bso.training_finished
