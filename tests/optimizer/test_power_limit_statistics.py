"""The statistics (``_statistics.py``): estimates, stalls, the job-wide jitter, intervals."""

from __future__ import annotations

import json
import math
import random
import statistics

import pytest

from zeus_core.exceptions import ZeusProfileError
from zeus_core.optimizer.power_limit import PowerLimitMeasurement, Visit
from zeus_core.optimizer.power_limit._statistics import (
    SampleLog,
    _t_central,
    drop_stalls,
    quantile,
    relative_step_spread,
    significantly_greater,
    summarize,
)


# -- estimates from samples -------------------------------------------------------------------------------
def test_samples_weighted_by_steps_give_per_step_estimates() -> None:
    # Samples of 2, 3 and 5 steps; per-step values 0.10, 0.12, 0.11 s and 20, 25, 22 J.
    times, energies, steps = [0.20, 0.36, 0.55], [40.0, 75.0, 110.0], [2, 3, 5]
    m = summarize(200, times, energies, steps, num_gpus=1)
    assert (m.steps, m.samples, m.dof) == (10, 3, 2)
    assert m.time == pytest.approx(1.11 / 10) and m.energy == pytest.approx(22.5)
    x, y = [0.10, 0.12, 0.11], [20.0, 25.0, 22.0]
    assert m.time_var_s2 == pytest.approx(sum(n * (a - 0.111) ** 2 for n, a in zip(steps, x)) / 2)
    assert m.energy_var_j2 == pytest.approx(sum(n * (b - 22.5) ** 2 for n, b in zip(steps, y)) / 2)
    assert m.covariance_js == pytest.approx(
        sum(n * (a - 0.111) * (b - 22.5) for n, a, b in zip(steps, x, y)) / 2
    )
    assert m.stderr(0, 1) == pytest.approx(math.sqrt(m.time_var_s2 / 10))
    single = summarize(200, [1.1], [225.0], [10], num_gpus=1)  # a mean, but no spread to judge it by
    assert (single.steps, single.samples, single.stderr(1, 0)) == (10, 1, math.inf)


def test_the_weighted_variance_is_unbiased_for_per_step_noise() -> None:
    rng = random.Random(5)
    sizes = [1, 2, 3, 5, 8, 13]
    estimates = []
    for _ in range(3000):
        per_step = [[rng.gauss(0.1, 0.01) for _ in range(n)] for n in sizes]
        times = [sum(s) for s in per_step]
        estimates.append(summarize(200, times, [100 * t for t in times], sizes, num_gpus=1).time_var_s2)
    assert statistics.mean(estimates) == pytest.approx(0.01**2, rel=0.05)


def test_measurements_have_zeus_field_names_and_read_older_files() -> None:
    m = PowerLimitMeasurement(250, 40, 0.25, 60.0, 1e-4, samples=8)
    assert (m.power_limit, m.energy, m.time, m.average_power) == (250, 60.0, 0.25, 240.0)
    assert PowerLimitMeasurement.from_dict(json.loads(json.dumps(m.to_dict()))) == m
    old = {"power_limit_w": 250, "steps": 40, "time_per_step_s": 0.25, "energy_per_step_j": 60.0}
    assert PowerLimitMeasurement.from_dict(old) == PowerLimitMeasurement(
        250, energy=60.0, time=0.25, steps=40
    )
    with pytest.raises(ZeusProfileError, match="needs power_limit, energy and time"):
        PowerLimitMeasurement.from_dict({"power_limit": 250})
    with pytest.raises(ZeusProfileError, match="time > 0 s"):
        PowerLimitMeasurement(250, energy=60.0, time=0.0)
    with pytest.raises(ZeusProfileError, match="finite"):
        PowerLimitMeasurement(power_limit=250, energy=60.0)  # Zeus's keywords: time is needed too


# -- stalls and the job-wide jitter --------------------------------------------------------------------------
def test_stalls_are_dropped_but_jitter_is_kept() -> None:
    times = [1.0, 1.04, 0.97, 1.02, 2.9, 0.99, 1.01]
    kept_t, kept_e, kept_n = drop_stalls(times, [10.0] * 7, [1] * 7)
    assert kept_t == [1.0, 1.04, 0.97, 1.02, 0.99, 1.01] and len(kept_e) == len(kept_n) == 6
    bimodal = [1.0, 2.0, 1.0, 2.0]  # half slow: not stalls but the workload
    assert drop_stalls(bimodal, [1.0] * 4, [1] * 4)[0] == bimodal


def _grouped(
    rng: random.Random, samples: int, per_sample: int, stalled: set[int], step_s: float = 0.04
) -> list[float]:
    """Sample times (s) of ``step_s`` steps with 5 % jitter; a stalled sample holds one 3× step."""
    out = []
    for i in range(samples):
        steps = [step_s * rng.gauss(1.0, 0.05) for _ in range(per_sample)]
        if i in stalled:
            steps[0] *= 3.0
        out.append(sum(steps))
    return out


def test_a_stall_inside_a_grouped_sample_is_dropped_even_when_half_the_visit_stalled() -> None:
    rng = random.Random(3)
    history = [(_grouped(rng, 6, 8, set()), [8] * 6) for _ in range(4)]
    spread = relative_step_spread(history)
    assert spread is not None and 0.03 < spread < 0.07  # the 5 % per-step jitter, pooled
    times = _grouped(rng, 4, 8, {0, 3})  # one 3× step in 8 adds 25 %
    kept, _, steps = drop_stalls(times, [1.0] * 4, [8] * 4, step_spread=spread)
    assert kept == [times[1], times[2]] and steps == [8, 8]
    assert drop_stalls(times, [1.0] * 4, [8] * 4)[0] == times  # alone, half a visit is never dropped


def test_ordinary_jitter_is_never_dropped_with_a_pooled_spread() -> None:
    rng = random.Random(5)
    dropped = sum(
        6 - len(drop_stalls(times, [1.0] * 6, [4] * 6, step_spread=0.05)[0])
        for times in (_grouped(rng, 6, 4, set()) for _ in range(300))
    )
    assert dropped == 0


def _visit(rng: random.Random, limit: float, step_s: float, stalled: set[int], samples: int = 4) -> Visit:
    """Samples of 8 steps at ~200 W; a stalled sample holds one 3× step at idle power."""
    times = _grouped(rng, samples, 8, set(), step_s)
    stalls = [2 * step_s if i in stalled else 0.0 for i in range(samples)]
    return Visit(
        limit,
        tuple(t + s for t, s in zip(times, stalls)),
        tuple(200 * t + 60 * s for t, s in zip(times, stalls)),
        (8,) * samples,
    )


def test_the_first_limit_is_cleaned_once_later_visits_show_the_jitter() -> None:
    rng = random.Random(1)
    log = SampleLog(num_gpus=1)
    log.add(_visit(rng, 300, 0.040, {1, 2}))  # two of four samples stalled, nothing to compare with yet
    assert log.measurements()[0].time > 1.04 * 0.040  # judged alone, the stalls stay in
    for limit, step_s in ((275, 0.041), (250, 0.043), (225, 0.046), (200, 0.050)):
        log.add(_visit(rng, limit, step_s, set()))
    judged = {m.power_limit: m for m in log.measurements()}
    assert judged[300].time == pytest.approx(0.040, rel=0.02) and judged[300].samples == 2  # gone now
    time_sd, energy_sd, dof = log.spreads()
    assert time_sd is not None and 0.025 < time_sd < 0.09 and energy_sd is not None  # ~5 % per step
    assert dof >= 5 and judged[250].dof == dof > judged[250].samples - 1  # limits borrow the job's dof


def test_the_job_wide_jitter_is_a_floor_under_a_lucky_limit() -> None:
    rng = random.Random(7)
    log = SampleLog(num_gpus=1)
    for limit in (300, 275, 250, 225, 200):
        log.add(_visit(rng, limit, 0.04, set(), samples=6))
    lucky = Visit(175, (0.400, 0.401, 0.400, 0.401), (100.0, 100.4, 100.1, 100.3), (8,) * 4)
    log.add(lucky)
    time_sd, _, dof = log.spreads()
    judged = {m.power_limit: m for m in log.measurements()}
    own = summarize(175, lucky.times_s, lucky.energies_j, lucky.steps, 1)
    assert judged[175].stderr(0, 1) == pytest.approx(time_sd * own.time / math.sqrt(32))  # the floor
    assert judged[175].stderr(0, 1) > 5 * own.stderr(0, 1) and judged[175].dof == dof


def test_a_short_visit_again_is_judged_with_the_limits_earlier_samples() -> None:
    rng = random.Random(2)
    log = SampleLog(num_gpus=1)
    for limit, step_s in ((300, 0.040), (250, 0.043), (200, 0.050)):
        log.add(_visit(rng, limit, step_s, set()))
    running = _visit(rng, 250, 0.043, {0}, samples=2)  # two samples alone: no median to judge by
    m = {m.power_limit: m for m in log.with_running(running)}[250]
    assert m.samples == 5 and m.time == pytest.approx(0.043, rel=0.02)
    log.add(running)
    assert {m.power_limit: m for m in log.measurements()}[250] == m


def test_visits_round_trip_through_json_and_bad_ones_are_named() -> None:
    rng = random.Random(4)
    log = SampleLog(1, [_visit(rng, 300, 0.040, {1}), _visit(rng, 250, 0.043, set())])
    again = SampleLog(1, [Visit.from_json(v) for v in json.loads(json.dumps(log.to_json()))])
    assert again.measurements() == log.measurements()
    with pytest.raises(ZeusProfileError, match="malformed"):
        Visit.from_json([300, [0.3], [60.0]])
    with pytest.raises(ZeusProfileError, match="mismatched"):
        Visit.from_json([300, [0.3, 0.3], [60.0], [8]])


# -- intervals ----------------------------------------------------------------------------------------------
def _exact_quantile(confidence: float, dof: int) -> float:
    lo, hi = 0.0, 1.0
    while _t_central(hi, dof) < confidence:
        hi *= 2
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _t_central(mid, dof) < confidence else (lo, mid)
    return lo


def test_t_quantiles_match_the_student_distribution() -> None:
    assert quantile(0.95, 1) == pytest.approx(12.706, abs=1e-3) and quantile(0.95, 2) == pytest.approx(
        4.303, abs=1e-3
    )
    assert quantile(0.95, 10) == pytest.approx(2.228, abs=1e-3) and quantile(0.99, 30) == pytest.approx(
        2.750, abs=1e-3
    )
    worst = max(
        abs(quantile(c, dof) / _exact_quantile(c, dof) - 1)
        for c in (0.9, 0.95, 0.99, 0.995, 0.999)
        for dof in range(1, 200, 3)
    )
    assert worst < 1e-3 and quantile(0.95, 0) == math.inf


def test_significance_needs_the_difference_beyond_both_errors() -> None:
    assert significantly_greater(10.5, 0.1, 9, 10.0, 0.1, 9, 0.95)
    assert not significantly_greater(10.2, 0.1, 9, 10.0, 0.1, 9, 0.95)  # within 2.26 × 0.14
    assert not significantly_greater(99.0, math.inf, 9, 10.0, 0.1, 9, 0.95)  # no spread known
    assert not significantly_greater(10.5, 0.1, 0, 10.0, 0.1, 9, 0.95)
