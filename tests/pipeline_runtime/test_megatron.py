"""Perseus on Megatron-core's 1F1B and interleaved schedules, for real: 2 gloo processes, CPU shims.

Each run profiles two clocks, plans on rank 0, broadcasts, and applies; a forward-only call after
training is not treated as an iteration. The interleaved run has 2 model chunks per rank
(``virtual_pipeline_model_parallel_size=2``), virtual stages 1 and 3 doing twice the work of 0 and 2.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from statistics import mean
from typing import Any

import pytest

from tests.pipeline_runtime._helpers import (
    check_changes,
    clocks,
    planned,
    report,
    run_two_ranks,
    sequence,
    textbook,
)
from zeus_core.optimizer.pipeline_frequency import interleaved_1f1b

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("megatron") is None,
        reason="needs megatron-core: pip install 'zeus-suite[pipeline]'",
    ),
]


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("megatron_pipeline")
    run_two_ranks("megatron_pipeline.py", folder)
    return folder


@pytest.mark.parametrize("rank", [0, 1])
def test_profile_plan_apply_with_exact_sequences(out: Path, rank: int) -> None:
    rep = report(out, "megatron", rank)
    its = rep["iterations"]
    assert rep["stage"] == rank
    assert [i["phase"] for i in its] == ["discovering", "profiling", "profiling", "applying", "applying"]
    for it in its:
        assert sequence(it) == textbook("1f1b", rank)
    assert clocks(its[1]) == [1740] * 8 and clocks(its[2]) == [1140] * 8
    for it in its[3:]:
        assert clocks(it) == planned(rep["plan"], rank, it)
    check_changes(rep)


def test_plan_is_shared_and_slows_the_light_stage(out: Path) -> None:
    r0, r1 = report(out, "megatron", 0), report(out, "megatron", 1)
    assert r0["plan"] == r1["plan"]
    rows = {row["stage"]: row["forward"] + row["backward"] for row in r0["plan"]["frequencies_mhz"]}
    assert mean(rows[0]) < mean(rows[1])


def _chunk_sequence(it: dict[str, Any], rank: int) -> list[str]:
    """``["F0", "F1", "F0c1", ...]``: chunk c of rank r is virtual stage 2c + r."""
    return [
        f"{kind[0].upper()}{mb}" + (f"c{(v - rank) // 2}" if v != rank else "")
        for kind, mb, _, v in it["instructions"]
    ]


@pytest.mark.parametrize("rank", [0, 1])
def test_interleaved_profile_plan_apply_per_chunk(out: Path, rank: int) -> None:
    rep = report(out, "megatron-interleaved", rank)
    its = rep["iterations"]
    assert [i["phase"] for i in its] == ["discovering", "profiling", "profiling", "applying", "applying"]
    # The hook names every instruction's chunk and microbatch, backwards included, in exactly the
    # order the planner's interleaved DAG assumes (Megatron-core's), so plans fit the run.
    order = [i.short_name for i in interleaved_1f1b(2, 4, 2).stage_orders[rank]]
    for it in its:
        assert _chunk_sequence(it, rank) == order
    assert clocks(its[1]) == [1740] * 16 and clocks(its[2]) == [1140] * 16
    plan = rep["plan"]
    assert plan["schedule"] == "interleaved-1f1b" and plan["num_chunks"] == 2 and plan["num_stages"] == 2
    rows = {(r["stage"], r["chunk"]): r for r in plan["frequencies_mhz"]}
    for it in its[3:]:
        assert clocks(it) == [rows[(rank, (v - rank) // 2)][k][mb] for k, mb, _, v in it["instructions"]]
    # The simulated GPU ran each chunk's forward and backward at the planned clock. Clocks are set
    # by the controller's worker thread, so an instruction may start a moment before its clock lands.
    for chunk, seen in enumerate(rep["work_clocks"]):
        assert len(seen) == 5 * 8 + 4  # 5 training iterations of 4 F + 4 B, then a forward-only call
        ran = [mhz for k, mb, mhz, v in its[-1]["instructions"] if v == 2 * chunk + rank]
        assert sum(a == b for a, b in zip(seen[32:40], ran)) >= 6, (seen[32:40], ran)
    check_changes(rep)


def test_interleaved_plan_slows_the_light_chunks(out: Path) -> None:
    r0, r1 = report(out, "megatron-interleaved", 0), report(out, "megatron-interleaved", 1)
    assert r0["plan"] == r1["plan"]
    rows = {(r["stage"], r["chunk"]): r["forward"] + r["backward"] for r in r0["plan"]["frequencies_mhz"]}
    assert mean(rows[(0, 0)] + rows[(0, 1)]) < mean(rows[(1, 0)] + rows[(1, 1)])


@pytest.mark.parametrize("rank", [0, 1])
def test_interleaved_order_with_tuned_microbatch_groups_is_the_planners(out: Path, rank: int) -> None:
    # microbatch_group_size_per_vp_stage=3 with 5 microbatches: groups {0,1,2} and {3,4} per chunk
    # (megatron-core without the knob, e.g. 0.9: its fixed groups of 2 with 4 microbatches).
    rep = report(out, "megatron-grouped", rank)
    assert rep["schedule"] == "interleaved-1f1b"
    seen = _chunk_sequence({"instructions": [[k, mb, None, v] for k, mb, v in rep["order"]]}, rank)
    expected = interleaved_1f1b(2, rep["microbatches"], 2, microbatch_group_size=rep["group"])
    assert seen == [i.short_name for i in expected.stage_orders[rank]]
