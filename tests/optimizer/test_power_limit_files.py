"""Files the power-limit optimizer reads and writes, tried as an attacker or an unlucky user would (issue 30).

A tampered profile, checkpoint or Zeus-format CSV fails with an error that names the file (or the
state) and the field; NaN and infinities are refused; a saved decision off this optimizer's grid is
refused; a checkpoint that names no hardware is not trusted; the profile save never writes through
a symlink planted in a shared directory.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from tests.optimizer.plo_support import make_gpus, monitor_of, run_steps
from zeus_core.exceptions import ZeusProfileError
from zeus_core.optimizer.power_limit import Energy, GlobalPowerLimitOptimizer, PowerLimitProfile
from zeus_core.testing import MeasuredProfile

SMALL = dict(wait_steps=1, warmup_steps=2, profile_steps=3, pl_step=50, early_stopping=None)


def _optimizer(gpus: Any, path: Path | None = None) -> GlobalPowerLimitOptimizer:
    return GlobalPowerLimitOptimizer(monitor_of(gpus), Energy(), profile_path=path, **SMALL)


@pytest.fixture
def saved(tmp_path: Path) -> dict[str, Any]:
    """A finished profile's content, written at ``tmp_path / 'plo.json'``."""
    path = tmp_path / "plo.json"
    gpus = make_gpus(1)
    plo = _optimizer(gpus, path)
    plo.on_train_begin()
    run_steps(plo, gpus, 40)
    plo.on_train_end()
    return json.loads(path.read_text())


def _load_fails(tmp_path: Path, content: str, *fragments: str) -> None:
    path = tmp_path / "plo.json"
    path.write_text(content)
    gpus = make_gpus(1)
    plo = _optimizer(gpus, path)
    with pytest.raises(ZeusProfileError) as err:
        plo.on_train_begin()
    assert str(path) in str(err.value)
    for fragment in fragments:
        assert fragment in str(err.value)
    assert gpus[0].get_power_limit() == 300  # nothing was applied


def test_a_tampered_measurement_names_the_file_and_the_field(tmp_path: Path, saved: dict[str, Any]) -> None:
    saved["measurements"][1]["steps"] = "many"
    _load_fails(tmp_path, json.dumps(saved), "measurements[1]")
    saved["measurements"][1] = ["not", "an", "object"]
    _load_fails(tmp_path, json.dumps(saved), "measurements[1]")
    saved["measurements"] = "none"
    _load_fails(tmp_path, json.dumps(saved), "measurements")


def test_nan_infinity_and_deep_nesting_are_refused_with_the_file(
    tmp_path: Path, saved: dict[str, Any]
) -> None:
    text = json.dumps(saved)
    _load_fails(tmp_path, text.replace('"energy": ', '"energy": NaN, "x": ', 1), "NaN")
    _load_fails(tmp_path, text.replace('"time": ', '"time": Infinity, "x": ', 1), "Infinity")
    _load_fails(tmp_path, '{"kind": ' + "[" * 100_000 + "]" * 100_000 + "}", "not valid JSON")
    saved["optimal_power_limit_w"] = "inf"
    _load_fails(tmp_path, json.dumps(saved), "optimal_power_limit_w")


def test_an_off_grid_decision_is_refused(tmp_path: Path, saved: dict[str, Any]) -> None:
    saved["optimal_power_limit_w"] = 123.456
    _load_fails(tmp_path, json.dumps(saved), "optimal_power_limit_w", "123.456 W", "not one of the limits")


def test_a_profile_without_hardware_is_refused(tmp_path: Path, saved: dict[str, Any]) -> None:
    saved["hardware"] = None
    _load_fails(tmp_path, json.dumps(saved), "hardware")


def test_a_checkpoint_that_names_no_hardware_is_not_trusted(caplog) -> None:
    gpus = make_gpus(1)
    plo = _optimizer(gpus)
    plo.on_train_begin()
    run_steps(plo, gpus, 40)
    state = plo.state_dict()
    plo.on_train_end()
    resumed = _optimizer(gpus)
    resumed.load_state_dict({**state, "hardware": None})
    with caplog.at_level(logging.WARNING):
        resumed.on_train_begin()
    assert "does not name the GPUs" in caplog.text and resumed.measurements == ()
    assert resumed.optimal_power_limit_w is None  # profiles again instead of trusting the state
    resumed.on_train_end()


@pytest.mark.parametrize("state", ["junk", {"measurements": 5}, ["measurements"]])
def test_a_malformed_checkpoint_names_the_field(state: Any) -> None:
    gpus = make_gpus(1)
    plo = _optimizer(gpus)
    plo.on_train_begin()
    with pytest.raises(ZeusProfileError, match="measurements"):
        plo.load_state_dict(state)
    plo.on_train_end()


@pytest.mark.parametrize(
    ("value", "field"), [("nan", "elapsed_time"), ("inf", "gpu0_energy"), ("x", "gpu0_energy")]
)
def test_a_zeus_csv_profile_refuses_non_finite_values(tmp_path: Path, value: str, field: str) -> None:
    path = tmp_path / "A40_tampered.csv"
    rows = [
        "start_time,window_name,elapsed_time,gpu0_energy",
        "1.0,__GlobalPowerLimitOptimizer_300,10.0,2900.0",
    ]
    bad = {"elapsed_time": f"2.0,__GlobalPowerLimitOptimizer_250,{value},2700.0"}
    rows.append(bad.get(field, f"2.0,__GlobalPowerLimitOptimizer_250,11.0,{value}"))
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(ZeusProfileError, match=rf"{path.name}:3: field '{field}'"):
        MeasuredProfile.from_zeus_csv(path)


def test_the_save_never_writes_through_a_planted_symlink(tmp_path: Path, saved: dict[str, Any]) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    path = tmp_path / "shared" / "plo.json"
    path.parent.mkdir()
    # The names a predictable temporary file would have, and the target itself, point at the victim.
    for name in (f".plo.json.{os.getpid()}.tmp", ".plo.json.tmp", "plo.json.tmp"):
        (path.parent / name).symlink_to(victim)
    path.symlink_to(victim)
    profile = PowerLimitProfile.from_dict(saved)
    profile.save(path)
    assert victim.read_text() == "keep me"
    assert not path.is_symlink() and PowerLimitProfile.load(path) == profile
    leftovers = [p.name for p in path.parent.iterdir() if not p.is_symlink() and p.name != "plo.json"]
    assert leftovers == []  # the temporary file was renamed into place


def test_an_endless_profile_file_is_refused_not_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "plo.json"
    path.symlink_to("/dev/zero")  # a file that never ends: reading it whole would exhaust memory
    with pytest.raises(ZeusProfileError, match="larger than"):
        PowerLimitProfile.load(path)
    plo = _optimizer(make_gpus(1), path)
    with pytest.raises(ZeusProfileError, match="plo.json"):
        plo.on_train_begin()
