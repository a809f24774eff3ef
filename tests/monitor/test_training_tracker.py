"""TrainingTracker: windows per run/epoch/step, pause/resume, forwarding, checkpoint state."""

from __future__ import annotations

import pytest

from zeus_core import PhysicalModel, SimulatedGPU, TrainingCallback, VirtualClock, ZeusMonitor
from zeus_core.exceptions import ZeusConfigError
from zeus_core.training._tracker import TrainingTracker, metric_key


class Recorder(TrainingCallback):
    def __init__(self, log: list[str], name: str = "r") -> None:
        self.log, self.name = log, name
        self.loaded: dict | None = None

    def on_train_begin(self) -> None:
        self.log.append(f"{self.name}.train_begin")

    def on_epoch_begin(self) -> None:
        self.log.append(f"{self.name}.epoch_begin")

    def on_step_begin(self) -> None:
        self.log.append(f"{self.name}.step_begin")

    def on_step_end(self) -> None:
        self.log.append(f"{self.name}.step_end")

    def on_epoch_end(self) -> None:
        self.log.append(f"{self.name}.epoch_end")

    def on_train_end(self) -> None:
        self.log.append(f"{self.name}.train_end")

    def state_dict(self) -> dict:
        return {"name": self.name}

    def load_state_dict(self, state: dict) -> None:
        self.loaded = state


def make(clock: VirtualClock, **kwargs) -> tuple[TrainingTracker, SimulatedGPU]:
    gpu = SimulatedGPU(PhysicalModel.a40(), clock=clock, busy=True)  # draws 300 W while busy
    return TrainingTracker(ZeusMonitor(gpus=[gpu], cpu_indices=[]), **kwargs), gpu


def run_epoch(tracker: TrainingTracker, clock: VirtualClock, steps: int, step_s: float = 1.0) -> None:
    tracker.on_epoch_begin()
    for _ in range(steps):
        tracker.on_step_begin()
        clock.advance(step_s)
        tracker.on_step_end()
    tracker.on_epoch_end()


def test_epoch_step_and_train_metrics() -> None:
    clock = VirtualClock()
    tracker, _ = make(clock, log_every_n_steps=2)
    tracker.on_train_begin()
    run_epoch(tracker, clock, 4)
    assert tracker.epoch_metrics[metric_key("energy", "epoch")] == pytest.approx(1200.0)
    assert tracker.epoch_metrics["energy/epoch_gpu0_j"] == pytest.approx(1200.0)
    assert tracker.epoch_metrics["time/epoch_s"] == pytest.approx(4.0)
    assert tracker.epoch_metrics["power/avg_w"] == pytest.approx(300.0)
    assert tracker.epoch_metrics["simulated"] == 1.0
    assert tracker.step_metrics["energy/step_j"] == pytest.approx(300.0)  # step 4 is logged
    clock.advance(3.0)  # between epochs: counted in the run, not in an epoch
    run_epoch(tracker, clock, 2)
    tracker.on_train_end()
    assert tracker.epochs_done == 2 and tracker.steps_done == 6
    assert tracker.train_metrics["time/train_s"] == pytest.approx(9.0)
    assert tracker.train_metrics["energy/train_j"] == pytest.approx(2700.0)
    assert tracker.train_metrics["energy/train_gpu_j"] == pytest.approx(2700.0)


def test_pause_excludes_validation_time() -> None:
    clock = VirtualClock()
    tracker, _ = make(clock)
    tracker.on_train_begin()
    tracker.on_epoch_begin()
    clock.advance(2.0)
    tracker.pause()
    clock.advance(100.0)  # validation
    tracker.resume()
    clock.advance(1.0)
    tracker.on_epoch_end()
    tracker.on_train_end()
    assert tracker.epoch_metrics["time/epoch_s"] == pytest.approx(3.0)
    assert tracker.train_metrics["energy/train_j"] == pytest.approx(900.0)


def test_events_reach_optimizers_in_order() -> None:
    clock = VirtualClock()
    log: list[str] = []
    tracker, _ = make(clock, zeus_optimizers=[Recorder(log, "a"), Recorder(log, "b")])
    tracker.on_train_begin()
    run_epoch(tracker, clock, 1)
    tracker.on_train_end()
    assert log == [
        "a.train_begin",
        "b.train_begin",
        "a.epoch_begin",
        "b.epoch_begin",
        "a.step_begin",
        "b.step_begin",
        "b.step_end",
        "a.step_end",
        "b.epoch_end",
        "a.epoch_end",
        "b.train_end",
        "a.train_end",
    ]


def test_train_end_after_failure_mid_epoch_still_reaches_optimizers() -> None:
    clock = VirtualClock()
    log: list[str] = []
    tracker, _ = make(clock, zeus_optimizers=[Recorder(log)], log_every_n_steps=1)
    tracker.on_train_begin()
    tracker.on_epoch_begin()
    tracker.on_step_begin()
    clock.advance(1.0)
    tracker.on_train_end()  # the framework failed inside a step
    assert log[-1] == "r.train_end"
    assert tracker.epochs_done == 0
    assert tracker.train_metrics["energy/train_j"] == pytest.approx(300.0)
    assert tracker.monitor.open_windows == []


def test_checkpoint_resume_continues_totals_and_restores_optimizer_state() -> None:
    clock = VirtualClock()
    tracker, _ = make(clock, zeus_optimizers=[Recorder([], "opt")])
    tracker.on_train_begin()
    run_epoch(tracker, clock, 2)
    state = tracker.state_dict()  # mid-run: includes the running train window
    assert state["energy_j"]["gpu0"] == pytest.approx(600.0) and state["epochs_done"] == 1

    resumed_opt = Recorder([], "opt")
    resumed, _ = make(clock, zeus_optimizers=[resumed_opt])
    resumed.load_state_dict(state)
    assert resumed_opt.loaded == {"name": "opt"}
    resumed.on_train_begin()
    run_epoch(resumed, clock, 1)
    resumed.on_train_end()
    assert resumed.epochs_done == 2
    assert resumed.train_metrics["energy/train_j"] == pytest.approx(900.0)
    assert resumed.train_metrics["time/train_s"] == pytest.approx(3.0)


def test_rejects_non_protocol_optimizers_and_bad_step_interval() -> None:
    clock = VirtualClock()
    with pytest.raises(ZeusConfigError, match="does not implement the training protocol"):
        make(clock, zeus_optimizers=[object()])
    with pytest.raises(ZeusConfigError, match="log_every_n_steps"):
        make(clock, log_every_n_steps=0)
