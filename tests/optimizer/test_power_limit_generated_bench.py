"""``benchmarks/power_limit_generated.py``: seeds run apart and pooled; the informed reference beside ours."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytest.importorskip("zeus", reason="the benchmark runs zeus==0.16.0 beside ours (the dev extra)")


def _hook_tables():
    path = REPO_ROOT / "docs" / "_hooks" / "benchmark_tables.py"
    spec = importlib.util.spec_from_file_location("docs_hook_tables_for_plo", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_two_seeds_are_run_apart_and_pooled(tmp_path: Path) -> None:
    out = tmp_path / "generated.json"
    # A process of its own: the bench binds published zeus to a fake NVML and a virtual clock for good.
    env = {**os.environ, "ZEUS_SUITE_RUN_DIR": str(tmp_path / "run"), "PYTHONPATH": str(REPO_ROOT)}
    script = REPO_ROOT / "benchmarks" / "power_limit_generated.py"
    args = ["--profiles", "1", "--seeds", "2", "--seed", "3", "--epochs", "32", "--a40", str(tmp_path / "x")]
    done = subprocess.run(
        [sys.executable, str(script), *args, "--json", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "seed 3:" in done.stdout and "seed 4:" in done.stdout  # each seed's figure is printed
    results = json.loads(out.read_text())["results"]
    assert results["seeds"] == [3, 4]
    per_seed = results["generated_per_seed"]
    assert sorted(per_seed) == ["3", "4"]
    # 1 profile × 4 selectors × 2 noise levels × 1 epoch length per seed, pooled into one table.
    assert [per_seed[s]["cases"] for s in ("3", "4")] == [8, 8]
    pooled = results["generated"]["all"]
    assert pooled["cases"] == 16
    assert pooled["ours_ok"] == pytest.approx((per_seed["3"]["ours_ok"] + per_seed["4"]["ours_ok"]) / 2)
    assert all(m["seed"] in (3, 4) for m in results["misses"])
    text = _hook_tables().plo_generated(results)
    assert "for each of 2 seeds" in text and "(seed 3)" in text and "(seed 4)" in text
    assert "informed_ok" in pooled and all("informed_ok" in per_seed[s] for s in ("3", "4"))
    assert "Informed:" in text
    # The noise floor replays the same grid: its informed reference must miss exactly what this one did.
    from benchmarks import power_limit_noise_floor

    floor_json = tmp_path / "floor.json"
    assert power_limit_noise_floor.main(["--results", str(out), "--json", str(floor_json)]) == 0
    floor = json.loads(floor_json.read_text())["results"]
    assert floor["cases"] == 16 and floor["allowed_misses"] == 0
    ours_missed = round(16 * (1 - pooled["ours_ok"]))
    assert sum(row["ours"] for row in floor["rows"]) == ours_missed
    assert [row["ideal"] is None for row in floor["rows"]] == [True, True, True, False]


def _truth_and_draws(workload, counts: dict[float, int]):
    truth = {w: (t, t * p) for w, (t, p) in ((w, workload.step(w)) for w in workload.gpu.limits())}

    def draw(limit: float) -> tuple[float, float]:
        counts[limit] = counts.get(limit, 0) + 1
        return workload.step(limit)

    return truth, draw


@pytest.mark.parametrize("label", ["Time", "Energy", "ZeusCost(0.5)", "MaxSlowdown(1.1)"])
def test_informed_reference_looks_only_around_the_optimum_within_the_budget(label: str) -> None:
    from benchmarks.power_limit_common import informed_choice, optimal
    from zeus_core.testing import generate

    for workload in generate(8, seed=5):
        counts: dict[float, int] = {}
        truth, draw = _truth_and_draws(workload, counts)
        limits = sorted(truth, reverse=True)
        budget = 1 + 50 * len(limits)
        best = optimal(label, truth)
        # Without noise its measurements are the truth, so it finds the optimum...
        assert informed_choice(label, truth, draw, budget) == best
        # ... having measured only the optimum, its neighbours and (for the bound) the highest limit.
        i = limits.index(best)
        allowed = set(limits[max(0, i - 1) : i + 2]) | ({limits[0]} if label.startswith("Max") else set())
        assert set(counts) <= allowed and best in counts
        assert sum(counts.values()) <= budget - 1


def test_informed_reference_chooses_from_what_it_measured() -> None:
    from benchmarks.power_limit_common import informed_choice, optimal
    from zeus_core.testing import generate

    workload = generate(1, seed=2)[0]
    truth, _ = _truth_and_draws(workload, {})
    best = optimal("Time", truth)

    def slow_at_best(limit: float) -> tuple[float, float]:
        t, p = workload.step(limit)
        return (t * 1.2, p) if limit == best else (t, p)  # a draw that misleads it about the optimum

    assert informed_choice("Time", truth, slow_at_best, 1 + 50 * len(truth)) != best


def test_ideal_reference_measures_only_the_optimum_and_the_highest_limit() -> None:
    from benchmarks.power_limit_common import ideal_slowdown_choice, optimal
    from zeus_core.testing import generate

    for workload in generate(8, seed=5):
        counts: dict[float, int] = {}
        truth, draw = _truth_and_draws(workload, counts)
        budget = 1 + 50 * len(truth)
        best = optimal("MaxSlowdown(1.1)", truth)
        assert ideal_slowdown_choice(truth, draw, budget) == best  # without noise: the optimum
        assert set(counts) <= {max(truth), best} and sum(counts.values()) <= budget - 1


def test_ideal_reference_falls_back_to_the_next_higher_limit() -> None:
    from benchmarks.power_limit_common import ideal_slowdown_choice, optimal
    from zeus_core.testing import generate

    checked = 0
    for workload in generate(8, seed=5):
        truth, _ = _truth_and_draws(workload, {})
        best = optimal("MaxSlowdown(1.1)", truth)
        limits = sorted(truth, reverse=True)
        if best == limits[0]:
            continue
        checked += 1

        def slow_at_best(limit: float) -> tuple[float, float]:
            t, p = workload.step(limit)
            return (t * 1.2, p) if limit == best else (t, p)  # measured beyond the bound

        next_higher = limits[limits.index(best) - 1]
        assert ideal_slowdown_choice(truth, slow_at_best, 1 + 50 * len(truth)) == next_higher
    assert checked >= 4


def test_noise_floor_counts_each_choice_once_per_epoch_length() -> None:
    from benchmarks.power_limit_noise_floor import floor

    rows = floor(profiles=2, seeds=[1], epochs=3)
    assert list(rows) == ["Time", "Energy", "ZeusCost(0.5)", "MaxSlowdown(1.1)"]
    for label, row in rows.items():
        assert row["cases"] == 2 * 2 * 3  # profiles × noise levels × epoch lengths
        assert row["informed"] % 3 == 0 and row["ideal"] % 3 == 0
        assert row["informed"] <= row["cases"] // 2  # the noise-free half is always right
        if not label.startswith("Max"):
            assert row["ideal"] == 0
