"""Helpers shared by the 2-rank scripts: the package's simulated pipeline GPU and GPU work, and reports.

:func:`make_gpu` is a :class:`SimulatedPipelineGPU` (A40 model) and :func:`work` a
:class:`GpuWork` whose time follows the DVFS model (memory share 20 %, compute share ∝ 1/f),
forward ``forward_s`` at the highest clock and backward twice that; so profiles, plans and the
measured savings follow the documented model.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from _support.emulation import GpuWork

from zeus_core.testing import InstructionWork, SimulatedPipelineGPU


def make_gpu(rank: int) -> SimulatedPipelineGPU:
    """This rank's simulated A40 (idle until its :class:`GpuWork` runs)."""
    return SimulatedPipelineGPU("a40", index=0, seed=rank)


def work(gpu: SimulatedPipelineGPU, forward_s: float) -> GpuWork:
    """A layer with ``forward_s`` of forward work at the highest clock (80 % compute-bound)."""
    return GpuWork(gpu, InstructionWork(0.8 * forward_s, 0.2 * forward_s))


def runtime_report(runtime: Any) -> dict[str, Any]:
    """What the tests assert on: iteration records, requests, changes, plan and the restored clock."""
    ctl = runtime.controller
    return {
        "iterations": [
            {
                "phase": r.phase,
                "time_s": r.time_s,
                "energy_j": r.energy_j,
                "simulated": r.simulated,
                "instructions": [
                    [i.kind.value, i.microbatch, i.frequency_mhz, i.virtual_stage] for i in r.instructions
                ],
            }
            for r in runtime.iterations
        ],
        "requests": [[r.frequency_mhz, r.tag] for r in ctl.requests],
        "changes": [c.frequency_mhz for c in ctl.changes],
        "plan": runtime.plan.to_dict() if runtime.plan is not None else None,
        "locked_after_close": runtime.gpu.locked_sm_frequency,
        "stage": runtime.stage,
    }


def dump(out: str | Path, name: str, data: dict[str, Any]) -> None:
    """Write ``data`` to ``<out>/<name>-rank<r>.json``."""
    rank = int(os.environ.get("RANK", "0"))
    Path(out, f"{name}-rank{rank}.json").write_text(json.dumps(data, indent=1))
