"""ZeusMonitor's CSV log: a mismatched file is refused before any window is taken."""

from __future__ import annotations

import csv

import pytest

from zeus_core import PhysicalModel, SimulatedGPU, VirtualClock, ZeusMonitor
from zeus_core.exceptions import ZeusConfigError


def test_mismatched_log_file_fails_at_begin_and_loses_nothing(tmp_path) -> None:
    log = tmp_path / "windows.csv"
    log.write_text("start_time,window_name,elapsed_time,gpu7_energy\n")
    clock = VirtualClock()
    monitor = ZeusMonitor(
        gpus=[SimulatedGPU(PhysicalModel.a40(), clock=clock, busy=True)], cpu_indices=[], log_file=log
    )
    with pytest.raises(ZeusConfigError, match="has columns"):
        monitor.begin_window("epoch")
    assert monitor.open_windows == []
    assert log.read_text() == "start_time,window_name,elapsed_time,gpu7_energy\n"  # untouched


def test_rows_are_flushed_per_window_and_appended_across_monitors(tmp_path) -> None:
    log = tmp_path / "windows.csv"
    clock = VirtualClock()
    gpu = SimulatedGPU(PhysicalModel.a40(), clock=clock, busy=True)
    first = ZeusMonitor(gpus=[gpu], cpu_indices=[], log_file=log)
    first.begin_window("a")
    clock.advance(2.0)
    first.end_window("a")
    rows = list(csv.reader(log.open()))  # readable before close: flushed
    assert rows[0] == ["start_time", "window_name", "elapsed_time", "gpu0_energy"]
    assert rows[1][1] == "a" and float(rows[1][3]) == pytest.approx(600.0)
    first.close()
    second = ZeusMonitor(gpus=[gpu], cpu_indices=[], log_file=log)
    with second.window("b"):
        clock.advance(1.0)
    second.begin_window("cancelled")
    second.end_window("cancelled", cancel=True)
    second.close()
    rows = list(csv.reader(log.open()))
    assert [r[1] for r in rows[1:]] == ["a", "b"]
