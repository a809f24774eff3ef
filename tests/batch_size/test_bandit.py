"""The batch-size bandit and its job spec, on hand-made data (no service, no traces)."""

from __future__ import annotations

import json
import logging
import math

import pytest

from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.batch_size import BatchSizeBandit, JobSpec, Observation, Phase
from zeus_core.optimizer.batch_size._posterior import _SHRINK_PSEUDO_OBS

SIZES = (8, 16, 32, 64, 128)


def make_spec(**overrides) -> JobSpec:
    fields = dict(
        job_id="job",
        batch_sizes=SIZES,
        default_batch_size=32,
        target_metric=0.9,
        max_power_w=300.0,
        seed=7,
        slack=None,  # the exploration rules alone; the budget has its own tests
    )
    fields.update(overrides)
    return JobSpec(**fields)


def run_pruning(bandit: BatchSizeBandit, cost: dict[int, float], fail: set[int] = frozenset()) -> list[int]:
    """Drive the pruning phase sequentially; returns the batch sizes handed out."""
    handed = []
    trial = 0
    while bandit.phase is Phase.PRUNING:
        trial += 1
        bs = bandit.next_batch_size(trial)
        handed.append(bs)
        bandit.observe(Observation(bs, cost[bs], bs not in fail))
        assert trial < 50
    return handed


# ------------------------------------------------------------------ spec
def test_spec_round_trips_through_json():
    spec = make_spec(beta_knob=None, prior_mean=100.0, prior_std=10.0, window_size=0)
    data = json.loads(json.dumps(spec.to_dict()))
    assert JobSpec.from_dict(data) == spec
    assert data["batch_sizes"] == list(SIZES)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"job_id": ""}, "job_id"),
        ({"batch_sizes": ()}, "batch_sizes"),
        ({"batch_sizes": (32, 16)}, "batch_sizes"),
        ({"batch_sizes": (16, 16, 32)}, "batch_sizes"),
        ({"batch_sizes": (0, 16)}, "batch_sizes"),
        ({"default_batch_size": 48}, "default_batch_size"),
        ({"target_metric": float("nan")}, "target_metric"),
        ({"max_epochs": 0}, "max_epochs"),
        ({"eta_knob": 1.5}, "eta_knob"),
        ({"beta_knob": 1.0}, "beta_knob"),
        ({"window_size": -1}, "window_size"),
        ({"num_pruning_rounds": -1}, "num_pruning_rounds"),
        ({"prior_mean": 10.0}, "prior_std"),
        ({"prior_mean": -1.0, "prior_std": 1.0}, "prior_mean"),
        ({"prior_mean": 1.0, "prior_std": 0.0}, "prior_std"),
        ({"max_power_w": 0.0}, "max_power_w"),
    ],
)
def test_spec_rejects_bad_fields_naming_them(overrides, field):
    with pytest.raises(ZeusConfigError, match=field):
        make_spec(**overrides)


def test_spec_from_dict_rejects_unknown_and_missing_fields():
    data = make_spec().to_dict()
    with pytest.raises(ZeusConfigError, match="unknown field"):
        JobSpec.from_dict({**data, "colour": "red"})
    del data["target_metric"]
    with pytest.raises(ZeusConfigError, match="target_metric"):
        JobSpec.from_dict(data)


def test_observation_validation():
    with pytest.raises(ZeusConfigError, match="cost"):
        Observation(32, -1.0, True)
    with pytest.raises(ZeusConfigError, match="cost"):
        Observation(32, math.inf, True)
    with pytest.raises(ZeusConfigError, match="overhead"):
        Observation(32, 10.0, True, overhead=11.0)
    with pytest.raises(ZeusConfigError, match="epochs=-1"):
        Observation(32, 10.0, True, epochs=-1)
    with pytest.raises(ZeusConfigError, match="epochs=True"):
        Observation(32, 10.0, True, epochs=True)
    with pytest.raises(ZeusConfigError, match="batch_size=48"):
        BatchSizeBandit(make_spec()).observe(Observation(48, 1.0, True))


# --------------------------------------------------------------- pruning
def test_pruning_goes_down_from_default_then_up_and_repeats_from_the_cheapest():
    bandit = BatchSizeBandit(make_spec(beta_knob=2.0, num_pruning_rounds=2))
    # 8 fails (250 > 2 × 100), so round 1 prunes it and a second round follows. (Were every arm to
    # pass, pruning would end after round 1: see the early-end test below.)
    cost = {8: 250.0, 16: 110.0, 32: 100.0, 64: 90.0, 128: 120.0}
    handed = run_pruning(bandit, cost)
    # Round 1: 32, down 16, 8, then up 64, 128. Round 2 starts at the cheapest (64), without 8.
    assert handed[:5] == [32, 16, 8, 64, 128]
    assert handed[5:] == [64, 32, 16, 128]
    assert bandit.phase == "thompson"
    assert bandit.pruning_round == 2
    assert bandit.arms == [16, 32, 64, 128]


def test_one_pruning_round_by_default_even_when_it_pruned_an_arm():
    bandit = BatchSizeBandit(make_spec(beta_knob=2.0))
    assert bandit.spec.num_pruning_rounds == 1
    cost = {8: 250.0, 16: 110.0, 32: 100.0, 64: 90.0, 128: 120.0}
    handed = run_pruning(bandit, cost)
    # 8 fails and is pruned; the arms that passed each have one trial and sampling starts.
    assert handed == [32, 16, 8, 64, 128]
    assert bandit.phase == "thompson"
    assert bandit.pruning_round == 1
    assert bandit.arms == [16, 32, 64, 128]
    # The pooled variance gives single-trial arms a posterior: no arm is left without one.
    assert all(math.isfinite(p.std) and p.std > 0 for p in bandit.posteriors().values())


def test_pruning_ends_early_when_a_round_passes_every_arm():
    spec = make_spec(num_pruning_rounds=3)
    cost = {8: 150.0, 16: 110.0, 32: 100.0, 64: 90.0, 128: 120.0}  # all within 2 × the best
    bandit = BatchSizeBandit(spec)
    handed = run_pruning(bandit, cost)
    # One round explores every arm and prunes none; another would repeat it, so sampling starts.
    assert handed == [32, 16, 8, 64, 128]
    assert bandit.phase == "thompson"
    assert bandit.pruning_round == 1  # fewer than num_pruning_rounds
    assert bandit.arms == list(SIZES)
    assert BatchSizeBandit(spec, bandit.observations).summary() == bandit.summary()


def test_a_failure_ends_its_direction_and_the_arm_is_pruned():
    bandit = BatchSizeBandit(make_spec(num_pruning_rounds=2))
    cost = {8: 100.0, 16: 100.0, 32: 100.0, 64: 100.0, 128: 100.0}
    handed = run_pruning(bandit, cost, fail={16, 128})
    assert handed[:4] == [32, 16, 64, 128]  # 16 fails: 8 is never tried; 128 fails: the round ends
    assert 8 not in handed
    assert bandit.arms == [32, 64]
    assert handed[4:] == [32, 64]


def test_pruning_drops_arms_costlier_than_beta_times_the_best():
    bandit = BatchSizeBandit(make_spec(beta_knob=2.0))
    # 16 passes when observed (best so far 100), but 64 later costs 40: 16 (100 > 2 × 40) must go,
    # as must 32 itself (100 > 80).
    cost = {8: 210.0, 16: 100.0, 32: 100.0, 64: 40.0, 128: 70.0}
    handed = run_pruning(bandit, cost)
    assert handed[:4] == [32, 16, 8, 64]  # 8 fails at once (210 > 2 × 100), ending the down walk
    assert bandit.arms == [64, 128]


def test_pruning_counts_out_of_order_results_of_concurrent_trials():
    spec = make_spec()
    bandit = BatchSizeBandit(spec)
    first = bandit.next_batch_size(1)
    second = bandit.next_batch_size(2, pending=[first])  # default running: the upward walk starts
    assert (first, second) == (32, 64)
    bandit.observe(Observation(32, 100.0, True))
    third = bandit.next_batch_size(3, pending=[64])
    fourth = bandit.next_batch_size(4, pending=[64, third])  # both walks busy: the best known arm
    assert (third, fourth) == (16, 32)
    bandit.observe(Observation(32, 101.0, True))  # the duplicate joins the history only
    bandit.observe(Observation(16, 120.0, True))  # results arrive out of order
    bandit.observe(Observation(64, 90.0, True))
    assert bandit.next_batch_size(5) == 8
    rebuilt = BatchSizeBandit(spec, bandit.observations)
    assert rebuilt.summary() == bandit.summary()


def test_round_without_any_success_prunes_nothing(caplog):
    bandit = BatchSizeBandit(make_spec(batch_sizes=(16, 32, 64), num_pruning_rounds=1))
    with caplog.at_level(logging.WARNING):
        handed = run_pruning(bandit, {16: 5.0, 32: 5.0, 64: 5.0}, fail={16, 32, 64})
    assert handed == [32, 64]
    assert bandit.arms == [16, 32, 64]
    assert "nothing pruned" in caplog.text


def test_no_pruning_rounds_tries_every_arm_once_then_samples():
    bandit = BatchSizeBandit(make_spec(num_pruning_rounds=0))
    assert bandit.phase == "thompson"
    seen = []
    for trial in range(1, 6):
        bs = bandit.next_batch_size(trial)
        seen.append(bs)
        bandit.observe(Observation(bs, 100.0 + bs, True))
    assert sorted(seen) == list(SIZES)


# ------------------------------------------------------------- posterior
def test_posterior_matches_the_conjugate_update_with_pooled_variance():
    spec = make_spec(batch_sizes=(16, 32), default_batch_size=32, num_pruning_rounds=0)
    obs = [Observation(16, c, True) for c in (90.0, 110.0)] + [
        Observation(32, c, True) for c in (200.0, 200.0)
    ]
    post = BatchSizeBandit(spec, obs).posteriors()
    # Pooled relative variance: arm 16 has ss/m² = 200/100² over 1 dof; arm 32 has 0 over 1 dof.
    rel_var = (200.0 / 100.0**2 + 0.0) / 2
    k = _SHRINK_PSEUDO_OBS
    noise16 = (200.0 + k * rel_var * 100.0**2) / (1 + k)
    noise32 = (0.0 + k * rel_var * 200.0**2) / (1 + k)
    assert post[16].mean == pytest.approx(100.0)
    assert post[16].std == pytest.approx(math.sqrt(noise16 / 2))
    assert post[32].mean == pytest.approx(200.0)
    assert post[32].std == pytest.approx(math.sqrt(noise32 / 2))
    assert post[32].std > 0  # two equal costs do not freeze the arm (Zeus's zero variance)


def test_prior_pulls_the_posterior_mean():
    base = dict(batch_sizes=(16, 32), default_batch_size=32, num_pruning_rounds=0)
    obs = [Observation(32, 100.0, True), Observation(32, 120.0, True)]
    flat = BatchSizeBandit(make_spec(**base), obs).posteriors()[32]
    strong = BatchSizeBandit(make_spec(**base, prior_mean=50.0, prior_std=1.0), obs).posteriors()[32]
    assert flat.mean == pytest.approx(110.0)
    assert 50.0 < strong.mean < 55.0
    assert strong.std < 1.0
    untried = BatchSizeBandit(make_spec(**base, prior_mean=50.0, prior_std=5.0), obs).posteriors()[16]
    assert (untried.mean, untried.std, untried.count) == (50.0, 5.0, 0)


def test_epochs_to_target_are_shrunk_towards_the_pooled_count():
    """An arm cheap per epoch whose one trial drew an extra epoch is not written off."""
    spec = make_spec(batch_sizes=(16, 32, 64), default_batch_size=32, num_pruning_rounds=0)
    # (cost J, epochs): 16 costs 100 J/epoch, 32 costs 110 J/epoch, 64 costs 120 J/epoch.
    trials = {16: [(500.0, 5)], 32: [(440.0, 4), (550.0, 5)], 64: [(480.0, 4), (480.0, 4)]}
    obs = [Observation(b, c, True, epochs=e) for b, ts in trials.items() for c, e in ts]
    without = BatchSizeBandit(spec, [Observation(o.batch_size, o.cost, True) for o in obs]).posteriors()
    post = BatchSizeBandit(spec, obs).posteriors()
    assert sorted(without, key=lambda b: without[b].mean) == [64, 32, 16]  # raw 480, 495, 500 J

    # Empirical Bayes by hand. Epochs: 16 [5], 32 [4, 5], 64 [4, 4]; pooled mean 22/5.
    pooled = 22 / 5
    within = (0.0 + 0.5 + 0.0) / 2  # squared deviations over 2 degrees of freedom
    spread = (0.5**2 + 0.0 + 0.5**2) / 2  # variance of the arm means 5, 4.5, 4
    weight = within / (spread - within * (1 / 1 + 1 / 2 + 1 / 2) / 3)
    assert weight == pytest.approx(3.0)
    assert post[16].mean == pytest.approx(100.0 * (5 + weight * pooled) / (1 + weight))
    assert post[32].mean == pytest.approx(110.0 * (9 + weight * pooled) / (2 + weight))
    assert post[64].mean == pytest.approx(120.0 * (8 + weight * pooled) / (2 + weight))
    assert sorted(post, key=lambda b: post[b].mean) == [16, 32, 64]  # by cost per epoch
    # The pooled count also counts as evidence: the posterior narrows by sqrt(n / (n + weight)).
    for b, n in ((16, 1), (32, 2), (64, 2)):
        assert post[b].std == pytest.approx(without[b].std * math.sqrt(n / (n + weight)))


def test_epoch_counts_that_differ_by_batch_size_are_barely_pooled():
    spec = make_spec(batch_sizes=(16, 32, 64), default_batch_size=32, num_pruning_rounds=0)
    epochs = {16: (10, 11), 32: (20, 21), 64: (30, 31)}
    obs = [Observation(b, 10.0 * e, True, epochs=e) for b, es in epochs.items() for e in es]
    post = BatchSizeBandit(spec, obs).posteriors()
    for b, es in epochs.items():
        assert post[b].mean == pytest.approx(10.0 * sum(es) / 2, rel=5e-3)  # pooled: 205 J


def test_arms_without_epoch_counts_keep_their_raw_mean():
    spec = make_spec(batch_sizes=(16, 32, 64), default_batch_size=32, num_pruning_rounds=0)
    known = [Observation(32, 400.0, True, epochs=4), Observation(64, 600.0, True, epochs=6)]
    # 16: one trial without an epoch count; with an epoch count, then a failure in its window.
    post = BatchSizeBandit(spec, [*known, Observation(16, 500.0, True)]).posteriors()
    assert post[16].mean == pytest.approx(500.0)
    assert post[32].mean != pytest.approx(400.0)  # two arms with counts: they are pooled
    failed = [*known, Observation(16, 500.0, True, epochs=5), Observation(16, 300.0, False, epochs=3)]
    assert BatchSizeBandit(spec, failed).posteriors()[16].count == 2
    threshold = 2.0 * 400.0
    assert BatchSizeBandit(spec, failed).posteriors()[16].mean == pytest.approx(
        (500.0 + threshold + 400.0) / 2
    )
    # A single arm with epoch counts has nothing to be pooled with.
    alone = BatchSizeBandit(spec, [Observation(32, 400.0, True, epochs=4)]).posteriors()[32]
    assert alone.mean == pytest.approx(400.0)


def test_window_uses_only_the_last_observations():
    base = dict(batch_sizes=(16, 32), default_batch_size=32, num_pruning_rounds=0)
    obs = [Observation(32, c, True) for c in (500.0, 500.0, 100.0, 110.0)]
    assert BatchSizeBandit(make_spec(**base, window_size=2), obs).posteriors()[32].mean == pytest.approx(
        105.0
    )
    assert BatchSizeBandit(make_spec(**base, window_size=0), obs).posteriors()[32].mean == pytest.approx(
        302.5
    )


def test_failed_trials_cost_at_least_the_threshold_plus_a_retry():
    spec = make_spec(batch_sizes=(16, 32), default_batch_size=32, num_pruning_rounds=0, beta_knob=2.0)
    obs = [Observation(32, 100.0, True), Observation(16, 30.0, False)]
    post = BatchSizeBandit(spec, obs).posteriors()
    assert post[16].mean == pytest.approx(2.0 * 100.0 + 100.0)
    assert post[16].failures == 1


def test_overhead_is_left_out_of_what_the_bandit_learns():
    spec = make_spec(batch_sizes=(16, 32), default_batch_size=32, num_pruning_rounds=0)
    bandit = BatchSizeBandit(
        spec, [Observation(32, 130.0, True, overhead=30.0), Observation(32, 100.0, True)]
    )
    assert bandit.posteriors()[32].mean == pytest.approx(100.0)
    assert bandit.early_stop_threshold() == pytest.approx(200.0)


# -------------------------------------------------------------- sampling
def test_thompson_sampling_prefers_the_cheapest_arm_and_is_deterministic():
    spec = make_spec(num_pruning_rounds=0)
    obs = [
        Observation(b, c * f, True)
        for b, c in {8: 300.0, 16: 150.0, 32: 100.0, 64: 160.0, 128: 320.0}.items()
        for f in (0.9, 1.1)
    ]
    bandit = BatchSizeBandit(spec, obs)
    picks = [bandit.next_batch_size(t) for t in range(1, 201)]
    assert picks.count(32) > 150
    assert picks == [BatchSizeBandit(spec, obs).next_batch_size(t) for t in range(1, 201)]
    other_seed = BatchSizeBandit(make_spec(num_pruning_rounds=0, seed=8), obs)
    assert picks != [other_seed.next_batch_size(t) for t in range(1, 201)]


def test_sampling_stays_near_the_leader():
    spec = make_spec(num_pruning_rounds=0)
    # 8 looks nearly as cheap as 32 but is neither a neighbour of the leader nor the runner-up.
    costs = {8: (112.0, 112.0), 16: (100.0, 140.0), 32: (90.0, 110.0), 64: (95.0, 125.0), 128: (150.0, 150.0)}
    obs = [Observation(b, c, True) for b, cs in costs.items() for c in cs]
    bandit = BatchSizeBandit(spec, obs)
    picks = {bandit.next_batch_size(t) for t in range(1, 300)}
    assert 8 not in picks and 128 not in picks
    assert {16, 32, 64} <= picks


def test_an_arm_observed_once_is_not_resampled_far_from_the_leader():
    spec = make_spec(num_pruning_rounds=0)
    # 8 was tried once and looks costlier than the leader 32 and the runner-up 64, and is not a
    # neighbour of the leader: were 8 the cheapest, 16 (between it and 32) would look cheaper
    # than 32, so one trial is enough to leave it alone.
    costs = {8: (125.0,), 16: (110.0, 140.0), 32: (90.0, 110.0), 64: (95.0, 125.0), 128: (150.0,)}
    obs = [Observation(b, c, True) for b, cs in costs.items() for c in cs]
    bandit = BatchSizeBandit(spec, obs)
    picks = [bandit.next_batch_size(t) for t in range(1, 300)]
    assert 8 not in picks and 128 not in picks
    assert {16, 32, 64} <= set(picks)
    # Once 16 proves cheap, the leader moves next to 8, which becomes a candidate again.
    for _ in range(4):
        bandit.observe(Observation(16, 60.0, True))
    assert 8 in {bandit.next_batch_size(t) for t in range(300, 600)}


def test_runner_up_is_sampled_even_when_not_a_neighbour():
    spec = make_spec(num_pruning_rounds=0)
    costs = {
        8: (101.0, 103.0),
        16: (150.0, 160.0),
        32: (100.0, 104.0),
        64: (160.0, 170.0),
        128: (200.0, 200.0),
    }
    obs = [Observation(b, c, True) for b, cs in costs.items() for c in cs]
    picks = [BatchSizeBandit(spec, obs).next_batch_size(t) for t in range(1, 200)]
    assert 8 in picks  # the runner-up, two steps away from the leader 32
    assert 128 not in picks


# ---------------------------------------------------------- early stop
def test_early_stop_threshold_and_should_stop():
    bandit = BatchSizeBandit(make_spec(max_epochs=10, beta_knob=2.0))
    assert bandit.early_stop_threshold() is None
    assert not bandit.should_stop(1e9, epoch=3)
    assert bandit.should_stop(0.0, epoch=10)
    bandit.observe(Observation(32, 100.0, True))
    bandit.observe(Observation(16, 80.0, False))  # failures never set the best
    assert bandit.early_stop_threshold() == pytest.approx(200.0)
    assert not bandit.should_stop(200.0, epoch=3)
    assert bandit.should_stop(200.5, epoch=3)
    assert bandit.should_stop(150.0, epoch=3, next_epoch_cost=60.0)
    assert not bandit.should_stop(150.0, epoch=3, next_epoch_cost=40.0)


def test_the_threshold_is_beta_times_the_best_arms_mean_not_its_luckiest_run():
    # 64 is the best arm: 4 epochs on average at 25 J each, but one run needed only 2 and one 7.
    epochs = [4, 2, 4, 4, 7]
    obs = [Observation(32, 130.0, True, epochs=5)]
    obs += [Observation(64, 25.0 * e, True, epochs=e) for e in epochs]
    bandit = BatchSizeBandit(make_spec(beta_knob=2.0, num_pruning_rounds=0, window_size=0), obs)
    assert bandit.summary()["best_converged_cost"] == pytest.approx(105.0)  # 64's mean, not its 50 J run
    assert bandit.early_stop_threshold() == pytest.approx(210.0)
    # Its next 7-epoch run (175 J) goes on; 2 × the luckiest run (100 J) would have stopped it at
    # epoch 4 and charged a retry.
    assert not any(bandit.should_stop(25.0 * e, epoch=e, next_epoch_cost=25.0) for e in range(7))


def test_early_stopping_disabled_by_beta_none():
    bandit = BatchSizeBandit(make_spec(beta_knob=None, max_epochs=5), [Observation(32, 100.0, True)])
    assert bandit.early_stop_threshold() is None
    assert not bandit.should_stop(1e9, epoch=4, next_epoch_cost=1e9)
    assert bandit.should_stop(0.0, epoch=5)


def test_threshold_follows_the_window_when_costs_drift_up():
    spec = make_spec(batch_sizes=(16, 32), default_batch_size=32, num_pruning_rounds=0, window_size=2)
    obs = [Observation(32, 100.0, True)] + [Observation(32, 300.0, True)] * 2
    assert BatchSizeBandit(spec, obs).early_stop_threshold() == pytest.approx(600.0)


# --------------------------------------------------------------- report
def test_summary_is_json_safe_and_rebuilds_identically():
    spec = make_spec()
    bandit = BatchSizeBandit(spec)
    run_pruning(bandit, {8: 150.0, 16: 110.0, 32: 100.0, 64: 90.0, 128: 120.0}, fail={8})
    summary = bandit.summary()
    text = json.dumps(summary, allow_nan=False)
    assert json.loads(text)["phase"] == "thompson"
    assert summary["best_batch_size"] == 64
    assert summary["per_arm"]["8"]["pruned"] is True
    assert summary["early_stop_threshold"] == pytest.approx(180.0)
    assert BatchSizeBandit(spec, bandit.observations).summary() == summary


def test_window_tracks_a_cost_that_drifts():
    spec = make_spec(batch_sizes=(32, 64), default_batch_size=32, window_size=5)
    bandit = BatchSizeBandit(spec)
    picks = []
    for trial in range(1, 81):
        bs = bandit.next_batch_size(trial)
        picks.append(bs)
        base = {32: 100.0 if trial <= 30 else 300.0, 64: 150.0}[bs]
        cost = base * (1.0 + 0.02 * (trial % 3))
        threshold = bandit.early_stop_threshold()
        if threshold is not None and cost > threshold:  # the client is told to stop: a failed trial
            bandit.observe(Observation(bs, threshold, False))
        else:
            bandit.observe(Observation(bs, cost, True))
    assert picks[10:30].count(32) >= 17  # before the drift, 32 is cheaper
    assert picks[-30:].count(64) >= 27  # after it, the bandit has moved to 64
