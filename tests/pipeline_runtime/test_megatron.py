"""Perseus on Megatron-core's 1F1B schedule, for real: 2 gloo processes with a test-only CUDA shim.

The run profiles two clocks, plans on rank 0, broadcasts, and applies; a forward-only call after
training is not treated as an iteration.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from statistics import mean

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
