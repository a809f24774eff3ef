"""Instruction profiles (CSV), execution options and cost models."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from zeus_core.exceptions import ZeusConfigError, ZeusProfileError
from zeus_core.optimizer.pipeline_frequency import InstructionKind, InstructionProfile, synchronous_1f1b
from zeus_core.optimizer.pipeline_frequency._profile import ProfileMeasurement as PM
from zeus_core.optimizer.pipeline_frequency.planner._cost_model import (
    ConvexHullCostModel,
    ExponentialCostModel,
    InstructionOptions,
    quantize_time,
)
from zeus_core.testing._pipeline_profiles import (
    PHYSICAL_GPUS,
    physical_instruction_profile,
    stage_weights,
)


def test_csv_round_trip_and_averaging(tmp_path: Path) -> None:
    text = (
        "stage,instruction,frequency,time,energy\n"
        "0,forward,1410,0.010,3.0\n"
        "0,forward,1410,0.012,3.4\n"  # a repeat: averaged
        "0,Forward,1200,0.011,2.5\n"
        "0,backward,1410,0.020,6.0\n"
    )
    prof = InstructionProfile.from_csv_text(text)
    fwd = prof.get(0, "forward")
    assert [m.frequency_mhz for m in fwd] == [1410, 1200]
    assert fwd[0].time_s == pytest.approx(0.011) and fwd[0].energy_j == pytest.approx(3.2)
    assert fwd[0].power_w == pytest.approx(3.2 / 0.011)
    path = tmp_path / "sub" / "p.csv"
    prof.to_csv(path)
    assert InstructionProfile.from_csv(path) == prof
    assert path.read_text().splitlines()[0] == "stage,instruction,frequency,time,energy"


@pytest.mark.parametrize(
    "text, match",
    [
        ("stage,instruction,frequency,time\n0,forward,1,1\n", r"lacks column\(s\) \['energy'\]"),
        ("stage,instruction,frequency,time,energy\n0,forward,abc,0.1,1\n", r"<text>:2: cannot parse"),
        (
            "stage,instruction,frequency,time,energy\n0,sideways,1,0.1,1\n",
            "Unknown instruction kind 'sideways'",
        ),
        ("stage,instruction,frequency,time,energy\n0,forward,1410,-0.1,1\n", "must be positive"),
        ("stage,instruction,frequency,time,energy\n", "no rows"),
    ],
)
def test_malformed_csv_names_the_problem(text: str, match: str) -> None:
    with pytest.raises(ZeusProfileError, match=match):
        InstructionProfile.from_csv_text(text)


def test_missing_file_and_missing_stage(tmp_path: Path) -> None:
    with pytest.raises(ZeusProfileError, match="Cannot read profile"):
        InstructionProfile.from_csv(tmp_path / "nope.csv")
    prof = physical_instruction_profile("a40", 2)
    with pytest.raises(ZeusProfileError, match=r"missing \[\(2, 'backward'\), \(2, 'forward'\)\]"):
        prof.check_covers(synchronous_1f1b(3, 2))
    with pytest.raises(ZeusProfileError, match="no backward measurements for stage 5"):
        prof.get(5, "backward")


def test_quantisation_handles_float_noise() -> None:
    assert quantize_time(0.012, 0.001, "floor") == 12  # 0.012 / 0.001 = 11.999999999999998
    assert quantize_time(0.012, 0.001, "ceil") == 12
    assert quantize_time(0.0121, 0.001, "floor") == 12
    assert quantize_time(0.0121, 0.001, "ceil") == 13


def test_options_keep_the_pareto_front_of_effective_energy() -> None:
    rows = [PM(1410, 0.010, 3.00), PM(1300, 0.0104, 3.10), PM(1200, 0.011, 2.50), PM(900, 0.014, 2.60)]
    # Without blocking power, 1300 MHz (slower and costlier than 1410) and 900 MHz (slower and
    # costlier than 1200) are dominated.
    plain = InstructionOptions(rows, 0.001, 0.0, "ceil")
    assert [o.frequency_mhz for o in plain.all_pareto] == [1200, 1410]
    # With 100 W blocking power, 900 MHz saves 0.3 J of blocking: effective 1.2 J < 1200's 1.4 J.
    blocked = InstructionOptions(rows, 0.001, 100.0, "ceil")
    assert [o.frequency_mhz for o in blocked.all_pareto] == [900, 1200, 1410]
    assert blocked.slowest.effective_energy_j == pytest.approx(2.6 - 1.4)
    assert blocked.option_for_duration(12).frequency_mhz == 1200
    assert blocked.option_for_duration(100).frequency_mhz == 900
    assert blocked.option_for_duration(1).frequency_mhz == 1410  # below range: the fastest


def test_same_quantum_keeps_fastest_under_floor_and_cheapest_under_ceil() -> None:
    rows = [PM(1410, 0.0101, 3.0), PM(1380, 0.0104, 2.9), PM(1350, 0.0108, 2.8)]
    assert [o.frequency_mhz for o in InstructionOptions(rows, 0.001, 0.0, "floor").options] == [1410]
    assert [o.frequency_mhz for o in InstructionOptions(rows, 0.001, 0.0, "ceil").options] == [1350]


def test_bad_option_settings() -> None:
    with pytest.raises(ZeusConfigError, match="unit_time_s"):
        InstructionOptions([PM(1, 1.0, 1.0)], 0.0)
    with pytest.raises(ZeusProfileError, match="shorter than one time quantum"):
        InstructionOptions([PM(1, 0.0005, 1.0)], 0.001, rounding="floor")


def _options(gpu: str = "a100", kind: InstructionKind = InstructionKind.BACKWARD) -> InstructionOptions:
    prof = physical_instruction_profile(gpu, 2, seed=1)
    return InstructionOptions(prof.get(1, kind), 0.001, PHYSICAL_GPUS[gpu].blocking_power_w, "floor")


@pytest.mark.parametrize("model_cls", [ConvexHullCostModel, ExponentialCostModel])
def test_cost_models_are_convex_and_non_increasing(model_cls) -> None:
    for gpu in ("a100", "a40"):
        for kind in InstructionKind:
            opts = _options(gpu, kind)
            model = model_cls(opts)
            savings = model.savings()
            assert len(savings) == opts.max_quant_time - opts.min_quant_time
            assert np.all(savings >= 0) and np.all(np.diff(savings) <= 1e-12)
            costs = [o.effective_energy_j for o in opts.options]
            span = max(costs) - min(costs)
            for o in opts.options:  # both models stay close to the measured points
                assert abs(model(o.quant_time) - o.effective_energy_j) <= 0.1 * span + 1e-9


def test_hull_is_exact_at_its_vertices_and_below_all_options() -> None:
    opts = _options()
    model = ConvexHullCostModel(opts)
    for q, c in model.vertices:
        assert model(q) == pytest.approx(c)
    for o in opts.options:
        assert model(o.quant_time) <= o.effective_energy_j + 1e-12


def test_exponential_model_recovers_an_exponential() -> None:
    rows = [
        PM(f, 0.001 * q, 5.0 + 40.0 * math.exp(-0.2 * q))
        for f, q in zip(range(1400, 800, -50), range(10, 22))
    ]
    opts = InstructionOptions(rows, 0.001, 0.0, "floor")
    model = ExponentialCostModel(opts)
    assert model.b == pytest.approx(-0.2, rel=1e-3)
    for q in range(10, 22):
        assert model(q) == pytest.approx(5.0 + 40.0 * math.exp(-0.2 * q), rel=1e-4)


def test_physical_profile_follows_the_documented_model() -> None:
    prof = physical_instruction_profile("a100", 4, seed=2)
    assert prof.simulated and "physical model" in prof.gpu_name
    w = stage_weights(4, seed=2)
    spec = PHYSICAL_GPUS["a100"]
    top = prof.get(3, "forward")[0]
    assert top.frequency_mhz == spec.model.f_max_mhz
    assert top.time_s == pytest.approx(spec.forward_time_s * w[3])
    back = prof.get(3, "backward")[0]
    assert back.time_s == pytest.approx(2 * top.time_s)  # backward = 2x forward at f_max
    for kind in InstructionKind:
        rows = prof.get(0, kind)
        times = [m.time_s for m in rows]
        assert times == sorted(times)  # lower clock, longer time
        assert min(m.power_w for m in rows) >= spec.model.static_power_w
    assert w[-1] > 1.0  # last stage heavier
    with pytest.raises(ZeusConfigError, match="Unknown physical GPU"):
        physical_instruction_profile("tpu", 2)
