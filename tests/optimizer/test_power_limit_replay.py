"""The replay benchmark in quick mode: the issue's targets hold on every measured A40 profile."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT


@pytest.fixture(scope="module")
def replay():
    path = REPO_ROOT / "benchmarks" / "power_limit_replay.py"
    spec = importlib.util.spec_from_file_location("power_limit_replay", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def assert_targets(replay, cases) -> None:
    """The issue's targets on one table (24 cases)."""
    assert len(cases) == 6 * 4
    # Target 1: the optimal limit, or one within 1 % of its cost, in every case. Contenders still tied
    # after profile_steps are measured on (up to max_refine_steps) until told apart or known to be
    # within tie_tol (0.5 %) of each other; over seeds 0-99 this misses 2 of 2400 cases (both
    # survey verdicts wrong at 95 % confidence, one also missed by the exhaustive sweep), Zeus's sweep 6.
    assert [(c.profile, c.selector, c.early.chosen_w, c.early.excess) for c in cases if not c.early.ok] == []
    # Target 2: at most half of the exhaustive sweep's extra profiling energy, summed over all cases.
    summary = replay.summarize(cases)
    assert summary["energy_ratio"] <= 0.5, summary
    assert summary["early_steps"] < summary["zeus_steps"]


def test_quick_mode_prints_the_table_and_meets_the_targets(replay, shared_data: Path, capsys) -> None:
    data = shared_data / "power_limit_profiles"
    assert replay.main(["--quick", "--data", str(data)]) == 0
    out = capsys.readouterr().out
    assert "Zeus sweep: W" in out and "early stop: W" in out and "A40_bert-base-uncased_1gpu" in out
    within = r"Within 1 % of the optimum: early stop 24/24 \(worst \d\.\d\d% off\), Zeus sweep"
    assert re.search(within, out)

    cases = replay.run_all(0.03, 0, data)
    assert_targets(replay, cases)
    # The baseline really is Zeus's sweep: 9 limits × (10 warm-up + 40 measured) + 1 wait step.
    assert {c.zeus.steps for c in cases} == {451} and {c.zeus.limits for c in cases} == {9}


def test_another_seed_also_meets_the_targets(replay, shared_data: Path) -> None:
    assert_targets(replay, replay.run_all(0.03, 7, shared_data / "power_limit_profiles"))


def test_one_sample_per_step_is_the_per_step_profiler(replay, shared_data: Path) -> None:
    """min_sample_s=0 reads after every step: samples change nothing where steps are long."""
    data = shared_data / "power_limit_profiles" / "A40_bert-base-uncased_1gpu.csv"  # 0.26 s steps
    for label in replay.SELECTORS:
        assert replay.run_case(data, label) == replay.run_case(data, label, min_sample_s=0.0)
