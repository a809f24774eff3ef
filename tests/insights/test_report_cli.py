"""``zeus-suite report``: what it says when there is nothing to report, and carbon recomputed offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zeus_core._cli import main
from zeus_core.training._run_record import write_record


def test_nothing_to_report_is_an_error_that_says_what_was_looked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "zeus_run.json" in err and "metrics.csv" in err and "trainer_state.json" in err


def test_carbon_and_cost_are_recomputed_offline_for_another_region(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_network: list[object]
) -> None:
    record = {"kind": "training", "who": "test", "train": {"energy/train_j": 7.2e6, "time/train_s": 3600.0}}
    write_record(tmp_path, record, None)
    out = tmp_path / "r.html"
    assert main(["report", str(tmp_path), "-o", str(out), "--region", "FR", "--price-per-kwh", "0.5"]) == 0
    page = out.read_text()
    assert "France (FR)" in page and "112 g CO2e" in page and "1.00 USD" in page  # 2 kWh
    assert "no power timeline" in page.lower()
    summary = capsys.readouterr().out
    assert "112 g CO2e" in summary and "1.00 USD" in summary
    assert not no_network  # nothing was fetched
    assert json.loads((tmp_path / "zeus_run.json").read_text())["version"] == 1
