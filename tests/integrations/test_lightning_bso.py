"""ZeusCallback with a batch-size optimizer: real Lightning fits reporting to a real service over HTTP.

The tiny module runs one unit of simulated work per batch (0.1 s, 30 J; ``scripts/lightning_tiny.py``),
so every trial's time, energy and Zeus cost on the server has an exact expected value.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

pl = pytest.importorskip("lightning.pytorch")
pytest.importorskip("fastapi")

SCRIPTS = Path(__file__).parent / "scripts"
sys.path.insert(0, str(SCRIPTS))
from lightning_tiny import UNIT_ENERGY_J, UNIT_TIME_S, TinyModule, loader, simulated_monitor, trainer_kwargs  # noqa: E402

from tests.batch_size.server_harness import ThreadServer  # noqa: E402
from zeus_core import BatchSizeOptimizer, JobSpec  # noqa: E402
from zeus_core.exceptions import ZeusConfigError  # noqa: E402
from zeus_core.optimizer.batch_size._server import create_app  # noqa: E402
from zeus_integrations.lightning import ZeusCallback  # noqa: E402

SPEC = JobSpec("tiny", (2, 4, 8), 4, target_metric=0.75, max_power_w=300.0, max_epochs=10, beta_knob=2.5)
SAMPLES = 16


class AccuracyModule(TinyModule):
    """Logs ``val_acc`` = ``gain`` × (epoch + 1): with the default gain the target 0.75 is met in epoch 3."""

    def __init__(self, gpu: Any, gain: float = 0.25, **kwargs: Any) -> None:
        super().__init__(gpu, **kwargs)
        self.gain = gain

    def on_validation_epoch_end(self) -> None:
        self.log("val_acc", self.gain * (self.current_epoch + 1))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ThreadServer]:
    with ThreadServer(create_app(str(tmp_path / "bso.sqlite3"))) as srv:
        yield srv


def _fit(tmp_path: Path, bso: BatchSizeOptimizer, **module_kwargs: Any) -> tuple[pl.Trainer, ZeusCallback]:
    gpu, monitor = simulated_monitor()
    zeus = ZeusCallback(monitor=monitor, batch_size_optimizer=bso, metric_name="val_acc")
    trainer = pl.Trainer(
        callbacks=[zeus],
        limit_val_batches=1,
        num_sanity_val_steps=0,
        **trainer_kwargs(str(tmp_path), max_epochs=10),
    )
    batch_size = bso.get_batch_size()
    trainer.fit(AccuracyModule(gpu, **module_kwargs), loader(SAMPLES, batch_size), loader(4))
    return trainer, zeus


def _trials(server: ThreadServer) -> list[dict[str, Any]]:
    return httpx.get(f"{server.url}/jobs/{SPEC.job_id}").json()["trials"]


def test_each_epoch_is_reported_and_the_fit_stops_at_the_target(tmp_path: Path, server: ThreadServer) -> None:
    with BatchSizeOptimizer(server.url, SPEC) as bso:
        trainer, zeus = _fit(tmp_path, bso)
        assert bso.batch_size is None and bso.last_result is not None  # reported
    assert bso.stop_reason == "target_reached"
    assert trainer.current_epoch == 3 and len(zeus.epoch_history) == 3  # of max_epochs=10

    (trial,) = _trials(server)
    batches = SAMPLES // SPEC.default_batch_size  # the first trial runs the default batch size
    assert (trial["batch_size"], trial["status"], trial["epochs"]) == (4, "converged", 3)
    # Validation is not counted: 3 epochs × 4 batches of 0.1 s and 30 J.
    assert trial["time_s"] == pytest.approx(3 * batches * UNIT_TIME_S)
    assert trial["energy_j"] == pytest.approx(3 * batches * UNIT_ENERGY_J)
    assert trial["metric"] == 0.75
    assert trial["energy_j"] == pytest.approx(zeus.train_metrics["energy/train_j"])


def test_the_server_stops_a_costly_trial_early(tmp_path: Path, server: ThreadServer) -> None:
    with BatchSizeOptimizer(server.url, SPEC) as bso:
        _fit(tmp_path / "first", bso)  # batch size 4 converges in 3 epochs: 360 J of Zeus cost
        # Pruning goes down next: batch size 2 runs 8 batches (240 J of cost) an epoch. With a
        # metric that never reaches the target, the look-ahead stops it after epoch 3 (720 J),
        # as a fourth would pass 2.5 × 360 J = 900 J.
        trainer, zeus = _fit(tmp_path / "second", bso, gain=0.01)
        assert bso.stop_reason == "early_stop"
    assert trainer.current_epoch == 3 and len(zeus.epoch_history) == 3
    first, second = _trials(server)
    assert (first["status"], second["batch_size"], second["status"]) == ("converged", 2, "failed")
    assert (second["end_reason"], second["epochs"]) == ("early_stop", 3)


def test_a_failed_fit_abandons_its_trial(tmp_path: Path, server: ThreadServer) -> None:
    with BatchSizeOptimizer(server.url, SPEC) as bso:
        with pytest.raises(RuntimeError, match="on purpose"):
            _fit(tmp_path, bso, fail_at_batch=6)
    (trial,) = _trials(server)
    assert (trial["status"], trial["end_reason"], trial["epochs"]) == ("expired", "abandoned", 1)


def test_a_fit_without_a_trial_is_refused(tmp_path: Path, server: ThreadServer) -> None:
    gpu, monitor = simulated_monitor()
    with BatchSizeOptimizer(server.url, SPEC) as bso:
        zeus = ZeusCallback(monitor=monitor, batch_size_optimizer=bso, metric_name="val_acc")
        trainer = pl.Trainer(callbacks=[zeus], **trainer_kwargs(str(tmp_path)))
        with pytest.raises(ZeusConfigError, match=r"get_batch_size\(\) before training"):
            trainer.fit(AccuracyModule(gpu), loader(SAMPLES), loader(4))
    assert httpx.get(f"{server.url}/jobs/{SPEC.job_id}").status_code == 404  # nothing was written


def test_bad_batch_size_optimizer_arguments() -> None:
    bso = BatchSizeOptimizer("http://127.0.0.1:9", SPEC)
    with pytest.raises(ZeusConfigError, match="metric_name=None must name"):
        ZeusCallback(batch_size_optimizer=bso)
    with pytest.raises(ZeusConfigError, match="needs batch_size_optimizer"):
        ZeusCallback(metric_name="val_acc")
    with pytest.raises(ZeusConfigError, match="must be a zeus_core.BatchSizeOptimizer"):
        ZeusCallback(batch_size_optimizer=object(), metric_name="val_acc")  # type: ignore[arg-type]
