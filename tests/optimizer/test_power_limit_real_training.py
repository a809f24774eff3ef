"""The optimizer as users run it: Zeus's loop, short epochs, noisy steps, a hard budget (issue 16)."""

from __future__ import annotations

import random

import pytest

from tests.optimizer.plo_support import (
    ConsoleLines,
    FakeTraining,
    make_gpus,
    monitor_of,
    run_steps,
    zeus_loop,
)
from zeus_core.device._base import PowerLimitConstraints
from zeus_core.optimizer.power_limit import (
    Energy,
    MaxSlowdownConstraint,
    PowerLimitMeasurement,
    PowerLimitOptions,
    Time,
    ZeusCost,
)
from zeus_core.testing import GPUS, MeasuredProfile, StepNoise, generate
from zeus_core.testing import PowerLimitWorkload as Workload


def zeus_budget(plo) -> int:
    return plo.wait_steps + (plo.warmup_steps + plo.profile_steps) * len(plo.power_limits)


def optimum(workload: Workload, selector) -> float:
    exact = [PowerLimitMeasurement(w, 40, t, t * p) for w, (t, p) in workload.profile().items()]
    return selector.select(exact)


def test_zeus_documented_loop_with_only_imports_changed_decides(monkeypatch) -> None:
    workload = Workload.random(GPUS["A100"], random.Random(7))
    training = FakeTraining(monkeypatch, workload, StepNoise.realistic(), seed=1)
    # --- Zeus's README loop; only the imports differ ---
    from zeus_core import ZeusMonitor
    from zeus_core.optimizer.power_limit import GlobalPowerLimitOptimizer

    monitor = ZeusMonitor(gpu_indices=[0])
    plo = GlobalPowerLimitOptimizer(monitor)
    with ConsoleLines() as shown:
        zeus_loop(plo, training, epochs=30, steps_per_epoch=32)
    # ---
    assert plo.optimal_power_limit_w is not None and plo.steps_used <= zeus_budget(plo)
    assert training.limit_w == plo.optimal_power_limit_w
    assert plo.metrics()["power/limit_w"] == plo.optimal_power_limit_w
    lines = [line for line in shown.lines if "chosen by ZeusCost(eta_knob=0.5" in line]
    assert len(lines) == 1 and f"Power limit {plo.optimal_power_limit_w:g} W" in lines[0]
    assert "energy saved per step" in lines[0] or plo.optimal_power_limit_w == GPUS["A100"].max_w
    plo.close()
    assert training.limit_w == GPUS["A100"].max_w


@pytest.mark.parametrize("epoch", [32, 100, 1000])
@pytest.mark.parametrize("selector", [Time(), Energy(), ZeusCost(0.5), MaxSlowdownConstraint(1.1)], ids=repr)
def test_every_run_decides_within_zeus_sweep_length(monkeypatch, epoch: int, selector) -> None:
    from zeus_core import ZeusMonitor
    from zeus_core.optimizer.power_limit import GlobalPowerLimitOptimizer

    for i, workload in enumerate(generate(3, seed=epoch)):
        training = FakeTraining(monkeypatch, workload, StepNoise.realistic(), seed=i)
        plo = GlobalPowerLimitOptimizer(
            ZeusMonitor(gpu_indices=[0]), selector, pl_step=workload.gpu.pl_step_w
        )
        budget = zeus_budget(plo)
        zeus_loop(plo, training, epochs=budget // epoch + 2, steps_per_epoch=epoch)
        assert plo.optimal_power_limit_w is not None, workload
        assert plo.steps_used <= budget
        plo.close()


def _decide(monkeypatch, workload: Workload, noise: StepNoise, seed: int, epoch: int = 32) -> float | None:
    from zeus_core import ZeusMonitor
    from zeus_core.optimizer.power_limit import GlobalPowerLimitOptimizer

    training = FakeTraining(monkeypatch, workload, noise, seed=seed)
    plo = GlobalPowerLimitOptimizer(ZeusMonitor(gpu_indices=[0]), Energy(), pl_step=workload.gpu.pl_step_w)
    zeus_loop(plo, training, epochs=30, steps_per_epoch=epoch)
    plo.close()
    return plo.optimal_power_limit_w


def test_identical_runs_decide_identically(monkeypatch) -> None:
    for workload in generate(4, seed=3):
        first = _decide(monkeypatch, workload, StepNoise.realistic(), seed=5)
        assert _decide(monkeypatch, workload, StepNoise.realistic(), seed=5) == first


def test_stalls_do_not_flip_decisions(monkeypatch) -> None:
    stalls = StepNoise(stall_prob=0.03, stall_factor=3.0)  # 3 steps in 100 take 3× as long, GPU idle
    for i, workload in enumerate(generate(6, seed=11)):
        best = optimum(workload, Energy())
        assert _decide(monkeypatch, workload, StepNoise.none(), seed=i) == best
        chosen = _decide(monkeypatch, workload, stalls, seed=i)
        assert chosen is not None
        energy = {w: t * p for w, (t, p) in workload.profile().items()}
        assert energy[chosen] <= 1.01 * energy[best]  # the optimum, or a limit within 1 % of it


def test_short_epochs_cost_no_more_profiling_than_one_long_epoch(monkeypatch) -> None:
    workload = generate(1, seed=2, gpus=["V100"])[0]
    steps = {}
    for epoch in (32, 10_000):
        from zeus_core import ZeusMonitor
        from zeus_core.optimizer.power_limit import GlobalPowerLimitOptimizer

        training = FakeTraining(monkeypatch, workload, StepNoise.none())
        plo = GlobalPowerLimitOptimizer(ZeusMonitor(gpu_indices=[0]), Energy())
        zeus_loop(plo, training, epochs=max(1, 1000 // epoch), steps_per_epoch=min(epoch, 1000))
        steps[epoch] = plo.steps_used
        assert plo.optimal_power_limit_w == optimum(workload, Energy())
        plo.close()
    # Epoch ends drop only the open sample of the limit being measured.
    assert steps[32] <= steps[10_000] * 1.15


def test_an_impossible_profile_is_measured_again_and_never_used() -> None:
    # 250 W reads 330 W on average: a broken reading (e.g. counter ticks in a short window).
    points = [
        (300, 0.20, 300.0),
        (250, 0.20, 330.0),
        (200, 0.225, 200.0),
        (150, 0.36, 150.0),
        (100, 0.8, 100.0),
    ]
    broken = MeasuredProfile(
        points=points, gpu_name="NVIDIA A40", constraints=PowerLimitConstraints(100.0, 300.0, 300.0)
    )
    gpus = make_gpus(1, behavior=broken)
    from zeus_core.optimizer.power_limit import GlobalPowerLimitOptimizer

    # Measuring again costs steps, so this test gives a budget beyond Zeus's 31-step sweep.
    plo = GlobalPowerLimitOptimizer(
        monitor_of(gpus), Energy(), warmup_steps=2, profile_steps=4, pl_step=50, budget_steps=100
    )
    with ConsoleLines() as shown:
        run_steps(plo, gpus, 200)
    assert 250 not in [m.power_limit for m in plo.measurements]
    assert plo.optimal_power_limit_w == 200
    rejections = [line for line in shown.lines if "measurement of 250 W" in line]
    assert len(rejections) == 3 and "left out" in rejections[-1]
    plo.close()


def test_a_budget_too_small_for_every_limit_still_decides() -> None:
    gpus = make_gpus(1)
    from zeus_core.optimizer.power_limit import GlobalPowerLimitOptimizer

    plo = GlobalPowerLimitOptimizer(
        monitor_of(gpus), Energy(), warmup_steps=2, profile_steps=4, pl_step=50, budget_steps=15
    )
    limits = run_steps(plo, gpus, 40, epoch_len=7)
    assert plo.optimal_power_limit_w is not None and plo.steps_used <= 15
    assert limits[-1] == plo.optimal_power_limit_w
    assert "budget" in plo.state.reason  # type: ignore[union-attr]
    plo.close()


def test_time_thresholds_and_budget_are_arguments_with_clear_errors() -> None:
    from zeus_core.exceptions import ZeusConfigError
    from zeus_core.optimizer.power_limit import GlobalPowerLimitOptimizer

    monitor = monitor_of(make_gpus(1))
    with pytest.raises(ZeusConfigError, match=r"budget_steps=0 .*counter_period_s=-1"):
        GlobalPowerLimitOptimizer(monitor, counter_period_s=-1, budget_steps=0)
    with pytest.raises(ZeusConfigError, match=r"unknown argument\(s\) \['min_steps_'\]; the options are"):
        GlobalPowerLimitOptimizer(monitor, min_steps_=3)
    plo = GlobalPowerLimitOptimizer(monitor, min_sample_s=0.01, counter_period_s=0.02)
    assert plo.budget_steps == 1 + 50 * 9 and plo.options == PowerLimitOptions(
        min_sample_s=0.01, counter_period_s=0.02
    )
    options = PowerLimitOptions(tie_tol=0.01)
    assert GlobalPowerLimitOptimizer(monitor, options=options, rel_tol=0.01).options == options.replace(
        rel_tol=0.01
    )


@pytest.mark.parametrize("selector", [Energy(), MaxSlowdownConstraint(1.1)], ids=repr)
def test_the_choice_rests_on_at_least_zeus_profile_length_when_budget_allows(monkeypatch, selector) -> None:
    from zeus_core import ZeusMonitor
    from zeus_core.optimizer.power_limit import GlobalPowerLimitOptimizer

    checked = 0
    for i, workload in enumerate(generate(12 if isinstance(selector, Energy) else 40, seed=21)):
        training = FakeTraining(monkeypatch, workload, StepNoise.realistic(), seed=i)
        plo = GlobalPowerLimitOptimizer(
            ZeusMonitor(gpu_indices=[0]), selector, pl_step=workload.gpu.pl_step_w
        )
        zeus_loop(plo, training, epochs=30, steps_per_epoch=100)
        chosen = plo.optimal_power_limit_w
        assert chosen is not None
        plo.close()
        if zeus_budget(plo) - plo.steps_used < plo.warmup_steps + plo.profile_steps:
            continue  # the budget could not pay another visit
        checked += 1
        decisive = [m for m in plo.measurements if m.power_limit == chosen]
        if isinstance(selector, MaxSlowdownConstraint):
            decisive.append(max(plo.measurements, key=lambda m: m.power_limit))  # the reference
        for m in decisive:
            rel = 1.96 * m.stderr(0, 1) / m.time  # tight: known within rel_tol (0.5 %)
            assert m.steps >= plo.profile_steps or rel <= plo.options.rel_tol, (workload, m)
    assert checked >= 2  # decided with budget to spare in several runs, so the rule was exercised
