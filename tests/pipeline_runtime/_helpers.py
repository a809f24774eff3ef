"""Helpers for the 2-rank pipeline runs: launch a script once per module and read each rank's report."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import REPO_ROOT, torchrun_command

SCRIPTS = Path(__file__).parent / "scripts"
#: The examples' support code (``_support``: CPU shims, simulated GPU work) is imported from here.
EXAMPLES = REPO_ROOT / "examples"


def run_two_ranks(script: str, out: Path, timeout_s: float = 240) -> None:
    """Run ``scripts/<script>`` on 2 gloo processes with output folder ``out``; fail with its stderr."""
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "DS_BUILD_OPS": "0",
        "DS_ACCELERATOR": "cpu",
        "TORCH_EXTENSIONS_DIR": str(out / "torch_extensions"),
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(REPO_ROOT), str(EXAMPLES), os.environ.get("PYTHONPATH")])
        ),
    }
    proc = subprocess.run(
        torchrun_command(SCRIPTS / script, str(out)),
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=out,
    )
    assert proc.returncode == 0, f"{script} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"


def report(out: Path, name: str, rank: int) -> dict[str, Any]:
    """The JSON a script wrote for ``name`` on ``rank``."""
    return json.loads((out / f"{name}-rank{rank}.json").read_text())


def sequence(iteration: dict[str, Any]) -> list[str]:
    """``["F0", "F1", "B0", ...]`` of one iteration record."""
    return [f"{kind[0].upper()}{mb}" for kind, mb, *_ in iteration["instructions"]]


def clocks(iteration: dict[str, Any]) -> list[int | None]:
    """The clock requested for each instruction of one iteration record, MHz."""
    return [mhz for _, _, mhz, *_ in iteration["instructions"]]


def planned(plan: dict[str, Any], stage: int, iteration: dict[str, Any]) -> list[int]:
    """The plan's clock for each instruction of one iteration record, MHz."""
    row = next(r for r in plan["frequencies_mhz"] if r["stage"] == stage)
    return [row[kind][mb] for kind, mb, *_ in iteration["instructions"]]


def textbook(schedule: str, stage: int, microbatches: int = 4) -> list[str]:
    """The textbook order of one stage of a 2-stage pipeline."""
    from zeus_core.optimizer.pipeline_frequency import make_schedule

    return [i.short_name for i in make_schedule(schedule, 2, microbatches).stage_orders[stage]]


def check_changes(rep: dict[str, Any]) -> None:
    """Clock changes: each a requested clock, never the same twice in a row, the last a reset."""
    changes, requested = rep["changes"], {mhz for mhz, _ in rep["requests"]}
    assert changes and changes[-1] is None and rep["locked_after_close"] is None
    assert all(c in requested for c in changes[:-1])
    assert all(a != b for a, b in zip(changes, changes[1:]))
