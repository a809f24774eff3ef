"""PerseusRuntime in one process (a 1-stage pipeline) on a simulated A40 with a virtual clock.

Covers the phase machine, planning targets, saving and reusing files on restart, rejecting files
made for other hardware or another instruction order, measure mode, and resuming from state.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zeus_core import console
from zeus_core.exceptions import ZeusConfigError, ZeusProfileError
from zeus_core.optimizer.pipeline_frequency import FrequencyPlan, FrequencySweep, synchronous_1f1b
from zeus_core.optimizer.pipeline_frequency.runtime import (
    ApplyingPhase,
    DiscoveryPhase,
    InstructionListener,
    PerseusRuntime,
    PlanSettings,
    ProfilingPhase,
)
from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock

ORDER = [("forward", 0), ("backward", 0), ("forward", 1), ("backward", 1)]  # 1F1B, 1 stage, 2 microbatches
SWEEP = FrequencySweep(frequencies_mhz=(1740, 1140, 840), iterations_per_frequency=2, patience=0)
LEAST = PlanSettings(target="least-energy", unit_time_s=1e-3)


class Shown:
    """The console messages a test triggered (``console.warn`` and ``console.info``)."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    @property
    def text(self) -> str:
        return "\n".join(self.messages)


@pytest.fixture
def shown(monkeypatch: pytest.MonkeyPatch) -> Shown:
    seen = Shown()
    monkeypatch.setattr(console, "warn", seen.messages.append)
    monkeypatch.setattr(console, "info", seen.messages.append)
    return seen


def make_gpu(model: PhysicalModel | None = None, **kwargs: object) -> SimulatedGPU:
    return SimulatedGPU(model or PhysicalModel.a40(), clock=VirtualClock(), **kwargs)  # type: ignore[arg-type]


def iterate(runtime: PerseusRuntime, gpu: SimulatedGPU, n: int = 1, order: list | None = None) -> None:
    """Run ``n`` iterations: an instruction is one unit of model work (backward: two) at the locked clock."""
    clock = gpu.clock
    model = gpu.behavior
    for _ in range(n):
        runtime.begin_iteration()
        for kind, mb in order or ORDER:
            runtime.begin_instruction(kind, mb)
            assert runtime.controller is not None and runtime.controller.wait()  # deterministic for the test
            f = gpu.locked_sm_frequency or model.f_max_mhz
            gpu.set_busy(True)
            clock.advance((2.0 if kind == "backward" else 1.0) * model.time_at(f))  # type: ignore[attr-defined]
            gpu.set_busy(False)
            runtime.end_instruction(kind, mb)
            clock.advance(0.01)  # communication gap: the GPU idles
        runtime.end_iteration()


def new_runtime(gpu: SimulatedGPU, **kwargs: object) -> PerseusRuntime:
    runtime = PerseusRuntime(gpu, **kwargs)  # type: ignore[arg-type]
    runtime.set_pipeline(0, 1, "1f1b")
    return runtime


def test_profile_plan_apply_and_save(tmp_path: Path) -> None:
    gpu = make_gpu()
    runtime = new_runtime(gpu, sweep=SWEEP, planning=LEAST, save_dir=tmp_path)
    assert isinstance(runtime, InstructionListener)
    with runtime:
        iterate(runtime, gpu)
        assert runtime.phase == ProfilingPhase(0, 0)
        iterate(runtime, gpu, 6)
        assert isinstance(runtime.phase, ApplyingPhase)
        iterate(runtime, gpu, 2)
        assert gpu.locked_sm_frequency is not None
    assert gpu.locked_sm_frequency is None and not runtime.controller.active  # type: ignore[union-attr]
    phases = [r.phase for r in runtime.iterations]
    assert phases == ["discovering"] + ["profiling"] * 6 + ["applying"] * 2
    profiled = [r.instructions[0].frequency_mhz for r in runtime.iterations if r.phase == "profiling"]
    assert profiled == [1740, 1740, 1140, 1140, 840, 840]
    plan = runtime.plan
    assert plan is not None and plan.label == "least-energy" and plan.simulated
    # One stage, no slack: least energy is the clock of least energy per instruction (1140 in the A40 model).
    profile = runtime.profile
    assert profile is not None
    for kind in ("forward", "backward"):
        best = min(profile.get(0, kind), key=lambda m: m.energy_j).frequency_mhz
        assert {plan.frequency(0, kind, mb) for mb in range(2)} == {best} == {1140}
    for rec in list(runtime.iterations)[-2:]:
        assert [(i.kind.value, i.microbatch) for i in rec.instructions] == ORDER
        assert [i.frequency_mhz for i in rec.instructions] == [plan.frequency(0, k, m) for k, m in ORDER]
    assert (tmp_path / "profile.csv").read_text().count("\n") == 1 + 2 * 3
    meta = json.loads((tmp_path / "profile.json").read_text())
    assert meta["gpu_names"] == {"0": "NVIDIA A40 (simulated)"} and meta["blocking_power_w"] == pytest.approx(
        30.0
    )
    saved = FrequencyPlan.load(tmp_path / "plan-1f1b-s1-m2-least-energy.json")
    assert saved == plan and saved.metadata["runtime"]["stage_orders"] == "stage 0: F0 B0 F1 B1"


def _profiled(tmp_path: Path) -> Path:
    gpu = make_gpu()
    with new_runtime(gpu, sweep=SWEEP, planning=LEAST, save_dir=tmp_path) as runtime:
        iterate(runtime, gpu, 7)
    return tmp_path


def test_restart_reuses_the_plan_and_replans_a_new_target_from_the_profile(tmp_path: Path) -> None:
    _profiled(tmp_path)
    first = FrequencyPlan.load(tmp_path / "plan-1f1b-s1-m2-least-energy.json")
    gpu = make_gpu()
    with new_runtime(gpu, sweep=SWEEP, planning=LEAST, save_dir=tmp_path) as again:
        iterate(again, gpu, 2)
    assert [r.phase for r in again.iterations] == ["discovering", "applying"]
    assert again.plan == first and again.profile is not None
    # A new target plans from the saved profile: no profiling, a new file, the old one kept.
    with new_runtime(gpu, planning=PlanSettings(unit_time_s=1e-3), save_dir=tmp_path) as fast:
        iterate(fast, gpu, 2)
    assert [r.phase for r in fast.iterations] == ["discovering", "applying"]
    assert fast.plan is not None and fast.plan.label == "zero-slowdown"
    assert {fast.plan.frequency(0, k, m) for k, m in ORDER} == {1740}  # one stage: no slack to use
    assert (tmp_path / "plan-1f1b-s1-m2-zero-slowdown.json").exists()
    assert FrequencyPlan.load(tmp_path / "plan-1f1b-s1-m2-least-energy.json") == first


def test_files_from_other_hardware_are_set_aside_and_profiled_again(tmp_path: Path, shown) -> None:
    _profiled(tmp_path)
    old_profile = (tmp_path / "profile.csv").read_text()
    gpu = make_gpu(PhysicalModel.a100())
    with new_runtime(gpu, planning=LEAST, save_dir=tmp_path) as runtime:
        iterate(runtime, gpu, 2)
        assert isinstance(runtime.phase, ProfilingPhase)  # profiling the new GPUs, not an error
        iterate(runtime, gpu, 8)
    assert isinstance(runtime.phase, ApplyingPhase) and gpu.locked_sm_frequency is None
    assert "moved to" in shown.text and "profiling again" in shown.text
    # Nothing lost: the old profile is kept beside the new one.
    assert (tmp_path / "profile.csv.replaced").read_text() == old_profile
    assert "A100" in json.loads((tmp_path / "profile.json").read_text())["gpu_names"]["0"]


def test_a_saved_plan_for_another_order_is_replanned_from_the_profile(tmp_path: Path, shown) -> None:
    _profiled(tmp_path)
    path = tmp_path / "plan-1f1b-s1-m2-least-energy.json"
    good = FrequencyPlan.load(path)
    data = json.loads(path.read_text())
    data["metadata"]["runtime"]["stage_orders"] = "stage 0: F0 F1 B0 B1"
    path.write_text(json.dumps(data))
    gpu = make_gpu()
    with new_runtime(gpu, planning=LEAST, save_dir=tmp_path) as runtime:
        iterate(runtime, gpu, 2)
    assert [r.phase for r in runtime.iterations] == ["discovering", "applying"]  # no profiling
    assert runtime.plan == good and "another instruction order" in shown.text
    assert FrequencyPlan.load(path) == good  # re-planned and saved again


def test_a_corrupt_plan_file_is_replanned_from_the_profile(tmp_path: Path, shown) -> None:
    _profiled(tmp_path)
    path = tmp_path / "plan-1f1b-s1-m2-least-energy.json"
    good = FrequencyPlan.load(path)
    path.write_text(path.read_text()[: len(path.read_text()) // 2])  # truncated by a crash
    gpu = make_gpu()
    with new_runtime(gpu, planning=LEAST, save_dir=tmp_path) as runtime:
        iterate(runtime, gpu, 2)
    assert runtime.plan == good and "not valid JSON" in shown.text
    # A corrupt plan given by path: reported, then the saved profile plans.
    path.write_text("{")
    with new_runtime(gpu, planning=LEAST, save_dir=tmp_path, plan=path) as given:
        iterate(given, gpu, 2)
    assert given.plan == good


def test_a_microbatch_change_runs_max_clocks_then_replans(tmp_path: Path, shown) -> None:
    gpu = make_gpu()
    with new_runtime(gpu, sweep=SWEEP, planning=LEAST, save_dir=tmp_path) as runtime:
        iterate(runtime, gpu, 8)
        assert isinstance(runtime.phase, ApplyingPhase) and runtime.plan.num_microbatches == 2  # type: ignore[union-attr]
        three = [
            ("forward", 0),
            ("backward", 0),
            ("forward", 1),
            ("backward", 1),
            ("forward", 2),
            ("backward", 2),
        ]
        iterate(runtime, gpu, 1, order=three)  # more microbatches than planned: not an error
        assert [i.frequency_mhz for i in runtime.iterations[-1].instructions][-2:] == [1740, 1740]
        assert isinstance(runtime.phase, DiscoveryPhase)
        iterate(runtime, gpu, 2, order=three)  # one untouched iteration, then the new plan
        assert isinstance(runtime.phase, ApplyingPhase) and runtime.plan.num_microbatches == 3  # type: ignore[union-attr]
        iterate(runtime, gpu, 1)  # back to 2 microbatches: the saved plan for that shape
        iterate(runtime, gpu, 1)
    phases = [r.phase for r in runtime.iterations]
    assert phases[8:] == ["applying", "discovering", "applying", "applying", "discovering"]
    assert shown.text.count("planning again for the new shape") == 1  # told once
    assert (tmp_path / "plan-1f1b-s1-m3-least-energy.json").exists()


def test_measure_mode_records_without_touching_clocks(tmp_path: Path) -> None:
    gpu = make_gpu(can_control=False)
    with new_runtime(gpu, mode="measure") as runtime:
        iterate(runtime, gpu, 3)
    assert runtime.plan is not None and runtime.plan.label == "max-frequency"
    assert [i.frequency_mhz for i in runtime.iterations[-1].instructions] == [1740] * 4
    assert runtime.controller is not None and list(runtime.controller.changes) == []
    assert len(runtime.controller.requests) > 0
    # With a saved plan, measure mode records that plan's clocks (still changing nothing).
    _profiled(tmp_path)
    with new_runtime(gpu, mode="measure", planning=LEAST, save_dir=tmp_path) as dry:
        iterate(dry, gpu, 2)
    assert [i.frequency_mhz for i in dry.iterations[-1].instructions] == [1140] * 4
    assert gpu.locked_sm_frequency is None and list(dry.controller.changes) == []  # type: ignore[union-attr]


def test_early_stop_when_energy_rises() -> None:
    gpu = make_gpu()
    sweep = FrequencySweep(step_mhz=300, iterations_per_frequency=1, patience=2)
    with new_runtime(gpu, sweep=sweep, planning=LEAST) as runtime:
        iterate(runtime, gpu, 8)
    profiled = [r.instructions[0].frequency_mhz for r in runtime.iterations if r.phase == "profiling"]
    # A40 energy per unit: 30.0 (1740), 27.6 (1440), 26.2 (1140), 26.6 (840), 31.0 (540): two rises, stop.
    assert profiled == [1740, 1440, 1140, 840, 540]
    assert isinstance(runtime.phase, ApplyingPhase)


def test_given_plan_is_checked_against_the_gpu(shown) -> None:
    gpu = make_gpu()
    bad = FrequencyPlan.uniform(synchronous_1f1b(1, 2), 1000, label="bad")
    runtime = new_runtime(gpu, plan=bad)
    with pytest.raises(ZeusProfileError, match=r"not allowed(.|\n)*>1000<"):
        with runtime:
            iterate(runtime, gpu)
    # A plan for another shape is not an error: reported, then Perseus profiles this pipeline.
    wrong_shape = FrequencyPlan.uniform(synchronous_1f1b(1, 3), 1005)
    with new_runtime(gpu, plan=wrong_shape, sweep=SWEEP) as runtime:
        iterate(runtime, gpu, 2)
    assert isinstance(runtime.phase, ProfilingPhase) and "given plan does not fit" in shown.text


def test_state_dict_resumes_the_plan(tmp_path: Path) -> None:
    gpu = make_gpu()
    with new_runtime(gpu, sweep=SWEEP, planning=LEAST) as first:
        iterate(first, gpu, 7)
    state = json.loads(json.dumps(first.state_dict()))
    assert state["version"] == 1
    resumed = new_runtime(gpu)
    resumed.load_state_dict({**state, "unknown": 1})
    with resumed:
        iterate(resumed, gpu, 2)
    assert [r.phase for r in resumed.iterations] == ["discovering", "applying"]
    assert resumed.plan == first.plan


def test_events_outside_iterations_are_ignored_and_microbatches_counted() -> None:
    gpu = make_gpu()
    runtime = new_runtime(gpu, mode="measure")
    runtime.begin_instruction("forward", 0)  # before any iteration: ignored
    runtime.end_instruction("forward", 0)
    runtime.end_iteration()
    with runtime:
        runtime.begin_iteration()
        for kind in ("forward", "backward", "forward", "backward"):
            runtime.begin_instruction(kind)  # no microbatch id: counted per kind
            runtime.end_instruction(kind)
        runtime.end_iteration()
        runtime.begin_iteration()
        runtime.begin_instruction("forward", 0)
        runtime.end_instruction("forward", 0, failed=True)
        runtime.end_iteration(failed=True)  # dropped: no record, phase unchanged
    assert [(i.kind.value, i.microbatch) for i in runtime.iterations[0].instructions] == ORDER
    assert len(runtime.iterations) == 1 and isinstance(runtime.phase, ApplyingPhase)


def test_a_stage_without_backward_is_explained() -> None:
    gpu = make_gpu()
    runtime = new_runtime(gpu)
    with pytest.raises(ZeusProfileError, match="ran no backward(.|\n)*begin_instruction"):
        with runtime:
            iterate(runtime, gpu, order=[("forward", 0), ("forward", 1)])
    # The fix named is the one for the framework whose hook attached.
    for framework, fix in (("torch", "loss_fn"), ("deepspeed", "train_batch"), ("megatron", "forward_only")):
        runtime = PerseusRuntime(gpu)
        runtime.set_pipeline(0, 1, "1f1b", framework=framework)
        with pytest.raises(ZeusProfileError, match=f"ran no backward(.|\n)*{fix}"):
            with runtime:
                iterate(runtime, gpu, order=[("forward", 0), ("forward", 1)])


def test_configuration_errors() -> None:
    gpu = make_gpu()
    with pytest.raises(ZeusConfigError, match="warmup_iterations"):
        PerseusRuntime(gpu, warmup_iterations=0)
    runtime = PerseusRuntime(gpu)
    with pytest.raises(ZeusConfigError, match="stage is unknown"):
        runtime.begin_iteration()
    with pytest.raises(ZeusConfigError, match="0 <= stage < num_stages"):
        runtime.set_pipeline(2, 2)
    runtime.set_pipeline(0, 2)
    with pytest.raises(ZeusConfigError, match="already attached as stage 0"):
        runtime.set_pipeline(1, 2)
    with pytest.raises(ZeusConfigError, match="target"):
        PlanSettings(target="fastest")
    with pytest.raises(ZeusConfigError, match="deadline_s"):
        PlanSettings(target="deadline")
    assert PlanSettings(deadline_s=0.5).label == "deadline-0.5s"
    assert DiscoveryPhase(1).name == "discovering"


def test_an_unusable_sweep_fails_only_when_profiling_is_needed(tmp_path: Path) -> None:
    gpu = make_gpu(PhysicalModel.a100())  # 210–1410 MHz: 1740 is not a clock of this GPU
    runtime = new_runtime(gpu, sweep=SWEEP, save_dir=tmp_path)
    with pytest.raises(ZeusProfileError, match=r"Cannot profile: rank 0: .*\[1740\] MHz not supported"):
        with runtime:
            iterate(runtime, gpu)
    given = FrequencyPlan.uniform(synchronous_1f1b(1, 2), 1005)
    with new_runtime(gpu, sweep=SWEEP, plan=given) as ok:  # a given plan needs no sweep
        iterate(ok, gpu, 2)
    assert ok.plan == given


def test_training_that_ends_before_a_plan_warns_and_keeps_the_partial_profile(tmp_path: Path, shown) -> None:
    gpu = make_gpu()
    with new_runtime(gpu, save_dir=tmp_path) as runtime:
        iterate(runtime, gpu, 3)  # discovery + 2 of the adaptive sweep's clocks
        assert isinstance(runtime.phase, ProfilingPhase)
    assert "before a frequency plan was made" in shown.text and "Run at least 9 iterations" in shown.text
    partial = tmp_path / "profile-partial-stage0-rank0.csv"
    assert partial.exists() and f"{partial}" in shown.text
    from zeus_core.optimizer.pipeline_frequency import InstructionProfile

    profile = InstructionProfile.from_csv(partial)
    assert [m.frequency_mhz for m in profile.get(0, "forward")] == [1740, 1380]
    assert profile.simulated and profile.blocking_power_w is not None


def test_the_default_sweep_plans_within_ten_iterations() -> None:
    gpu = make_gpu()
    with new_runtime(gpu) as runtime:
        iterate(runtime, gpu, 10)
    phases = [r.phase for r in runtime.iterations]
    assert "applying" in phases and phases.index("applying") <= 9  # the 10th iteration runs the plan
