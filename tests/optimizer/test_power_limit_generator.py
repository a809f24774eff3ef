"""The profile generator: physically plausible, varied, seeded."""

from __future__ import annotations

import pytest

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
