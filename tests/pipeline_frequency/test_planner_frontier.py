"""The public planner: frontier points, the plans Perseus uses, real-time refinement, plots."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from zeus_core.exceptions import ZeusConfigError, ZeusProfileError
from zeus_core.optimizer.pipeline_frequency import (
    FrequencyPlan,
    Instruction,
    InstructionKind,
    plan_frontier,
    synchronous_1f1b,
)
from zeus_core.optimizer.pipeline_frequency.planner._real_time import lp_plan, reclaim_slack
from zeus_core.testing import PHYSICAL_GPUS, physical_instruction_profile

F, B = InstructionKind.FORWARD, InstructionKind.BACKWARD


@pytest.fixture(scope="module")
def frontier():
    prof = physical_instruction_profile("a100", 3, seed=4)
    return plan_frontier(
        synchronous_1f1b(3, 6),
        prof,
        blocking_power_w=PHYSICAL_GPUS["a100"].blocking_power_w,
        check_invariants=True,
    )


def _padded(plan: FrequencyPlan, time_s: float, stages: int, power_w: float) -> float:
    return plan.energy_j + power_w * stages * (time_s - plan.iteration_time_s)


def test_frontier_points_are_consistent(frontier) -> None:
    n = len(frontier)
    assert n == frontier.quant_times[0] - frontier.quant_times[-1] + 1  # every quantum
    assert np.all(np.diff(frontier.quant_times) == -1)
    assert np.all(
        np.diff(frontier.model_energy_j - frontier.blocking_power_w * 3 * frontier.times_s) >= -1e-9
    )
    stages, p = frontier.schedule.num_stages, frontier.blocking_power_w
    for i in [0, n // 3, n // 2, n - 1]:
        d = frontier.durations(i)
        assert int(frontier.dag.longest_path(d)) == frontier.quant_times[i]
        plan = frontier.plan(i)
        opts = frontier.measured_options(plan)
        eff = sum(o.effective_energy_j for o in opts)
        assert frontier.energy_j[i] == pytest.approx(eff + p * stages * frontier.times_s[i])
        # The hull model is exact at its vertices and interpolates in between: close to the plan.
        assert frontier.model_energy_j[i] == pytest.approx(frontier.energy_j[i], rel=0.02)
    with pytest.raises(ZeusConfigError, match="out of range"):
        frontier.durations(n)


def test_zero_slowdown_plan_is_never_slower_and_saves_energy(frontier) -> None:
    base, fast = frontier.max_frequency_plan(), frontier.zero_slowdown_plan()
    assert fast.iteration_time_s <= base.iteration_time_s * (1 + 1e-9)
    assert fast.energy_j < 0.97 * base.energy_j
    assert fast.label == "zero-slowdown" and fast.simulated
    rep = frontier.replay_plan(fast)
    assert rep.iteration_time_s == pytest.approx(fast.iteration_time_s)
    assert rep.energy_j == pytest.approx(fast.energy_j)
    # The instructions on the critical path of the all-max plan keep the top clock.
    top = {k: frontier.profile.get(*k)[0].frequency_mhz for k in frontier.options}
    assert fast.frequency(0, "forward", 0) == top[(0, F)]
    assert fast.frequency(0, "backward", 5) == top[(0, B)]
    assert min(fast.frequencies.values()) < min(top.values())  # something was slowed


def test_plans_for_longer_times_use_less_energy(frontier) -> None:
    stages, p = frontier.schedule.num_stages, frontier.blocking_power_w
    t0 = frontier.max_frequency_plan().iteration_time_s
    previous = np.inf
    for factor in (1.0, 1.05, 1.1, 1.2, 1.4):
        target = t0 * factor
        plan = frontier.plan_for_time(target)
        assert plan.iteration_time_s <= target * (1 + 1e-9)
        effective = (
            plan.energy_j - p * stages * plan.iteration_time_s
        )  # Σ energy − blocking power × busy time
        assert effective <= previous + 1e-6
        previous = effective
    with pytest.raises(ZeusConfigError, match="needs at least"):
        frontier.plan_for_time(0.5 * t0)


def test_extrinsic_bloat_planning_for_a_straggler_beats_idling(frontier) -> None:
    stages, p = frontier.schedule.num_stages, frontier.blocking_power_w
    base = frontier.max_frequency_plan()
    t = 1.2 * base.iteration_time_s
    idle_fast = _padded(frontier.zero_slowdown_plan(), t, stages, p)
    planned = _padded(frontier.plan_for_time(t, label="straggler"), t, stages, p)
    assert planned < 0.97 * idle_fast < _padded(base, t, stages, p)


def test_least_energy_and_pareto_points(frontier) -> None:
    least = frontier.least_energy_plan()
    assert least.energy_j < frontier.zero_slowdown_plan().energy_j
    idx = frontier.pareto_indices()
    t, e = frontier.real_times_s, frontier.real_energy_j
    assert t[idx].min() == t.min()  # the shortest real time is always Pareto-optimal
    order = idx[np.argsort(t[idx])]
    assert np.all(np.diff(t[order]) > 0) and np.all(np.diff(e[order]) < 0)
    assert e[idx].min() == pytest.approx(e.min())


def test_cached_plans_are_independent_copies(frontier) -> None:
    a = frontier.zero_slowdown_plan()
    a.label = "changed"
    a.metadata["x"] = 1
    b = frontier.zero_slowdown_plan()
    assert b.label == "zero-slowdown" and "x" not in b.metadata


def test_lp_and_slack_reclaiming_meet_the_target(frontier) -> None:
    pytest.importorskip("scipy")
    ladders = [frontier.options[(i.stage, i.kind)].all_pareto for i in frontier.dag.instructions]
    target = frontier.max_frequency_plan().iteration_time_s * 1.07
    lp = lp_plan(frontier.dag, ladders, target)
    assert frontier.replay(lp).iteration_time_s <= target * (1 + 1e-9)
    reclaimed = reclaim_slack(frontier.dag, ladders, lp, target)
    assert frontier.replay(reclaimed).iteration_time_s <= target * (1 + 1e-9)
    assert all(r.time_s >= o.time_s for r, o in zip(reclaimed, lp))  # only ever slower
    assert sum(o.effective_energy_j for o in reclaimed) <= sum(o.effective_energy_j for o in lp)
    with pytest.raises(ZeusConfigError, match="below the fastest"):
        lp_plan(frontier.dag, ladders, target / 2)


@pytest.mark.parametrize("rounding", ["floor", "ceil"])
def test_without_the_lp_the_frontier_plan_is_repaired_in_real_time(rounding: str) -> None:
    prof = physical_instruction_profile("a40", 3, seed=1)
    fr = plan_frontier(
        synchronous_1f1b(3, 5), prof, blocking_power_w=60.0, rounding=rounding, backend="networkx"
    )
    fr.settings["use_lp"] = False
    base = fr.max_frequency_plan()
    plan = fr.zero_slowdown_plan()
    assert plan.metadata["method"] == "frontier"
    assert plan.iteration_time_s <= base.iteration_time_s * (1 + 1e-9)
    assert plan.energy_j < base.energy_j


def test_stop_at_time_gives_the_same_deadline_plan() -> None:
    prof = physical_instruction_profile("a100", 3, seed=2)
    sched = synchronous_1f1b(3, 4)
    full = plan_frontier(sched, prof, blocking_power_w=80.0)
    t = 1.15 * full.max_frequency_plan().iteration_time_s
    part = plan_frontier(sched, prof, blocking_power_w=80.0, stop_at_time_s=t)
    assert len(part) < len(full)
    assert part.times_s[-1] <= t
    assert part.plan_for_time(t).energy_j == pytest.approx(full.plan_for_time(t).energy_j)


def test_exponential_cost_model_plans_too() -> None:
    pytest.importorskip("scipy")
    prof = physical_instruction_profile("a100", 2, seed=3)
    fr = plan_frontier(synchronous_1f1b(2, 4), prof, blocking_power_w=80.0, cost_model="exponential")
    assert fr.zero_slowdown_plan().energy_j < fr.max_frequency_plan().energy_j
    with pytest.raises(ZeusConfigError, match="unknown cost_model"):
        plan_frontier(synchronous_1f1b(2, 4), prof, cost_model="cubic")
    with pytest.raises(ZeusConfigError, match="blocking_power_w"):
        plan_frontier(synchronous_1f1b(2, 4), prof, blocking_power_w=-1)


def test_plan_json_round_trip_and_program_order(tmp_path: Path, frontier) -> None:
    plan = frontier.zero_slowdown_plan()
    path = tmp_path / "plans" / "zs.json"
    plan.save(path)
    loaded = FrequencyPlan.load(path)
    assert loaded == plan
    assert loaded.metadata["planner"]["blocking_power_w"] == frontier.blocking_power_w
    sched = frontier.schedule
    program = loaded.stage_program(sched, 1)
    assert [i for i, _ in program] == list(sched.stage_orders[1])
    assert [f for _, f in program] == [plan.frequencies[i] for i in sched.stage_orders[1]]
    with pytest.raises(ZeusProfileError, match=r"\(stages, microbatches, chunks, kinds\)=\(3, 6, 1, 'F/B'\)"):
        loaded.stage_program(synchronous_1f1b(3, 7), 0)


def test_plan_errors_mark_the_failing_cell() -> None:
    sched = synchronous_1f1b(2, 3)
    plan = FrequencyPlan.uniform(sched, 1410, label="max")
    plan.frequencies[Instruction(1, B, 2)] = 1234
    with pytest.raises(ZeusProfileError) as err:
        plan.validate({(s, k): {1410, 1200} for s in range(2) for k in InstructionKind})
    text = str(err.value)
    assert "stage1:B2 at 1234 MHz" in text
    row = next(line for line in text.splitlines() if line.startswith("1 backward"))
    assert row.split()[-1] == ">1234<" and row.count(">") == 1
    data = plan.to_dict()
    del data["frequencies_mhz"][0]["forward"][1]
    with pytest.raises(ZeusProfileError, match="lists 2 clocks for 3 microbatches"):
        FrequencyPlan.from_dict(data)
    with pytest.raises(ZeusProfileError, match="lacks the key 'num_stages'"):
        FrequencyPlan.from_dict({"schedule": "1f1b"})
    with pytest.raises(ZeusProfileError, match="newer than this library"):
        FrequencyPlan.from_dict({**plan.to_dict(), "version": 99})
    with pytest.raises(ZeusProfileError, match="not valid JSON"):
        FrequencyPlan.from_json("{")
    freqs = dict(plan.frequencies)
    del freqs[Instruction(0, F, 1)]
    with pytest.raises(ZeusProfileError, match="have no clock") as err:
        FrequencyPlan("1f1b", 2, 3, freqs)
    assert ">?<" in str(err.value)
    with pytest.raises(ZeusProfileError, match="has no instruction"):
        plan.frequency(0, "forward", 7)


def test_plots_are_written(tmp_path: Path, frontier) -> None:
    pytest.importorskip("matplotlib")
    from zeus_core.optimizer.pipeline_frequency import plot_frontier, plot_timeline

    a = plot_frontier(frontier, tmp_path / "f.png", others={"other": ([1.0, 2.0], [100.0, 90.0])})
    b = plot_timeline(frontier, frontier.zero_slowdown_plan(), tmp_path / "t.png")
    for path in (a, b):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_planning_imports_neither_matplotlib_nor_torch() -> None:
    code = (
        "import sys\n"
        "import zeus_core.optimizer.pipeline_frequency as pf\n"
        "assert 'scipy' not in sys.modules, 'package import pulled scipy'\n"
        "from zeus_core.testing import physical_instruction_profile\n"
        "fr = pf.plan_frontier(pf.synchronous_1f1b(2, 2), physical_instruction_profile('a40', 2))\n"
        "fr.zero_slowdown_plan()\n"
        "bad = [m for m in ('matplotlib', 'torch') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize(
    ("face", "absent"),
    [
        ("zeus_core.optimizer.pipeline_frequency", ("numpy", "scipy", "matplotlib", "torch")),
        ("zeus_core.optimizer.pipeline_frequency.planner", ("scipy", "matplotlib", "torch")),
        ("zeus_core.optimizer.pipeline_frequency.runtime", ("scipy", "matplotlib", "torch")),
    ],
)
def test_importing_a_face_stays_light(face: str, absent: tuple[str, ...]) -> None:
    code = f"import sys, {face}\nbad = [m for m in {absent!r} if m in sys.modules]\nassert not bad, bad\n"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
