"""Interleaved 1F1B and split-backward schedules: orders, DAGs, planning, plans, one-point planning."""

from __future__ import annotations

import numpy as np
import pytest

from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.pipeline_frequency import FrequencyPlan, PipelineDAG, plan_at_time, plan_frontier
from zeus_core.optimizer.pipeline_frequency._schedule import (
    SPLIT_BACKWARD,
    InstructionKind,
    PipelineSchedule,
    interleaved_1f1b,
    make_schedule,
    synchronous_1f1b,
    zero_bubble_1f1b,
)
from zeus_core.testing import physical_instruction_profile


def test_interleaved_order_follows_megatron() -> None:
    sched = interleaved_1f1b(4, 8, 2)
    assert sched.num_instructions == 2 * 4 * 8 * 2 and sched.num_chunks == 2
    # The last stage warms up with (C - 1)·S forwards, then alternates; backwards run chunks in reverse.
    assert " ".join(i.short_name for i in sched.stage_orders[3][:8]) == "F0 F1 F2 F3 F0c1 B0c1 F1c1 B1c1"
    # Stage 0 warms up with 2(S - 1) + (C - 1)·S forwards.
    assert all(i.kind is InstructionKind.FORWARD for i in sched.stage_orders[0][:10])
    assert (
        sched.stage_orders[0][10].kind is InstructionKind.FORWARD
        and sched.stage_orders[0][11].short_name == "B0c1"
    )
    # Virtual stage c·S + s: forward flows 3 -> 4 (stage 3 chunk 0 -> stage 0 chunk 1).
    assert sched.virtual_stage(3, 0) == 3 and sched.virtual_stage(0, 1) == 4
    deps = set(sched.data_dependencies())
    f = InstructionKind.FORWARD
    from zeus_core.optimizer.pipeline_frequency import Instruction

    assert (Instruction(3, f, 5, 0), Instruction(0, f, 5, 1)) in deps
    PipelineDAG(sched)  # no deadlock


def test_zero_bubble_splits_the_backward_and_shortens_the_iteration() -> None:
    zb = zero_bubble_1f1b(4, 8)
    assert zb.kinds == SPLIT_BACKWARD and zb.num_instructions == 3 * 4 * 8
    for order in zb.stage_orders:
        pos = {i: n for n, i in enumerate(order)}
        for i in order:  # every weight gradient follows its input gradient on the same stage
            if i.kind is InstructionKind.BACKWARD_WEIGHT:
                assert pos[i] > pos[type(i)(i.stage, InstructionKind.BACKWARD_INPUT, i.microbatch)]
    one = PipelineDAG(synchronous_1f1b(4, 8))
    t_1f1b = one.longest_path([1.0 if i.kind is InstructionKind.FORWARD else 2.0 for i in one.instructions])
    split = PipelineDAG(zb)
    assert split.longest_path([1.0] * split.num_nodes) <= t_1f1b  # never longer than 1F1B
    # Gradients travel back after the input half alone: a slow weight half does not delay stage 0.
    slow_w = [3.0 if i.kind is InstructionKind.BACKWARD_WEIGHT else 1.0 for i in split.instructions]
    first_i = split.index[type(zb.stage_orders[0][0])(0, InstructionKind.BACKWARD_INPUT, 0)]
    assert split.start_times(slow_w)[first_i] == split.start_times([1.0] * split.num_nodes)[first_i]


@pytest.mark.parametrize("sched", [interleaved_1f1b(3, 6, 2), zero_bubble_1f1b(3, 6)], ids=lambda s: s.name)
def test_new_schedules_plan_and_round_trip(sched: PipelineSchedule) -> None:
    profile = physical_instruction_profile("a100", 3, seed=4)
    fr = plan_frontier(sched, profile)
    base, fast = fr.max_frequency_plan(), fr.zero_slowdown_plan()
    assert fast.iteration_time_s <= base.iteration_time_s * (1 + 1e-9) and fast.energy_j < base.energy_j
    back = FrequencyPlan.from_json(fast.to_json())
    assert back == fast and back.kinds == sched.kinds and back.num_chunks == sched.num_chunks
    fast.check_matches(sched)
    # One target time without the whole frontier: the same plan quality.
    point = plan_at_time(sched, profile)
    assert point.iteration_time_s <= base.iteration_time_s * (1 + 1e-9)
    assert point.energy_j == pytest.approx(fast.energy_j, rel=5e-3)
    assert point.metadata["baseline"]["energy_j"] == pytest.approx(base.energy_j)


def test_schedule_builder_errors() -> None:
    with pytest.raises(ZeusConfigError, match="multiple of the stages"):
        interleaved_1f1b(4, 6, 2)
    with pytest.raises(ZeusConfigError, match="one model chunk per stage"):
        make_schedule("1f1b", 2, 4, num_chunks=2)
    assert make_schedule("interleaved-1f1b", 2, 4, 2).num_chunks == 2
    with pytest.raises(ZeusConfigError, match="virtual_stages"):
        PipelineSchedule("x", 2, 1, synchronous_1f1b(2, 1).stage_orders, virtual_stages=((0,), (0,)))


def test_plan_at_time_meets_a_deadline() -> None:
    sched, profile = interleaved_1f1b(2, 4, 2), physical_instruction_profile("a40", 2)
    base = plan_at_time(sched, profile)
    deadline = 1.1 * base.metadata["baseline"]["iteration_time_s"]
    plan = plan_at_time(sched, profile, deadline)
    assert plan.label == "deadline" and plan.iteration_time_s <= deadline * (1 + 1e-9)
    assert plan.energy_j < base.energy_j
    assert np.isfinite(plan.metadata["timing"]["lp_s"])


def test_interleaved_microbatch_groups_follow_megatron() -> None:
    # Megatron-core's microbatch_group_size_per_vp_stage N: groups of N microbatches per chunk, and
    # (C - 1)·N warm-up forwards on top of 2(S - s - 1). Default N = S.
    assert interleaved_1f1b(2, 4, 2, microbatch_group_size=2) == interleaved_1f1b(2, 4, 2)
    sched = interleaved_1f1b(2, 5, 2, microbatch_group_size=3)
    assert sched.num_microbatches == 5 and sched.num_instructions == 2 * 2 * 5 * 2
    last = " ".join(i.short_name for i in sched.stage_orders[1])
    assert last == "F0 F1 F2 F0c1 B0c1 F1c1 B1c1 F2c1 B2c1 F3 B0 F4 B1 F3c1 B2 F4c1 B3c1 B4c1 B3 B4"
    first = " ".join(i.short_name for i in sched.stage_orders[0][:8])
    assert first == "F0 F1 F2 F0c1 F1c1 F2c1 B0c1 F3"
    PipelineDAG(sched)  # raises if this order deadlocks (a dependency cycle)
    for bad in (1, 6):  # N outside [S, M]
        with pytest.raises(ZeusConfigError, match="group size"):
            interleaved_1f1b(2, 5, 2, microbatch_group_size=bad)
    with pytest.raises(ZeusConfigError, match="remainder"):
        interleaved_1f1b(3, 7, 2, microbatch_group_size=3)  # 7 mod 3 = 1 < S: Megatron rejects it
