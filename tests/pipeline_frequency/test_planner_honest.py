"""Honest planner outputs.

Blocking power is never a silent 0 W, frontier.csv has real figures, and a deadline plan is never
worse than a frontier point that meets the deadline.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from zeus_core._cli import main
from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.pipeline_frequency import InstructionProfile, plan_frontier, synchronous_1f1b
from zeus_core.optimizer.pipeline_frequency.planner._blocking_power import (
    idle_power_w,
    resolve_blocking_power,
)
from zeus_core.testing import physical_instruction_profile


def _bare_csv(tmp_path: Path) -> Path:
    """A profile CSV without its metadata JSON (as a user might hand-write or copy it)."""
    path = tmp_path / "bare.csv"
    path.write_text(physical_instruction_profile("a100", 3, seed=5).to_csv_text())
    return path


def _plan(tmp_path: Path, profile: Path, *extra: str) -> int:
    return main(
        [
            "plan",
            "--profile",
            str(profile),
            "--microbatches",
            "4",
            "--no-plots",
            "--out",
            str(tmp_path / "o"),
            *extra,
        ]
    )


def test_unknown_blocking_power_is_an_error_naming_the_fixes(tmp_path: Path, capsys) -> None:
    assert _plan(tmp_path, _bare_csv(tmp_path)) == 2
    err = capsys.readouterr().err
    assert "blocking (idle) power is unknown" in err and "--blocking-power" in err and "--gpu" in err


def test_gpu_name_gives_its_documented_idle_power(tmp_path: Path, capsys) -> None:
    assert _plan(tmp_path, _bare_csv(tmp_path), "--gpu", "a100") == 0
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["blocking_power_w"] == idle_power_w("a100") == 70.0
    assert "documented idle power" in summary["blocking_power_source"]
    assert "70 W (documented idle power of a100)" in capsys.readouterr().out


def test_given_blocking_power_wins_over_the_measured_one(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    physical_instruction_profile("a100", 3, seed=5).to_csv(path)  # metadata says 80 W
    assert _plan(tmp_path, path, "--blocking-power", "55") == 0
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["blocking_power_w"] == 55.0 and summary["blocking_power_source"] == "given"


def test_blocking_power_changes_the_reported_savings(tmp_path: Path) -> None:
    """Charging idle time changes the figures: 0 W (the old silent default) is not the same plan."""
    path = tmp_path / "p.csv"
    physical_instruction_profile("a100", 3, seed=5).to_csv(path)
    savings = {}
    for watts in ("0", "80"):
        assert _plan(tmp_path, path, "--blocking-power", watts) == 0
        summary = json.loads((tmp_path / "o" / "summary.json").read_text())
        savings[watts] = summary["plans"]["zero_slowdown"]["saving_vs_max_frequency"]
    assert savings["80"] != pytest.approx(savings["0"], rel=1e-3)


def test_resolution_order_and_bad_values() -> None:
    assert resolve_blocking_power(None, 61.5, "NVIDIA A100") == (61.5, "measured while profiling")
    assert resolve_blocking_power(None, None, "NVIDIA A40 / NVIDIA A100-SXM4")[0] == 70.0
    with pytest.raises(ZeusConfigError, match=">= 0"):
        resolve_blocking_power(-1.0)
    with pytest.raises(ZeusConfigError, match="'Mystery GPU'"):
        resolve_blocking_power(None, None, "Mystery GPU")


def test_plan_frontier_uses_the_profiles_blocking_power() -> None:
    prof = physical_instruction_profile("a40", 2)
    fr = plan_frontier(synchronous_1f1b(2, 3), prof)
    assert fr.blocking_power_w == prof.blocking_power_w == 60.0
    bare = InstructionProfile.from_csv_text(prof.to_csv_text())
    with pytest.raises(ZeusConfigError, match="blocking"):
        plan_frontier(synchronous_1f1b(2, 3), bare)


def test_profile_metadata_round_trips(tmp_path: Path) -> None:
    prof = physical_instruction_profile("a40", 2)
    prof.to_csv(tmp_path / "x.csv")
    back = InstructionProfile.from_csv(tmp_path / "x.csv")
    assert back == prof and back.blocking_power_w == 60.0 and back.simulated and "A40" in back.gpu_name


def test_frontier_csv_lists_real_times_and_energies(tmp_path: Path) -> None:
    fr = plan_frontier(synchronous_1f1b(3, 5), physical_instruction_profile("a100", 3, seed=5))
    fr.to_csv(tmp_path / "f.csv")
    with (tmp_path / "f.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(fr)
    for i in (0, len(fr) // 2, len(fr) - 1):
        replay = fr.replay_plan(fr.plan(i))
        assert float(rows[i]["time_s"]) == pytest.approx(replay.iteration_time_s, rel=1e-12)
        assert float(rows[i]["energy_j"]) == pytest.approx(replay.energy_j, rel=1e-12)
        # Floored durations: the quantised time is never longer than the real one.
        assert float(rows[i]["quantised_time_s"]) <= float(rows[i]["time_s"]) + 1e-12
    assert any(float(r["time_s"]) > float(r["quantised_time_s"]) for r in rows)
    # Pareto flags are on the real figures: no flagged point is dominated by any point.
    t, e = fr.real_times_s, fr.real_energy_j
    for r in rows:
        if r["pareto"] == "1":
            i = int(r["index"])
            assert not np.any((t < t[i]) & (e < e[i]))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_deadline_plan_is_never_worse_than_a_frontier_point_meeting_it(seed: int) -> None:
    fr = plan_frontier(synchronous_1f1b(3, 6), physical_instruction_profile("a100", 3, seed=seed))
    least = fr.least_energy_plan()
    base = fr.max_frequency_plan()
    t, e = fr.real_times_s, fr.real_energy_j
    for deadline in (base.iteration_time_s * 1.05, least.iteration_time_s * 1.2, float(t.max()) * 1.1):
        plan = fr.plan_for_time(deadline)
        assert plan.iteration_time_s <= deadline * (1 + 1e-9)
        assert plan.energy_j <= float(e[t <= deadline].min()) * (1 + 1e-9)
        if least.iteration_time_s <= deadline:
            assert plan.energy_j <= least.energy_j * (1 + 1e-9)
