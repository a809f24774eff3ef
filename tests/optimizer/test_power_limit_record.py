"""What profiling kept (``_record.py``): kept and refused visits, limits left out, resuming, the file."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from zeus_core.optimizer.power_limit import JobGPUs, PowerLimitMeasurement, PowerLimitOptions, Visit
from zeus_core.optimizer.power_limit._record import Record

JOB = JobGPUs("NVIDIA A40", ("GPU-0",), 1, 100.0, 300.0)
LIMITS = [300.0, 250.0, 200.0, 150.0, 100.0]


def record(path: Path | None = None, selector: str = "Energy()") -> Record:
    r = Record(PowerLimitOptions(), path, selector, tag="")
    r.job = JOB
    return r


def visit(limit: float, watts: float, samples: int = 4) -> Visit:
    """``samples`` samples of 5 steps of 0.1 s each, drawing ``watts``."""
    return Visit(limit, (0.5,) * samples, (0.5 * watts,) * samples, (5,) * samples)


def test_a_possible_visit_is_kept_and_an_impossible_one_measured_again_twice_then_left_out() -> None:
    r = record()
    assert r.keep(visit(250, 240)) is False and [m.power_limit for m in r.log.measurements()] == [250]
    assert r.keep(visit(200, 280)) is True  # 280 W under a 200 W limit: measure again
    assert r.keep(visit(200, 280)) is True
    assert r.left_out == []
    assert r.keep(visit(200, 280)) is False and r.left_out == [200]  # the third time: left out
    assert [m.power_limit for m in r.log.measurements()] == [250]  # never kept
    assert r.keep(visit(150, 400), retry=False) is False and r.left_out == [200]  # not counted
    assert r.keep(Visit(150, (), (), ())) is False and len(r.log.visits) == 1  # an empty visit


def test_a_thermal_refusal_is_counted_apart_and_never_leaves_a_limit_out() -> None:
    r = record()
    assert r.refuse(250, "thermal", "GPU 0 was throttled") and r.refuse(250, "thermal", "again")
    assert not r.refuse(250, "thermal", "a third time") and r.left_out == []


def test_resume_takes_saved_visits_or_measurements_of_the_limits_only(caplog) -> None:
    r = record()
    ms = [PowerLimitMeasurement(w, 40, 0.2, w * 0.18) for w in (300.0, 250.0, 225.0)]  # 225: not a limit
    r.resume(ms, [visit(300, 270).to_json()], LIMITS, "the checkpoint")
    assert [(v.power_limit, len(v.steps)) for v in r.log.visits] == [(300, 4), (250, 1)]
    with caplog.at_level(logging.WARNING, logger="zeus_core.optimizer.power_limit"):
        r.resume(ms, [["bad"]], LIMITS, "the checkpoint")
    assert "Ignoring the profiling samples saved in the checkpoint" in caplog.text
    assert [(v.power_limit, len(v.steps)) for v in r.log.visits] == [(300, 1), (250, 1)]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="zeus_core.optimizer.power_limit"):
        r.resume(ms, 5, LIMITS, "the profile")  # not a list: the same warning, not a TypeError
    assert "Ignoring the profiling samples saved in the profile: field 'visits' is not a list" in caplog.text
    assert [(v.power_limit, len(v.steps)) for v in r.log.visits] == [(300, 1), (250, 1)]


def test_the_profile_file_is_written_and_reused_by_the_same_selector_only(tmp_path: Path) -> None:
    path = tmp_path / "plo.json"
    assert record(path).reuse_file(LIMITS) is None  # no file yet
    first = record(path)
    first.keep(visit(300, 270))
    first.keep(visit(250, 240))
    first.save(250.0, "the choice is settled")
    assert json.loads(path.read_text())["optimal_power_limit_w"] == 250.0
    again = record(path)
    source, decided = again.reuse_file(LIMITS)  # type: ignore[misc]
    assert decided == (250.0, f"reused from {source}: the choice is settled")
    assert [v.power_limit for v in again.log.visits] == [300, 250]
    assert record(path, selector="Time()").reuse_file(LIMITS)[1] is None  # type: ignore[index]


def test_nothing_is_written_without_a_path_or_before_the_job_is_known(tmp_path: Path) -> None:
    record(None).save(250.0, "done")
    r = Record(PowerLimitOptions(), tmp_path / "plo.json", "Energy()", tag="")
    r.save(250.0, "done")
    assert list(tmp_path.iterdir()) == []
