"""Rank 0's decisions from the ranks' reports (pure functions; the 2-rank runs use the same code)."""

from __future__ import annotations

import dataclasses
import logging
import re

import pytest

from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.pipeline_frequency import (
    ControlMode,
    PipelineSchedule,
    interleaved_1f1b,
    synchronous_1f1b,
)
from zeus_core.optimizer.pipeline_frequency.runtime import _observed_schedule as observed_schedule
from zeus_core.optimizer.pipeline_frequency.runtime import _plan_target as plan_target
from zeus_core.optimizer.pipeline_frequency.runtime import _rank_zero_decisions as decisions
from zeus_core.optimizer.pipeline_frequency.runtime import _save_dir as save_dir

CLOCKS = (1740, 1500, 1200)


def info(rank: int, stage: int, order: str, **kw: object) -> observed_schedule.RankInfo:
    parsed = tuple(("forward" if t[0] == "F" else "backward", int(t[1:])) for t in order.split())
    fields = dict(
        rank=rank,
        stage=stage,
        num_stages=2,
        schedule="1f1b",
        gpu_name="NVIDIA A40 (simulated)",
        simulated=True,
        supported_mhz=CLOCKS,
        order=parsed,
    )
    fields.update(kw)
    return observed_schedule.RankInfo(**fields)  # type: ignore[arg-type]


S0, S1 = "F0 F1 B0 B1", "F0 B0 F1 B1"


def test_observed_orders_become_the_schedule_with_data_parallel_replicas() -> None:
    infos = [info(0, 0, S0), info(1, 1, S1), info(2, 0, S0), info(3, 1, S1)]
    assert observed_schedule.schedule_of(infos).stage_orders == synchronous_1f1b(2, 2).stage_orders
    decision = decisions.decide_after_discovery(
        infos, plan_target.PlanSettings(), ControlMode.CONTROL, None, None
    )
    assert decision.plan is None and decision.error is None  # -> profile


@pytest.mark.parametrize(
    ("infos", "match"),
    [
        ([info(0, 0, S0), info(1, 1, S1), info(2, 0, "F0 B0 F1 B1")], "different instruction orders"),
        ([info(0, 0, S0)], r"No rank runs pipeline stage\(s\) \[1\]"),
        ([info(0, 0, S0), info(1, 1, S1, num_stages=3)], "disagree on the number"),
        ([info(0, 0, "F0 F1 B0"), info(1, 1, S1)], "do not form one pipeline iteration"),
        ([info(0, 0, S0), info(1, 1, S1, mode="measure")], "different modes"),
        ([info(0, 0, S0), info(1, 1, S1, gpu_name="NVIDIA A100"), info(2, 1, S1)], "different GPU models"),
    ],
)
def test_inconsistent_ranks_become_one_error_for_everyone(infos: list, match: str) -> None:
    decision = decisions.decide_after_discovery(
        infos, plan_target.PlanSettings(), ControlMode.CONTROL, None, None
    )
    assert decision.plan is None and decision.error is not None
    assert re.search(match, decision.error), decision.error


def test_measure_mode_without_a_plan_records_each_stage_at_its_highest_clock() -> None:
    infos = [info(0, 0, S0, mode="measure"), info(1, 1, S1, mode="measure", supported_mhz=(1410, 1200))]
    decision = decisions.decide_after_discovery(
        infos, plan_target.PlanSettings(), ControlMode.MEASURE, None, None
    )
    assert decision.plan is not None
    rows = {r["stage"]: r["forward"] + r["backward"] for r in decision.plan["frequencies_mhz"]}
    assert rows == {0: [1740] * 4, 1: [1410] * 4}


def test_unexpected_failures_do_not_leave_ranks_waiting() -> None:
    decision = decisions.decide_after_profiling(
        [info(0, 0, S0), info(1, 1, S1)],
        [object()],  # type: ignore[list-item]
        plan_target.PlanSettings(),
        None,
    )
    assert decision.error is not None and decision.error.startswith("Perseus planning failed on rank 0")


def test_plan_settings() -> None:
    assert plan_target.PlanSettings(target="least-energy").label == "least-energy"
    with pytest.raises(ZeusConfigError, match="not both"):
        plan_target.PlanSettings(target="least-energy", deadline_s=1.0)
    with pytest.raises(ZeusConfigError, match="blocking_power_w"):
        plan_target.PlanSettings(blocking_power_w=-1)
    assert save_dir.plan_file_name(synchronous_1f1b(2, 4), plan_target.PlanSettings(deadline_s=0.25)) == (
        "plan-1f1b-s2-m4-deadline-0.25s.json"
    )


def test_auto_time_unit_follows_the_shortest_instruction() -> None:
    from zeus_core.optimizer.pipeline_frequency import InstructionProfile

    rows = [(0, "forward", 1740, 0.004, 1.0), (0, "backward", 1740, 0.010, 2.0)]
    assert plan_target.auto_unit_time(InstructionProfile.from_rows(rows)) == pytest.approx(2e-4)
    rows = [(0, "forward", 1740, 0.1, 1.0), (0, "backward", 1740, 0.2, 2.0)]
    assert plan_target.auto_unit_time(InstructionProfile.from_rows(rows)) == 1e-3


def infos_of(sched: PipelineSchedule, orders: list | None = None) -> list[observed_schedule.RankInfo]:
    """What the ranks of ``sched`` report (``(kind, microbatch, virtual stage)`` per instruction)."""
    return [
        dataclasses.replace(
            info(s, s, "", num_stages=sched.num_stages, schedule=sched.name),
            order=tuple(
                (i.kind.value, i.microbatch, sched.virtual_stage(s, i.chunk))
                for i in (orders or sched.stage_orders)[s]
            ),
        )
        for s in range(sched.num_stages)
    ]


def test_megatron_interleaved_order_with_tuned_microbatch_groups_is_textbook(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # microbatch_group_size_per_vp_stage N: the textbook's N is read from the warm-up.
    for m, n in [(4, 4), (5, 3)]:
        grouped = interleaved_1f1b(2, m, 2, microbatch_group_size=n)
        assert n == 2 or grouped.stage_orders != interleaved_1f1b(2, 2 * (m // 2), 2).stage_orders
        with caplog.at_level(logging.WARNING, logger=observed_schedule.__name__):
            assert observed_schedule.schedule_of(infos_of(grouped)).stage_orders == grouped.stage_orders
    assert "differs from textbook" not in caplog.text
    # An order Megatron-core never runs is planned as observed, with a warning.
    default = interleaved_1f1b(2, 4, 2)
    odd = [
        default.stage_orders[0],
        (default.stage_orders[1][1], default.stage_orders[1][0], *default.stage_orders[1][2:]),
    ]
    with caplog.at_level(logging.WARNING, logger=observed_schedule.__name__):
        assert observed_schedule.schedule_of(infos_of(default, odd)).stage_orders == tuple(odd)
    assert "differs from textbook interleaved-1f1b" in caplog.text
