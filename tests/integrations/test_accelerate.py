"""The Accelerate hook: real Accelerate loops of a tiny model on the CPU with a simulated GPU.

Each forward pass runs one unit of simulated work (0.1 s, 30 J on a virtual clock; see
``scripts/accelerate_tiny.py``), so every figure has an exact expected value.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("accelerate")
import torch  # noqa: E402
from accelerate import Accelerator  # noqa: E402

SCRIPTS = Path(__file__).parent / "scripts"
sys.path.insert(0, str(SCRIPTS))
from accelerate_tiny import UNIT_ENERGY_J, UNIT_TIME_S, RecordingTracker, SimModel, loader, run_epochs  # noqa: E402
from lightning_accelerate_common import Recorder, expected_events, run_script  # noqa: E402

from zeus_core.exceptions import ZeusConfigError  # noqa: E402
from zeus_core.monitor._energy import ZeusMonitor  # noqa: E402
from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock  # noqa: E402
from zeus_integrations.accelerate import attach  # noqa: E402


def _setup(grad_accum: int, samples: int = 16):
    gpu = SimulatedGPU(PhysicalModel.a40(), clock=VirtualClock())
    monitor = ZeusMonitor(gpus=[gpu], cpu_indices=[])
    tracker = RecordingTracker()
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=grad_accum, log_with=[tracker])
    accelerator.init_trackers("zeus-test")
    model = SimModel(gpu)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    model, opt, train, evaluate = accelerator.prepare(model, opt, loader(samples), loader(4))
    return gpu, monitor, tracker, accelerator, model, opt, train, evaluate


def test_steps_epochs_and_logged_values_under_accumulation() -> None:
    gpu, monitor, logged, acc, model, opt, train, evaluate = _setup(grad_accum=3)
    recorder = Recorder()
    with attach(acc, model, opt, zeus_optimizers=recorder, monitor=monitor, log_every_n_steps=1) as zeus:
        run_epochs(acc, model, opt, train, epochs=2, evaluate=evaluate)  # 8 batches/epoch: steps of 3, 3, 2

    assert recorder.events == expected_events(epochs=2, steps_per_epoch=3)
    assert len(zeus.epoch_history) == 2
    for epoch in zeus.epoch_history:  # evaluation (2 forward passes per epoch) is excluded
        assert epoch["energy/epoch_j"] == pytest.approx(8 * UNIT_ENERGY_J)
        assert epoch["energy/epoch_gpu0_j"] == pytest.approx(8 * UNIT_ENERGY_J)
        assert epoch["time/epoch_s"] == pytest.approx(8 * UNIT_TIME_S)
        assert epoch["simulated"] == 1.0
    assert zeus.train_metrics["energy/train_j"] == pytest.approx(16 * UNIT_ENERGY_J)
    assert gpu.get_total_energy() == pytest.approx(20 * UNIT_ENERGY_J)  # 16 train + 4 eval forwards
    assert logged.column("energy/epoch_j") == pytest.approx([240.0, 240.0])
    assert logged.column("energy/step_j") == pytest.approx([90.0, 90.0, 60.0] * 2)
    assert logged.column("energy/train_j") == pytest.approx([480.0])
    assert [step for values, step in logged.logged if "energy/epoch_j" in values] == [3, 6]
    # Detached afterwards: more training is not measured and raises nothing.
    run_epochs(acc, model, opt, train, epochs=1)
    assert recorder.events[-1] == "train_end" and len(zeus.epoch_history) == 2
    assert monitor.open_windows == []


def test_evaluation_counted_when_asked() -> None:
    gpu, monitor, _, acc, model, opt, train, evaluate = _setup(grad_accum=1, samples=8)
    with attach(acc, model, opt, monitor=monitor, include_validation=True, checkpoint=False) as zeus:
        run_epochs(acc, model, opt, train, epochs=2, evaluate=evaluate)
    # Epoch 1 ends at its last optimizer step; the evaluation after it counts in the fit's total.
    assert [e["energy/epoch_j"] for e in zeus.epoch_history] == pytest.approx([120.0, 120.0])
    assert zeus.train_metrics["energy/train_j"] == pytest.approx(12 * UNIT_ENERGY_J)


def test_save_and_load_state_continue_the_totals(tmp_path: Path) -> None:
    gpu, monitor, _, acc, model, opt, train, _ = _setup(grad_accum=2, samples=8)
    first = Recorder()
    with attach(acc, model, opt, zeus_optimizers=first, monitor=monitor):
        run_epochs(acc, model, opt, train, epochs=1)
        acc.save_state(str(tmp_path / "state"))

    gpu2 = SimulatedGPU(PhysicalModel.a40(), clock=VirtualClock())
    acc2 = Accelerator(cpu=True, gradient_accumulation_steps=2)
    model2 = SimModel(gpu2)
    opt2 = torch.optim.SGD(model2.parameters(), lr=0.01)
    model2, opt2, train2 = acc2.prepare(model2, opt2, loader(8))
    second = Recorder()
    monitor2 = ZeusMonitor(gpus=[gpu2], cpu_indices=[])
    with attach(acc2, model2, opt2, zeus_optimizers=second, monitor=monitor2) as zeus:
        acc2.load_state(str(tmp_path / "state"))
        run_epochs(acc2, model2, opt2, train2, epochs=1)
    assert second.loaded == {"version": 1, "steps_seen": 2}
    assert zeus.train_metrics["energy/train_j"] == pytest.approx(8 * UNIT_ENERGY_J)
    assert zeus.tracker is not None and zeus.tracker.epochs_done == 2 and zeus.tracker.steps_done == 4


def test_failure_in_the_loop_ends_training_once() -> None:
    gpu, monitor, logged, acc, model, opt, train, _ = _setup(grad_accum=2)
    recorder = Recorder()
    with pytest.raises(RuntimeError, match="on purpose"):
        with attach(acc, model, opt, zeus_optimizers=recorder, monitor=monitor, checkpoint=False) as zeus:
            run_epochs(acc, model, opt, train, epochs=2, fail_at_batch=5)
    assert recorder.events.count("train_end") == 1 and recorder.events[-1] == "train_end"
    assert zeus.train_metrics["energy/train_j"] == pytest.approx(5 * UNIT_ENERGY_J)
    assert logged.column("energy/train_j") == pytest.approx([150.0])
    assert monitor.open_windows == []


def test_a_step_skipped_by_the_grad_scaler_still_ends_its_window(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu, monitor, _, acc, model, opt, train, _ = _setup(grad_accum=2, samples=8)
    skipped = {"now": False}
    monkeypatch.setattr(type(opt), "step_was_skipped", property(lambda self: skipped["now"]))
    recorder = Recorder()
    with attach(acc, model, opt, zeus_optimizers=recorder, monitor=monitor, checkpoint=False):
        for i, (x, y) in enumerate(train):  # 4 micro-batches -> 2 windows; the first window's step is skipped
            with acc.accumulate(model):
                acc.backward(torch.nn.functional.mse_loss(model(x), y))
                skipped["now"] = i == 1
                if not skipped["now"]:  # what AcceleratedOptimizer.step does on fp16 overflow
                    opt.step()
                opt.zero_grad()
    assert recorder.events == expected_events(epochs=1, steps_per_epoch=2)


def test_arguments_are_validated() -> None:
    acc = Accelerator(cpu=True)
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ZeusConfigError, match="log_every_n_steps=0"):
        attach(acc, model, opt, log_every_n_steps=0)
    with pytest.raises(ZeusConfigError, match="training protocol"):
        attach(acc, model, opt, zeus_optimizers=object())
    with pytest.raises(ZeusConfigError, match="models"):
        attach(acc, [], opt)


def test_missing_accelerate_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "accelerate", None)
    monkeypatch.delitem(sys.modules, "zeus_integrations.accelerate")
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'zeus-suite\[hf\]'"):
        importlib.import_module("zeus_integrations.accelerate")


@pytest.mark.slow
def test_two_processes_sum_their_energy(tmp_path: Path) -> None:
    proc = run_script(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            str(SCRIPTS / "accelerate_ddp.py"),
            str(tmp_path),
        ],
        timeout_s=180,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    job = sum(r["gpu_energy_j"] for r in ranks)
    assert ranks[0]["gpu_energy_j"] != pytest.approx(ranks[1]["gpu_energy_j"])
    for r in ranks:
        assert r["world_size"] == 2
        assert r["train"]["energy/train_j"] == pytest.approx(job)
        assert r["events"] == expected_events(epochs=2, steps_per_epoch=2)  # 4 batches per rank, 2 per step
        assert sum(e["energy/epoch_j"] for e in r["epochs"]) == pytest.approx(job)
        assert {k for k in r["epochs"][0] if k.startswith("energy/epoch_rank")} == {
            "energy/epoch_rank0_gpu0_j",
            "energy/epoch_rank1_gpu0_j",
        }
    # Only the main process logs through accelerator.log.
    assert ranks[0]["logged_train"] == pytest.approx([job]) and ranks[1]["logged_train"] == []
