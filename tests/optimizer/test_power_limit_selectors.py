"""Selector math, measurement statistics and the early-stopping rules, on hand-made measurements."""

from __future__ import annotations

import json
import math
import random

import pytest

from zeus_core._cost import zeus_cost
from zeus_core.exceptions import ZeusConfigError, ZeusProfileError
from zeus_core.optimizer.power_limit import (
    EarlyStopping,
    Energy,
    MaxSlowdownConstraint,
    OptimumSelector,
    PowerLimitMeasurement,
    Time,
    ZeusCost,
)
from zeus_core.optimizer.power_limit.planner import (
    ActionKind,
    measured_enough,
    next_action,
    short_of_profile,
    visit_cap,
)

M = PowerLimitMeasurement
RULE = EarlyStopping()


def exact(rows: list[tuple[float, float, float]], num_gpus: int = 1) -> list[PowerLimitMeasurement]:
    """Noise-free measurements from ``(limit W, s/step, J/step)`` rows, highest limit first."""
    return [M(w, 40, t, e, num_gpus=num_gpus) for w, t, e in rows]


def noisy(w: float, t: float, e: float, rel_sd: float, steps: int = 10) -> PowerLimitMeasurement:
    """A measurement whose per-step samples have the given relative spread."""
    return M(w, steps, t, e, (rel_sd * t) ** 2, (rel_sd * e) ** 2, 0.0)


# Energy falls then rises; time rises as the limit falls.
ROWS = [(300, 0.50, 140.0), (250, 0.52, 120.0), (200, 0.60, 110.0), (150, 0.80, 115.0), (100, 1.30, 150.0)]


def test_each_selector_picks_its_optimum() -> None:
    ms = exact(ROWS)
    assert Time().select(ms) == 300
    assert Energy().select(ms) == 200
    assert MaxSlowdownConstraint(1.1).select(ms) == 250  # 0.52 <= 1.1 * 0.50; 200 W is 20 % slower
    assert MaxSlowdownConstraint(1.25).select(ms) == 200
    assert MaxSlowdownConstraint(1.0).select(ms) == 300
    # ZeusCost with MaxPower = 300 W: eta=1 is energy, eta=0 is time.
    assert ZeusCost(1.0).select(ms) == 200
    assert ZeusCost(0.0).select(ms) == 300
    assert ZeusCost(0.5).select(ms) == 250  # 0.5*120 + 150*0.52 = 138 < 140 (300 W), 145 (200 W)


def test_zeus_cost_uses_the_metric_and_the_job_gpu_count() -> None:
    ms = exact(ROWS, num_gpus=4)
    sel = ZeusCost(0.3)
    assert sel.max_power_w(ms) == 1200  # highest limit × 4 GPUs recorded in the measurements
    assert sel.costs(ms) == [zeus_cost(m.energy_per_step_j, m.time_per_step_s, 0.3, 1200) for m in ms]
    assert ZeusCost(0.3, world_size=2).max_power_w(ms) == 600
    # A bigger MaxPower prices time higher, so the choice moves to faster limits.
    assert ZeusCost(0.8, world_size=1).select(ms) == 200
    assert ZeusCost(0.8, world_size=16).select(ms) == 300


def test_slowdown_is_relative_to_the_highest_limit_as_in_zeus() -> None:
    # Noise made 250 W look fastest; the bound is still 1.1 × 300 W's time (0.616 s), as in Zeus,
    # so the minimum of noisy estimates does not tighten it.
    ms = exact([(300, 0.56, 140.0), (250, 0.50, 125.0), (200, 0.545, 110.0), (150, 0.70, 100.0)])
    assert MaxSlowdownConstraint(1.1).select(ms) == 200
    assert [m.power_limit_w for m in MaxSlowdownConstraint(1.1).feasible(ms)] == [300, 250, 200]


def test_slowdown_bound_allows_its_tolerance_on_the_measured_slowdown() -> None:
    # 200 W is measured 0.4 % over the bound (1.1 × 0.5 s = 0.55 s): within the default half
    # percent, so it is taken; a strict bound or a limit 1 % over is not.
    ms = exact([(300, 0.50, 140.0), (250, 0.52, 125.0), (200, 0.5522, 110.0), (150, 0.5555, 100.0)])
    assert MaxSlowdownConstraint(1.1).select(ms) == 200
    assert MaxSlowdownConstraint(1.1, tolerance=0.0).select(ms) == 250
    assert MaxSlowdownConstraint(1.1, tolerance=0.02).select(ms) == 150


@pytest.mark.parametrize(
    ("make", "text"),
    [
        (lambda: ZeusCost(1.5), "eta_knob=1.5"),
        (lambda: ZeusCost(-0.1), "eta_knob=-0.1"),
        (lambda: ZeusCost(0.5, world_size=0), "world_size=0"),
        (lambda: MaxSlowdownConstraint(0.9), "factor=0.9"),
        (lambda: MaxSlowdownConstraint(1.1, tolerance=0.1), "tolerance=0.1"),
        (lambda: EarlyStopping(confidence=1.0), "confidence=1.0"),
        (lambda: EarlyStopping(min_steps=2, patience=0), "min_steps=2"),
        (lambda: EarlyStopping(rel_tol=0), "rel_tol=0"),
    ],
)
def test_bad_arguments_are_refused_with_the_value(make, text: str) -> None:
    with pytest.raises(ZeusConfigError, match=text.replace("(", r"\(").replace(".", r"\.")):
        make()


def test_selecting_from_nothing_says_what_to_do() -> None:
    for sel in (Time(), Energy(), ZeusCost(0.5), MaxSlowdownConstraint(1.1)):
        with pytest.raises(ZeusConfigError, match="no measurements"):
            sel.select([])


def test_selectors_have_a_readable_text_form() -> None:
    assert repr(MaxSlowdownConstraint(1.1)) == "MaxSlowdownConstraint(factor=1.1, tolerance=0.005)"
    assert repr(ZeusCost(0.5, 4)) == "ZeusCost(eta_knob=0.5, world_size=4)"
    assert repr(Energy()) == "Energy()"


def test_a_custom_selector_gets_the_exhaustive_sweep() -> None:
    class Lowest(OptimumSelector):
        def select(self, measurements):  # noqa: D102
            return min(m.power_limit_w for m in measurements)

    ms = exact(ROWS)
    assert Lowest().select(ms) == 100
    assert not Lowest.supports_early_stopping
    assert Lowest().sweep_done(ms, RULE) is None and Lowest().contenders(ms, RULE) == []


# -- measurement statistics ----------------------------------------------------------------------------
def test_from_samples_means_variances_and_totals() -> None:
    times = [0.5, 0.7, 0.6, 0.6]
    energies = [100.0, 140.0, 130.0, 110.0]
    m = M.from_samples(250, times, energies, num_gpus=2)
    assert (m.steps, m.time_per_step_s, m.energy_per_step_j, m.num_gpus) == (4, pytest.approx(0.6), 120.0, 2)
    assert m.time_var_s2 == pytest.approx(0.02 / 3)
    assert m.energy_var_j2 == pytest.approx(1000 / 3)
    assert m.covariance_js == pytest.approx((-0.1 * -20 + 0.1 * 20 + 0 + 0) / 3)
    assert m.average_power_w == pytest.approx(200.0)
    assert m.time_stderr() == pytest.approx(math.sqrt(0.02 / 3 / 4))
    # The synchronised window totals override the means, not the spread.
    m2 = M.from_samples(250, times, energies, 2, total_time_s=2.8, total_energy_j=500.0)
    assert (m2.time_per_step_s, m2.energy_per_step_j, m2.time_var_s2) == (0.7, 125.0, m.time_var_s2)
    assert M.from_samples(250, [0.5], [100.0], 1).cost_stderr(1, 0) == math.inf


def test_merging_two_visits_equals_measuring_them_at_once() -> None:
    rng = random.Random(3)
    t = [rng.gauss(0.5, 0.02) for _ in range(25)]
    e = [rng.gauss(120, 5) + 100 * (x - 0.5) for x in t]
    whole = M.from_samples(200, t, e, 1)
    merged = M.from_samples(200, t[:10], e[:10], 1).merge(M.from_samples(200, t[10:], e[10:], 1))
    fields = (
        "steps",
        "time_per_step_s",
        "energy_per_step_j",
        "time_var_s2",
        "energy_var_j2",
        "covariance_js",
    )
    for field in fields:
        assert getattr(merged, field) == pytest.approx(getattr(whole, field), rel=1e-9), field
    with pytest.raises(ZeusConfigError, match="different limits"):
        whole.merge(M(150, 10, 0.5, 100.0))


def test_measurements_round_trip_through_json_and_reject_garbage() -> None:
    m = noisy(225, 0.61, 137.5, 0.03)
    assert M.from_dict(json.loads(json.dumps(m.to_dict()))) == m
    assert M.from_dict({**m.to_dict(), "future_field": 1}) == m  # unknown keys are ignored
    with pytest.raises(ZeusProfileError, match="time_per_step_s"):
        M.from_dict({"power_limit_w": 200, "steps": 3})
    with pytest.raises(ZeusProfileError, match="steps >= 1"):
        M(200, 0, 0.5, 10.0)


def test_t_quantiles_match_the_student_distribution() -> None:
    stats = pytest.importorskip("scipy.stats")
    for conf in (0.9, 0.95, 0.99):
        rule = EarlyStopping(confidence=conf)
        for dof in (1, 2, 3, 4, 9, 20, 100):
            assert rule.quantile(dof) == pytest.approx(stats.t.ppf(0.5 + conf / 2, dof), rel=1e-9)
    assert RULE.quantile(0) == math.inf


def test_tightness_needs_both_time_and_power_within_the_tolerance() -> None:
    assert RULE.is_tight(noisy(300, 0.5, 140.0, 0.003, steps=40))
    assert not RULE.is_tight(noisy(300, 0.5, 140.0, 0.003, steps=5))  # fewer than min_steps
    assert not RULE.is_tight(noisy(300, 0.5, 140.0, 0.03, steps=40))
    wobbly_power = M(300, 40, 0.5, 140.0, (0.001 * 0.5) ** 2, (0.05 * 140) ** 2, 0.0)
    assert not RULE.is_tight(wobbly_power)


# -- early-stopping rules ----------------------------------------------------------------------------------
def test_sweep_stops_after_patience_significant_rises_beyond_the_margin() -> None:
    base = [noisy(300, 0.5, 140.0, 0.02), noisy(275, 0.5, 120.0, 0.02)]
    # Two rises of > 10 %: done, naming the limits and the best one.
    rising = [*base, noisy(250, 0.6, 150.0, 0.02), noisy(225, 0.7, 170.0, 0.02)]
    reason = Energy().sweep_done(rising, RULE)
    assert reason is not None and "250/225 W" in reason and "275 W" in reason
    # One rise is not enough with patience 2, enough with patience 1.
    assert Energy().sweep_done(rising[:3], RULE) is None
    assert Energy().sweep_done(rising[:3], EarlyStopping(patience=1)) is not None
    # A bump: the second limit recovers below the margin, so the sweep goes on.
    bump = [*base, noisy(250, 0.6, 150.0, 0.02), noisy(225, 0.6, 125.0, 0.02)]
    assert Energy().sweep_done(bump, RULE) is None
    # Rises smaller than the margin do not count, however significant.
    small = [*base, noisy(250, 0.5, 128.0, 0.001, 40), noisy(225, 0.5, 129.0, 0.001, 40)]
    assert Energy().sweep_done(small, RULE) is None
    assert Energy().sweep_done(small, EarlyStopping(margin=0.05)) is not None
    # Rises that noise explains do not count.
    vague = [*base, noisy(250, 0.6, 150.0, 0.4), noisy(225, 0.7, 170.0, 0.4)]
    assert Energy().sweep_done(vague, RULE) is None


def test_contenders_are_the_limits_not_significantly_worse_than_the_best() -> None:
    ms = [
        noisy(300, 0.50, 140.0, 0.03),
        noisy(275, 0.51, 121.0, 0.03),
        noisy(250, 0.55, 120.0, 0.03),
        noisy(225, 0.60, 150.0, 0.03),
    ]
    assert [m.power_limit_w for m in Energy().contenders(ms, RULE)] == [275, 250]
    assert [m.power_limit_w for m in Time().contenders(ms, RULE)] == [300, 275]
    precise = [noisy(275, 0.51, 121.0, 0.001, 40), noisy(250, 0.55, 120.0, 0.001, 40)]
    assert [m.power_limit_w for m in Energy().contenders(precise, RULE)] == [250]


def test_slowdown_sweep_stops_on_consecutive_violations_only() -> None:
    sel = MaxSlowdownConstraint(1.1)
    head = [noisy(300, 0.50, 140.0, 0.01), noisy(275, 0.50, 130.0, 0.01)]
    slow = [noisy(250, 0.60, 125.0, 0.01), noisy(225, 0.62, 120.0, 0.01)]
    reason = sel.sweep_done([*head, *slow], RULE)
    assert reason is not None and "slower than 1.1 × the highest" in reason
    # A slow bump followed by a fast limit keeps the sweep going (resnet18 at 250 W does this).
    assert sel.sweep_done([*head, slow[0], noisy(225, 0.51, 110.0, 0.01)], RULE) is None


def test_slowdown_contenders_include_the_fastest_when_feasibility_is_unsure() -> None:
    sel = MaxSlowdownConstraint(1.1)
    fast = noisy(300, 0.50, 140.0, 0.03)
    borderline = noisy(250, 0.55, 120.0, 0.03)  # right at 1.1 × 0.50: feasibility unsure
    clearly_slow = noisy(200, 0.75, 100.0, 0.01)
    names = [m.power_limit_w for m in sel.contenders([fast, borderline, clearly_slow], RULE)]
    assert names == [250, 300]
    sure = [noisy(300, 0.50, 140.0, 0.001, 40), noisy(250, 0.52, 120.0, 0.001, 40)]
    assert [m.power_limit_w for m in sel.contenders(sure, RULE)] == [250]


# -- refinement of tied contenders: max_refine_steps and tie_tol -----------------------------------------
def _m(limit: float, steps: int, t: float, e: float, rel_sd: float = 0.03) -> PowerLimitMeasurement:
    """A measurement with per-step relative spread ``rel_sd`` of time and energy (independent)."""
    return PowerLimitMeasurement(limit, steps, t, e, (rel_sd * t) ** 2, (rel_sd * e) ** 2, 0.0)


def test_refinement_knobs_are_validated_and_default_to_three_times_profile_steps() -> None:
    assert EarlyStopping().refine_cap(40) == 120
    assert EarlyStopping(max_refine_steps=200).refine_cap(40) == 200
    assert EarlyStopping(max_refine_steps=10).refine_cap(40) == 40  # never below profile_steps
    with pytest.raises(ZeusConfigError, match=r"max_refine_steps=0 .*tie_tol=-0.1"):
        EarlyStopping(max_refine_steps=0, tie_tol=-0.1)


def test_visit_cap_refines_in_rounds_of_profile_steps_up_to_the_cap() -> None:
    rule = EarlyStopping()
    caps = [visit_cap(_m(250, n, 0.3, 75.0), 40, rule) for n in (10, 39, 40, 79, 80, 120)]
    assert caps == [50, 79, 80, 119, 120, 120]  # each visit adds up to profile_steps
    assert visit_cap(None, 40, rule) == 40 and visit_cap(_m(250, 40, 0.3, 75.0), 40, None) == 40
    # Too few samples to judge (short steps): no measuring beyond profile_steps.
    few = PowerLimitMeasurement(250, 40, 0.01, 2.5, 1e-6, 1e-2, 0.0, samples=2)
    assert visit_cap(few, 40, rule) == 40


def test_tied_contenders_are_refined_past_profile_steps_until_settled() -> None:
    rule = EarlyStopping()
    # Two limits 0.2 % apart in time with 3 % noise: not told apart at 40 steps, nor settled.
    tied = [_m(300, 40, 0.2000, 80.0), _m(275, 40, 0.2004, 75.0)]
    assert len(Time().contenders(tied, rule)) == 2 and not Time().settled(tied, rule)
    action = next_action(tied, [300.0, 275.0], Time(), rule, profile_steps=40)
    assert action.kind is ActionKind.REFINE
    # With the cap reached nothing more is measured, and without max_refine_steps past 40 neither.
    capped = [_m(300, 120, 0.2000, 80.0), _m(275, 120, 0.2004, 75.0)]
    assert next_action(capped, [300.0, 275.0], Time(), rule, 40).kind is ActionKind.DONE
    no_extra = EarlyStopping(max_refine_steps=40, tie_tol=0.0)
    assert next_action(tied, [300.0, 275.0], Time(), no_extra, 40).kind is ActionKind.DONE
    # Precise enough to say the choice is < 0.5 % costlier than the other: settled, done.
    precise = [_m(300, 400, 0.2000, 80.0), _m(275, 400, 0.2004, 75.0)]
    assert Time().settled(precise, rule) and not Time().settled(precise, EarlyStopping(tie_tol=0.0))
    assert (
        next_action(precise, [300.0, 275.0], Time(), EarlyStopping(max_refine_steps=1000), 40).kind
        is ActionKind.DONE
    )
    # A real 1 % gap is not settled, however precise: it is told apart instead.
    gap = [_m(300, 400, 0.2000, 80.0, 0.01), _m(275, 400, 0.2020, 75.0, 0.01)]
    assert len(Time().contenders(gap, rule)) == 1
    # Equal estimates with wide intervals: the choice might be > 0.5 % costlier, so not settled.
    assert not Time().settled([_m(300, 100, 0.2000, 80.0, 0.05), _m(275, 100, 0.2000, 75.0, 0.05)], rule)
    # A clearly cheaper choice is settled even while the other is still a contender.
    wide = [_m(300, 100, 0.2000, 80.0, 0.05), _m(275, 100, 0.2020, 75.0, 0.05)]
    assert len(Time().contenders(wide, rule)) == 2 and Time().settled(wide, rule)


def test_a_decision_never_rests_on_a_survey_measurement_short_of_profile_steps() -> None:
    rule = EarlyStopping()
    limits = [300.0, 250.0, 200.0]
    # Energy: 200 W is clearly cheapest (one contender left) but measured only in the survey.
    clear = [_m(300, 40, 0.50, 140.0), _m(250, 40, 0.52, 120.0), _m(200, 10, 0.60, 100.0)]
    assert Energy().contenders(clear, rule) == [clear[2]]
    assert [m.power_limit_w for m in short_of_profile(clear, Energy(), rule, 40)] == [200.0]
    action = next_action(clear, limits, Energy(), rule, profile_steps=40)
    assert (action.kind, action.power_limit_w) == (ActionKind.REFINE, 200.0)
    # Measured to profile_steps, or tight (noise-free) already: decided.
    done = [*clear[:2], _m(200, 40, 0.60, 100.0)]
    assert next_action(done, limits, Energy(), rule, 40).kind is ActionKind.DONE
    tight = [*clear[:2], M(200, 10, 0.60, 100.0)]
    assert next_action(tight, limits, Energy(), rule, 40).kind is ActionKind.DONE
    # MaxSlowdown rests on its reference too: a 10-step reference is measured again first.
    slow = MaxSlowdownConstraint(1.1)
    ref_short = [_m(300, 10, 0.50, 140.0), _m(250, 40, 0.52, 120.0), _m(200, 40, 0.60, 100.0)]
    assert [m.power_limit_w for m in slow.decisive(ref_short)] == [250.0, 300.0]
    assert [m.power_limit_w for m in short_of_profile(ref_short, slow, rule, 40)] == [300.0]
    # A refinement visit of such a limit runs on to profile_steps although nothing else needs it.
    running = _m(200, 25, 0.60, 100.0)
    assert not measured_enough(running, clear, Energy(), rule, profile_steps=40)
    assert measured_enough(running, clear, Energy(), rule)  # no floor: one contender, done
    assert measured_enough(_m(200, 40, 0.60, 100.0), clear, Energy(), rule, profile_steps=40)


def test_contenders_are_refined_most_promising_first_and_only_those_the_budget_pays_for() -> None:
    rule = EarlyStopping()
    limits = [300.0, 275.0, 250.0, 225.0, 200.0]
    # Five contenders within noise of each other, all surveyed for 10 steps: Energy refines the
    # cheapest-looking first (not the highest), and with budget for one visit only the two most
    # promising are left in play.
    flat = [_m(w, 10, 0.2, e, 0.05) for w, e in zip(limits, (80.0, 79.5, 79.0, 78.0, 78.5))]
    assert len(Energy().contenders(flat, rule)) == 5
    assert next_action(flat, limits, Energy(), rule, 40).power_limit_w == 225.0
    refined = [m if m.power_limit_w != 225.0 else _m(225.0, 50, 0.2, 78.0, 0.05) for m in flat]
    assert next_action(refined, limits, Energy(), rule, 40).power_limit_w == 200.0
    # 300 W, still at its 10 survey steps, is a contender but the least promising (highest
    # optimistic energy): refined next while the budget pays for every contender, left out when
    # it pays for one visit only.
    three = [_m(300, 10, 0.2, 80.0, 0.03), _m(275, 50, 0.2, 78.4, 0.05), _m(250, 50, 0.2, 78.0, 0.05)]
    assert len(Energy().contenders(three, rule)) == 3
    assert next_action(three, limits[:3], Energy(), rule, 40).power_limit_w == 300.0
    assert next_action(three, limits[:3], Energy(), rule, 40, affordable_visits=3).power_limit_w == 300.0
    assert next_action(three, limits[:3], Energy(), rule, 40, affordable_visits=1).power_limit_w == 250.0
    # MaxSlowdown refines its reference first: every feasibility verdict rests on it.
    slow = [_m(300, 10, 0.200, 80.0, 0.05), _m(275, 10, 0.215, 76.0, 0.05), _m(250, 10, 0.222, 72.0, 0.05)]
    sel = MaxSlowdownConstraint(1.1)
    assert sel.refine_priority(slow[0], slow, rule) < sel.refine_priority(slow[2], slow, rule)
    assert next_action(slow, [300.0, 275.0, 250.0], sel, rule, 40).power_limit_w == 300.0


def test_max_slowdown_is_settled_only_when_the_choice_is_surely_feasible() -> None:
    rule = EarlyStopping()
    sel = MaxSlowdownConstraint(1.1)
    # 250 W is 5 % slower than the fastest (feasible) and 0.1 % more energy than 225 W, which is 9.9 %
    # slower: precise measurements settle the choice within tie_tol.
    ok = [_m(300, 400, 0.200, 80.0, 0.01), _m(250, 400, 0.210, 70.0, 0.01), _m(225, 400, 0.2198, 70.07, 0.01)]
    assert sel.select(ok) == 250 and sel.settled(ok, rule)
    # The choice right at the allowed slowdown, measured 40 steps: not surely within 1.005 × of it.
    edge = [_m(300, 40, 0.200, 80.0), _m(225, 40, 0.2198, 70.0)]
    assert sel.select(edge) == 225 and not sel.settled(edge, rule)
