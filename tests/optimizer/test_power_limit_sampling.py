"""The sampler (``_sampling.py``): where samples end, energy taken when final, work kept out, costly reads."""

from __future__ import annotations

from typing import Any

import pytest

from tests.optimizer.plo_coarse_gpu import CoarseCounterGPU
from tests.optimizer.plo_support import make_gpus, monitor_of
from zeus_core.device._base import PowerLimitConstraints
from zeus_core.monitor._measurement import Measurement
from zeus_core.optimizer.power_limit import (
    GlobalPowerLimitOptimizer,
    MaxSlowdownConstraint,
    PowerLimitOptions,
)
from zeus_core.optimizer.power_limit._sampling import Mode, Sampler, steps_per_sample
from zeus_core.testing import MeasuredProfile, VirtualClock, simulate_steps


def flat(step_s: float) -> MeasuredProfile:
    """Every limit: ``step_s`` per step at its own power."""
    return MeasuredProfile(
        points=[(w, step_s, float(w)) for w in (100, 200, 300)],
        gpu_name="NVIDIA A40",
        constraints=PowerLimitConstraints(100.0, 300.0, 300.0),
    )


def run_visit(sampler: Sampler, gpus: list, steps: int) -> list[Any]:
    """What :meth:`Sampler.step` returned after each of ``steps`` steps (the first began with ``begin``)."""
    out = []
    for _ in range(steps):
        simulate_steps(gpus, 1)
        sampler.step_end()
        out.append(sampler.step())
    return out


def test_steps_per_sample_covers_the_shortest_sample() -> None:
    assert steps_per_sample(0.25, 0.010) == 25
    assert steps_per_sample(0.25, 0.011) == 23  # 23 × 11 ms = 253 ms
    assert steps_per_sample(0.25, 0.25) == 1 and steps_per_sample(0.25, 0.9) == 1
    assert steps_per_sample(0.0, 0.001) == 1  # 0: one sample per step


@pytest.mark.parametrize(
    ("min_sample_s", "min_samples", "samples"),
    [
        # 50 ms steps: the first sample ends at the first power of two lasting 0.25 s (8 steps), then
        # samples of ceil(0.25 / 0.05) = 5 steps until the survey has 10 steps and min_samples samples.
        (0.25, 4, [8, 5, 5, 5]),
        (0.25, 2, [8, 5]),
        (0.6, 2, [16, 12]),  # 16 steps last 0.8 s >= 0.6 s; then 12 steps of 50 ms per sample
        (0.0, 3, [1] * 10),  # one sample per step: min_steps decides
    ],
)
def test_short_steps_are_grouped_and_a_survey_visit_needs_min_samples(
    min_sample_s: float, min_samples: int, samples: list[int]
) -> None:
    gpus = make_gpus(1, behavior=flat(0.05))
    options = PowerLimitOptions(min_sample_s=min_sample_s, min_samples=min_samples)
    sampler = Sampler(monitor_of(gpus), options)
    sampler.begin(300.0, cap=400, mode=Mode.SURVEY)
    out = run_visit(sampler, gpus, sum(samples))
    visit = out[-1]
    assert out[:-1] == [None] * (sum(samples) - 1) and visit.steps == tuple(samples)
    assert visit.times_s == pytest.approx([0.05 * n for n in samples])
    assert visit.energies_j == pytest.approx([0.05 * 300 * n for n in samples])
    assert sampler.monitor.open_windows == []
    # The next visit, knowing the step time, cuts its samples to length from the first step.
    sampler.begin(200.0, cap=20, mode=Mode.FULL, step_s=0.05)
    visit = run_visit(sampler, gpus, 20)[-1]
    n = steps_per_sample(min_sample_s, 0.05)
    assert (
        visit.steps[: 20 // n - 1] == (n,) * (20 // n - 1) and sum(visit.steps) == 20
    )  # the last absorbs the rest


class _Pending:
    """Energy the monitor has not finalized yet (a background reader would, a little later)."""

    ready = False

    def __init__(self, energy: dict[int, float]) -> None:
        self.energy = energy

    def done(self) -> bool:
        return _Pending.ready

    def resolve(self) -> dict[int, float]:
        assert _Pending.ready, "the training thread waited for energy"
        return self.energy


def _lazy(m: Measurement) -> Measurement:
    lazy = Measurement(m.time, {}, simulated=m.simulated)
    del lazy.__dict__["gpu_energy"]
    lazy.__dict__["_pending"] = _Pending(dict(m.gpu_energy))
    return lazy


def test_energy_is_taken_once_final_and_a_step_waits_for_it_only_after_one_without() -> None:
    gpus = make_gpus(1, behavior=flat(0.1))
    monitor = monitor_of(gpus)
    for call in ("read_window", "end_window"):
        real = getattr(monitor, call)
        setattr(monitor, call, lambda *a, _real=real, **k: _lazy(_real(*a, **k)))
    sampler = Sampler(monitor, PowerLimitOptions(min_sample_s=0.2))
    _Pending.ready = False
    sampler.begin(300.0, cap=8, mode=Mode.FULL, step_s=0.1)
    out = run_visit(sampler, gpus, 8)  # the visit's 8 steps end; its energy is not final yet: no wait
    assert out == [None] * 8 and sampler.ended and sampler.monitor.open_windows == []
    _Pending.ready = True  # the next step would wait for it (a background reader finalized it first here)
    visit = sampler.step()
    assert visit.steps == (2, 2, 2, 2) and visit.energies_j == pytest.approx([60.0] * 4)


def test_a_checks_work_is_kept_out_of_the_samples() -> None:
    gpus = make_gpus(1, behavior=flat(0.1))
    clock = gpus[0].clock
    seen = []

    def slow_judge(visit: Any) -> bool:  # a planner that takes a whole second to decide
        seen.append(visit.total_steps)
        clock.advance(1.0)
        return visit.total_steps >= 12

    sampler = Sampler(monitor_of(gpus), PowerLimitOptions(min_sample_s=0.2, check_every=4))
    sampler.begin(300.0, cap=40, mode=Mode.AGAIN, prior_samples=4, step_s=0.1, judge=slow_judge)
    visit = next(v for v in run_visit(sampler, gpus, 40) if v is not None)
    assert seen == [4, 8, 12] and visit.total_steps == 12
    assert visit.times_s == pytest.approx([0.2] * 6)  # the judge's seconds are in no sample


def test_checks_go_on_after_one_when_the_limit_had_fewer_than_min_samples() -> None:
    """A resumed measurement may have one sample: the samples a check took over still count."""
    gpus = make_gpus(1, behavior=flat(0.1))
    seen: list[int] = []
    sampler = Sampler(monitor_of(gpus), PowerLimitOptions(min_sample_s=0.2, min_samples=4, check_every=4))
    sampler.begin(
        300.0,
        cap=20,
        mode=Mode.AGAIN,
        prior_samples=1,
        step_s=0.1,
        judge=lambda v: seen.append(v.total_steps) or False,
    )
    run_visit(sampler, gpus, 20)
    assert seen == [6, 8, 12, 16]  # from 4 samples on (the prior one, and 3 of 2 steps), every 4 steps


def _coarse_run(**options: Any) -> GlobalPowerLimitOptimizer:
    """10 ms steps on an NVML-like counter (updates every 50 ms, 3 ms per read on this thread).

    225 W is 11.5 % slower than 300 W: MaxSlowdownConstraint(1.1) must keep 250 W.
    """
    points = [(300, 0.0100, 300.0), (275, 0.0102, 275.0), (250, 0.0106, 240.0), (225, 0.01115, 205.0)]
    points += [(200, 0.0125, 180.0), (175, 0.0145, 160.0), (150, 0.0170, 140.0), (100, 0.0270, 100.0)]
    behavior = MeasuredProfile(points, "NVIDIA H100", PowerLimitConstraints(100.0, 300.0, 300.0))
    gpu = CoarseCounterGPU(behavior, clock=VirtualClock(), noise=0.02, seed=4, update_s=0.05, read_s=0.003)
    plo = GlobalPowerLimitOptimizer(
        monitor_of([gpu]), MaxSlowdownConstraint(1.1), profile_steps=400, budget_steps=20_000, **options
    )
    plo.on_epoch_begin()
    while plo.optimal_power_limit_w is None:
        plo.on_step_begin()
        simulate_steps([gpu], 1)
        plo.on_step_end()
    plo.close()
    return plo


def test_reads_that_take_time_on_this_thread_get_samples_100_times_longer() -> None:
    sampled = _coarse_run()
    assert sampled._sampler.sample_s == pytest.approx(0.3)  # 100 × the 3 ms read, not min_sample_s
    assert sampled.optimal_power_limit_w == 250
    for m in sampled.measurements:
        assert m.steps / m.samples * m.time >= 0.29  # samples of 0.3 s (30 steps of 10 ms)
    # Reading after every step: each read slows its step and the counter's 50 ms ticks are all a
    # step sees, so 225 W looks feasible (14.15 / 13 ms) and is chosen.
    per_step = _coarse_run(min_sample_s=0.0)
    assert per_step.optimal_power_limit_w == 225
    assert {m.power_limit: m.time for m in per_step.measurements}[300] == pytest.approx(0.013, rel=0.02)


def test_a_visit_cut_by_the_budget_keeps_its_final_samples() -> None:
    gpus = make_gpus(1, behavior=flat(0.1))
    sampler = Sampler(monitor_of(gpus), PowerLimitOptions(min_sample_s=0.2))
    sampler.begin(300.0, cap=40, mode=Mode.FULL, step_s=0.1)
    run_visit(sampler, gpus, 7)  # three samples of 2, one step open
    visit = sampler.abandon()
    assert visit is not None and visit.steps == (2, 2, 2) and sampler.monitor.open_windows == []
    assert sampler.abandon() is None
