"""Perseus on DeepSpeed's PipelineEngine, for real: 2 gloo processes, simulated A40s, a given plan."""

from __future__ import annotations

import importlib.util
from pathlib import Path

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

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("deepspeed") is None,
        reason="needs DeepSpeed: pip install 'zeus-suite[pipeline]'",
    ),
]


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("deepspeed_pipeline")
    run_two_ranks("deepspeed_pipeline.py", folder)
    return folder


@pytest.mark.parametrize("rank", [0, 1])
def test_every_instruction_gets_its_planned_clock(out: Path, rank: int) -> None:
    rep = report(out, "deepspeed", rank)
    assert rep["stage"] == rank and rep["plan"] == rep["given_plan"]
    its = rep["iterations"]
    assert [i["phase"] for i in its] == [
        "discovering",
        "applying",
        "applying",
    ]  # eval_batch is not an iteration
    for it in its:  # DeepSpeed's TrainSchedule is synchronous 1F1B; microbatches counted per type
        assert sequence(it) == textbook("1f1b", rank)
    assert clocks(its[0]) == [None] * 8
    for it in its[1:]:
        want = planned(rep["given_plan"], rank, it)
        assert clocks(it) == want and len(set(want)) == 8
    check_changes(rep)
    # Between iterations (here: eval_batch's forwards) the GPU runs at its highest clock.
    assert rep["work_clocks"][-4:] == [1740] * 4
