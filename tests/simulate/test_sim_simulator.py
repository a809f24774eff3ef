"""The trace-driven simulator on a hand-made trace (exact numbers) and on the NSDI'23 traces."""

from __future__ import annotations

import json

import pytest

from tests.simulate.toy_traces import TOY, TRAIN, write_toy
from zeus_core._cost import zeus_cost
from zeus_core.exceptions import ZeusConfigError
from zeus_core.simulate import (
    DefaultPolicy,
    FixedPolicy,
    GridSearchPolicy,
    ZeusPolicy,
    expected_fixed_cost,
    jit_power_limit,
    load_nsdi23_traces,
    load_workload_trace,
    noise_free_cost,
    oracle,
    simulate,
)


@pytest.fixture
def toy(tmp_path):
    return load_workload_trace(TOY, *write_toy(tmp_path))


def test_jit_power_limit_minimises_the_per_epoch_zeus_cost(toy):
    # bs 16: 100 W -> 0.5·800 + 0.5·200·10 = 1400; 200 W -> 0.5·900 + 0.5·200·6 = 1050.
    assert jit_power_limit(toy, 16, 0.5) == 200
    # eta = 1 cares only about energy: 800 J at 100 W beats 900 J at 200 W.
    assert jit_power_limit(toy, 16, 1.0) == 100


def test_default_policy_runs_each_trial_as_the_trace_says(toy):
    result = simulate(toy, DefaultPolicy(toy), seed=3, recurrences=6)
    assert result.num_recurrences == 6 and result.policy == "default"
    for t in result.trials:
        assert (t.batch_size, t.power_limit_w, t.profiled_power) == (32, 200, False)
        if t.converged:
            assert (t.epochs, t.energy_j, t.time_s) == (3, 3 * 900.0, 15.0)
        else:  # run 2 never reaches the target: stopped at max_epochs, then retried
            assert (t.epochs, t.energy_j, t.time_s) == (5, 5 * 900.0, 25.0)
        assert t.cost_j == pytest.approx(zeus_cost(t.energy_j, t.time_s, 0.5, 200.0))
    assert sum(t.converged for t in result.trials) == 6
    assert result.cost_j == pytest.approx(sum(result.recurrence_costs()))
    assert result.cumulative_costs()[-1] == pytest.approx(result.cost_j)
    assert result.chosen() == [(32, 200)] * 6
    assert json.loads(json.dumps(result.to_dict()))["simulated"] is True


def test_first_trial_of_a_batch_size_pays_for_power_profiling(toy):
    result = simulate(toy, ZeusPolicy(toy, seed=1, beta_knob=None), seed=1, recurrences=4)
    first = {}
    for t in result.trials:
        first.setdefault(t.batch_size, t)
    for bs, t in first.items():
        assert t.profiled_power and t.power_limit_w == 200
        lo, hi = toy.epochs[(bs, 100)], toy.epochs[(bs, 200)]
        e1, t1 = (lo.energy_j + hi.energy_j) / 2, (lo.time_s + hi.time_s) / 2
        assert t.energy_j == pytest.approx(e1 + (t.epochs - 1) * hi.energy_j)
        assert t.time_s == pytest.approx(t1 + (t.epochs - 1) * hi.time_s)
        assert t.overhead_j == pytest.approx(
            zeus_cost(e1, t1, 0.5, 200.0) - zeus_cost(hi.energy_j, hi.time_s, 0.5, 200.0)
        )
    later = [t for t in result.trials if t is not first[t.batch_size]]
    assert later and not any(t.profiled_power or t.overhead_j for t in later)


class _ThresholdPolicy(FixedPolicy):
    """Stops before any epoch that would take the cost past ``limit`` J; records the outcomes."""

    def __init__(self, trace, limit):
        super().__init__(trace, 16, 200)
        self.limit, self.outcomes = limit, []

    def observe(self, outcome):
        self.outcomes.append(outcome)

    def should_stop(self, cost_so_far, epoch, next_epoch_cost):
        return epoch >= 5 or cost_so_far + next_epoch_cost > self.limit


def test_a_trial_whose_next_epoch_crosses_the_threshold_stops_before_it(toy):
    # One epoch at (16, 200 W) costs 0.5·900 + 0.5·200·6 = 1050 J: two fit under 2,500 J.
    policy = _ThresholdPolicy(toy, 2500.0)
    with pytest.raises(ZeusConfigError, match="did not reach the target in 3 tries"):
        simulate(toy, policy, seed=0, recurrences=1, max_tries=3)
    assert [o.cost_j for o in policy.outcomes] == [pytest.approx(2100.0)] * 3
    assert [o.epochs for o in policy.outcomes] == [2, 2, 2]
    assert not any(o.converged for o in policy.outcomes)


def test_a_trial_is_not_started_when_one_epoch_alone_crosses_the_threshold(toy):
    policy = _ThresholdPolicy(toy, 1000.0)
    with pytest.raises(ZeusConfigError):
        simulate(toy, policy, seed=0, recurrences=1, max_tries=2)
    assert [o.cost_j for o in policy.outcomes] == [0.0, 0.0]


def test_expected_fixed_cost_and_oracle(toy):
    # (32, 200 W): half the runs converge in 3 epochs, the other half fail after 5 and retry.
    energy, time, cost = expected_fixed_cost(toy, 32, 200, 0.5)
    assert (energy, time) == (pytest.approx(8 * 900.0), pytest.approx(8 * 5.0))
    assert cost == pytest.approx(zeus_cost(7200.0, 40.0, 0.5, 200.0))
    bs, pl, best = oracle(toy, 0.5)
    candidates = {(b, p): expected_fixed_cost(toy, b, p, 0.5)[2] for b, p in toy.epochs}
    assert (bs, pl) == min(candidates, key=candidates.get)
    assert best[2] == pytest.approx(min(candidates.values()))


def test_noise_free_cost_takes_the_luck_of_the_run_draws_out(tmp_path):
    # bs 32's runs converge in 3 or 5 epochs: realised costs depend on the draws, the noise-free
    # cost is 4 epochs per recurrence whatever the seed.
    train = TRAIN.replace("toy,net,32,sgd,0.1,2,0.5,nan", "toy,net,32,sgd,0.1,2,0.5,5")
    trace = load_workload_trace(TOY, *write_toy(tmp_path, train=train))
    epoch_cost = zeus_cost(900.0, 5.0, 0.5, 200.0)
    results = [simulate(trace, FixedPolicy(trace, 32, 200), seed=s, recurrences=8) for s in range(1, 6)]
    assert len({r.cost_j for r in results}) > 1
    for r in results:
        assert noise_free_cost(trace, r) == pytest.approx(8 * 4 * epoch_cost)


def test_noise_free_cost_keeps_failed_trials_and_profiling_overhead(toy):
    # In the toy trace every batch size converges in one number of epochs only, so nothing is luck:
    # failed trials (runs that never converge) and the profiling epochs keep their cost.
    result = simulate(toy, ZeusPolicy(toy, seed=2, beta_knob=None), seed=2, recurrences=6)
    assert any(not t.converged for t in result.trials) and any(t.overhead_j > 0 for t in result.trials)
    assert noise_free_cost(toy, result) == pytest.approx(result.cost_j)


def test_grid_search_tries_every_configuration_default_first_then_keeps_the_best(toy):
    policy = GridSearchPolicy(toy, beta_knob=None)
    result = simulate(toy, policy, seed=5, recurrences=12)
    explored = []
    for t in result.trials:
        if (t.batch_size, t.power_limit_w) not in explored:
            explored.append((t.batch_size, t.power_limit_w))
    assert explored == [(32, 200), (32, 100), (16, 200), (16, 100)]
    converged = [t for t in result.trials[:8] if t.converged]
    best = min(converged, key=lambda t: t.cost_j)
    assert result.chosen()[-1] == (best.batch_size, best.power_limit_w)


def test_simulation_is_a_pure_function_of_the_seed(shared_data):
    trace = load_nsdi23_traces("v100", shared_data / "zeus_nsdi23")[2]  # librispeech
    a = simulate(trace, ZeusPolicy(trace, seed=3), seed=3, recurrences=60)
    b = simulate(trace, ZeusPolicy(trace, seed=3), seed=3, recurrences=60)
    c = simulate(trace, ZeusPolicy(trace, seed=4), seed=4, recurrences=60)
    assert a == b
    assert [t.batch_size for t in a.trials] != [t.batch_size for t in c.trials]


def test_bad_arguments(toy):
    with pytest.raises(ZeusConfigError, match="recurrences=0"):
        simulate(toy, DefaultPolicy(toy), seed=0, recurrences=0)
    with pytest.raises(ZeusConfigError, match="not in the"):
        FixedPolicy(toy, 16, 150)
    with pytest.raises(ZeusConfigError, match="batch size 48 is not in the"):
        FixedPolicy(toy, 48, None)
