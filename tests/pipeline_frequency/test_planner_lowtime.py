"""The benchmark's quick mode: our planner against lowtime 0.3.0 on identical inputs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "perseus_planner.py"


def _load_benchmark():
    spec = importlib.util.spec_from_file_location("perseus_planner_benchmark", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


@pytest.mark.slow
def test_quick_benchmark_agrees_with_lowtime(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("lowtime")
    pytest.importorskip("scipy")
    bench = _load_benchmark()
    rows, ext = bench.run_benchmark(["a100"], bench.QUICK_SIZES, unit=1e-3, cap=300.0)
    bench.print_tables(rows, 300.0, ext)
    table = capsys.readouterr().out
    assert "| A100 | 4×8 |" in table and "Extrinsic bloat" in table
    for row in rows:
        assert not row["lt_capped"]
        # Same quantised range: both planners walk from the same slowest to the same fastest time.
        assert row["ours_tmin_q"] == row["lt_tmin_q"]
        assert row["ours_points"] == row["lt_points"]
        # The same frontier: energy at the shortest time within 0.5% of lowtime's, and never slower.
        assert abs(row["ours_e_tmin"] / row["lt_e_tmin"] - 1) <= 0.005
        assert row["ours_slow"] <= 1e-9
        assert row["ours_e_min"] <= row["lt_e_min"] * 1.005
        assert row["ours_s"] < row["lt_s"]
    for _, _, _, e in ext:
        assert e["e_plan"] < e["e_zero"] < e["e_base"]


def test_benchmark_cli_without_lowtime(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _load_benchmark()
    assert bench.main(["--sizes", "2x3", "--gpus", "a40", "--no-lowtime"]) == 0
    out = capsys.readouterr().out
    assert "| A40 | 2×3 |" in out and "—" in out
