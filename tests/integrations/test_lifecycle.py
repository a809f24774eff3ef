"""TrainingLifecycle, the one lifecycle every adapter drives: its rules tested directly."""

from __future__ import annotations

import gc
import json
from typing import Any

import pytest

from tests.integrations.scripts.lightning_accelerate_common import Recorder
from zeus_core import PhysicalModel, SimulatedGPU, TrainingLifecycle, VirtualClock, ZeusMonitor
from zeus_core.exceptions import ZeusConfigError
from zeus_core.training import _lifecycle as lifecycle_module
from zeus_core.training._lifecycle import gpu_indices_of, local_rank

torch = pytest.importorskip("torch")


def simulated() -> tuple[SimulatedGPU, ZeusMonitor]:
    gpu = SimulatedGPU(PhysicalModel.a40(), clock=VirtualClock())
    return gpu, ZeusMonitor(gpus=[gpu], cpu_indices=[])


def run_epoch(lc: TrainingLifecycle, gpu: SimulatedGPU, steps: int) -> dict[str, float]:
    lc.begin_epoch()
    for _ in range(steps):
        lc.begin_step()
        gpu.run_steps(1)
        lc.end_step()
    return lc.end_epoch()


def test_only_local_rank_zero_reads_cpu_and_dram(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[dict[str, Any]] = []

    class Recording(ZeusMonitor):
        def __init__(self, **kwargs: Any) -> None:
            built.append(kwargs)
            super().__init__(gpus=[], cpu_indices=[])

    monkeypatch.setattr(lifecycle_module, "ZeusMonitor", Recording)
    for rank in (0, 1, 3):
        TrainingLifecycle("test", verbose=False).setup([], rank_on_machine=rank)
    monkeypatch.setenv("LOCAL_RANK", "2")  # torchrun's variable when no rank is given
    TrainingLifecycle("test", verbose=False).setup([])
    assert [b["cpu_indices"] for b in built] == [None, [], [], []]
    assert local_rank() == 2


def test_device_mapping() -> None:
    assert gpu_indices_of([torch.device("cuda", 3), "cuda:1", 1, torch.device("cpu")]) == [1, 3]
    assert gpu_indices_of([torch.device("cpu"), "meta"]) == []
    assert gpu_indices_of(["tpu:0"]) is None  # cannot tell: every visible GPU


def test_each_window_begins_and_ends_once_and_stages_are_apart() -> None:
    gpu, monitor = simulated()
    recorder = Recorder()
    lc = TrainingLifecycle("test", recorder, monitor=monitor, verbose=False)
    lc.setup()
    lc.begin_train()
    lc.begin_train()  # a second begin aborts the first run, so its optimizer ends once
    assert recorder.events == ["train_begin", "train_end", "train_begin"]
    epoch = run_epoch(lc, gpu, 3)
    lc.begin_stage("val")
    gpu.run_steps(2)
    val = lc.end_stage()
    assert epoch["energy/epoch_j"] == pytest.approx(90.0) and val["energy/val/total_j"] == pytest.approx(60.0)
    assert val["energy/val/gpu0_j"] == pytest.approx(60.0) and val["time/val/total_s"] == pytest.approx(0.2)
    totals = lc.end_train()
    assert totals["energy/train_j"] == pytest.approx(90.0)  # validation excluded
    assert lc.end_train() is lc.train_metrics and lc.abort() == totals  # ended already: no-ops
    assert recorder.events.count("train_end") == 2 and monitor.open_windows == []
    with pytest.raises(ZeusConfigError, match="use one of val, test, predict"):
        lc.begin_stage("eval")


def test_a_run_left_open_ends_when_the_lifecycle_is_collected() -> None:
    gpu, monitor = simulated()
    recorder = Recorder()
    lc = TrainingLifecycle("test", recorder, monitor=monitor, verbose=False)
    lc.setup()
    lc.begin_train()
    lc.begin_epoch()
    lc.begin_step()
    del lc
    gc.collect()
    assert recorder.events[-1] == "train_end" and monitor.open_windows == []


def test_checkpoint_state_is_versioned_and_continues_a_running_epoch() -> None:
    gpu, monitor = simulated()
    lc = TrainingLifecycle("test", Recorder(), monitor=monitor, verbose=False)
    lc.setup()
    lc.begin_train()
    run_epoch(lc, gpu, 2)
    lc.begin_epoch()
    lc.begin_step()
    gpu.run_steps(1)
    lc.end_step()
    state = json.loads(json.dumps(lc.state_dict()))  # JSON-safe, saved mid-epoch
    assert state["version"] == 2 and len(state["epoch_history"]) == 1

    gpu2, monitor2 = simulated()
    resumed = TrainingLifecycle("test", Recorder(), monitor=monitor2, verbose=False)
    resumed.load_state_dict(state)  # before setup, as frameworks may do
    resumed.setup()
    resumed.begin_train()
    epoch = run_epoch(resumed, gpu2, 1)  # the rest of the running epoch
    assert epoch["energy/epoch_j"] == pytest.approx(60.0)  # 1 unit before the checkpoint + 1 after
    assert [e["energy/epoch_j"] for e in resumed.epoch_history] == pytest.approx([60.0, 60.0])
    assert resumed.end_train()["energy/train_j"] == pytest.approx(120.0)

    old = {"version": 1, "ranks": [{"time_s": 1.0, "energy_j": {"gpu0": 50.0}, "steps_done": 4}]}
    legacy = TrainingLifecycle("test", monitor=monitor2, verbose=False)
    legacy.setup()
    legacy.load_state_dict(old)  # the Hugging Face callback's version 1
    legacy.begin_train()
    assert legacy.end_train()["energy/train_j"] == pytest.approx(50.0)


def test_optimizer_metrics_join_each_epoch_and_bad_arguments_are_named() -> None:
    gpu, monitor = simulated()

    class WithMetrics(Recorder):
        def metrics(self) -> dict[str, float]:
            return {"power/limit_w": 250}

    lc = TrainingLifecycle("test", WithMetrics(), monitor=monitor, verbose=False)
    lc.setup()
    lc.begin_train()
    assert run_epoch(lc, gpu, 1)["power/limit_w"] == 250.0
    lc.end_train()
    with pytest.raises(ZeusConfigError, match="simulate='v9000'"):
        TrainingLifecycle("test", simulate="v9000")
    with pytest.raises(ZeusConfigError, match="was not set up"):
        TrainingLifecycle("test").begin_train()
