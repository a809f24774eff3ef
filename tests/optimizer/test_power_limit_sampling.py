"""Samples: groups of steps read once from the energy counter, and their statistics.

Ends with a counter that behaves like NVML's (updates every 50 ms, 3 ms per read) under 10 ms steps.
"""

from __future__ import annotations

import math
import random

import pytest

from tests.optimizer.plo_coarse_gpu import CoarseCounterGPU
from tests.optimizer.plo_support import make_gpus, monitor_of, run_steps
from zeus_core.device._base import PowerLimitConstraints
from zeus_core.exceptions import ZeusConfigError, ZeusProfileError
from zeus_core.monitor._measurement import Measurement
from zeus_core.optimizer.power_limit import (
    Done,
    EarlyStopping,
    Energy,
    GlobalPowerLimitOptimizer,
    MaxSlowdownConstraint,
    PowerLimitMeasurement,
    Profiling,
    window_name,
)
from zeus_core.optimizer.power_limit.sampling import LocalSamples, sample_ends, steps_per_sample
from zeus_core.testing import MeasuredProfile, VirtualClock, simulate_steps

M = PowerLimitMeasurement


# -- the rules -----------------------------------------------------------------------------------------
def test_steps_per_sample_covers_the_shortest_sample() -> None:
    assert steps_per_sample(0.25, 0.010) == 25
    assert steps_per_sample(0.25, 0.011) == 23  # 23 × 11 ms = 253 ms
    assert steps_per_sample(0.25, 0.25) == 1 and steps_per_sample(0.25, 0.9) == 1
    assert steps_per_sample(0.25, 0.2) == 2
    assert steps_per_sample(0.0, 0.001) == 1  # 0: one sample per step
    assert steps_per_sample(0.25, 0.0) == 1 and steps_per_sample(0.25, math.inf) == 1


def test_samples_end_every_n_steps_and_the_last_one_absorbs_the_rest() -> None:
    def ends(cap: int, n: int) -> list[int]:
        out, boundary = [], 0
        for s in range(1, cap + 1):
            if sample_ends(s, boundary, n, cap - s):
                out.append(s)
                boundary = s
        return out

    assert ends(10, 1) == list(range(1, 11))
    assert ends(12, 4) == [4, 8, 12]
    assert ends(14, 4) == [4, 8, 14]  # 2 steps left after 12: the last sample has 6 steps
    assert ends(3, 5) == [3]  # a measurement shorter than a sample is one sample
    assert all(len(ends(cap, n)) <= cap for cap in range(1, 30) for n in range(1, 12))  # reads <= steps


def test_local_samples_difference_cumulative_readings() -> None:
    def reading(t: float, e: float) -> Measurement:
        return Measurement(t, {0: e}, {}, {}, frozenset(), True)

    samples = LocalSamples()
    samples.add(reading(0.3, 60.0), 3)
    samples.add(reading(0.5, 95.0), 5)
    assert samples.take() == ([0.3, pytest.approx(0.2)], [60.0, 35.0], [3, 2])
    assert samples.take() == ([], [], []) and samples.boundary_step == 5
    samples.add(reading(0.9, 170.0), 9)
    assert samples.take() == ([pytest.approx(0.4)], [75.0], [4])


# -- statistics of weighted samples --------------------------------------------------------------------
def test_weighted_samples_give_per_step_estimates() -> None:
    # Samples of 2, 3 and 5 steps; per-step values 0.10, 0.12, 0.11 s and 20, 25, 22 J.
    times, energies, steps = [0.20, 0.36, 0.55], [40.0, 75.0, 110.0], [2, 3, 5]
    m = M.from_samples(200, times, energies, 1, steps=steps)
    assert (m.steps, m.samples, m.dof) == (10, 3, 2)
    assert m.time_per_step_s == pytest.approx(1.11 / 10) and m.energy_per_step_j == pytest.approx(22.5)
    x, y = [0.10, 0.12, 0.11], [20.0, 25.0, 22.0]
    assert m.time_var_s2 == pytest.approx(sum(n * (a - 0.111) ** 2 for n, a in zip(steps, x)) / 2)
    assert m.energy_var_j2 == pytest.approx(sum(n * (b - 22.5) ** 2 for n, b in zip(steps, y)) / 2)
    cov = sum(n * (a - 0.111) * (b - 22.5) for n, a, b in zip(steps, x, y)) / 2
    assert m.covariance_js == pytest.approx(cov)
    assert m.time_stderr() == pytest.approx(math.sqrt(m.time_var_s2 / 10))
    # One sample: a mean but no spread, so no early-stopping judgement.
    single = M.from_samples(200, [1.1], [225.0], 1, steps=[10])
    assert (single.steps, single.samples) == (10, 1) and single.cost_stderr(1, 0) == math.inf
    assert not EarlyStopping(min_steps=3).is_tight(single)
    with pytest.raises(ZeusConfigError, match="each sample >= 1 step"):
        M.from_samples(200, [0.1, 0.2], [1.0, 2.0], 1, steps=[1, 0])


def test_the_weighted_variance_is_unbiased_for_per_step_noise() -> None:
    rng = random.Random(5)
    sizes = [1, 2, 3, 5, 8, 13]
    estimates = []
    for _ in range(3000):
        per_step = [[rng.gauss(0.1, 0.01) for _ in range(n)] for n in sizes]
        m = M.from_samples(200, [sum(s) for s in per_step], [100 * sum(s) for s in per_step], 1, steps=sizes)
        estimates.append(m.time_var_s2)
    assert sum(estimates) / len(estimates) == pytest.approx(0.01**2, rel=0.05)


def test_merging_sampled_visits_equals_summarising_them_at_once() -> None:
    rng = random.Random(9)
    steps = [rng.randint(1, 6) for _ in range(14)]
    times = [n * rng.gauss(0.2, 0.01) for n in steps]
    energies = [t * rng.gauss(250, 10) for t in times]
    whole = M.from_samples(175, times, energies, 2, steps=steps)
    merged = M.from_samples(175, times[:5], energies[:5], 2, steps=steps[:5]).merge(
        M.from_samples(175, times[5:], energies[5:], 2, steps=steps[5:])
    )
    for field in (
        "steps",
        "samples",
        "time_per_step_s",
        "energy_per_step_j",
        "time_var_s2",
        "energy_var_j2",
        "covariance_js",
    ):
        assert getattr(merged, field) == pytest.approx(getattr(whole, field), rel=1e-9), field


def test_measurements_without_samples_mean_one_per_step() -> None:
    old = {
        "power_limit_w": 250,
        "steps": 40,
        "time_per_step_s": 0.5,
        "energy_per_step_j": 100.0,
        "time_var_s2": 1e-4,
        "energy_var_j2": 4.0,
        "covariance_js": 0.0,
        "num_gpus": 1,
    }
    m = M.from_dict(old)  # a profile file written before samples existed
    assert m.samples == 40 and m.dof == 39 and m == M(250, 40, 0.5, 100.0, 1e-4, 4.0, 0.0, 1)
    assert M.from_dict(m.to_dict()) == m
    assert M.from_dict({**old, "samples": 8}).dof == 7
    with pytest.raises(ZeusProfileError, match="samples <= steps"):
        M(250, 4, 0.5, 100.0, samples=5)
    assert (
        "(40 steps, ±" in m.describe()
        and "(40 steps in 8 samples, ±" in M.from_dict({**old, "samples": 8}).describe()
    )


# -- the optimizer ---------------------------------------------------------------------------------------
def test_min_sample_s_is_validated() -> None:
    monitor = monitor_of(make_gpus(1))
    for bad in (-0.1, math.inf, "0.25", True):
        with pytest.raises(ZeusConfigError, match="min_sample_s="):
            GlobalPowerLimitOptimizer(monitor, min_sample_s=bad)  # type: ignore[arg-type]
    assert GlobalPowerLimitOptimizer(monitor).min_sample_s == 0.25


@pytest.mark.parametrize(
    ("min_sample_s", "min_samples", "per_sample", "sample_steps"),
    [
        # 50 ms steps: the first sample ends at the first power of two lasting 0.25 s (8 steps),
        # then samples of ceil(0.25 / 0.05) = 5 steps; the survey needs 4 samples and 10 steps.
        (0.25, 4, 5, [8, 5, 5, 5]),
        (0.25, 2, 5, [8, 5]),
        (0.6, 2, 12, [16, 12]),  # 16 steps last 0.8 s >= 0.6 s; then 12 steps of 50 ms per sample
        (0.0, 4, 1, [1] * 10),  # one sample per step: min_steps decides, as without samples
    ],
)
def test_short_steps_are_grouped_and_the_survey_needs_min_samples(
    min_sample_s: float, min_samples: int, per_sample: int, sample_steps: list[int]
) -> None:
    survey = sum(sample_steps)
    flat = MeasuredProfile(
        points=[(w, 0.05, float(w)) for w in (100, 200, 300)],
        gpu_name="NVIDIA A40",
        constraints=PowerLimitConstraints(100.0, 300.0, 300.0),
    )
    gpus = make_gpus(1, behavior=flat)
    plo = GlobalPowerLimitOptimizer(
        monitor_of(gpus),
        Energy(),
        warmup_steps=1,
        pl_step=100,
        early_stopping=EarlyStopping(min_samples=min_samples),
        min_sample_s=min_sample_s,
    )
    reads: list[str] = []
    real_read = plo.monitor.read_window
    plo.monitor.read_window = lambda name, *a, **k: (reads.append(name), real_read(name, *a, **k))[1]
    plo.on_train_begin()
    plo.on_epoch_begin()
    states = []
    for _ in range(2 + survey):  # wait step, warm-up step, then the survey of 300 W
        plo.on_step_begin()
        states.append(plo.state)
        simulate_steps(gpus, 1)
        plo.on_step_end()
    plo.on_step_begin()
    first = plo.measurements[0]
    assert (first.power_limit_w, first.steps, first.samples) == (300, survey, len(sample_steps))
    assert len(reads) == len(sample_steps) - 1  # one per sample; end_window closes the last
    agreed = [s.steps_per_sample for s in states if isinstance(s, Profiling)]
    # Unknown (0) until the first sample ended, then the same for the rest of the visit.
    undecided = sample_steps[0] if min_sample_s > 0 else 1
    assert agreed == [0] * undecided + [per_sample] * (survey - undecided)
    plo.on_train_end()


def test_a_profile_too_short_for_min_samples_warns_and_falls_back_to_full_measurements(caplog) -> None:
    flat = MeasuredProfile(
        points=[(w, 0.01, float(w)) for w in (100, 300)],
        gpu_name="NVIDIA A40",
        constraints=PowerLimitConstraints(100.0, 300.0, 300.0),
    )
    gpus = make_gpus(1, behavior=flat)
    plo = GlobalPowerLimitOptimizer(monitor_of(gpus), Energy(), warmup_steps=1, profile_steps=40, pl_step=100)
    plo.on_train_begin()
    run_steps(plo, gpus, 200)
    assert "profile_steps=40 measured steps hold 1 sample(s) of min_sample_s=0.25 s" in caplog.text
    assert "Raise profile_steps to 125 or more" in caplog.text
    assert caplog.text.count("Raise profile_steps") == 1
    assert [(m.steps, m.samples) for m in plo.measurements] == [(40, 1), (40, 1), (40, 1)]
    assert isinstance(plo.state, Done)
    plo.on_train_end()


# -- an NVML-like counter: updates every 50 ms, 3 ms per read; 10 ms steps -------------------------------
# Energy falls as the limit falls; 225 W is 11.5 % slower than 300 W, so MaxSlowdownConstraint(1.1)
# must keep 250 W. A counter read after every step adds 3 ms to each 10 ms step, which makes 225 W
# look only 8.8 % slower (14.15 / 13.0 ms), and its per-step energies are 0 or a whole counter update.
_H100_LIKE = [
    (300, 0.0100, 300.0),
    (275, 0.0102, 275.0),
    (250, 0.0106, 240.0),
    (225, 0.01115, 205.0),
    (200, 0.0125, 180.0),
    (175, 0.0145, 160.0),
    (150, 0.0170, 140.0),
    (125, 0.0210, 120.0),
    (100, 0.0270, 100.0),
]


def _run_coarse(min_sample_s: float) -> tuple[GlobalPowerLimitOptimizer, dict[float, int], CoarseCounterGPU]:
    behavior = MeasuredProfile(
        points=list(_H100_LIKE),
        gpu_name="NVIDIA H100",
        constraints=PowerLimitConstraints(100.0, 300.0, 300.0),
    )
    gpu = CoarseCounterGPU(behavior, clock=VirtualClock(), noise=0.02, seed=4, update_s=0.05, read_s=0.003)
    plo = GlobalPowerLimitOptimizer(
        monitor_of([gpu]),
        MaxSlowdownConstraint(1.1),
        warmup_steps=10,
        profile_steps=400,
        min_sample_s=min_sample_s,
    )
    reads: dict[float, int] = {}
    real_read = plo.monitor.read_window

    def counting_read(name: str, *args, **kwargs) -> Measurement:
        limit = next(w for w in plo.power_limits if window_name(w) == name)
        reads[limit] = reads.get(limit, 0) + 1
        return real_read(name, *args, **kwargs)

    plo.monitor.read_window = counting_read  # type: ignore[method-assign]
    plo.on_train_begin()
    plo.on_epoch_begin()
    for _ in range(20_000):
        plo.on_step_begin()
        if isinstance(plo.state, Done):
            break
        simulate_steps([gpu], 1)
        plo.on_step_end()
    plo.on_epoch_end()
    plo.on_train_end()
    return plo, reads, gpu


def test_a_coarse_energy_counter_with_short_steps_is_read_per_sample_not_per_step() -> None:
    sampled, reads, _ = _run_coarse(0.25)
    per_step, per_step_reads, _ = _run_coarse(0.0)  # the old behaviour: a read after every step

    # Per-step reads mislead: each read slows its step (and the GPU idles meanwhile), so 225 W looks
    # feasible and is chosen, and the measured power is far below what the GPU drew while working.
    times = {m.power_limit_w: m.time_per_step_s for m in per_step.measurements}
    assert times[300] == pytest.approx(0.013, rel=0.02)  # 10 ms step + 3 ms read
    assert times[225] / times[300] < 1.1
    assert per_step.optimal_power_limit_w == 225
    assert per_step.measurements[0].average_power_w < 0.85 * 300
    for m in per_step.measurements:
        # One read per step, except the step that ends each visit (at most 4: survey + 3 refinement rounds).
        assert m.samples == m.steps and per_step_reads[m.power_limit_w] >= m.steps - 4

    # Samples of >= 0.25 s: the right limit, time and power close to the truth, a read per ~0.25 s.
    assert sampled.optimal_power_limit_w == 250
    truth = {w: (t, p) for w, t, p in _H100_LIKE}
    for m in sampled.measurements:
        # Each 3 ms read still delays its step: about 1-2 % of a 0.25 s sample, not 30 % of a step.
        assert m.time_per_step_s == pytest.approx(truth[m.power_limit_w][0], rel=0.03)
        if m.steps >= 100:
            assert m.average_power_w == pytest.approx(truth[m.power_limit_w][1], rel=0.05)
        profiled_s = m.steps * m.time_per_step_s
        n = reads.get(m.power_limit_w, 0)
        # One read per sample but the last, plus one synchronised read per visit of the limit.
        assert profiled_s / 0.25 / 2 - 2 <= n <= min(profiled_s / 0.25, m.samples) + 3, (m.describe(), n)
        assert 2 <= m.samples <= m.steps / 10  # 10 ms steps: about 25 per sample
    assert sum(reads.values()) * 20 < sum(m.steps for m in sampled.measurements)

    # Per-sample energies are meaningful; per-step ones are the counter's 50 ms quantisation, so at
    # equal steps the early-stopping rules saw a power estimate several times noisier.
    # (Standard errors scaled by sqrt(steps) compare them at equal steps: tied contenders may be
    # refined past profile_steps, to different totals in the two runs.)
    full = {m.power_limit_w: m for m in per_step.measurements if m.steps >= 400}
    compared = [
        (m, full[m.power_limit_w]) for m in sampled.measurements if m.steps >= 400 and m.power_limit_w in full
    ]
    assert compared
    for m, old in compared:
        assert (
            3 * m.power_stderr() / m.average_power_w * m.steps**0.5
            < old.power_stderr() / old.average_power_w * old.steps**0.5
        )
    # Early stopping works again: limits that are clearly worse stop after a few samples.
    assert min(m.steps for m in sampled.measurements) < 200
    assert sum(m.steps for m in sampled.measurements) < sum(m.steps for m in per_step.measurements)
