"""The profile generator: physically plausible, varied, seeded."""

from __future__ import annotations

import random

import pytest

from zeus_core.optimizer.power_limit.measurement import (
    EarlyStopping,
    PowerLimitMeasurement,
    drop_stalls,
    relative_step_spread,
)
from zeus_core.testing import GPUS, NoisyRun, StepNoise, generate


def test_limit_ranges_follow_the_specs() -> None:
    assert GPUS["A40"].limits() == [300, 275, 250, 225, 200, 175, 150, 125, 100]
    assert GPUS["V100"].limits()[-1] == 150 and GPUS["H100"].limits()[0] == 700
    assert GPUS["L4"].limits() == [72, 68, 64, 60, 56, 52, 48, 44, 40]


def test_profiles_obey_the_physics_of_a_power_cap() -> None:
    workloads = generate(60, seed=1)
    assert {w.gpu.name for w in workloads} == {g.name for g in GPUS.values()}
    energy_optimum_inside = plateau = 0
    for w in workloads:
        profile = w.profile()  # highest limit first
        times = [t for t, _ in profile.values()]
        powers = [p for _, p in profile.values()]
        assert times == sorted(times)  # a lower cap is never faster
        assert powers == sorted(powers, reverse=True)  # ...and never draws more
        assert all(p <= limit for limit, (_, p) in profile.items())
        energy = [t * p for t, p in profile.values()]
        energy_optimum_inside += 0 < energy.index(min(energy)) < len(energy) - 1
        plateau += times[0] == times[1]
    assert energy_optimum_inside >= 10 and plateau >= 10  # knees and plateaus both occur


def test_noise_is_seeded_and_has_stalls_and_transients() -> None:
    w = generate(1, seed=4)[0]
    top, low = w.gpu.max_w, w.gpu.min_w

    def steps(seed: int) -> list[tuple[float, float, float]]:
        run = NoisyRun(w, StepNoise(jitter=0.05, stall_prob=0.2, transient_steps=3), seed)
        return [run.step(top) for _ in range(20)] + [run.step(low) for _ in range(20)]

    first = steps(7)
    assert first == steps(7) and first != steps(8)
    assert any(idle > 0 for _, _, idle in first)
    clean = NoisyRun(w, StepNoise(transient_steps=3), 0)
    clean.step(top)
    after_change = [clean.step(low)[0] for _ in range(5)]
    assert after_change[0] < after_change[3] == after_change[4] == w.step(low)[0]  # leans to the old limit


def test_unknown_gpu_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="known: "):
        generate(1, gpus=["B200"])


def test_stalls_are_dropped_but_jitter_is_kept() -> None:
    times = [1.0, 1.04, 0.97, 1.02, 2.9, 0.99, 1.01]
    kept_t, kept_e, kept_n = drop_stalls(times, [10.0] * 7, [1] * 7)
    assert kept_t == [1.0, 1.04, 0.97, 1.02, 0.99, 1.01] and len(kept_e) == len(kept_n) == 6
    bimodal = [1.0, 2.0, 1.0, 2.0]  # half slow: not stalls but the workload
    assert drop_stalls(bimodal, [1.0] * 4, [1] * 4)[0] == bimodal


def _grouped_visit(rng: random.Random, samples: int, per_sample: int, stalled: set[int]) -> list[float]:
    """Sample times (s) of 40 ms steps with 5 % jitter; a stalled sample holds one 3× step."""
    out = []
    for i in range(samples):
        steps = [0.04 * rng.gauss(1.0, 0.05) for _ in range(per_sample)]
        if i in stalled:
            steps[0] *= 3.0
        out.append(sum(steps))
    return out


def test_a_stall_inside_a_grouped_sample_is_dropped_even_when_half_the_visit_stalled() -> None:
    rng = random.Random(3)
    history = [(_grouped_visit(rng, 6, 8, set()), [8] * 6) for _ in range(4)]
    spread = relative_step_spread(history)
    assert spread is not None and 0.03 < spread < 0.07  # the 5 % per-step jitter, pooled
    times = _grouped_visit(rng, 4, 8, {0, 3})  # one 3x step in 8 adds 25 %: under the old 25 % floor
    kept, _, steps = drop_stalls(times, [1.0] * 4, [8] * 4, step_spread=spread)
    assert kept == [times[1], times[2]] and steps == [8, 8]
    # Without the pooled spread, half a visit is never dropped (it could be the workload itself).
    assert drop_stalls(times, [1.0] * 4, [8] * 4)[0] == times


def test_ordinary_jitter_is_never_dropped_with_a_pooled_spread() -> None:
    rng = random.Random(5)
    dropped = 0
    for _ in range(300):
        times = _grouped_visit(rng, 6, 4, set())
        dropped += 6 - len(drop_stalls(times, [1.0] * 6, [4] * 6, step_spread=0.05)[0])
    assert dropped == 0


def test_the_job_wide_spread_is_a_floor_under_a_lucky_measurement() -> None:
    lucky = PowerLimitMeasurement.from_samples(
        250, [0.400, 0.401, 0.400, 0.401], [100.0, 100.4, 100.1, 100.3], 1, steps=[4] * 4
    )
    floored = lucky.with_spread_floor(0.05, 0.05)
    assert floored.time_stderr() == pytest.approx(0.05 * lucky.time_per_step_s / 4)  # 16 steps
    assert floored.time_stderr() > 5 * lucky.time_stderr()
    assert floored.time_per_step_s == lucky.time_per_step_s and floored.steps == 16
    corr = lucky.covariance_js / (lucky.time_var_s2 * lucky.energy_var_j2) ** 0.5
    assert floored.covariance_js / (floored.time_var_s2 * floored.energy_var_j2) ** 0.5 == pytest.approx(corr)
    assert lucky.with_spread_floor(None, None) is lucky


def test_a_limit_consistent_with_the_job_jitter_borrows_its_degrees_of_freedom() -> None:
    # Four samples alone have 3 degrees of freedom (t quantile 3.18); resting on a job-wide
    # spread from 40 more, the same limit is judged with a quantile near 2.
    calm = PowerLimitMeasurement.from_samples(
        250, [1.60, 1.72, 1.64, 1.68], [400.0, 430.0, 410.0, 420.0], 1, steps=[4] * 4
    )
    pooled = calm.with_spread_floor(0.05, 0.05, spread_dof=40)
    assert calm.dof == 3 and pooled.dof == 40 and pooled.samples == 4
    assert EarlyStopping().quantile(pooled.dof) < 0.7 * EarlyStopping().quantile(calm.dof)
    # A limit far noisier than the job (30 % per step) keeps its own spread and degrees of freedom.
    wild = PowerLimitMeasurement.from_samples(
        250, [1.2, 2.2, 1.4, 2.0], [300.0, 550.0, 350.0, 500.0], 1, steps=[4] * 4
    )
    kept = wild.with_spread_floor(0.05, 0.05, spread_dof=40)
    assert kept.dof == 3 and kept.time_var_s2 == wild.time_var_s2
    # Saved and loaded, a measurement keeps them.
    assert PowerLimitMeasurement.from_dict(pooled.to_dict()) == pooled
