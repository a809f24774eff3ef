"""The plan (``_planner.py``): survey, contenders, settled choice, decisive measurements, budget, choice.

Every rule works from what a selector says (a cost; for a constraint, feasibility against a
reference), so the tests use measurements built by hand.
"""

from __future__ import annotations

import pytest

from zeus_core.optimizer.power_limit import (
    Energy,
    MaxSlowdownConstraint,
    OptimumSelector,
    PowerLimitMeasurement,
    PowerLimitOptions,
    Time,
)
from zeus_core.optimizer.power_limit._planner import Planner, Step, candidate_limits, choose, impossible

LIMITS = [300.0, 275.0, 250.0, 225.0, 200.0, 175.0, 150.0, 125.0, 100.0]


def m(
    limit: float, energy: float, time: float = 0.2, steps: int = 10, rel_sd: float = 0.02
) -> PowerLimitMeasurement:
    """A measurement of ``steps`` one-step samples whose time and energy jitter by ``rel_sd``."""
    var_t, var_e = (rel_sd * time) ** 2, (rel_sd * energy) ** 2
    return PowerLimitMeasurement(limit, steps, time, energy, var_t, var_e, 0.0, samples=steps)


def planner(selector: OptimumSelector, **options) -> Planner:
    return Planner(selector, LIMITS, PowerLimitOptions(**options), profile_steps=40, warmup_steps=10)


def test_candidate_limits_and_impossible_readings() -> None:
    assert candidate_limits(300, 100, 25) == LIMITS and candidate_limits(300, 100, 75) == [
        300.0,
        225.0,
        150.0,
    ]
    options = PowerLimitOptions()
    assert not impossible(m(250, 50.0, 0.2, steps=40), options)  # 250 W
    assert impossible(m(250, 60.0, 0.2, steps=40), options)  # 300 W under a 250 W limit
    assert not impossible(m(250, 52.8, 0.2, steps=40), options)  # 264 W: within 5 % + one 0.1 s update in 8 s


def test_the_survey_goes_down_until_the_cost_rose_beyond_the_margin_twice() -> None:
    p = planner(Energy())
    survey = [m(300, 60), m(275, 55), m(250, 50), m(225, 49), m(200, 50)]
    assert p.next_action(survey).power_limit == 175  # 200 W rose, but by 2 %: within the margin
    rose = survey + [m(175, 56), m(150, 60)]  # +14 % and +22 % over 225 W, well beyond noise
    action = p.next_action(rose)
    assert action.step is Step.MEASURE and action.again and "rose by more than 10%" in action.reason
    assert action.power_limit in (250, 225, 200)  # the contenders: not significantly worse than 225 W
    bump = survey + [m(175, 56), m(150, 48)]  # a real bump that came back down: keep surveying
    assert p.next_action(bump).power_limit == 125


def test_contenders_are_measured_again_lowest_optimistic_cost_first_then_settled() -> None:
    p = planner(Energy())
    ms = [m(300, 60), m(275, 55), m(250, 50.5), m(225, 49), m(200, 50), m(175, 56), m(150, 60)]
    action = p.next_action(ms)
    assert (action.power_limit, action.again, action.cap) == (225, True, 50)  # lowest optimistic energy
    tight = [
        x if x.power_limit not in (250, 225, 200) else m(x.power_limit, x.energy, steps=400, rel_sd=0.02)
        for x in ms
    ]
    done = p.next_action(tight)  # 225 W is known to be >2 % cheaper than its neighbours: settled
    assert done.step is Step.DONE and done.power_limit == 225


def test_the_budget_keeps_only_the_most_promising_contenders() -> None:
    p = planner(Energy())
    ms = [m(300, 60), m(275, 50.5), m(250, 50.2), m(225, 49), m(200, 50.1), m(175, 56), m(150, 60)]
    plenty = {p.next_action(ms, budget_left=b).power_limit for b in (1000,)}
    assert plenty == {225.0}
    # Fewer steps left than one visit: the two most promising stay in play, fewest steps first.
    assert p.next_action(ms, budget_left=40).power_limit in (225, 250)


def test_the_choice_rests_on_zeus_length_measurements_where_a_visit_can_pay() -> None:
    p = planner(Energy())
    clear = [m(300, 60), m(275, 55), m(250, 50), m(225, 40, rel_sd=0.01), m(200, 50), m(175, 56), m(150, 60)]
    action = p.next_action(clear)  # 225 W clearly best, but only its 10 survey steps say so
    assert (action.step, action.power_limit, action.again) == (Step.MEASURE, 225, True)
    running = m(225, 40, steps=25, rel_sd=0.01)
    current = [running if x.power_limit == 225 else x for x in clear]
    assert not p.enough(running, current)  # on to profile_steps in one visit
    done = m(225, 40, steps=40, rel_sd=0.01)
    assert p.enough(done, [done if x.power_limit == 225 else x for x in clear])


def test_a_slowdown_constraint_keeps_the_reference_in_play_while_feasibility_is_unsure() -> None:
    p = planner(MaxSlowdownConstraint(1.1))
    ms = [m(300, 60, 0.200), m(275, 55, 0.205), m(250, 50, 0.214), m(225, 46, 0.221), m(200, 43, 0.240)]
    ms += [m(175, 40, 0.290), m(150, 38, 0.330)]  # 45 % and 65 % slower: infeasible by more than 10 %
    action = p.next_action(ms)
    assert "infeasible by more than 10%" in action.reason
    # 225 W is 10.5 % slower: unsure while the reference is this noisy, so it is refined first.
    assert (action.power_limit, action.again) == (300, True)


def test_infeasible_limits_end_the_survey_only_after_a_feasible_one() -> None:
    class PowerCap(OptimumSelector):  # the top limits break the cap, the lower ones meet it
        def cost(self, m, measurements):
            return m.time

        def feasible(self, m, reference):
            return m.average_power <= 230

    p = planner(PowerCap())
    top = [m(300, 60, 0.2), m(275, 55, 0.2)]  # 300 W and 275 W: both over the cap
    assert p.next_action(top).power_limit == 250  # keep looking: the cap may be met lower down
    assert choose(PowerCap(), top + [m(250, 50, 0.22), m(225, 45, 0.2)]) == 225


def test_without_early_stopping_or_a_cost_every_limit_gets_zeus_length() -> None:
    class ZeusStyle(OptimumSelector):
        def select(self, measurements):
            return min(measurements, key=lambda x: x.energy).power_limit

    for p in (planner(Energy(), early_stopping=False), planner(ZeusStyle())):
        action = p.next_action([m(300, 60), m(275, 80)])
        assert (action.power_limit, action.cap, action.again) == (250, 40, False)
        ms = [m(w, 50 + abs(w - 200) / 10) for w in LIMITS]
        assert p.next_action(ms).step is Step.DONE and p.next_action(ms).power_limit == 200


def test_the_choice_is_the_least_cost_among_feasible_limits() -> None:
    costs = {300: 10.4, 275: 10.2, 250: 9.85, 225: 10.05, 200: 10.0, 175: 10.05, 150: 10.2}
    ms = [m(w, c, c, steps=120, rel_sd=0.05) for w, c in costs.items()]
    assert choose(Energy(), ms) == choose(Time(), ms) == 250
    times = {300: 1.0, 275: 1.05, 250: 1.12, 225: 1.2, 200: 1.3, 175: 1.4, 150: 1.6}
    slow = [PowerLimitMeasurement(w, 40, times[w], c) for w, c in costs.items()]
    assert choose(MaxSlowdownConstraint(1.1), slow) == 275  # 250 W is 12 % slower: infeasible


def test_enough_stops_a_visit_that_is_tight_or_no_longer_needed() -> None:
    p = planner(Energy())
    ms = [m(300, 60), m(275, 55), m(250, 50), m(225, 49.5), m(200, 50), m(175, 56), m(150, 60)]
    p.next_action(ms)  # what the choice rests on, for the checks
    running = m(275, 55, steps=20)  # far above the best: not a contender
    assert p.enough(running, [running if x.power_limit == 275 else x for x in ms])
    unsure = m(250, 49.6, steps=15)
    assert not p.enough(unsure, [unsure if x.power_limit == 250 else x for x in ms])
    tight = m(250, 49.6, steps=400, rel_sd=0.01)
    assert p.enough(tight, [tight if x.power_limit == 250 else x for x in ms])


@pytest.mark.parametrize("tie_tol", [0.0, 0.005])
def test_settling_needs_the_choice_surely_feasible_and_within_tie_tol(tie_tol: float) -> None:
    p = planner(MaxSlowdownConstraint(1.1, tolerance=0.0), tie_tol=tie_tol)
    ref = m(300, 60, 0.2, steps=400, rel_sd=0.01)
    near = m(
        250, 45, 0.2195, steps=400, rel_sd=0.01
    )  # 9.75 % slower: feasible, not surely with 0.5 % to spare
    far = m(225, 44.9, 0.25, steps=400, rel_sd=0.01)  # clearly too slow
    ms = [ref, m(275, 52, 0.205, steps=400, rel_sd=0.01), near, far, m(200, 50, 0.3), m(175, 52, 0.35)]
    action = p.next_action(ms)
    assert action.step is Step.DONE and action.power_limit == 250  # nothing left to refine: all tight
