"""Test-only helpers shared by the 2-rank scripts: a simulated GPU whose compute really slows down.

A ``SimulatedGPU`` on the wall clock draws the A40 model's power at its locked clock while busy,
but CPU work does not get slower when the simulated clock drops. :class:`GpuWork` closes that gap:
a layer that sleeps, busy, for the model's time at the currently locked clock
(``memory + compute · f_max / f``), in forward and (twice as long) in backward. So profiles,
plans and the measured savings follow the documented DVFS model.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import torch

from zeus_core.device.simulated import PhysicalModel, SimulatedGPU

MODEL = PhysicalModel.a40()


def make_gpu(rank: int) -> SimulatedGPU:
    """This rank's simulated A40 (idle until :class:`GpuWork` runs)."""
    return SimulatedGPU(MODEL, index=0, busy=False, seed=rank, activity=None)  # busy only in GpuWork


class _Sleep(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, work: "GpuWork") -> torch.Tensor:  # noqa: D102
        ctx.work = work
        work.run(work.forward_s)
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # noqa: D102
        ctx.work.run(2 * ctx.work.forward_s)
        return grad, None


class GpuWork(torch.nn.Module):
    """Sleeps, with the simulated GPU busy, for the model's time of ``forward_s`` (at f_max) of work."""

    def __init__(self, gpu: SimulatedGPU, forward_s: float) -> None:
        super().__init__()
        self.gpu = gpu
        self.forward_s = forward_s
        self.clocks: list[int | None] = []  # locked clock seen at the start of every forward/backward

    def run(self, seconds_at_max: float) -> None:
        locked = self.gpu.locked_sm_frequency
        self.clocks.append(locked)
        f = locked if locked is not None else MODEL.f_max_mhz
        self.gpu.set_busy(True)
        time.sleep(seconds_at_max * MODEL.time_at(f) / MODEL.time_at(MODEL.f_max_mhz))
        self.gpu.set_busy(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return _Sleep.apply(x, self)


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
                "instructions": [[i.kind.value, i.microbatch, i.frequency_mhz] for i in r.instructions],
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
