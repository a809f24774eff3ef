"""The measured data ships inside the package and is found without anything beside the repository."""

from __future__ import annotations

import fnmatch
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from tests.conftest import REPO_ROOT
from zeus_core import data
from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.pipeline_frequency import InstructionProfile
from zeus_core.simulate._traces import default_trace_dir, load_nsdi23_traces
from zeus_core.testing import physical_instruction_profile


def test_every_bundled_name_resolves_inside_the_package() -> None:
    package = Path(data.__file__).parent
    for name in data.DATASETS:
        p = data.path(name)
        assert p.exists() and package in p.parents
    assert sorted(f.name for f in data.path("zeus_nsdi23").glob("*.csv")) == [
        "summary_power_a40.csv",
        "summary_power_v100.csv",
        "summary_train.csv",
    ]
    assert len(list(data.path("power_limit_profiles").glob("*.csv"))) == 6
    assert data.path("power_limit_profiles/A40_resnet50_1gpu.csv").is_file()


def test_unknown_name_lists_what_is_bundled() -> None:
    with pytest.raises(ZeusConfigError, match="not bundled.*power_limit_profiles"):
        data.path("imagenet")
    with pytest.raises(ZeusConfigError, match="not bundled"):
        data.path("")


def test_the_simulator_defaults_to_the_bundled_traces() -> None:
    assert default_trace_dir() == data.path("zeus_nsdi23")
    traces = load_nsdi23_traces("a40")
    assert len(traces) == 6 and all(t.batch_sizes for t in traces)


def test_sample_perseus_profile_is_the_documented_generator_output() -> None:
    bundled = InstructionProfile.from_csv(data.path("perseus/a100_4stage_profile.csv"))
    assert bundled == physical_instruction_profile("a100", 4, seed=0)


def test_package_data_globs_cover_every_bundled_file() -> None:
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["zeus_core"]
    package = Path(data.__file__).parent.parent
    files = [
        p.relative_to(package).as_posix()
        for p in Path(data.__file__).parent.rglob("*")
        if p.is_file() and p.suffix != ".py" and "__pycache__" not in p.parts
    ]
    assert files
    for f in files:
        assert any(fnmatch.fnmatch(f, g) for g in globs), f"{f} is not shipped by package-data {globs}"


def test_module_prints_a_path_for_the_shell() -> None:
    run = [sys.executable, "-m", "zeus_core.data"]
    out = subprocess.run(
        [*run, "perseus/a100_4stage_profile.csv"], capture_output=True, text=True, check=True, cwd=REPO_ROOT
    )
    assert Path(out.stdout.strip()) == data.path("perseus/a100_4stage_profile.csv")
    listing = subprocess.run(run, capture_output=True, text=True, check=True, cwd=REPO_ROOT).stdout
    assert all(name in listing for name in data.DATASETS)
    bad = subprocess.run([*run, "nope"], capture_output=True, text=True, cwd=REPO_ROOT)
    assert bad.returncode == 2 and "not bundled" in bad.stderr
