"""Issue 30: a plan file cannot exhaust memory or have its clocks coerced silently."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from zeus_core.exceptions import ZeusProfileError
from zeus_core.optimizer.pipeline_frequency import FrequencyPlan, synchronous_1f1b

REPO_ROOT = Path(__file__).resolve().parents[2]


def _plan_dict() -> dict:
    return FrequencyPlan.uniform(synchronous_1f1b(2, 2), 1410, label="max").to_dict()


@pytest.mark.parametrize(
    ("stages", "problem"),
    [(10**9, "field 'num_stages': 1000000000 is out of range"), (10**6, "2000000 instructions")],
)
def test_a_tiny_file_declaring_a_huge_shape_is_refused_without_building_it(
    tmp_path: Path, stages: int, problem: str
) -> None:
    path = tmp_path / "plan.json"
    huge = {
        "schedule": "1f1b",
        "num_stages": stages,
        "num_microbatches": 1,
        "frequencies_mhz": [{"stage": 0, "forward": [1410], "backward": [1410]}],
    }
    path.write_text(json.dumps(huge))
    assert path.stat().st_size < 200
    # In a child limited to 1 GiB of address space: before issue 30 this built 2e9 cells.
    code = textwrap.dedent(
        f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from zeus_core.exceptions import ZeusProfileError
        from zeus_core.optimizer.pipeline_frequency import FrequencyPlan
        try:
            FrequencyPlan.load({str(path)!r})
        except ZeusProfileError as err:
            print("refused:", err)
            sys.exit(0)
        sys.exit(1)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert str(path) in done.stdout and problem in done.stdout


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (1.9, "1.9 is not a whole number of MHz"),
        (True, "True is not an integer"),
        ("1410", "'1410' is not an integer"),
        (float("nan"), "not a finite number"),
        (1e308, "out of range"),
        (0, "out of range"),
    ],
)
def test_clocks_are_never_coerced(tmp_path: Path, value: object, problem: str) -> None:
    data = _plan_dict()
    data["frequencies_mhz"][1]["backward"][0] = value
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ZeusProfileError) as err:
        FrequencyPlan.load(path)
    assert str(path) in str(err.value) and "frequencies_mhz[1].backward[0]" in str(err.value)
    assert problem in str(err.value)


def test_shape_fields_must_be_whole_counts() -> None:
    for name, value in (("num_stages", 2.5), ("num_microbatches", -1), ("num_chunks", "2")):
        with pytest.raises(ZeusProfileError, match=f"field '{name}'"):
            FrequencyPlan.from_dict(_plan_dict() | {name: value}, source="p.json")


def test_deeply_nested_json_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ZeusProfileError, match="plan.json"):
        FrequencyPlan.load(path)


def test_save_replaces_a_planted_symlink_instead_of_following_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / "plan.json").symlink_to(victim)
    FrequencyPlan.from_dict(_plan_dict()).save(tmp_path / "plan.json")
    assert victim.read_text() == "keep me" and not (tmp_path / "plan.json").is_symlink()


def test_the_profile_save_replaces_planted_symlinks(tmp_path: Path) -> None:
    from zeus_core.optimizer.pipeline_frequency import InstructionProfile

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    for name in ("profile.csv", "profile.json"):
        (tmp_path / name).symlink_to(victim)
    rows = [(0, "forward", 1410, 0.01, 2.0), (0, "backward", 1410, 0.02, 4.0)]
    InstructionProfile.from_rows(rows).to_csv(tmp_path / "profile.csv")
    assert victim.read_text() == "keep me"
    assert not (tmp_path / "profile.csv").is_symlink() and not (tmp_path / "profile.json").is_symlink()
