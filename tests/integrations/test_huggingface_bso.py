"""ZeusTrainerCallback with a batch-size optimizer: real Trainer runs reporting to a real service (HTTP)."""

from __future__ import annotations

import gc
import logging
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

pytest.importorskip("transformers")
pytest.importorskip("fastapi")
from transformers import Trainer  # noqa: E402

from tests.batch_size.server_harness import ThreadServer  # noqa: E402
from tests.integrations.test_huggingface import RecordingMonitor, TinyRegressor, args, dataset  # noqa: E402
from zeus_core import BatchSizeOptimizer, JobSpec  # noqa: E402
from zeus_core.exceptions import ZeusConfigError  # noqa: E402
from zeus_core.optimizer.batch_size._server import create_app  # noqa: E402
from zeus_integrations.huggingface import ZeusTrainerCallback  # noqa: E402

SPEC = JobSpec("hf-tiny", (2, 4), 2, target_metric=0.75, max_power_w=300.0, max_epochs=10)


class RisingAccuracy:
    """``compute_metrics`` whose accuracy rises by 0.25 per evaluation: the target 0.75 on the third."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, prediction: Any) -> dict[str, float]:
        self.calls += 1
        return {"accuracy": 0.25 * self.calls}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ThreadServer]:
    with ThreadServer(create_app(str(tmp_path / "bso.sqlite3"))) as srv:
        yield srv


def _trainer(
    tmp_path: Path, bso: BatchSizeOptimizer, spec_epochs: int = 10, model: Any = None, **overrides: Any
) -> tuple[Trainer, ZeusTrainerCallback]:
    zeus = ZeusTrainerCallback(
        monitor=RecordingMonitor(), batch_size_optimizer=bso, metric_name="eval_accuracy"
    )
    settings = dict(
        per_device_train_batch_size=bso.get_batch_size(), num_train_epochs=spec_epochs, eval_strategy="epoch"
    )
    trainer = Trainer(
        model=model or TinyRegressor(),
        args=args(tmp_path, **{**settings, **overrides}),
        train_dataset=dataset(8),
        eval_dataset=dataset(4),
        compute_metrics=RisingAccuracy(),
        callbacks=[zeus],
    )
    return trainer, zeus


def _trials(server: ThreadServer, job: str = SPEC.job_id) -> list[dict[str, Any]]:
    return httpx.get(f"{server.url}/jobs/{job}").json()["trials"]


def test_each_epoch_is_reported_after_its_evaluation_and_training_stops_at_the_target(
    tmp_path: Path, server: ThreadServer
) -> None:
    with BatchSizeOptimizer(server.url, SPEC) as bso:
        trainer, zeus = _trainer(tmp_path, bso)
        trainer.train()
        assert bso.stop_reason == "target_reached" and bso.batch_size is None  # reported
    assert trainer.state.epoch == 3 and len(zeus.epoch_history) == 3  # of num_train_epochs=10
    (trial,) = _trials(server)
    assert (trial["batch_size"], trial["status"], trial["epochs"], trial["metric"]) == (
        2,
        "converged",
        3,
        0.75,
    )
    assert trial["time_s"] == pytest.approx(sum(e["time/epoch_s"] for e in zeus.epoch_history))
    assert trial["energy_j"] == pytest.approx(sum(e["energy/epoch_j"] for e in zeus.epoch_history))
    # The train window also holds what runs outside the epochs (set-up, the final log).
    assert 0 < trial["energy_j"] <= zeus.train_metrics["energy/train_j"]


def test_without_evaluation_epochs_are_reported_at_their_end_until_max_epochs(
    tmp_path: Path, server: ThreadServer, caplog: pytest.LogCaptureFixture
) -> None:
    spec = JobSpec("hf-no-eval", (2, 4), 2, target_metric=0.75, max_power_w=300.0, max_epochs=2)
    with BatchSizeOptimizer(server.url, spec) as bso:
        trainer, zeus = _trainer(tmp_path, bso, spec_epochs=5, eval_strategy="no")
        with caplog.at_level(logging.WARNING):
            trainer.train()
        assert bso.stop_reason == "max_epochs"
    assert trainer.state.epoch == 2 and len(zeus.epoch_history) == 2
    warnings = [r.getMessage() for r in caplog.records if "no metric 'eval_accuracy'" in r.getMessage()]
    assert len(warnings) == 1 and "after epoch 1" in warnings[0]  # once, naming the metric
    (trial,) = _trials(server, spec.job_id)
    assert (trial["status"], trial["end_reason"], trial["epochs"]) == ("failed", "max_epochs", 2)


def test_a_failed_train_abandons_its_trial(tmp_path: Path, server: ThreadServer) -> None:
    with BatchSizeOptimizer(server.url, SPEC) as bso:
        trainer, _ = _trainer(tmp_path, bso, model=TinyRegressor(fail_at=6))  # in epoch 2 (4 batches each)
        with pytest.raises(RuntimeError, match="injected"):
            trainer.train()
        del trainer, _  # Transformers calls no hook on failure: the run ends when its callback goes
        gc.collect()
    (trial,) = _trials(server)
    assert (trial["status"], trial["end_reason"], trial["epochs"]) == ("expired", "abandoned", 1)


def test_bad_batch_size_optimizer_arguments(tmp_path: Path, server: ThreadServer) -> None:
    bso = BatchSizeOptimizer(server.url, SPEC)
    with pytest.raises(ZeusConfigError, match="metric_name=None must name"):
        ZeusTrainerCallback(batch_size_optimizer=bso)
    with pytest.raises(ZeusConfigError, match="needs batch_size_optimizer"):
        ZeusTrainerCallback(metric_name="eval_accuracy")
    zeus = ZeusTrainerCallback(
        monitor=RecordingMonitor(), batch_size_optimizer=bso, metric_name="eval_accuracy"
    )
    trainer = Trainer(model=TinyRegressor(), args=args(tmp_path), train_dataset=dataset(8), callbacks=[zeus])
    with pytest.raises(ZeusConfigError, match=r"get_batch_size\(\) before training"):
        trainer.train()
    assert httpx.get(f"{server.url}/jobs/{SPEC.job_id}").status_code == 404
