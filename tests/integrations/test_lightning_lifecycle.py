"""ZeusCallback in the set-ups of issue 13, with real tiny fits on the CPU.

Mid-epoch resume, stages, manual optimization, two callbacks, ddp_spawn, simulate, console
summaries and optimizer metrics.

Every batch runs one unit of simulated work (0.1 s, 30 J on a virtual clock), so each figure has an
exact expected value.
"""

from __future__ import annotations

import csv
import json
import logging
import sys
from pathlib import Path
from typing import Any

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
    TwoOptimizerModule,
    loader,
    simulated_monitor,
    trainer_kwargs,
)

from zeus_core import console  # noqa: E402
from zeus_core.exceptions import ZeusConfigError  # noqa: E402
from zeus_integrations.lightning import ZeusCallback  # noqa: E402


def _rows(root: Path, key: str) -> list[dict[str, str]]:
    """Rows of the CSVLogger's metrics.csv that hold ``key``."""
    (path,) = root.glob("csv/version_*/metrics.csv")
    with path.open(newline="") as f:
        return [row for row in csv.DictReader(f) if row.get(key)]


class _Messages(logging.Handler):
    """Collects what zeus_core.console shows."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def messages() -> Any:
    handler = _Messages()
    logger = logging.getLogger(console.LOGGER_NAME)
    console.info("")  # the console sets its logger up on first use
    logger.addHandler(handler)
    yield handler.lines
    logger.removeHandler(handler)


def test_mid_epoch_resume_continues_the_epoch_with_its_history(tmp_path: Path) -> None:
    gpu, monitor = simulated_monitor()
    zeus = ZeusCallback(Recorder(), monitor=monitor)
    ckpt = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=2, save_top_k=-1)
    kwargs = trainer_kwargs(str(tmp_path / "run1"), enable_checkpointing=True)
    with pytest.raises(RuntimeError, match="on purpose"):  # 4 batches per epoch; fails at batch 7
        pl.Trainer(callbacks=[zeus, ckpt], **kwargs).fit(TinyModule(gpu, fail_at_batch=6), loader(8))
    (mid_epoch,) = (tmp_path / "ckpt").glob("*step=6.ckpt")  # 2 batches into epoch 2

    gpu2, monitor2 = simulated_monitor()
    recorder = Recorder()
    resumed = ZeusCallback(recorder, monitor=monitor2)
    trainer = pl.Trainer(callbacks=[resumed], **trainer_kwargs(str(tmp_path / "run2")))
    trainer.fit(TinyModule(gpu2), loader(8), ckpt_path=mid_epoch)

    assert trainer.global_step == 8 and gpu2.get_total_energy() == pytest.approx(2 * UNIT_ENERGY_J)
    # Epoch 1 from the checkpoint; epoch 2 = 2 batches before the checkpoint + 2 after it.
    assert [e["energy/epoch_j"] for e in resumed.epoch_history] == pytest.approx([120.0, 120.0])
    assert resumed.epoch_history[1]["time/epoch_s"] == pytest.approx(4 * UNIT_TIME_S)
    assert resumed.epoch_history[0] == zeus.epoch_history[0]
    assert recorder.events == ["train_begin", "epoch_begin"] + ["step_begin", "step_end"] * 2 + [
        "epoch_end",
        "train_end",
    ]
    assert resumed.train_metrics["energy/train_j"] == pytest.approx(8 * UNIT_ENERGY_J)
    assert resumed.tracker.steps_done == 8 and resumed.tracker.epochs_done == 2
    # Only the resumed epoch is logged again, once, with its full value (no stale epoch-1 value).
    assert [float(r["energy/epoch_j"]) for r in _rows(tmp_path / "run2", "energy/epoch_j")] == pytest.approx(
        [120.0]
    )


def test_old_checkpoints_load(tmp_path: Path) -> None:
    """A checkpoint of the version-1 callback (one key for every instance) continues its totals."""
    gpu, monitor = simulated_monitor()
    ckpt = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
    zeus = ZeusCallback(monitor=monitor)
    kwargs = trainer_kwargs(str(tmp_path / "run1"), max_epochs=1, enable_checkpointing=True)
    pl.Trainer(callbacks=[zeus, ckpt], **kwargs).fit(TinyModule(gpu), loader(8))
    path = tmp_path / "ckpt" / "last.ckpt"
    checkpoint = torch.load(path, weights_only=False)
    state = checkpoint["callbacks"].pop(zeus.state_key)
    tracker = {k: v for k, v in state["tracker"].items() if k in ("epochs_done", "steps_done", "ranks")}
    for rank in tracker["ranks"]:
        rank.pop("epoch_part")
    checkpoint["callbacks"]["zeus_suite.ZeusCallback"] = {"version": 1, "tracker": {"version": 1, **tracker}}
    torch.save(checkpoint, path)

    gpu2, monitor2 = simulated_monitor()
    resumed = ZeusCallback(monitor=monitor2)
    pl.Trainer(callbacks=[resumed], **trainer_kwargs(str(tmp_path / "run2"))).fit(
        TinyModule(gpu2), loader(8), ckpt_path=path
    )
    assert resumed.train_metrics["energy/train_j"] == pytest.approx(8 * UNIT_ENERGY_J)
    assert resumed.tracker.epochs_done == 2


def test_validate_test_and_predict_are_measured_under_their_own_keys(tmp_path: Path) -> None:
    gpu, monitor = simulated_monitor()
    zeus = ZeusCallback(monitor=monitor)
    trainer = pl.Trainer(callbacks=[zeus], **trainer_kwargs(str(tmp_path)))
    model = TinyModule(gpu)

    (validated,) = trainer.validate(model, loader(6))  # 3 batches
    (tested,) = trainer.test(model, loader(4))  # 2 batches
    trainer.predict(model, loader(10))  # 5 batches

    assert validated["energy/val/total_j"] == pytest.approx(3 * UNIT_ENERGY_J)
    assert validated["time/val/total_s"] == pytest.approx(3 * UNIT_TIME_S)
    assert validated["energy/val/gpu0_j"] == pytest.approx(3 * UNIT_ENERGY_J)
    assert validated["power/val/avg_w"] == pytest.approx(300.0) and validated["simulated"] == 1.0
    assert tested["energy/test/total_j"] == pytest.approx(2 * UNIT_ENERGY_J)
    (predicted,) = zeus.stage_history["predict"]
    assert predicted["energy/predict/total_j"] == pytest.approx(5 * UNIT_ENERGY_J)
    assert [
        float(r["energy/predict/total_j"]) for r in _rows(tmp_path, "energy/predict/total_j")
    ] == pytest.approx([150.0])
    assert zeus.train_metrics == {} and zeus.epoch_history == []  # no training happened
    assert monitor.open_windows == []


def test_manual_optimization_counts_steps_like_global_step(tmp_path: Path) -> None:
    gpu, monitor = simulated_monitor()
    recorder = Recorder()
    zeus = ZeusCallback(recorder, monitor=monitor, log_every_n_steps=4)
    trainer = pl.Trainer(callbacks=[zeus], **trainer_kwargs(str(tmp_path)))
    trainer.fit(TwoOptimizerModule(gpu), loader(8))  # 4 batches x 2 optimizers x 2 epochs

    assert trainer.global_step == 16 and zeus.tracker.steps_done == 16
    assert recorder.events.count("step_end") == 8  # one protocol step per batch
    rows = _rows(tmp_path, "energy/step_j")
    steps = [int(r["step"]) for r in rows]
    assert steps == [4, 8, 12, 16]  # every 4th optimizer step, each logged once under its own step
    assert [float(r["energy/step_j"]) for r in rows] == pytest.approx([UNIT_ENERGY_J] * 4)


class PowerLimitLike(Recorder):
    """A protocol object with ``metrics()``, as the power-limit optimizer has."""

    def metrics(self) -> dict[str, float]:
        return {"power/limit_w": 250.0 if self.events.count("epoch_end") else 300.0}


def test_two_callbacks_checkpoint_separately_and_optimizer_metrics_are_logged(tmp_path: Path) -> None:
    gpu, monitor = simulated_monitor()
    first, second = PowerLimitLike(), Recorder()
    a = ZeusCallback(first, monitor=monitor)
    b = ZeusCallback(second, monitor=monitor, log_every_n_steps=2)
    assert a.state_key != b.state_key
    ckpt = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
    kwargs = trainer_kwargs(str(tmp_path / "run1"), max_epochs=1, enable_checkpointing=True)
    pl.Trainer(callbacks=[a, b, ckpt], **kwargs).fit(TinyModule(gpu), loader(8))
    saved = torch.load(tmp_path / "ckpt" / "last.ckpt", weights_only=False)["callbacks"]
    assert saved[a.state_key]["tracker"]["optimizers"] == [{"version": 1, "steps_seen": 4}]
    assert saved[b.state_key]["tracker"]["optimizers"] == [{"version": 1, "steps_seen": 4}]
    assert a.epoch_history[0]["power/limit_w"] == 250.0
    assert [float(r["power/limit_w"]) for r in _rows(tmp_path / "run1", "power/limit_w")] == [250.0]

    gpu2, monitor2 = simulated_monitor()
    a2, b2 = (
        ZeusCallback(PowerLimitLike(), monitor=monitor2),
        ZeusCallback(Recorder(), monitor=monitor2, log_every_n_steps=2),
    )
    pl.Trainer(callbacks=[a2, b2], **trainer_kwargs(str(tmp_path / "run2"))).fit(
        TinyModule(gpu2), loader(8), ckpt_path=tmp_path / "ckpt" / "last.ckpt"
    )
    for cb in (a2, b2):
        assert cb.train_metrics["energy/train_j"] == pytest.approx(8 * UNIT_ENERGY_J)
        assert cb.zeus_optimizers[0].loaded == {"version": 1, "steps_seen": 4}  # type: ignore[attr-defined]


def test_epoch_summaries_reach_the_console_unless_turned_off(tmp_path: Path, messages: list[str]) -> None:
    gpu, monitor = simulated_monitor()
    pl.Trainer(callbacks=[ZeusCallback(monitor=monitor)], **trainer_kwargs(str(tmp_path / "a"))).fit(
        TinyModule(gpu), loader(4)
    )
    assert "Epoch 1: 60.0 J in 0.20 s (300.0 W) [simulated]" in messages
    assert "Training used 120.0 J in 0.40 s (300.0 W) [simulated]" in messages
    messages.clear()
    quiet = ZeusCallback(monitor=monitor, verbose=False)
    pl.Trainer(callbacks=[quiet], **trainer_kwargs(str(tmp_path / "b"))).fit(TinyModule(gpu), loader(4))
    assert not [m for m in messages if m.startswith(("Epoch", "Training"))]


def test_simulate_measures_a_simulated_gpu_when_none_is_found(tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU, so nothing is simulated")
    zeus = ZeusCallback(simulate="a40")
    gpu, _ = simulated_monitor()  # the model's own unit of work; the callback measures its own GPU
    pl.Trainer(callbacks=[zeus], **trainer_kwargs(str(tmp_path))).fit(TinyModule(gpu), loader(8))
    (sim,) = zeus.monitor.gpus
    assert sim.simulated and zeus.train_metrics["simulated"] == 1.0
    assert zeus.train_metrics["energy/train_gpu_j"] > 0
    assert all(e["simulated"] == 1.0 and e["energy/epoch_gpu0_j"] > 0 for e in zeus.epoch_history)
    with pytest.raises(ZeusConfigError, match="simulate='b9000'"):
        ZeusCallback(simulate="b9000")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["passed", "default"])
def test_ddp_spawn_with_a_passed_or_built_monitor(tmp_path: Path, mode: str) -> None:
    proc = run_script(
        [sys.executable, str(SCRIPTS / "lightning_spawn.py"), str(tmp_path), mode], timeout_s=240
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    for r in ranks:
        assert r["events"] == ["train_begin", "epoch_begin"] + ["step_begin", "step_end"] * 4 + [
            "epoch_end",
            "train_end",
        ]
        assert r["train"]["simulated"] == 1.0
        assert r["train"]["energy/train_j"] == pytest.approx(ranks[0]["train"]["energy/train_j"])
    if mode == "passed":  # each rank's copy of the monitor measured its own 4 batches
        assert [r["gpu_energy_j"] for r in ranks] == pytest.approx([4 * UNIT_ENERGY_J] * 2)
        assert ranks[0]["train"]["energy/train_j"] == pytest.approx(8 * UNIT_ENERGY_J)
    else:  # each spawned process built its own simulated GPU, and rank zero said so once
        assert ranks[0]["train"]["energy/train_j"] > 0
        assert proc.stderr.count("no GPU found; measuring a simulated A40") == 1
