"""Profile file save/reuse/rejection, and checkpoint state (state_dict / load_state_dict)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tests.optimizer.plo_support import make_gpus, monitor_of, run_steps, synthetic_profile
from zeus_core.exceptions import ZeusProfileError
from zeus_core.optimizer.power_limit import (
    Done,
    Energy,
    GlobalPowerLimitOptimizer,
    JobGPUs,
    PowerLimitProfile,
    Ready,
    Time,
)
from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock

CLOCK = VirtualClock()
SMALL = dict(wait_steps=1, warmup_steps=2, profile_steps=3, pl_step=50, early_stopping=None)


def optimizer(gpus, path: Path | None = None, selector=None) -> GlobalPowerLimitOptimizer:
    return GlobalPowerLimitOptimizer(monitor_of(gpus), selector or Energy(), profile_path=path, **SMALL)


def profiled(tmp_path: Path, n: int = 2) -> Path:
    """Run a whole sweep with a profile file; return the file."""
    path = tmp_path / "plo.json"
    gpus = make_gpus(n)
    plo = optimizer(gpus, path)
    plo.on_train_begin()
    run_steps(plo, gpus, 40)
    plo.on_train_end()
    return path


def test_the_profile_holds_measurements_decision_and_hardware(tmp_path: Path) -> None:
    data = json.loads(profiled(tmp_path).read_text())
    assert data["version"] == 2 and data["kind"] == "zeus-suite/power-limit-profile"
    assert data["optimal_power_limit_w"] == 200 and data["selector"] == "Energy()"
    assert [m["power_limit"] for m in data["measurements"]] == [300, 250, 200, 150, 100]
    assert data["measurements"][2]["energy"] == pytest.approx(2 * 45.0)  # two GPUs, J per step
    assert [v[0] for v in data["visits"]] == [300, 250, 200, 150, 100]  # every visit's samples
    hw = data["hardware"]
    assert hw["gpu_model"] == "NVIDIA A40 (simulated)" and hw["simulated"] is True
    assert hw["gpu_uuids"] == ["SIM-NVIDIA-A40-0", "SIM-NVIDIA-A40-1"] and hw["world_size"] == 1
    assert (hw["min_w"], hw["max_w"]) == (100, 300)
    profile = PowerLimitProfile.load(tmp_path / "plo.json")
    assert PowerLimitProfile.from_dict(profile.to_dict()) == profile


def test_a_restarted_job_skips_profiling(tmp_path: Path, caplog) -> None:
    path = profiled(tmp_path)
    gpus = make_gpus(2)
    plo = optimizer(gpus, path)
    with caplog.at_level(logging.INFO):
        plo.on_train_begin()
    assert isinstance(plo.state, Done) and plo.optimal_power_limit_w == 200
    assert [g.get_power_limit() for g in gpus] == [200, 200]  # set at once, before the first step
    limits = run_steps(plo, gpus, 20)
    assert limits == [200.0] * 20 and plo.monitor.open_windows == []
    assert "applied without profiling" in caplog.text
    plo.on_train_end()
    assert [g.get_power_limit() for g in gpus] == [300, 300]


def test_another_selector_decides_from_the_saved_measurements(tmp_path: Path) -> None:
    path = profiled(tmp_path)
    gpus = make_gpus(2)
    plo = optimizer(gpus, path, Time())
    plo.on_train_begin()
    assert plo.optimal_power_limit_w == 300 and gpus[0].get_power_limit() == 300
    plo.on_train_end()


def test_an_unfinished_profile_resumes_where_it_stopped(tmp_path: Path) -> None:
    path = tmp_path / "plo.json"
    gpus = make_gpus(1)
    plo = optimizer(gpus, path)
    plo.on_train_begin()
    run_steps(plo, gpus, 12)  # wait + 300 W + 250 W measured, then the job dies
    plo.on_train_end()
    saved = json.loads(path.read_text())
    assert saved["optimal_power_limit_w"] is None
    assert [m["power_limit"] for m in saved["measurements"]] == [300, 250]

    gpus = make_gpus(1)
    plo = optimizer(gpus, path)
    plo.on_train_begin()
    assert plo.state == Ready(200, 2)
    limits = run_steps(plo, gpus, 20)
    assert 300 not in limits[1:] and 250 not in limits  # not profiled again
    assert plo.optimal_power_limit_w == 200
    plo.on_train_end()  # waits for the profile writer
    assert json.loads(path.read_text())["optimal_power_limit_w"] == 200


@pytest.mark.parametrize(
    ("gpus", "message"),
    [
        (
            lambda: [SimulatedGPU(PhysicalModel.a100(), 0, clock=CLOCK)],
            r"measured on 'NVIDIA A40 \(simulated\)' GPUs",
        ),
        (lambda: make_gpus(1), "measured on 2 GPU\\(s\\), but this job uses 1"),
        (lambda: [SimulatedGPU(synthetic_profile(), i, clock=CLOCK) for i in (2, 3)], "another set of GPUs"),
    ],
)
def test_a_profile_from_other_hardware_is_rejected(tmp_path: Path, gpus, message: str) -> None:
    path = profiled(tmp_path)
    devices = gpus()
    limits = [g.get_power_limit() for g in devices]
    plo = GlobalPowerLimitOptimizer(monitor_of(devices), Energy(), profile_path=path)
    with pytest.raises(ZeusProfileError, match=message) as err:
        plo.on_train_begin()
    assert "Delete the file (or pass a new profile_path)" in str(err.value)
    assert [g.get_power_limit() for g in devices] == limits  # nothing was changed
    plo.on_train_end()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ('[{"power_limit_w": 300}]', "not a Zeus Suite power-limit profile"),
        ('{"kind": "zeus-suite/power-limit-profile", "version": 99}', "version 99"),
        ('{"kind": "zeus-suite/power-limit-profile", "version": true}', "version True"),
        (
            '{"kind": "zeus-suite/power-limit-profile", "version": 1, "hardware": {"gpu_model": "x"}}',
            "malformed",
        ),
    ],
)
def test_a_malformed_profile_is_rejected(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "plo.json"
    path.write_text(content)
    gpus = make_gpus(1)
    plo = optimizer(gpus, path)
    with pytest.raises(ZeusProfileError, match=message):
        plo.on_train_begin()
    assert gpus[0].get_power_limit() == 300


def test_limit_range_mismatch_is_rejected() -> None:
    job = JobGPUs("NVIDIA A40", ("GPU-a",), 1, 100.0, 300.0)
    saved = PowerLimitProfile(JobGPUs("NVIDIA A40", ("GPU-a",), 1, 150.0, 300.0))
    with pytest.raises(ZeusProfileError, match="150–300 W"):
        saved.check(job)
    PowerLimitProfile(job).check(JobGPUs("NVIDIA A40", ("GPU-a",), 1, 100.0, 300.0))


# -- checkpoints -----------------------------------------------------------------------------------------
def test_state_dict_is_json_and_resumes_without_reprofiling() -> None:
    gpus = make_gpus(1)
    plo = optimizer(gpus)
    plo.on_train_begin()
    run_steps(plo, gpus, 14)  # 300 and 250 W measured; 200 W being measured... then the epoch ended
    state = json.loads(json.dumps(plo.state_dict()))
    plo.on_train_end()
    assert state["version"] == 2 and state["state"]["kind"] == "measuring"  # paused over the boundary
    assert [m["power_limit"] for m in state["measurements"]] == [300, 250]

    gpus = make_gpus(1)
    resumed = optimizer(gpus)
    resumed.load_state_dict(state)  # before on_train_begin, as adapters restoring a checkpoint do
    resumed.on_train_begin()
    assert resumed.state == Ready(200, 2)
    limits = run_steps(resumed, gpus, 20)
    assert 250 not in limits and resumed.optimal_power_limit_w == 200
    assert [m.power_limit for m in resumed.measurements] == [300, 250, 200, 150, 100]
    resumed.on_train_end()


def test_a_checkpoint_taken_mid_measurement_reprofiles_only_that_limit() -> None:
    gpus = make_gpus(1)
    plo = optimizer(gpus)
    plo.on_train_begin()
    plo.on_epoch_begin()
    for _ in range(10):  # wait, 300 W, then 250 W warm-up and one measured step
        plo.on_step_begin()
        gpus[0].run_steps(1)
        plo.on_step_end()
    assert plo.state.power_limit_w == 250 and plo._sampler.steps == 1  # type: ignore[union-attr]
    state = plo.state_dict()
    # Loading into the running optimizer: the open window is dropped and 250 W starts over.
    plo.load_state_dict(state)
    assert plo.state == Ready(250, 2) and plo.monitor.open_windows == []
    assert gpus[0].get_power_limit() == 300
    limits = run_steps(plo, gpus, 30)
    assert limits[:2] == [300.0, 250.0] and plo.optimal_power_limit_w == 200
    plo.on_train_end()


def test_a_finished_checkpoint_resumes_at_the_optimum() -> None:
    gpus = make_gpus(1)
    plo = optimizer(gpus)
    plo.on_train_begin()
    run_steps(plo, gpus, 40)
    state = plo.state_dict()
    plo.on_train_end()
    assert state["state"] == {
        "kind": "done",
        "power_limit_w": 200.0,
        "reason": "the step budget is spent",
    }
    gpus = make_gpus(1)
    resumed = optimizer(gpus)
    resumed.load_state_dict(state)
    resumed.on_train_begin()
    assert isinstance(resumed.state, Done) and gpus[0].get_power_limit() == 200
    resumed.on_train_end()


def test_checkpoints_from_other_hardware_are_dropped_with_a_warning(caplog) -> None:
    gpus = make_gpus(2)
    plo = optimizer(gpus)
    plo.on_train_begin()
    run_steps(plo, gpus, 40)
    state = plo.state_dict()
    plo.on_train_end()
    other = make_gpus(1)
    resumed = optimizer(other)
    resumed.load_state_dict({**state, "measurements": [*state["measurements"], {"power_limit": 1}]})
    with caplog.at_level(logging.WARNING):
        resumed.on_train_begin()
    assert "Dropping the checkpointed power-limit measurements" in caplog.text
    assert resumed.state == Ready(300, 2) and resumed.measurements == ()
    resumed.on_train_end()


def test_old_or_partial_checkpoints_load_tolerantly(caplog) -> None:
    gpus = make_gpus(1)
    first = optimizer(gpus)
    first.on_train_begin()
    hardware = first.state_dict()["hardware"]
    first.on_train_end()
    plo = optimizer(gpus)
    old = {"power_limit_w": 300, "steps": 3, "time_per_step_s": 0.2, "energy_per_step_j": 60.0}  # version 1
    with caplog.at_level(logging.WARNING):
        plo.load_state_dict({"hardware": hardware, "measurements": [old, {"power_limit": 250}]})
        plo.on_train_begin()
    assert "version None" in caplog.text and "Dropping a checkpointed measurement" in caplog.text
    (m,) = plo.measurements  # a measurement saved without samples counts as one sample of its steps
    assert (m.power_limit, m.steps, m.samples, m.time, m.energy) == (
        300,
        3,
        1,
        pytest.approx(0.2),
        pytest.approx(60),
    )
    assert plo.state == Ready(250, 2)
    plo.on_train_end()
