"""``zeus-suite plan``: outputs, numbers, and errors."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from zeus_core._cli import main
from zeus_core.optimizer.pipeline_frequency import FrequencyPlan
from zeus_core.testing import physical_instruction_profile


@pytest.fixture
def profile_csv(tmp_path: Path) -> Path:
    path = tmp_path / "profile.csv"
    physical_instruction_profile("a100", 3, seed=5).to_csv(path)
    return path


def test_plan_writes_frontier_plans_and_plots(tmp_path: Path, profile_csv: Path, capsys) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "out"
    code = main(
        [
            "plan",
            "--profile",
            str(profile_csv),
            "--stages",
            "3",
            "--microbatches",
            "5",
            "--blocking-power",
            "80",
            "--deadline",
            "0.6",
            "--out",
            str(out),
            "--simulated",
            "--all-plans",
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "[SIMULATED profile]" in text and "zero-slowdown" in text and "deadline" in text
    for name in (
        "frontier.csv",
        "frontier.png",
        "timeline.png",
        "summary.json",
        "pareto_plans.jsonl",
        "plan_zero_slowdown.json",
        "plan_least_energy.json",
        "plan_max_frequency.json",
        "plan_deadline.json",
    ):
        assert (out / name).stat().st_size > 0, name
    summary = json.loads((out / "summary.json").read_text())
    plans = summary["plans"]
    assert plans["zero_slowdown"]["slowdown_vs_max_frequency"] <= 1e-9
    assert plans["zero_slowdown"]["saving_vs_max_frequency"] > 0.03
    assert plans["deadline"]["iteration_time_s"] <= 0.6
    zs = FrequencyPlan.load(out / "plan_zero_slowdown.json")
    assert zs.energy_j == pytest.approx(plans["zero_slowdown"]["energy_j"]) and zs.simulated
    with (out / "frontier.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == summary["frontier_points"]
    assert sum(int(r["pareto"]) for r in rows) == summary["pareto_points"]
    lines = (out / "pareto_plans.jsonl").read_text().splitlines()
    assert len(lines) == summary["pareto_points"]
    assert FrequencyPlan.from_json(lines[0]).num_microbatches == 5
    # The printed table shows the same numbers as the JSON.
    assert f"{plans['zero_slowdown']['energy_j']:.1f}" in text


def test_plan_infers_stages_and_skips_plots(tmp_path: Path, profile_csv: Path) -> None:
    out = tmp_path / "o"
    assert (
        main(
            [
                "plan",
                "--profile",
                str(profile_csv),
                "--microbatches",
                "3",
                "--out",
                str(out),
                "--no-plots",
                "--schedule",
                "gpipe",
                "--rounding",
                "ceil",
            ]
        )
        == 0
    )
    summary = json.loads((out / "summary.json").read_text())
    # The profile's metadata JSON (written beside the CSV) carries the simulated flag and blocking power.
    assert summary["stages"] == 3 and summary["schedule"] == "gpipe" and summary["simulated"]
    assert (
        summary["blocking_power_w"] == 80.0 and summary["blocking_power_source"] == "measured while profiling"
    )
    assert not (out / "frontier.png").exists()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--stages", "4"], "missing"),
        (["--schedule", "zigzag"], "Unknown pipeline schedule"),
        (["--deadline", "0.001"], "needs at least"),
        (["--unit-time", "0"], "argument --unit-time: '0' is out of range"),  # argparse (issue 30)
    ],
)
def test_plan_reports_bad_input(
    tmp_path: Path, profile_csv: Path, capsys, extra: list[str], message: str
) -> None:
    argv = [
        "plan",
        "--profile",
        str(profile_csv),
        "--microbatches",
        "2",
        "--out",
        str(tmp_path),
        "--no-plots",
    ]
    try:
        code = main([*argv, *extra])
    except SystemExit as exc:  # a flag's value refused by argparse (issue 30)
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_plan_reports_a_malformed_profile(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("stage,instruction,frequency,time,energy\n0,forward,x,1,1\n")
    assert (
        main(["plan", "--profile", str(bad), "--microbatches", "2", "--no-plots", "--out", str(tmp_path)])
        == 2
    )
    assert "bad.csv:2: cannot parse" in capsys.readouterr().err


def test_entry_point_runs_as_a_module(tmp_path: Path, profile_csv: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "zeus_core._cli",
            "plan",
            "--profile",
            str(profile_csv),
            "--microbatches",
            "2",
            "--no-plots",
            "--out",
            str(tmp_path / "m"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Perseus plan: 1f1b 3 stages x 2 microbatches" in proc.stdout
