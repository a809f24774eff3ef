"""The state machine (``_optimizer.py``, ``_states.py``) driven through the training protocol."""

from __future__ import annotations

import logging

import pytest

from tests.optimizer.plo_support import (
    make_gpus,
    monitor_of,
    profile_gpus,
    run_steps,
    simulate_steps,
    synthetic_profile,
)
from zeus_core.callback import CallbackList, TrainingCallback
from zeus_core.exceptions import ZeusConfigError, ZeusPermissionError
from zeus_core.optimizer.power_limit import (
    Deciding,
    Done,
    Energy,
    GlobalPowerLimitOptimizer,
    MaxSlowdownConstraint,
    Measuring,
    Ready,
    Time,
    Warmup,
    ZeusCost,
    window_name,
)
from zeus_core.testing import MeasuredProfile, PhysicalModel, SimulatedGPU, VirtualClock

SMALL = dict(wait_steps=1, warmup_steps=2, profile_steps=3, pl_step=50)


def exhaustive(gpus, selector=None, **kw) -> GlobalPowerLimitOptimizer:
    """Zeus's sweep with small step counts: 300, 250, 200, 150, 100 W."""
    return GlobalPowerLimitOptimizer(
        monitor_of(gpus), selector or Energy(), **{**SMALL, **kw}, early_stopping=None
    )


def test_the_constructor_only_validates_and_stores() -> None:
    gpus = make_gpus(2)
    gpus[0].set_power_limit(220)
    monitor = monitor_of(gpus)
    plo = GlobalPowerLimitOptimizer(monitor)
    assert [g.get_power_limit() for g in gpus] == [220, 300]
    assert monitor.open_windows == []
    assert plo.power_limits == [300, 275, 250, 225, 200, 175, 150, 125, 100]
    assert plo.state == Ready(300, 2)
    assert isinstance(plo.optimum_selector, ZeusCost) and plo.optimum_selector.eta_knob == 0.5  # Zeus's


def test_exhaustive_sweep_visits_every_limit_in_order() -> None:
    gpus = make_gpus(1)
    plo = exhaustive(gpus)
    plo.on_train_begin()
    limits = run_steps(plo, gpus, 30)
    plo.on_train_end()
    # 1 wait step at the maximum, then 2 warm-up + 3 measured steps per limit, then the optimum: the
    # budget, Zeus's sweep length, ends with the last measured step.
    expected = [300.0] + sum(([w] * 5 for w in (300.0, 250.0, 200.0, 150.0, 100.0)), []) + [200.0] * 4
    assert limits == expected
    assert [m.power_limit for m in plo.measurements] == [300, 250, 200, 150, 100]
    assert all(m.steps == 3 for m in plo.measurements)
    assert [round(m.energy, 6) for m in plo.measurements] == [60, 50, 45, 54, 80]
    assert plo.state == Done(200, "the step budget is spent")
    assert gpus[0].get_power_limit() == 300  # restored


@pytest.mark.parametrize(
    ("selector", "optimum"),
    [(Time(), 300), (Energy(), 200), (ZeusCost(0.5), 250), (MaxSlowdownConstraint(1.1), 250)],
)
def test_the_selector_decides_and_the_optimum_stays_set(selector, optimum: float) -> None:
    gpus = make_gpus(2)
    plo = exhaustive(gpus, selector)
    plo.on_train_begin()
    limits = run_steps(plo, gpus, 40)
    assert plo.optimal_power_limit_w == optimum
    assert limits[-10:] == [optimum] * 10
    plo.on_train_end()


@pytest.mark.parametrize("evaluate_before_epoch_end", [False, True])
def test_a_measurement_spans_epoch_boundaries_without_counting_the_time_between(
    evaluate_before_epoch_end: bool,
) -> None:
    gpus = make_gpus(1)
    plo = exhaustive(gpus, profile_steps=4)
    monitor = plo.monitor
    plo.on_train_begin()
    # Epoch 1 ends after 9 steps: wait (1), 300 W warm-up (2) + measured (4), 250 W warm-up (2).
    limits = run_steps(plo, gpus, 9)
    assert plo.state == Warmup(250, 1) and gpus[0].get_power_limit() == 250  # the warm-up goes on
    assert [m.power_limit for m in plo.measurements] == [300]
    gpus[0].clock.advance(30.0)  # evaluation between epochs: not measured
    # Epoch 2 ends 3 steps in: the last warm-up step, then 250 W's measured steps 1-2 (one sample each)
    # and step 3, whose sample the epoch end cuts.
    plo.on_epoch_begin()
    for _ in range(3):
        plo.on_step_begin()
        limits.append(gpus[0].get_power_limit())
        simulate_steps(gpus, 1)
        plo.on_step_end()
    if evaluate_before_epoch_end:
        gpus[0].clock.advance(30.0)  # as Lightning does: validation runs before the epoch's end
    plo.on_epoch_end()
    assert plo.state == Measuring(250) and monitor.open_windows == []
    # Right after on_step_end nothing but training ran in the open sample: step 3 is kept. After an
    # evaluation, it is dropped, and the dropped step counts against the budget.
    assert plo._sampler.steps == (2 if evaluate_before_epoch_end else 3)
    gpus[0].clock.advance(30.0)
    # Epoch 3: the rest of 250 W's steps, then the rest of the sweep; nothing is measured twice.
    limits += run_steps(plo, gpus, 30)
    assert [m.power_limit for m in plo.measurements] == [300, 250, 200, 150, 100]
    # Zeus's sweep, 31 steps, is the budget: with a dropped step, 100 W gets 3 steps.
    assert [m.steps for m in plo.measurements] == [4, 4, 4, 4, 3 if evaluate_before_epoch_end else 4]
    assert plo.measurements[1].time == pytest.approx(0.20)  # the time between epochs left out
    at_250 = 2 + 4 + (1 if evaluate_before_epoch_end else 0)  # warm-up, measured, dropped
    assert limits[: 7 + at_250 + 1] == [300.0] * 7 + [250.0] * at_250 + [200.0]
    assert plo.optimal_power_limit_w == 200 and plo.steps_used == 1 + 6 * 5  # epochs of 9 and 3 steps
    plo.on_train_end()


def test_states_along_the_way() -> None:
    gpus = make_gpus(1)
    plo = exhaustive(gpus)
    plo.on_train_begin()
    seen = []
    for _ in range(8):
        plo.on_step_begin()
        seen.append(plo.state)
        gpus[0].run_steps(1)
        plo.on_step_end()
    assert seen[:6] == [
        Ready(300, 1),
        Warmup(300, 2),
        Warmup(300, 1),
        Measuring(300),
        Measuring(300),
        Measuring(300),
    ]
    assert seen[6] == Warmup(250, 2)  # the third measured step ended 300 W: 250 W warms up while planned
    assert plo.monitor.open_windows == [window_name(250)] or plo.monitor.open_windows == []
    plo.on_train_end()
    assert plo.monitor.open_windows == []


def test_measuring_the_limit_just_measured_again_needs_no_warmup() -> None:
    # Energy per step falls down to the lowest limit (60, 52.5, 44, 37.5, 30 J): 100 W, the last
    # surveyed, is the clear choice, so it is measured again at once to profile_steps.
    falling = MeasuredProfile(
        points=[(300, 0.2, 300.0), (250, 0.21, 250.0), (200, 0.22, 200.0), (150, 0.25, 150.0)]
        + [(100, 0.3, 100.0)],
        gpu_name="NVIDIA A40",
    )
    gpus = make_gpus(1, behavior=falling, noise=0.02, seed=1)
    plo = GlobalPowerLimitOptimizer(monitor_of(gpus), Energy(), warmup_steps=5, pl_step=50)
    states = []
    plo.on_train_begin()
    plo.on_epoch_begin()
    while plo.optimal_power_limit_w is None:
        plo.on_step_begin()
        states.append(plo.state)
        gpus[0].run_steps(1)
        plo.on_step_end()
    plo.on_epoch_end()
    assert plo.optimal_power_limit_w == 100
    at_100 = [s for s in states if getattr(s, "power_limit_w", None) == 100]
    assert sum(isinstance(s, Warmup) for s in at_100) == 5  # only after the change from 150 W
    assert Deciding(100) in at_100 and Measuring(100, again=True) in at_100
    assert next(m for m in plo.measurements if m.power_limit == 100).steps >= plo.profile_steps
    plo.on_train_end()


def test_early_stopping_surveys_then_refines_contenders() -> None:
    # Energy per step (J): 300 W: 60, 275: 55, 250: 47.5, 225: 47, 200: 46.5, 175: 52.5, 150: 55, ...
    rows = [
        (300, 0.2),
        (275, 0.2),
        (250, 0.19),
        (225, 0.209),
        (200, 0.2325),
        (175, 0.3),
        (150, 0.3667),
        (125, 0.5),
        (100, 0.8),
    ]
    close = MeasuredProfile(points=[(w, t, float(w)) for w, t in rows], gpu_name="NVIDIA A40")
    gpus = make_gpus(1, behavior=close, noise=0.02, seed=3)
    plo = GlobalPowerLimitOptimizer(monitor_of(gpus), Energy(), warmup_steps=2)
    plo.on_train_begin()
    states = []
    plo.on_epoch_begin()
    for _ in range(600):
        plo.on_step_begin()
        states.append(plo.state)
        gpus[0].run_steps(1)
        plo.on_step_end()
    plo.on_epoch_end()
    assert plo.optimal_power_limit_w in (200, 225)  # within 1 % of each other
    measured = {m.power_limit: m.steps for m in plo.measurements}
    # The survey stopped once energy had risen > 10 % at two limits after the best (175 W: +13 %,
    # 150 W: +18 %, 125 W: +34 %); 100 W was never set.
    assert {300, 275, 250, 225, 200, 175, 150} <= set(measured) and 100 not in measured
    assert all(not isinstance(s, (Warmup, Measuring)) or s.power_limit_w > 100 for s in states)
    assert measured[300] == measured[275] == measured[175] == measured[150] == 10  # far off: survey only
    # Contenders within noise: the most promising (lowest optimistic energy, 200 W) is measured
    # again first, until the choice is settled against the others.
    assert measured[200] > 10
    again = [v.power_limit for v in plo.visits[len(measured) :]]
    assert again and again[0] == 200.0 and set(again) <= {250.0, 225.0, 200.0}
    assert sum(measured.values()) < 8 * 40
    plo.on_train_end()


def test_every_gpu_gets_the_same_limit_and_energy_is_summed(shared_data) -> None:
    gpus = profile_gpus(shared_data / "power_limit_profiles" / "A40_resnet50_4gpu.csv", noise=0.0)
    plo = GlobalPowerLimitOptimizer(monitor_of(gpus), Energy(), early_stopping=None)
    plo.on_train_begin()
    run_steps(plo, gpus, 460)  # run_steps asserts that all four GPUs always share one limit
    first = plo.measurements[0]
    per_gpu = [g.behavior.step(300, None) for g in gpus]
    step_time = max(t for t, _ in per_gpu)
    assert first.num_gpus == 4
    assert first.time == pytest.approx(step_time)
    assert first.energy == pytest.approx(sum(p for _, p in per_gpu) * step_time)
    assert plo.optimal_power_limit_w == 100
    plo.on_train_end()
    assert all(g.get_power_limit() == 300 for g in gpus)


def test_original_limits_come_back_not_the_maximum() -> None:
    gpus = make_gpus(2)
    for g in gpus:
        g.set_power_limit(240)
    plo = exhaustive(gpus)
    plo.on_train_begin()
    assert [g.get_power_limit() for g in gpus] == [300, 300]
    run_steps(plo, gpus, 40)
    plo.on_train_end()
    assert [g.get_power_limit() for g in gpus] == [240, 240]
    plo.on_train_end()  # idempotent


def test_a_second_fit_reuses_the_decision() -> None:
    gpus = make_gpus(1)
    plo = exhaustive(gpus)
    plo.on_train_begin()
    run_steps(plo, gpus, 40)
    plo.on_train_end()
    plo.on_train_begin()
    assert gpus[0].get_power_limit() == 200 and isinstance(plo.state, Done)
    plo.on_train_end()


def test_no_permission_fails_at_construction_with_the_fix() -> None:
    gpus = [SimulatedGPU(synthetic_profile(), index=0, can_control=False, clock=VirtualClock())]
    with pytest.raises(ZeusPermissionError, match="GlobalPowerLimitOptimizer must set power limits on GPU 0"):
        GlobalPowerLimitOptimizer(monitor_of(gpus))


def test_mixed_gpus_and_bad_arguments_are_refused() -> None:
    clock = VirtualClock()
    mixed = [
        SimulatedGPU(PhysicalModel.a40(), 0, clock=clock),
        SimulatedGPU(PhysicalModel.a100(), 1, clock=clock),
    ]
    with pytest.raises(ZeusConfigError, match="same model"):
        GlobalPowerLimitOptimizer(monitor_of(mixed))
    monitor = monitor_of(make_gpus(1))
    with pytest.raises(ZeusConfigError, match=r"wait_steps=-1 .*profile_steps=0 .*pl_step=0"):
        GlobalPowerLimitOptimizer(monitor, wait_steps=-1, profile_steps=0, pl_step=0)
    with pytest.raises(ZeusConfigError, match="optimum_selector"):
        GlobalPowerLimitOptimizer(monitor, optimum_selector="energy")  # type: ignore[arg-type]
    with pytest.raises(ZeusConfigError, match="no GPUs"):
        GlobalPowerLimitOptimizer(monitor_of([]))


def test_events_outside_training_are_ignored_with_one_warning(caplog) -> None:
    gpus = make_gpus(1)
    plo = exhaustive(gpus)
    with caplog.at_level(logging.WARNING):
        plo.on_step_end()
        plo.on_epoch_end()  # ends begin nothing
        assert plo.state == Ready(300, 2) and gpus[0].get_power_limit() == 300
        plo.on_step_begin()  # the first step event begins training (Zeus's loop)
        assert plo.state == Ready(300, 1)
        plo.on_train_end()
        plo.on_step_begin()  # after the restore, nothing begins again
        plo.on_step_begin()
    assert plo.state == Ready(300, 1) and gpus[0].get_power_limit() == 300
    assert len([r for r in caplog.records if "outside training" in r.message]) == 2


def test_progress_is_logged_per_limit_and_for_the_decision(caplog) -> None:
    gpus = make_gpus(1)
    plo = exhaustive(gpus)
    with caplog.at_level(logging.INFO, logger="zeus_core.optimizer.power_limit"):
        plo.on_train_begin()
        run_steps(plo, gpus, 30)
        plo.on_train_end()
    text = caplog.text
    assert "Profiled 300 W: 0.2000 s/step, 300.0 W, 60.00 J/step (3 steps" in text
    assert "Profiled 200 W: 0.2250 s/step, 200.0 W, 45.00 J/step" in text
    assert "Power limit 200 W chosen by Energy() after 26 steps (5 of 5 limits measured" in text
    assert "Restored the original power limits (GPU 0: 300 W)" in text


def test_a_failing_callback_still_gets_the_limits_restored() -> None:
    gpus = make_gpus(1)
    plo = exhaustive(gpus)

    class Boom(TrainingCallback):
        def on_step_begin(self) -> None:
            if gpus[0].get_power_limit() == 250:
                raise RuntimeError("training crashed")

    callbacks = CallbackList([plo, Boom()])
    callbacks.on_train_begin()
    with pytest.raises(RuntimeError, match="training crashed"):
        try:
            callbacks.on_epoch_begin()
            for _ in range(30):
                callbacks.on_step_begin()
                gpus[0].run_steps(1)
                callbacks.on_step_end()
        finally:
            callbacks.on_train_end()
    assert gpus[0].get_power_limit() == 300


def test_an_error_inside_the_optimizer_restores_before_raising() -> None:
    gpus = make_gpus(1)
    gpus[0].set_power_limit(260)
    plo = exhaustive(gpus)
    plo.on_train_begin()
    plo.monitor.begin_window(window_name(300))  # the optimizer's own window is taken: it must fail
    with pytest.raises(ZeusConfigError, match="already open"):
        run_steps(plo, gpus, 5)
    assert gpus[0].get_power_limit() == 260


def test_context_manager_and_close_restore() -> None:
    gpus = make_gpus(1)
    gpus[0].set_power_limit(270)
    with exhaustive(gpus) as plo:
        plo.on_train_begin()
        run_steps(plo, gpus, 40)
        assert gpus[0].get_power_limit() == 200
    assert gpus[0].get_power_limit() == 270
    plo2 = exhaustive(gpus)
    plo2.on_train_begin()
    assert gpus[0].get_power_limit() == 300
    plo2.close()
    assert gpus[0].get_power_limit() == 270


def test_steps_per_limit_follow_the_options() -> None:
    gpus = make_gpus(1, noise=0.0)
    plo = GlobalPowerLimitOptimizer(
        monitor_of(gpus),
        Energy(),
        warmup_steps=1,
        profile_steps=12,
        min_steps=4,
        min_samples=2,
        min_sample_s=0.4,
    )
    plo.on_train_begin()
    run_steps(plo, gpus, 200)
    # Noise-free steps have zero spread: the survey's 4 steps (2 samples of at least 0.4 s) already
    # separate every limit, and the survey ends two limits after the best.
    assert {m.power_limit: (m.steps, m.samples) for m in plo.measurements} == {
        w: (4, 2) for w in (300, 275, 250, 225, 200, 175, 150)
    }
    assert plo.optimal_power_limit_w == 200
    plo.on_train_end()
