"""InstructionProfiler and FrequencySweep on a simulated A40 with a virtual clock (exact numbers)."""

from __future__ import annotations

import pytest

from zeus_core.exceptions import ZeusConfigError, ZeusProfileError
from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.optimizer.pipeline_frequency import FrequencySweep, InstructionProfiler
from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock

MODEL = PhysicalModel.a40()


def make(stage: int = 0) -> tuple[InstructionProfiler, SimulatedGPU, VirtualClock]:
    clock = VirtualClock()
    gpu = SimulatedGPU(MODEL, clock=clock)
    return InstructionProfiler(ZeusMonitor(gpus=[gpu], cpu_indices=[]), stage), gpu, clock


def run_iteration(
    profiler: InstructionProfiler,
    gpu: SimulatedGPU,
    clock: VirtualClock,
    mhz: int,
    units: dict[str, float],
    gap_s: float = 0.0,
) -> None:
    """One iteration at ``mhz``: each instruction runs ``units`` of model work, with idle gaps."""
    gpu.set_locked_sm_frequency(mhz)
    profiler.begin_iteration(mhz)
    for mb in range(2):
        for kind, n in units.items():
            clock.advance(gap_s)
            profiler.begin_instruction(kind, mb)
            gpu.set_busy(True)
            clock.advance(n * MODEL.time_at(mhz))
            gpu.set_busy(False)
            profiler.end_instruction(kind, mb)
    clock.advance(gap_s)
    profiler.end_iteration()


def test_measures_time_and_energy_per_instruction_and_clock() -> None:
    profiler, gpu, clock = make(stage=3)
    for mhz in (1740, 1200):
        run_iteration(profiler, gpu, clock, mhz, {"forward": 1.0, "backward": 2.0}, gap_s=0.05)
    assert len(profiler.measurements) == 8
    m = profiler.measurements[-1]
    assert (m.stage, m.kind.value, m.microbatch, m.frequency_mhz) == (3, "backward", 1, 1200)
    assert m.time_s == pytest.approx(2 * MODEL.time_at(1200))
    assert m.energy_j == pytest.approx(MODEL.power_at(1200) * m.time_s)
    profile = profiler.to_profile(gpu_name=gpu.name)
    assert profile.simulated and profile.stages == [3]
    fwd = profile.get(3, "forward")
    assert [p.frequency_mhz for p in fwd] == [1740, 1200]
    assert fwd[0].energy_j == pytest.approx(MODEL.power_at(1740) * MODEL.time_at(1740))
    assert profiler.rows()[0][:3] == (3, "forward", 1740)
    assert profiler.frequencies() == [1740, 1200]
    # Between instructions the GPU idles (30 W in the model): that is the blocking power.
    assert profiler.blocking_power_w() == pytest.approx(MODEL.idle_power_w)
    assert profiler.blocking_power_w(1200) == pytest.approx(MODEL.idle_power_w)


def test_blocking_power_needs_measurable_gaps() -> None:
    profiler, gpu, clock = make()
    assert profiler.blocking_power_w() is None
    run_iteration(profiler, gpu, clock, 1740, {"forward": 1.0}, gap_s=0.0)
    assert profiler.blocking_power_w() is None


def test_energy_has_risen_after_patience_clocks() -> None:
    profiler, gpu, clock = make()
    # Energy of one A40 unit per clock: 30.0 J (1740), 26.2 (1140), 26.6 (840), 31.0 (540).
    for i, mhz in enumerate((1740, 1140, 840, 540)):
        run_iteration(profiler, gpu, clock, mhz, {"forward": 1.0, "backward": 2.0})
        if i < 2:
            assert not profiler.energy_has_risen(patience=1)
    assert profiler.energy_has_risen(patience=1) and profiler.energy_has_risen(patience=2)
    assert not profiler.energy_has_risen(patience=3)  # 1740 is worse than 1140: not all recent clocks rose
    assert not profiler.energy_has_risen(patience=2, tolerance=0.2)
    assert not profiler.energy_has_risen(patience=0)
    assert profiler.mean_energy("forward", 840) == pytest.approx(MODEL.power_at(840) * MODEL.time_at(840))
    assert profiler.mean_energy("forward", 600) is None


def test_failed_instruction_and_iteration_are_dropped() -> None:
    profiler, gpu, clock = make()
    profiler.begin_iteration(1740)
    profiler.begin_instruction("forward", 0)
    clock.advance(0.1)
    profiler.cancel_instruction()
    profiler.begin_instruction("forward", 1)
    with pytest.raises(ZeusConfigError, match="must end in the order"):
        profiler.end_instruction("backward", 1)
    profiler.cancel_iteration()
    assert profiler.measurements == [] and profiler.monitor.open_windows == []
    with pytest.raises(ZeusProfileError, match="no instruction was measured"):
        profiler.to_profile()
    with pytest.raises(ZeusConfigError, match="begin_iteration"):
        profiler.begin_instruction("forward", 0)
    with pytest.raises(ZeusConfigError, match="begin_iteration"):
        profiler.end_iteration()


def test_profiler_needs_exactly_one_gpu() -> None:
    clock = VirtualClock()
    gpus = [SimulatedGPU(MODEL, index=i, clock=clock) for i in range(2)]
    with pytest.raises(ZeusConfigError, match="exactly the one GPU"):
        InstructionProfiler(ZeusMonitor(gpus=gpus, cpu_indices=[]), 0)


def test_sweep_picks_clocks_from_the_top_down() -> None:
    supported = MODEL.sm_frequencies_mhz  # 1740, 1725, ..., 210 (15 MHz steps)
    assert FrequencySweep(step_mhz=300, min_mhz=800).frequencies_for(supported) == [1740, 1440, 1140, 840]
    assert FrequencySweep().frequencies_for(supported) == [1740]  # adaptive: the rest while profiling
    auto = FrequencySweep(step_mhz=60).frequencies_for(supported)
    assert auto[0] == 1740 and auto[-1] == 210 and all(a - b == 60 for a, b in zip(auto, auto[1:-1]))
    assert FrequencySweep(frequencies_mhz=(900, 1740, 900)).frequencies_for(supported) == [1740, 900]
    # Sparse supported clocks: the next supported clock below each step.
    assert FrequencySweep(step_mhz=300).frequencies_for([1740, 1500, 1440, 1200, 1140, 900, 600]) == [
        1740,
        1440,
        1140,
        600,
    ]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"frequencies_mhz": ()}, "at least one positive"),
        ({"step_mhz": 0}, "step must be"),
        ({"iterations_per_frequency": 0}, "measure at least 1"),
        ({"patience": -1}, "patience"),
        ({"tolerance": 1.5}, "tolerance"),
        ({"max_frequencies": 1}, "at least 2 clocks"),
        ({"descent_ratio": 1.0}, "descent_ratio"),
    ],
)
def test_sweep_rejects_bad_settings(kwargs: dict, match: str) -> None:
    with pytest.raises(ZeusConfigError, match=match):
        FrequencySweep(**kwargs)


def test_sweep_rejects_unsupported_clocks_and_clockless_gpus() -> None:
    with pytest.raises(ZeusConfigError, match=r"\[1000\] MHz not supported"):
        FrequencySweep(frequencies_mhz=(1740, 1000)).frequencies_for(MODEL.sm_frequencies_mhz)
    with pytest.raises(ZeusConfigError, match="no supported SM clocks"):
        FrequencySweep().frequencies_for([])


def _model_energies(clocks: list[int], blocking_w: float = 30.0) -> dict[int, dict[str, float]]:
    """Effective energy per clock of a forward (and a more compute-bound backward) on the A40 model."""
    return {
        f: {
            "forward": MODEL.power_at(f) * MODEL.time_at(f) - blocking_w * MODEL.time_at(f),
            "backward": 2 * (MODEL.power_at(f) - blocking_w) * (0.01 + 0.09 * 1740 / f),
        }
        for f in clocks
    }


def test_adaptive_sweep_descends_then_bisects_within_its_budget() -> None:
    sweep = FrequencySweep()
    supported = MODEL.sm_frequencies_mhz
    clocks: list[int] = []
    while (nxt := sweep.next_frequency(supported, _model_energies(clocks))) is not None:
        assert nxt in supported and nxt not in clocks
        clocks.append(nxt)
    assert clocks[0] == 1740 and len(clocks) <= sweep.max_frequencies
    energies = _model_energies(clocks)
    # It went below the least-energy clock of every instruction type (the minimum is bracketed) ...
    for kind in ("forward", "backward"):
        best = min(clocks, key=lambda f: energies[f][kind])
        assert any(f < best for f in clocks), kind
    # ... and spent its remaining budget between the highest clock and that minimum.
    descent = [f for i, f in enumerate(clocks) if i == 0 or f < clocks[i - 1]]
    assert len(descent) < len(clocks) == sweep.max_frequencies
    # The frontier from these few clocks is close to the one from every 15 MHz clock.
    assert max(b - a for a, b in zip(sorted(clocks), sorted(clocks)[1:])) < 400


def test_adaptive_sweep_stops_at_the_floor_and_when_no_clock_is_left() -> None:
    sweep = FrequencySweep(min_mhz=1500, max_frequencies=8)
    clocks: list[int] = []
    supported = [1740, 1600, 1500, 1400]
    while (nxt := sweep.next_frequency(supported, _model_energies(clocks))) is not None:
        clocks.append(nxt)
    assert set(clocks) <= {1740, 1600, 1500} and clocks[:2] == [1740, 1500]
