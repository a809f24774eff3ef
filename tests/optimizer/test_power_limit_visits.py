"""Every visit's samples kept, so each limit is re-judged with the job-wide jitter (issue 16: stalls)."""

from __future__ import annotations

import json
import random

import pytest

from tests.optimizer.plo_support import make_gpus, run_steps
from zeus_core.exceptions import ZeusProfileError
from zeus_core.optimizer.power_limit.visits import Visit, VisitLog


def _visit(rng: random.Random, limit: float, step_s: float, stalled: set[int], samples: int = 4) -> Visit:
    """Samples of 8 steps with 5 % jitter at ~200 W; a stalled sample holds one 3x step (GPU idle)."""
    times, energies = [], []
    for i in range(samples):
        steps = [step_s * rng.gauss(1.0, 0.05) for _ in range(8)]
        busy = sum(steps)
        stall = 2 * steps[0] if i in stalled else 0.0
        times.append(busy + stall)
        energies.append(200.0 * busy + 60.0 * stall)
    return Visit(limit, tuple(times), tuple(energies), (8,) * samples)


def test_the_first_limit_is_cleaned_once_later_visits_show_the_jitter() -> None:
    rng = random.Random(1)
    log = VisitLog()
    # The highest limit comes first: two of its four samples stalled, and nothing to compare with yet.
    log.add(_visit(rng, 300, 0.040, {1, 2}))
    alone = log.measurements(1)[0]
    assert alone.time_per_step_s > 1.04 * 0.040  # judged alone, the stalls stay in
    for limit, step_s in ((275, 0.041), (250, 0.043), (225, 0.046), (200, 0.050)):
        log.add(_visit(rng, limit, step_s, set()))
    judged = {m.power_limit_w: m for m in log.measurements(1)}
    assert judged[300].time_per_step_s == pytest.approx(0.040, rel=0.02)  # the stalls are gone now
    assert judged[300].samples == 2
    time_sd, energy_sd = log.spreads()
    assert time_sd is not None and 0.025 < time_sd < 0.09  # ~5 % per step, not the stalls' spread
    assert energy_sd is not None
    # The jitter rests on every limit's samples: limits consistent with it take its degrees of freedom.
    assert log.spread_dof() >= 5
    assert judged[250].dof == log.spread_dof() > judged[250].samples - 1


def test_a_short_refinement_visit_is_judged_with_the_limits_earlier_samples() -> None:
    rng = random.Random(2)
    log = VisitLog()
    for limit, step_s in ((300, 0.040), (250, 0.043), (200, 0.050)):
        log.add(_visit(rng, limit, step_s, set()))
    log.add(_visit(rng, 250, 0.043, {0}, samples=2))  # two samples alone: no median to judge by
    m = {m.power_limit_w: m for m in log.measurements(1)}[250]
    assert m.samples == 5 and m.time_per_step_s == pytest.approx(0.043, rel=0.02)


def test_a_visit_in_progress_counts_for_its_limit_only() -> None:
    rng = random.Random(3)
    log = VisitLog()
    log.add(_visit(rng, 300, 0.040, set()))
    log.add(_visit(rng, 250, 0.043, set()))
    before = log.measurements(1)
    during = log.measurements(1, extra=_visit(rng, 250, 0.043, set()))
    assert during[0] == before[0] and during[1].steps == before[1].steps + 32


def test_visits_round_trip_through_json_and_bad_ones_are_named() -> None:
    rng = random.Random(4)
    log = VisitLog()
    log.add(_visit(rng, 300, 0.040, {1}))
    log.add(_visit(rng, 250, 0.043, set()))
    again = VisitLog.from_json(json.loads(json.dumps(log.to_json())), {300.0, 250.0})
    assert again.measurements(1) == log.measurements(1)
    assert [v.power_limit_w for v in VisitLog.from_json(log.to_json(), {250.0}).visits] == [250.0]
    with pytest.raises(ZeusProfileError, match="malformed"):
        VisitLog.from_json([[300, [0.3], [60.0]]], {300.0})
    with pytest.raises(ZeusProfileError, match="mismatched"):
        VisitLog.from_json([[300, [0.3, 0.3], [60.0], [8]]], {300.0})


def test_a_checkpoint_resumes_with_the_same_judgement_of_every_limit() -> None:
    from tests.optimizer.test_power_limit_profile import optimizer

    gpus = make_gpus(1)
    plo = optimizer(gpus)
    plo.on_train_begin()
    run_steps(plo, gpus, 14)
    state = json.loads(json.dumps(plo.state_dict()))
    assert [v[0] for v in state["visits"]] == [300, 250]
    resumed = optimizer(make_gpus(1))
    resumed.load_state_dict(state)
    resumed.on_train_begin()
    assert [m.to_dict() for m in resumed.measurements] == [m.to_dict() for m in plo.measurements]
    plo.on_train_end()
    resumed.on_train_end()
