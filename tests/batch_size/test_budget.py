"""The conservative exploration budget: the job's cumulative cost against its default's."""

from __future__ import annotations

import math
import random

import pytest

from zeus_core.optimizer.batch_size import BatchSizeBandit, JobSpec, Observation
from zeus_core.optimizer.batch_size._budget import account

SIZES = (8, 16, 32, 64, 128)


def make_spec(**overrides) -> JobSpec:
    fields = dict(
        job_id="job", batch_sizes=SIZES, default_batch_size=32, target_metric=0.9, max_power_w=300.0
    )
    fields.update(overrides)
    return JobSpec(**fields)


def test_the_budget_measures_the_default_and_estimates_the_rest():
    obs = [
        Observation(32, 110.0, True, overhead=10.0, reference_cost=104.0),  # profiling on the default
        Observation(16, 50.0, False),  # a failed trial: charged, no recurrence
        Observation(16, 90.0, True, overhead=5.0),
        Observation(32, 100.0, True, reference_cost=104.0),
        Observation(64, 120.0, True),
    ]
    b = account(obs, default_batch_size=32, slack=0.0)
    assert b.cost_j == pytest.approx(470.0)
    assert (b.measured_recurrences, b.estimated_recurrences) == (2, 2)
    assert b.default_recurrence_cost_j == pytest.approx(104.0)
    assert b.default_cost_j == pytest.approx(4 * 104.0)
    assert b.uncharged_j == pytest.approx(10.0)  # the default's profiling is not exploration's
    assert b.remaining_j == pytest.approx(416.0 - 460.0)
    assert b.to_dict()["remaining_j"] == pytest.approx(-44.0)
    # Slack adds its fraction of the default's cost; None turns the budget off.
    assert account(obs, 32, 0.25).remaining_j == pytest.approx(1.25 * 416.0 - 460.0)
    off = account(obs, 32, None)
    assert off.remaining_j == math.inf and off.to_dict()["remaining_j"] is None and off.allows(1e12)
    # Without a reference, a default trial's recurring cost is the default's cost.
    assert account([Observation(32, 110.0, True, overhead=10.0)], 32, 0.0).default_recurrence_cost_j == 100.0


def test_the_default_is_measured_first_and_its_neighbours_tried_once():
    bandit = BatchSizeBandit(make_spec(slack=0.0))
    assert bandit.next_batch_size(1) == 32
    assert bandit.budget().default_recurrence_cost_j is None
    bandit.observe(Observation(32, 100.0, True))
    # Trying a neighbour is the only way to learn anything: allowed with no budget left.
    assert bandit.budget().remaining_j == pytest.approx(0.0)
    assert bandit.next_batch_size(2) == 16


def test_an_arm_whose_exploration_would_break_the_budget_is_not_played():
    spec = make_spec(slack=0.0)
    # The default costs 100 J; its neighbour 16 cost 120 J: the job is 20 J over the default.
    obs = [Observation(32, 100.0, True), Observation(16, 120.0, True)]
    bandit = BatchSizeBandit(spec, obs)
    assert bandit.phase == "pruning"
    walk = bandit._frontiers()[0]
    assert walk == 8  # what pruning would explore next
    # Cost rose from 32 to 16, so 8 is predicted costlier still: 120 × 120/100 = 144 J.
    assert bandit.pessimistic_cost(8) == pytest.approx(144.0)
    budget = bandit.budget()
    assert budget.remaining_j == pytest.approx(-20.0)
    assert not budget.allows(bandit.pessimistic_cost(8))
    played = {bandit.next_batch_size(n) for n in range(3, 40)}
    assert 8 not in played
    assert played <= {32, 64}  # the safe arm, or the untried other neighbour
    # The same history with enough slack lets the walk go on.
    assert BatchSizeBandit(make_spec(slack=0.5), obs).next_batch_size(3) == 8


def test_exploration_resumes_once_the_savings_pay_for_it():
    spec = make_spec(slack=0.0)
    obs = [Observation(32, 96.0, True, reference_cost=100.0), Observation(16, 120.0, True)]
    obs.append(Observation(64, 130.0, True))  # the other neighbour, costlier too
    bandit = BatchSizeBandit(spec, obs)
    rounds = 0
    while bandit.next_batch_size(len(obs) + 1) != 8:
        obs.append(Observation(32, 96.0, True, reference_cost=100.0))  # 4 J saved each time
        bandit = BatchSizeBandit(spec, obs)
        rounds += 1
        assert rounds < 100
    # 8 is predicted at 120 × 120/96 = 150 J: it waited until what is left covered the 50 J above
    # the default's 100 J, and not one recurrence longer.
    needed = bandit.pessimistic_cost(8) - bandit.budget().default_recurrence_cost_j
    assert needed == pytest.approx(50.0)
    assert needed <= bandit.budget().remaining_j < needed + 4.0
    assert rounds > 20


@pytest.mark.parametrize("seed", range(5))
def test_a_job_whose_default_is_the_best_arm_never_explores_past_the_budget(seed):
    """The default (32) is cheapest and every other arm costs more.

    Only the default's two neighbours are tried regardless of the budget; every other exploration
    must fit it, and by the end the job has cost no more than the default.
    """
    spec = make_spec(slack=0.0, seed=seed, window_size=0)
    mean = {8: 180.0, 16: 125.0, 32: 100.0, 64: 115.0, 128: 160.0}
    rng = random.Random(seed)
    bandit = BatchSizeBandit(spec)
    exempt = {16, 64}
    for n in range(1, 151):
        b = bandit.next_batch_size(n)
        budget = bandit.budget()
        if b not in exempt and b != bandit._safe_arm():
            assert budget.allows(bandit.pessimistic_cost(b)), (n, b, budget)
        exempt.discard(b)
        cost = mean[b] * rng.uniform(0.9, 1.1)
        reference = 104.0 if b == 32 else None  # 4 % saved against the default's power limit
        bandit.observe(Observation(b, cost, True, reference_cost=reference and reference * cost / mean[32]))
    budget = bandit.budget()
    assert budget.cost_j <= budget.default_cost_j  # the neighbours' cost was made up
    # Arms two steps away were explored at most once, and only once the savings paid for them.
    assert all(sum(o.batch_size == b for o in bandit.observations) <= 1 for b in (8, 128))


def test_no_budget_is_zeus_behaviour():
    obs = [Observation(32, 100.0, True), Observation(16, 120.0, True)]
    assert BatchSizeBandit(make_spec(slack=None), obs).next_batch_size(3) == 8


def test_a_walk_ends_before_an_arm_predicted_to_fail():
    spec = make_spec(slack=None, beta_knob=2.0)
    # 16 cost 1.5 × the default; the rise predicts 8 at 1.5 × 150 = 225 J > 2 × 100 J.
    bandit = BatchSizeBandit(spec, [Observation(32, 100.0, True), Observation(16, 150.0, True)])
    assert bandit._frontiers() == (None, 64)
    assert bandit.next_batch_size(3) == 64


def test_a_walk_ends_after_two_rises_in_a_row():
    spec = make_spec(batch_sizes=(8, 16, 32, 64, 128, 256), default_batch_size=256, slack=None)
    costs = {256: 100.0, 128: 80.0, 64: 70.0, 32: 75.0, 16: 80.0, 8: 81.0}
    # Two identical trials of the default: trials are known to be exact, so a rise is a rise.
    bandit = BatchSizeBandit(spec, [Observation(256, 100.0, True)] * 2)
    handed = [256]
    while bandit.phase == "pruning":
        b = bandit.next_batch_size(len(handed) + 1)
        handed.append(b)
        bandit.observe(Observation(b, costs[b], True))
    assert handed == [256, 128, 64, 32, 16]  # 32, then 16 cost more than the arm before: 8 is skipped


def test_out_of_budget_the_default_is_played_unless_an_arm_proved_cheaper():
    """Once the budget is spent, the job plays the default, not the arm it played most.

    192's first trial was lucky (94 J against the default's 100 J); its next ones cost 107 J on
    average. Its many trials make its standard deviation small, so its pessimistic cost is below
    the default's (one trial, a wide bound), but above the default's mean: it never proved cheaper.
    """
    spec = make_spec(batch_sizes=(128, 192, 256, 360), default_batch_size=256, slack=0.0, window_size=0)
    obs = [
        Observation(256, 100.0, True, reference_cost=100.0),
        Observation(192, 94.0, True),
        Observation(128, 125.0, True),
        Observation(360, 112.0, True),
    ]
    obs += [Observation(192, cost, True) for cost in (119.0, 97.0, 97.0, 119.0, 93.0, 115.0) * 3]
    bandit = BatchSizeBandit(spec, obs)
    post = bandit.posteriors()
    assert post[192].mean > post[256].mean
    assert bandit.pessimistic_cost(192) < bandit.pessimistic_cost(256)  # what used to pick 192
    assert bandit.budget().remaining_j < 0
    assert bandit._safe_arm() == 256
    assert {bandit.next_batch_size(n) for n in range(len(obs) + 1, len(obs) + 30)} == {256}
    # An arm whose pessimistic cost is below the default's mean did prove cheaper: it is played.
    cheaper = obs + [Observation(192, cost, True) for cost in (80.0, 82.0, 81.0, 79.0) * 5]
    bandit = BatchSizeBandit(spec, cheaper)
    assert bandit.pessimistic_cost(192) < bandit.posteriors()[256].mean
    assert bandit._safe_arm() == 192
