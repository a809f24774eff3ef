"""ZeusTrainerCallback: real tiny Trainer runs on the CPU with a simulated GPU (wall clock)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from zeus_core import PhysicalModel, SimulatedGPU, ZeusMonitor
from zeus_core.exceptions import ZeusConfigError
from zeus_core.monitor._measurement import Measurement

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers import Trainer, TrainerCallback, TrainingArguments  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from lightning_accelerate_common import Recorder as Protocol  # noqa: E402

from zeus_integrations.huggingface import ZeusTrainerCallback  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


class TinyRegressor(torch.nn.Module):
    """y = w·x + b; counts training micro-batches, can fail at one, and can make evaluation slow."""

    def __init__(self, fail_at: int | None = None, eval_sleep_s: float = 0.0) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 1)
        self.fail_at, self.eval_sleep_s = fail_at, eval_sleep_s
        self.micro_batches = 0

    def forward(self, x: Any, labels: Any = None) -> dict[str, Any]:
        if self.training:
            if self.micro_batches == self.fail_at:
                raise RuntimeError("injected training failure")
            self.micro_batches += 1
        elif self.eval_sleep_s:
            time.sleep(self.eval_sleep_s)
        out = self.lin(x).squeeze(-1)
        return {"loss": ((out - labels) ** 2).mean(), "logits": out}


def dataset(n: int) -> list[dict[str, Any]]:
    gen = torch.Generator().manual_seed(0)
    return [{"x": torch.randn(4, generator=gen), "labels": torch.tensor(1.0)} for _ in range(n)]


class Integration(TrainerCallback):
    """Stands for a report_to integration: Transformers places those before user callbacks."""

    def __init__(self) -> None:
        self.logs: list[dict[str, float]] = []

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        self.logs.append(dict(logs or {}))


class RecordingMonitor(ZeusMonitor):
    """A monitor on one busy simulated A40 that keeps every window it ended, by scope."""

    def __init__(self) -> None:
        super().__init__(gpus=[SimulatedGPU(PhysicalModel.a40(), busy=True)], cpu_indices=[])
        self.ended: dict[str, list[Measurement]] = {"train": [], "epoch": [], "step": [], "stage": []}

    def end_window(self, name: str, sync_execution: bool = True, cancel: bool = False) -> Measurement:
        m = super().end_window(name, sync_execution, cancel)
        if not cancel:
            scope = next(s for s in self.ended if f".{s}." in name)
            self.ended[scope].append(m)
        return m


def args(tmp_path: Path, **overrides: Any) -> TrainingArguments:
    base = dict(
        output_dir=str(tmp_path),
        use_cpu=True,
        per_device_train_batch_size=2,
        num_train_epochs=2,
        logging_strategy="epoch",
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=0,
    )
    return TrainingArguments(**{**base, **overrides})


def entries(logs: list[dict], key: str) -> list[dict]:
    return [log for log in logs if key in log]


def test_logged_energy_equals_measured_with_gradient_accumulation(tmp_path: Path) -> None:
    monitor, protocol, integration = RecordingMonitor(), Protocol(), Integration()
    zeus = ZeusTrainerCallback(protocol, monitor=monitor, log_every_n_steps=2)
    model = TinyRegressor()
    # 10 samples, batch 2 -> 5 micro-batches per epoch; accumulation 2 -> optimizer steps of 2, 2, 1.
    trainer = Trainer(
        model=model,
        args=args(tmp_path, gradient_accumulation_steps=2),
        train_dataset=dataset(10),
        callbacks=[integration],
    )
    assert zeus.attach(trainer) is zeus and zeus.trainer is trainer  # logs with Trainer.log from now on
    result = trainer.train()

    assert model.micro_batches == 10 and trainer.state.global_step == 6
    epoch = ["epoch_begin"] + ["step_begin", "step_end"] * 3 + ["epoch_end"]
    assert protocol.events == ["train_begin"] + epoch * 2 + ["train_end"]
    assert zeus.tracker is not None and zeus.tracker.steps_done == 6

    # The integration placed before the callback received every entry, with the measured values.
    epochs = entries(integration.logs, "energy/epoch_j")
    assert [e["energy/epoch_j"] for e in epochs] == pytest.approx(
        [m.total_energy for m in monitor.ended["epoch"]]
    )
    assert [e["time/epoch_s"] for e in epochs] == pytest.approx([m.time for m in monitor.ended["epoch"]])
    assert [e["energy/epoch_gpu0_j"] for e in epochs] == [e["energy/epoch_j"] for e in epochs]
    assert all(e["simulated"] == 1.0 and e["estimated"] == 0.0 for e in epochs)
    assert all(e["power/avg_w"] == pytest.approx(e["energy/epoch_j"] / e["time/epoch_s"]) for e in epochs)
    steps = entries(integration.logs, "energy/step_j")
    assert [e["energy/step_j"] for e in steps] == pytest.approx(
        [m.total_energy for m in monitor.ended["step"]]
    )
    assert len(steps) == 3  # steps 2, 4, 6
    (train,) = monitor.ended["train"]
    totals = entries(integration.logs, "energy/train_j")
    assert train.total_energy > 0 and totals[-1]["energy/train_j"] == pytest.approx(train.total_energy)
    assert totals[-1]["time/train_s"] == pytest.approx(train.time)

    # The same values are in log_history (with the step), the returned metrics and on the callback.
    history = trainer.state.log_history
    assert [h["step"] for h in entries(history, "energy/epoch_j")] == [3, 6]
    assert [h["step"] for h in entries(history, "energy/step_j")] == [2, 4, 6]
    assert len(entries(history, "loss")) == 2  # the Trainer's own epoch logs were not swallowed
    assert result.metrics["energy/train_j"] == pytest.approx(train.total_energy)
    assert result.metrics["energy/train_gpu_j"] == pytest.approx(train.total_energy)
    assert result.metrics["simulated"] == 1.0 and "train_runtime" in result.metrics
    assert zeus.train_metrics["energy/train_j"] == result.metrics["energy/train_j"]
    assert len(zeus.epoch_history) == 2
    assert monitor.open_windows == []


@pytest.mark.parametrize("include_validation", [False, True])
def test_evaluation_time_is_excluded_unless_asked(tmp_path: Path, include_validation: bool) -> None:
    monitor = RecordingMonitor()
    zeus = ZeusTrainerCallback(monitor=monitor, include_validation=include_validation)
    sleep_s = 0.1
    trainer = Trainer(
        model=TinyRegressor(eval_sleep_s=sleep_s),
        train_dataset=dataset(8),
        eval_dataset=dataset(4),
        args=args(
            tmp_path,
            num_train_epochs=1,
            eval_strategy="steps",
            eval_steps=2,
            per_device_eval_batch_size=2,
            prediction_loss_only=True,
        ),
        callbacks=[zeus],
    )
    result = trainer.train()
    evaluations = len(entries(trainer.state.log_history, "eval_loss"))
    assert evaluations == 2  # after steps 2 and 4
    eval_time = evaluations * 2 * sleep_s  # two evaluation batches each
    train_segments, epoch_segments = monitor.ended["train"], monitor.ended["epoch"]
    train_s = result.metrics["time/train_s"]
    assert train_s == pytest.approx(sum(m.time for m in train_segments))
    assert result.metrics["energy/train_j"] == pytest.approx(sum(m.total_energy for m in train_segments))
    assert zeus.epoch_history[0]["energy/epoch_j"] == pytest.approx(
        sum(m.total_energy for m in epoch_segments)
    )
    if include_validation:
        assert len(train_segments) == 1 and train_s >= eval_time
    else:  # paused before each evaluation (both inside the epoch), resumed after it
        assert len(train_segments) == 3 and len(epoch_segments) == 3
        assert train_s < result.metrics["train_runtime"] - 0.8 * eval_time


def test_a_run_left_open_by_a_failing_train_ends_once_at_the_next_train_or_collection(tmp_path: Path) -> None:
    """Transformers calls no hook when train() raises: the next train() or garbage collection ends the run."""
    monitor, protocol, integration = RecordingMonitor(), Protocol(), Integration()
    trainer = Trainer(
        model=TinyRegressor(fail_at=3),
        args=args(tmp_path, gradient_accumulation_steps=2),
        train_dataset=dataset(10),
        callbacks=[integration],
    )
    zeus = ZeusTrainerCallback(protocol, monitor=monitor).attach(trainer)
    assert zeus.attach(trainer) is zeus
    assert sum(cb is zeus for cb in trainer.callback_handler.callbacks) == 1
    with pytest.raises(RuntimeError, match="injected training failure"):
        trainer.train()
    # Micro-batches 0, 1 make step 1; the failure comes inside step 2.
    assert protocol.events == ["train_begin", "epoch_begin", "step_begin", "step_end", "step_begin"]
    assert zeus.lifecycle.training

    # The same trainer trains again after a fix: the failed run ends first, exactly once.
    trainer.model.fail_at = None
    trainer.train()
    assert protocol.events[5:7] == ["train_end", "train_begin"]
    assert protocol.events.count("train_end") == 2 and protocol.events[-1] == "train_end"
    assert len(monitor.ended["train"]) == 2 and len(monitor.ended["epoch"]) == 2  # broken epoch not counted
    assert entries(integration.logs, "energy/epoch_j")  # attach() logs through the trainer too
    assert monitor.open_windows == []

    # A failed run whose callback is dropped ends when it is collected.
    gone = Protocol()
    trainer = Trainer(
        model=TinyRegressor(fail_at=1), args=args(tmp_path), train_dataset=dataset(4), callbacks=[]
    )
    trainer.add_callback(ZeusTrainerCallback(gone, monitor=monitor))
    with pytest.raises(RuntimeError, match="injected training failure"):
        trainer.train()
    assert gone.events[-1] == "step_begin"
    del trainer
    gc.collect()
    assert gone.events[-1] == "train_end" and monitor.open_windows == []


@pytest.mark.slow
def test_a_failing_train_restores_the_power_limit_before_the_process_exits(tmp_path: Path) -> None:
    """``trainer.add_callback(...)``, a power-limit optimizer mid-profile, and an uncaught failure."""
    out = tmp_path / "exit.json"
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).parent / "scripts" / "hf_failing_train.py"), str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode != 0 and "injected training failure" in proc.stderr
    seen = json.loads(out.read_text())
    assert seen["limit_during_training_w"] < seen["default_limit_w"]  # the optimizer was profiling
    assert seen["limit_at_exit_w"] == seen["default_limit_w"]
    assert seen["open_windows_at_exit"] == []
    assert seen["events"][-1] == "train_end" and seen["events"].count("train_end") == 1


def test_resume_from_checkpoint_continues_totals_and_optimizer_state(tmp_path: Path) -> None:
    first = ZeusTrainerCallback(Protocol(), monitor=RecordingMonitor())
    run = args(
        tmp_path, max_steps=4, save_strategy="steps", save_steps=2, logging_strategy="steps", logging_steps=1
    )
    Trainer(model=TinyRegressor(), args=run, train_dataset=dataset(10), callbacks=[first]).train()
    ckpt = tmp_path / "checkpoint-2"
    saved = json.loads((ckpt / "trainer_state.json").read_text())["stateful_callbacks"]["ZeusTrainerCallback"]
    tracker = saved["attributes"]["_resume_state"]["tracker"]
    rank0 = tracker["ranks"][0]
    assert tracker["steps_done"] == 2 and tracker["optimizers"] == [{"version": 1, "steps_seen": 2}]
    saved_j = rank0["energy_j"]["gpu0"]
    assert 0 < saved_j < first.train_metrics["energy/train_j"]

    monitor, protocol = RecordingMonitor(), Protocol()
    second = ZeusTrainerCallback(protocol, monitor=monitor)
    trainer = Trainer(model=TinyRegressor(), args=run, train_dataset=dataset(10), callbacks=[second])
    result = trainer.train(resume_from_checkpoint=str(ckpt))
    assert protocol.loaded == {
        "version": 1,
        "steps_seen": 2,
    }  # the optimizer continues instead of starting over
    assert protocol.events.count("step_end") == 2 and second.tracker.steps_done == 4
    (train,) = monitor.ended["train"]
    assert result.metrics["energy/train_j"] == pytest.approx(saved_j + train.total_energy)
    assert result.metrics["time/train_s"] == pytest.approx(rank0["time_s"] + train.time)


def test_without_attach_entries_go_to_log_history(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    before, after = Integration(), Integration()
    zeus = ZeusTrainerCallback(monitor=RecordingMonitor())
    trainer = Trainer(
        model=TinyRegressor(),
        args=args(tmp_path, num_train_epochs=1),
        train_dataset=dataset(4),
        callbacks=[before, zeus, after],
    )
    result = trainer.train()
    assert zeus.trainer is None
    (epoch_log,) = entries(trainer.state.log_history, "energy/epoch_j")
    assert epoch_log["energy/epoch_j"] == zeus.epoch_history[0]["energy/epoch_j"]
    assert epoch_log["step"] == 2 and epoch_log["epoch"] == 1.0
    assert result.metrics["energy/train_j"] == zeus.train_metrics["energy/train_j"] > 0
    assert entries(after.logs, "energy/train_j")  # the summary dict carries the totals onwards


def test_evaluate_and_predict_outside_train_are_measured(tmp_path: Path) -> None:
    monitor = RecordingMonitor()
    zeus = ZeusTrainerCallback(monitor=monitor)
    trainer = Trainer(
        model=TinyRegressor(eval_sleep_s=0.05),
        args=args(tmp_path, per_device_eval_batch_size=2),
        eval_dataset=dataset(6),
        callbacks=[zeus],
    )
    evaluated = trainer.evaluate()  # 3 batches
    predicted = trainer.predict(dataset(4))  # 2 batches
    val, pred = monitor.ended["stage"]
    assert evaluated["energy/val/total_j"] == pytest.approx(val.total_energy)
    assert evaluated["time/val/total_s"] == pytest.approx(val.time) and val.time >= 3 * 0.05
    assert predicted.metrics["energy/predict/total_j"] == pytest.approx(pred.total_energy)
    assert predicted.metrics["time/predict/total_s"] >= 2 * 0.05
    assert evaluated["simulated"] == 1.0 and zeus.stage_history["val"][0] == {
        k: v for k, v in evaluated.items() if k in zeus.stage_history["val"][0]
    }
    assert entries(trainer.state.log_history, "energy/val/total_j")
    assert zeus.train_metrics == {} and monitor.ended["train"] == [] and monitor.open_windows == []


def test_rejects_bad_configuration() -> None:
    with pytest.raises(ZeusConfigError, match="training protocol"):
        ZeusTrainerCallback(zeus_optimizers=object())  # type: ignore[arg-type]
    with pytest.raises(ZeusConfigError, match="log_every_n_steps=0"):
        ZeusTrainerCallback(log_every_n_steps=0)
    two = [Protocol(), Protocol()]
    assert ZeusTrainerCallback(zeus_optimizers=two).zeus_optimizers == two


def test_light_import_and_missing_extra_message() -> None:
    code = (
        "import sys, zeus_core, zeus_integrations\n"
        "assert 'transformers' not in sys.modules and 'torch' not in sys.modules, sorted(sys.modules)\n"
        "sys.modules['transformers'] = None\n"
        "try:\n"
        "    import zeus_integrations.huggingface\n"
        "except ModuleNotFoundError as e:\n"
        "    print(e)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert "pip install 'zeus-suite[hf]'" in proc.stdout
