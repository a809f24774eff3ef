"""Schedules as data and the iteration DAG built from them."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.pipeline_frequency import (
    Instruction,
    InstructionKind,
    PipelineDAG,
    PipelineSchedule,
    gpipe,
    make_schedule,
    synchronous_1f1b,
)

F, B = InstructionKind.FORWARD, InstructionKind.BACKWARD

# The 1F1B order for S=4, M=8 as listed in shared/reference/perseus-lowtime.md (lowtime's output).
ONE_F_ONE_B_4X8 = """\
stage 0: F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7
stage 1: F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7
stage 2: F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7
stage 3: F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"""


def test_1f1b_order_matches_the_reference_listing() -> None:
    assert synchronous_1f1b(4, 8).to_text() == ONE_F_ONE_B_4X8


@pytest.mark.parametrize("stages, mbs", [(1, 1), (2, 1), (3, 2), (4, 8), (5, 3), (8, 16)])
def test_1f1b_order_matches_lowtime(stages: int, mbs: int) -> None:
    schedule_mod = pytest.importorskip("lowtime.perseus.schedule")
    from lowtime.operation import CandidateExecutionOptions, ExecutionOption, OperationSpec
    from lowtime.perseus.instruction import Backward, Forward

    spec = OperationSpec(CandidateExecutionOptions([ExecutionOption(1.0, 1.0, 1.0, 0)]), cost_model=None)
    ours = synchronous_1f1b(stages, mbs)
    for s in range(stages):
        ref = schedule_mod.Synchronous1F1B(stages, mbs, s, {Forward: spec, Backward: spec})
        theirs = [("F" if isinstance(i, Forward) else "B") + str(i.micro_batch_id) for i in ref]
        assert [i.short_name for i in ours.stage_orders[s]] == theirs


def test_gpipe_runs_all_forwards_then_all_backwards() -> None:
    sched = gpipe(3, 4)
    for order in sched.stage_orders:
        assert [i.short_name for i in order] == ["F0", "F1", "F2", "F3", "B0", "B1", "B2", "B3"]
    assert make_schedule("GPipe", 3, 4) == sched


def test_dag_size_matches_the_reference_formula() -> None:
    # Program order S(2M-1) plus cross-stage 2M(S-1); 4x8 gives 108 (110 with lowtime's source/sink).
    for s, m in [(4, 8), (3, 5), (1, 4)]:
        dag = PipelineDAG(synchronous_1f1b(s, m))
        assert dag.num_nodes == 2 * s * m
        assert dag.graph.number_of_edges() == s * (2 * m - 1) + 2 * m * (s - 1)
        assert list(dag.sources) == [dag.index[Instruction(0, F, 0)]]
        assert list(dag.sinks) == [dag.index[Instruction(0, B, m - 1)]]


@pytest.mark.parametrize("builder", [synchronous_1f1b, gpipe])
def test_dag_is_topologically_ordered_and_longest_path_matches_networkx(builder) -> None:
    dag = PipelineDAG(builder(4, 6))
    assert np.all(dag.edge_src < dag.edge_dst)
    rng = np.random.default_rng(3)
    durations = rng.uniform(0.5, 3.0, dag.num_nodes)
    g = nx.DiGraph()
    for inst in dag.instructions:  # node-weighted longest path via edge weights into each node
        g.add_edge("start", inst, w=durations[dag.index[inst]])
    for a, b in dag.graph.edges:
        g.add_edge(a, b, w=durations[dag.index[b]])
    assert dag.longest_path(durations) == pytest.approx(nx.dag_longest_path_length(g, weight="w"))
    ef = dag.earliest_finish(durations)
    lf = dag.latest_finish(durations, ef.max())
    assert np.all(lf >= ef - 1e-12)
    crit = np.isclose(lf, ef)
    assert crit[dag.sources].all() and crit[dag.sinks].all()


def test_integer_durations_stay_integer() -> None:
    dag = PipelineDAG(synchronous_1f1b(2, 2))
    ef = dag.earliest_finish(np.arange(1, 9, dtype=np.int64))
    assert ef.dtype == np.int64
    assert dag.latest_finish(np.ones(8, dtype=np.int64), 6).tolist() == [1, 3, 2, 3, 5, 4, 5, 6]


def test_interleaved_chunks_get_virtual_stage_dependencies() -> None:
    # 2 stages x 2 chunks = 4 virtual stages, 1 microbatch, orders written by hand.
    i = Instruction
    orders = (
        (i(0, F, 0, 0), i(0, F, 0, 1), i(0, B, 0, 1), i(0, B, 0, 0)),
        (i(1, F, 0, 0), i(1, F, 0, 1), i(1, B, 0, 1), i(1, B, 0, 0)),
    )
    sched = PipelineSchedule("interleaved", 2, 1, orders, num_chunks=2)
    deps = set(sched.data_dependencies())
    assert (i(1, F, 0, 0), i(0, F, 0, 1)) in deps  # virtual stage 1 -> 2 crosses back to stage 0
    assert (i(1, F, 0, 1), i(1, B, 0, 1)) in deps  # last virtual stage turns around
    assert (i(0, B, 0, 1), i(1, B, 0, 0)) in deps
    dag = PipelineDAG(sched)
    assert dag.longest_path(np.ones(8)) == 8.0  # the chain F v0..v3, B v3..v0


def test_bad_schedules_are_rejected_with_the_reason() -> None:
    good = synchronous_1f1b(2, 2)
    with pytest.raises(ZeusConfigError, match="listed twice"):
        PipelineSchedule("dup", 2, 2, (good.stage_orders[0] + good.stage_orders[0][:1], good.stage_orders[1]))
    with pytest.raises(ZeusConfigError, match="missing"):
        PipelineSchedule("short", 2, 2, (good.stage_orders[0][:-1], good.stage_orders[1]))
    with pytest.raises(ZeusConfigError, match="listed in stage 0"):
        PipelineSchedule("swap", 2, 2, (good.stage_orders[1], good.stage_orders[0]))
    with pytest.raises(ZeusConfigError, match="Unknown pipeline schedule 'zb'"):
        make_schedule("zb", 2, 2)
    with pytest.raises(ZeusConfigError, match=">= 1"):
        synchronous_1f1b(0, 2)


def test_deadlocking_schedule_names_the_cycle() -> None:
    # The last stage runs B0 before F0: B0 waits for F0, which waits for B0 in program order.
    i = Instruction
    orders = ((i(0, F, 0), i(0, B, 0)), (i(1, B, 0), i(1, F, 0)))
    with pytest.raises(ZeusConfigError, match="deadlocks.*stage1:B0"):
        PipelineDAG(PipelineSchedule("bad", 2, 1, orders))
