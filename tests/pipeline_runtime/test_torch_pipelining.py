"""Perseus on torch.distributed.pipelining, for real: 2 gloo processes, simulated A40s.

One launch of ``scripts/torch_pipeline.py`` runs four phases (see its docstring); the tests read
each rank's report. Stage 1 does twice the work of stage 0, and the simulated compute slows down
with the locked clock as the DVFS model says, so the plan has real slack to use.
"""

from __future__ import annotations

import json
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

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("torch_pipeline")
    run_two_ranks("torch_pipeline.py", folder)
    return folder


@pytest.mark.parametrize("rank", [0, 1])
def test_e2e_profiles_plans_and_applies_on_every_rank(out: Path, rank: int) -> None:
    rep = report(out, "e2e", rank)
    its = rep["iterations"]
    assert [i["phase"] for i in its] == ["discovering"] + ["profiling"] * 3 + ["applying"] * 3
    for it in its:  # the exact 1F1B order, every iteration
        assert sequence(it) == textbook("1f1b", rank)
        assert it["simulated"] is True
    assert clocks(its[0]) == [None] * 8  # discovery: untouched
    for it, mhz in zip(its[1:4], (1740, 1320, 900)):
        assert clocks(it) == [mhz] * 8
    for it in its[4:]:
        assert clocks(it) == planned(rep["plan"], rank, it)
    check_changes(rep)
    assert rep["plan"]["label"] == "zero-slowdown" and rep["plan"]["simulated"] is True


def test_e2e_lighter_stage_runs_slower_and_saves_energy(out: Path) -> None:
    r0, r1 = report(out, "e2e", 0), report(out, "e2e", 1)
    assert r0["plan"] == r1["plan"]  # broadcast: every rank holds the same plan
    rows = {row["stage"]: row["forward"] + row["backward"] for row in r0["plan"]["frequencies_mhz"]}
    assert mean(rows[0]) < mean(rows[1])
    assert sum(f < 1740 for f in rows[0]) >= 4  # most of the light stage's instructions slow down
    # Measured on stage 0: less energy per iteration than at the highest clock, hardly any slowdown.
    at_max = r0["iterations"][1]
    applied = r0["iterations"][4:]
    assert mean(i["energy_j"] for i in applied) < 0.97 * at_max["energy_j"]
    assert mean(i["time_s"] for i in applied) < 1.3 * at_max["time_s"]
    # The simulated compute really ran at the planned clocks once the plan applied (allowing
    # for the worker's asynchronous lag on a loaded 2-core machine).
    seen = r0["work_clocks"][-16:]
    assert sum(c is not None and c < 1740 for c in seen) >= 6


def test_e2e_saves_profile_and_plan(out: Path) -> None:
    folder = out / "perseus"
    lines = (folder / "profile.csv").read_text().splitlines()
    assert lines[0] == "stage,instruction,frequency,time,energy" and len(lines) == 1 + 2 * 2 * 3
    meta = json.loads((folder / "profile.json").read_text())
    assert meta["gpu_names"] == {"0": "NVIDIA A40 (simulated)", "1": "NVIDIA A40 (simulated)"}
    assert (
        25.0 < meta["blocking_power_w"] < 40.0
    )  # measured: the simulated A40 idles at 30 W between instructions
    saved = json.loads((folder / "plan-1f1b-s2-m4-zero-slowdown.json").read_text())
    assert saved["frequencies_mhz"] == report(out, "e2e", 0)["plan"]["frequencies_mhz"]
    assert saved["metadata"]["runtime"]["stage_orders"].startswith("stage 0: F0 F1 B0 F2 B1 F3 B2 B3")


@pytest.mark.parametrize("rank", [0, 1])
def test_restart_reuses_the_saved_plan_without_profiling(out: Path, rank: int) -> None:
    rep = report(out, "restart", rank)
    assert [i["phase"] for i in rep["iterations"]] == ["discovering", "applying", "applying"]
    assert rep["plan"]["frequencies_mhz"] == report(out, "e2e", rank)["plan"]["frequencies_mhz"]
    for it in rep["iterations"][1:]:
        assert clocks(it) == planned(rep["plan"], rank, it)
    check_changes(rep)


@pytest.mark.parametrize("rank", [0, 1])
def test_gpipe_applies_a_given_plan_instruction_by_instruction(out: Path, rank: int) -> None:
    rep = report(out, "gpipe", rank)
    assert rep["plan"] == rep["given_plan"]
    assert [i["phase"] for i in rep["iterations"]] == ["discovering", "applying", "applying"]
    for it in rep["iterations"]:
        assert sequence(it) == textbook("gpipe", rank) == ["F0", "F1", "F2", "F3", "B0", "B1", "B2", "B3"]
    for it in rep["iterations"][1:]:
        want = planned(rep["given_plan"], rank, it)
        assert clocks(it) == want and len(set(want)) == 8
    check_changes(rep)


@pytest.mark.parametrize("rank", [0, 1])
def test_rank0_planning_error_is_raised_on_every_rank_and_clocks_restored(out: Path, rank: int) -> None:
    rep = report(out, "deadline", rank)
    assert rep["error"] is not None and "plan_for_time" in rep["error"] and "longer time" in rep["error"]
    assert rep["active"] is False and rep["locked_after_close"] is None and rep["phase"] == "discovering"
