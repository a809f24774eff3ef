"""Fuzzing the parsers of user-supplied data with hypothesis.

Job specs, power-limit profiles, Perseus profile CSVs and frequency-plan JSON. The rule for each:
any input either parses to a valid object (which round-trips through its own serialised form) or
raises the project's :class:`~zeus_core.exceptions.ZeusError` with a message; never another
exception.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, TypeVar

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.strategies import JSON, broken
from zeus_core.exceptions import ZeusError
from zeus_core.optimizer.batch_size._spec import JobSpec
from zeus_core.optimizer.pipeline_frequency import FrequencyPlan, synchronous_1f1b
from zeus_core.optimizer.pipeline_frequency._profile import PROFILE_CSV_HEADER, InstructionProfile
from zeus_core.optimizer.power_limit import JobGPUs, PowerLimitMeasurement, PowerLimitProfile

T = TypeVar("T")
FUZZ = settings(
    max_examples=int(os.environ.get("ZEUS_FUZZ_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
)
SCRATCH = Path(tempfile.mkdtemp(prefix="zeus-parser-fuzz-"))


def parse_or_explain(parse: Callable[[], T]) -> T | None:
    """``parse()``'s result, or ``None`` when it refused the input with a ZeusError and a message."""
    try:
        return parse()
    except ZeusError as err:
        assert str(err).strip(), f"{type(err).__name__} without a message"
        return None


def _file(content: bytes, name: str) -> Path:
    path = SCRATCH / name
    path.write_bytes(content)
    return path


# ------------------------------------------------------------------------------------ job spec
VALID_SPEC = JobSpec(
    "job", (32, 64, 128), 64, target_metric=0.9, max_power_w=300.0, prior_mean=1.0, prior_std=2.0
)


@FUZZ
@given(st.one_of(JSON, broken(VALID_SPEC.to_dict())))
def test_job_spec_from_dict(data: Any) -> None:
    spec = parse_or_explain(lambda: JobSpec.from_dict(data))
    if spec is not None:
        assert JobSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


# ------------------------------------------------------------------------ power-limit profile
VALID_PROFILE = PowerLimitProfile(
    JobGPUs("NVIDIA A40", ("GPU-0", "GPU-1"), world_size=2, min_w=100.0, max_w=300.0),
    (
        PowerLimitMeasurement(300.0, 40, 0.1, 30.0, 1e-4, 2.0, 0.001, num_gpus=2, samples=8),
        PowerLimitMeasurement(250.0, 40, 0.11, 27.0, num_gpus=2),
    ),
    optimal_power_limit_w=250.0,
    selector="MaxSlowdownConstraint(factor=1.1)",
    reason="done",
).to_dict()


@FUZZ
@given(st.one_of(JSON, broken(VALID_PROFILE)))
def test_power_limit_profile_from_dict(data: Any) -> None:
    profile = parse_or_explain(lambda: PowerLimitProfile.from_dict(data))
    if profile is not None:
        assert PowerLimitProfile.from_dict(json.loads(json.dumps(profile.to_dict()))) == profile


@FUZZ
@given(st.one_of(st.binary(max_size=64), broken(VALID_PROFILE).map(lambda d: json.dumps(d).encode())))
def test_power_limit_profile_file(content: bytes) -> None:
    path = _file(content, "profile.json")
    parse_or_explain(lambda: PowerLimitProfile.load(path))


# --------------------------------------------------------------------------- Perseus profile
VALID_CSV_ROWS = [
    ["0", "forward", "1410", "0.010", "3.0"],
    ["0", "forward", "1200", "0.011", "2.6"],
    ["0", "backward", "1410", "0.020", "6.0"],
    ["1", "backward", "1200", "0.022", "5.2"],
]
CELL = st.one_of(
    st.sampled_from(["0", "1", "-1", "forward", "backward", "1e999", "nan", "inf", "-inf", "", "1.5", "0"]),
    st.text(max_size=6),
)


def _csv(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join(",".join(r) for r in [header, *rows]) + "\n"


@st.composite
def profile_csvs(draw: st.DrawFn) -> str:
    """A valid profile CSV with some cells, the header or the line structure broken."""
    rows = [list(r) for r in VALID_CSV_ROWS]
    for _ in range(draw(st.integers(0, 3))):
        row = draw(st.integers(0, len(rows) - 1))
        rows[row][draw(st.integers(0, 4))] = draw(CELL)
    header = list(PROFILE_CSV_HEADER)
    if draw(st.booleans()) and draw(st.booleans()):
        header = draw(st.lists(st.sampled_from([*PROFILE_CSV_HEADER, "x", ""]), max_size=6))
    if draw(st.booleans()) and draw(st.booleans()):
        rows.append(draw(st.lists(CELL, max_size=7)))
    return _csv(header, rows)


@FUZZ
@given(st.one_of(profile_csvs(), st.text(max_size=80)))
def test_instruction_profile_csv(text: str) -> None:
    profile = parse_or_explain(lambda: InstructionProfile.from_csv_text(text))
    if profile is not None:
        assert InstructionProfile.from_csv_text(profile.to_csv_text()) == profile


@FUZZ
@given(st.binary(max_size=64))
def test_instruction_profile_file(content: bytes) -> None:
    path = _file(content, "profile.csv")
    parse_or_explain(lambda: InstructionProfile.from_csv(path))


# ------------------------------------------------------------------------------ frequency plan
VALID_PLAN = FrequencyPlan.uniform(synchronous_1f1b(2, 3), 1410, label="max").to_dict()


@FUZZ
@given(st.one_of(JSON, broken(VALID_PLAN)))
def test_frequency_plan_from_dict(data: Any) -> None:
    plan = parse_or_explain(lambda: FrequencyPlan.from_dict(data))
    if plan is not None:
        assert FrequencyPlan.from_json(plan.to_json()) == plan


@FUZZ
@given(st.one_of(st.binary(max_size=64), broken(VALID_PLAN).map(lambda d: json.dumps(d).encode())))
def test_frequency_plan_file(content: bytes) -> None:
    path = _file(content, "plan.json")
    parse_or_explain(lambda: FrequencyPlan.load(path))
