"""ZeusCallback: real Lightning fits of a tiny model on the CPU with a simulated GPU.

Every batch runs one unit of simulated work (0.1 s, 30 J on a virtual clock; see
``scripts/lightning_tiny.py``), so each logged figure has an exact expected value.
"""

from __future__ import annotations

import csv
import importlib
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pl = pytest.importorskip("lightning.pytorch")
import torch  # noqa: E402

SCRIPTS = Path(__file__).parent / "scripts"
sys.path.insert(0, str(SCRIPTS))
from lightning_accelerate_common import run_script  # noqa: E402
from lightning_tiny import (  # noqa: E402
    UNIT_ENERGY_J,
    UNIT_TIME_S,
    Recorder,
    TinyModule,
    expected_events,
    loader,
    simulated_monitor,
    trainer_kwargs,
)

from zeus_core.exceptions import ZeusConfigError  # noqa: E402
from zeus_integrations.lightning import ZeusCallback, _trained_gpus  # noqa: E402


def _csv_column(root: Path, key: str) -> list[float]:
    """Non-empty values of one column of the CSVLogger's metrics.csv, in row order."""
    (path,) = root.glob("csv/version_*/metrics.csv")
    with path.open(newline="") as f:
        return [float(row[key]) for row in csv.DictReader(f) if row.get(key)]


def test_epochs_steps_and_logged_values_under_gradient_accumulation(tmp_path: Path) -> None:
    gpu, monitor = simulated_monitor()
    recorder = Recorder()
    zeus = ZeusCallback(recorder, monitor=monitor, log_every_n_steps=1)
    trainer = pl.Trainer(
        callbacks=[zeus],
        accumulate_grad_batches=3,
        limit_val_batches=2,
        num_sanity_val_steps=2,
        **trainer_kwargs(str(tmp_path)),
    )
    trainer.fit(TinyModule(gpu), loader(16), loader(4))  # 8 batches per epoch -> steps of 3, 3, 2 batches

    assert recorder.events == expected_events(epochs=2, steps_per_epoch=3)
    # Sanity check (2 batches) and validation (2 batches per epoch) are not counted.
    for epoch in zeus.epoch_history:
        assert epoch["energy/epoch_j"] == pytest.approx(8 * UNIT_ENERGY_J)
        assert epoch["energy/epoch_gpu0_j"] == pytest.approx(8 * UNIT_ENERGY_J)
        assert epoch["time/epoch_s"] == pytest.approx(8 * UNIT_TIME_S)
        assert epoch["power/avg_w"] == pytest.approx(300.0)
        assert epoch["simulated"] == 1.0 and epoch["estimated"] == 0.0
    train = zeus.train_metrics
    assert train["energy/train_j"] == pytest.approx(16 * UNIT_ENERGY_J)
    assert train["energy/train_gpu_j"] == pytest.approx(16 * UNIT_ENERGY_J)
    assert train["time/train_s"] == pytest.approx(16 * UNIT_TIME_S)
    # The GPU's own counter saw everything, validation and sanity check included (2 + 2*2 + 16 units).
    assert gpu.get_total_energy() == pytest.approx(22 * UNIT_ENERGY_J)

    # The values reached the logger, the callback metrics and the progress bar.
    assert _csv_column(tmp_path, "energy/epoch_j") == pytest.approx([240.0, 240.0])
    assert _csv_column(tmp_path, "energy/epoch_gpu0_j") == pytest.approx([240.0, 240.0])
    assert _csv_column(tmp_path, "time/epoch_s") == pytest.approx([0.8, 0.8])
    assert _csv_column(tmp_path, "energy/step_j") == pytest.approx([90.0, 90.0, 60.0] * 2)
    assert _csv_column(tmp_path, "energy/train_j") == pytest.approx([480.0])
    assert _csv_column(tmp_path, "simulated") == [1.0] * 11  # 6 steps, 2 validations, 2 epochs, 1 fit
    # Each validation run has its own figures (2 batches), not counted in training.
    assert _csv_column(tmp_path, "energy/val/total_j") == pytest.approx([60.0, 60.0])
    assert [v["time/val/total_s"] for v in zeus.stage_history["val"]] == pytest.approx([0.2, 0.2])
    assert float(trainer.callback_metrics["energy/epoch_j"]) == pytest.approx(240.0)
    assert "energy/epoch_j" in trainer.progress_bar_metrics


def test_validation_counted_when_asked(tmp_path: Path) -> None:
    gpu, monitor = simulated_monitor()
    zeus = ZeusCallback(monitor=monitor, include_validation=True)
    trainer = pl.Trainer(
        callbacks=[zeus],
        limit_val_batches=2,
        num_sanity_val_steps=0,
        max_epochs=1,
        **{k: v for k, v in trainer_kwargs(str(tmp_path)).items() if k != "max_epochs"},
    )
    trainer.fit(TinyModule(gpu), loader(8), loader(4))
    assert zeus.epoch_history[0]["energy/epoch_j"] == pytest.approx((4 + 2) * UNIT_ENERGY_J)
    assert zeus.train_metrics["energy/train_j"] == pytest.approx((4 + 2) * UNIT_ENERGY_J)


def test_checkpoint_resume_continues_totals_and_optimizer_state(tmp_path: Path) -> None:
    gpu, monitor = simulated_monitor()
    first = Recorder()
    ckpt = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
    zeus = ZeusCallback(first, monitor=monitor)
    kwargs = trainer_kwargs(str(tmp_path / "run1"), max_epochs=1, enable_checkpointing=True)
    pl.Trainer(callbacks=[zeus, ckpt], **kwargs).fit(TinyModule(gpu), loader(8))
    assert zeus.train_metrics["energy/train_j"] == pytest.approx(4 * UNIT_ENERGY_J)
    checkpoint = torch.load(tmp_path / "ckpt" / "last.ckpt", weights_only=False)
    saved = checkpoint["callbacks"][zeus.state_key]
    assert saved["tracker"]["energy_j"] == {"gpu0": pytest.approx(4 * UNIT_ENERGY_J)}
    json.dumps(saved)  # JSON-safe

    # A new process would build everything anew: new GPU, monitor, callback and optimizer object.
    gpu2, monitor2 = simulated_monitor()
    second = Recorder()
    zeus2 = ZeusCallback(second, monitor=monitor2)
    kwargs2 = trainer_kwargs(str(tmp_path / "run2"), max_epochs=3)
    trainer2 = pl.Trainer(callbacks=[zeus2], **kwargs2)
    trainer2.fit(TinyModule(gpu2), loader(8), ckpt_path=tmp_path / "ckpt" / "last.ckpt")
    assert second.loaded == {"version": 1, "steps_seen": 4}
    assert second.events == expected_events(epochs=2, steps_per_epoch=4)
    assert zeus2.train_metrics["energy/train_j"] == pytest.approx(12 * UNIT_ENERGY_J)  # 4 before + 8 after
    assert zeus2.train_metrics["time/train_s"] == pytest.approx(12 * UNIT_TIME_S)
    assert zeus2.tracker is not None and zeus2.tracker.epochs_done == 3


def test_failed_fit_ends_training_once_and_logs_what_was_spent(tmp_path: Path) -> None:
    gpu, monitor = simulated_monitor()
    recorder = Recorder()
    zeus = ZeusCallback(recorder, monitor=monitor)
    trainer = pl.Trainer(callbacks=[zeus], **trainer_kwargs(str(tmp_path)))
    with pytest.raises(RuntimeError, match="on purpose"):
        trainer.fit(TinyModule(gpu, fail_at_batch=5), loader(8))  # fails in epoch 2, batch 2
    assert recorder.events.count("train_end") == 1 and recorder.events[-1] == "train_end"
    assert recorder.events.count("epoch_end") == 1
    assert zeus.train_metrics["energy/train_j"] == pytest.approx(6 * UNIT_ENERGY_J)
    assert _csv_column(tmp_path, "energy/train_j") == pytest.approx([6 * UNIT_ENERGY_J])
    assert monitor.open_windows == []


def test_constructor_validates_arguments() -> None:
    with pytest.raises(ZeusConfigError, match="log_every_n_steps=0"):
        ZeusCallback(log_every_n_steps=0)
    with pytest.raises(ZeusConfigError, match="training protocol"):
        ZeusCallback(zeus_optimizers=[object()])  # type: ignore[list-item]


def test_devices_found_from_the_trainer_strategy() -> None:
    def trainer(device: object) -> SimpleNamespace:
        return SimpleNamespace(strategy=SimpleNamespace(root_device=device))

    assert _trained_gpus(trainer(torch.device("cuda", 3))) == [3]  # type: ignore[arg-type]
    assert _trained_gpus(trainer(torch.device("cpu"))) == []  # type: ignore[arg-type]

    class NoRoot:
        @property
        def root_device(self) -> torch.device:
            raise NotImplementedError

    assert _trained_gpus(SimpleNamespace(strategy=NoRoot())) is None  # type: ignore[arg-type]


def test_missing_lightning_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "lightning", None)
    monkeypatch.setitem(sys.modules, "lightning.pytorch", None)
    monkeypatch.delitem(sys.modules, "zeus_integrations.lightning")
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'zeus-suite\[lightning\]'"):
        importlib.import_module("zeus_integrations.lightning")
    monkeypatch.undo()
    importlib.import_module("zeus_integrations.lightning")


@pytest.mark.slow
def test_ddp_two_processes_log_the_job_energy(tmp_path: Path) -> None:
    """Lightning DDP on gloo, 2 ranks with different power limits; then a DDP resume from checkpoint."""
    proc = run_script([sys.executable, str(SCRIPTS / "lightning_ddp.py"), str(tmp_path)], timeout_s=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    job_first = sum(r["gpu_energy_after_first_fit_j"] for r in ranks)
    job_total = sum(r["gpu_energy_j"] for r in ranks)
    assert ranks[0]["gpu_energy_j"] != pytest.approx(ranks[1]["gpu_energy_j"])  # the ranks really differ

    # First fit: the logged job energy is the sum of both ranks' GPUs, on both ranks.
    for r in ranks:
        assert r["first"]["energy/train_j"] == pytest.approx(job_first)
        assert r["first"]["energy/train_gpu_j"] == pytest.approx(job_first)
        assert r["events_first"] == [
            "train_begin",
            "epoch_begin",
            "step_begin",
            "step_end",
            "step_begin",
            "step_end",
            "epoch_end",
            "train_end",
        ]  # 4 batches per rank, 2 per step
    assert _csv_column(tmp_path / "first", "energy/train_j") == pytest.approx([job_first])
    epoch_logged = _csv_column(tmp_path / "first", "energy/epoch_j")[0]
    per_rank = [_csv_column(tmp_path / "first", f"energy/epoch_rank{r}_gpu0_j")[0] for r in (0, 1)]
    assert epoch_logged == pytest.approx(job_first) and sum(per_rank) == pytest.approx(job_first)
    assert per_rank == pytest.approx([r["gpu_energy_after_first_fit_j"] for r in ranks])

    # Resumed fit: each rank continues its own prior totals, so the job total is counted once.
    for r in ranks:
        assert r["resumed"]["energy/train_j"] == pytest.approx(job_total)
    assert _csv_column(tmp_path / "resumed", "energy/train_j") == pytest.approx([job_total])
