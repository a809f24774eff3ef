"""Helpers for the GlobalPowerLimitOptimizer tests: simulated GPUs and a protocol driver."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

from zeus_core import console
from zeus_core.device._base import PowerLimitConstraints
from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.optimizer.power_limit import GlobalPowerLimitOptimizer
from zeus_core.testing import (
    MeasuredProfile,
    NoisyRun,
    SimulatedGPU,
    StepNoise,
    VirtualClock,
    simulate_steps,
)
from zeus_core.testing import (
    PowerLimitWorkload as Workload,
)

__all__ = [
    "synthetic_profile",
    "profile_gpus",
    "make_gpus",
    "run_steps",
    "monitor_of",
    "FakeTraining",
    "zeus_loop",
    "ConsoleLines",
]


def synthetic_profile(name: str = "NVIDIA A40") -> MeasuredProfile:
    """100–300 W: time per step rises and energy per step falls, then rises, as limits drop.

    Energy per step (J): 300 W: 60, 250 W: 50, 200 W: 45, 150 W: 54, 100 W: 80.
    """
    points = [
        (300, 0.20, 300.0),
        (250, 0.20, 250.0),
        (200, 0.225, 200.0),
        (150, 0.36, 150.0),
        (100, 0.80, 100.0),
    ]
    return MeasuredProfile(
        points=points, gpu_name=name, constraints=PowerLimitConstraints(100.0, 300.0, 300.0)
    )


def make_gpus(
    n: int = 1,
    behavior: MeasuredProfile | None = None,
    noise: float = 0.0,
    seed: int = 0,
    clock: VirtualClock | None = None,
) -> list[SimulatedGPU]:
    """``n`` simulated GPUs on one virtual clock."""
    clock = clock or VirtualClock()
    behavior = behavior or synthetic_profile()
    return [SimulatedGPU(behavior, index=i, clock=clock, noise=noise, seed=seed * 100 + i) for i in range(n)]


def profile_gpus(path: Path, noise: float = 0.03, seed: int = 0) -> list[SimulatedGPU]:
    """One simulated GPU per ``gpu<i>_energy`` column of a Zeus profile CSV, on one virtual clock."""
    header = path.read_text().splitlines()[0].split(",")
    n = sum(1 for h in header if h.startswith("gpu") and h.endswith("_energy"))
    clock = VirtualClock()
    return [
        SimulatedGPU(
            MeasuredProfile.from_zeus_csv(path, gpu=i), index=i, clock=clock, noise=noise, seed=seed * 100 + i
        )
        for i in range(n)
    ]


def monitor_of(gpus: Sequence[SimulatedGPU]) -> ZeusMonitor:
    """A monitor of exactly these GPUs (no CPUs)."""
    return ZeusMonitor(gpus=list(gpus), cpu_indices=[])


def run_steps(
    plo: GlobalPowerLimitOptimizer, gpus: Sequence[SimulatedGPU], steps: int, epoch_len: int | None = None
) -> list[float]:
    """Drive ``steps`` optimizer steps (epochs of ``epoch_len`` steps); returns the limit of each step.

    Calls ``on_epoch_begin`` first and ``on_epoch_end`` at every epoch boundary and at the end.
    """
    limits = []
    plo.on_epoch_begin()
    for i in range(steps):
        plo.on_step_begin()
        limits.append(gpus[0].get_power_limit())
        assert all(g.get_power_limit() == limits[-1] for g in gpus), "GPUs run different limits"
        simulate_steps(gpus, 1)
        plo.on_step_end()
        if epoch_len is not None and (i + 1) % epoch_len == 0 and i + 1 < steps:
            plo.on_epoch_end()
            plo.on_epoch_begin()
    plo.on_epoch_end()
    return limits


class FakeTraining:
    """A generated workload on one fake NVML GPU, stepped by hand on a virtual clock.

    Installs the fake ``pynvml`` and makes window times use its clock (``monkeypatch`` undoes both),
    so ``ZeusMonitor(gpu_indices=[0])`` finds the fake GPU exactly as a user's code finds a real one.
    Each :meth:`step` draws the step's time and power under the limit in force.
    """

    def __init__(self, monkeypatch: Any, workload: Workload, noise: StepNoise, seed: int = 0) -> None:
        from zeus_core.device import _base as base
        from zeus_core.testing import VirtualClock as FakeClock
        from zeus_core.testing._fake_nvml import FakeGPUSpec, FakeNVML

        gpu = workload.gpu
        self.clock = FakeClock(1000.0)  # the start the fake NVML's own clock had
        spec = FakeGPUSpec(
            name=gpu.name, min_limit_w=gpu.min_w, max_limit_w=gpu.max_w, default_limit_w=gpu.max_w
        )
        self.fake = FakeNVML([spec], clock=self.clock, root=True).patch(monkeypatch)
        monkeypatch.setattr(base, "wall_clock", self.clock)
        self.run = NoisyRun(workload, noise, seed)

    @property
    def limit_w(self) -> float:
        """The limit in force on the fake GPU, W."""
        return self.fake.devices[0].power_limit_mw / 1000

    def step(self) -> None:
        """One training step: the GPU draws the workload's power for the step's time."""
        busy_s, power_w, idle_s = self.run.step(self.limit_w)
        self.fake.set_power(0, power_w)
        self.clock.advance(busy_s)
        if idle_s:
            self.fake.set_power(0, self.run.workload.idle_w)
            self.clock.advance(idle_s)

    def between_epochs(self, seconds: float = 2.0) -> None:
        """Evaluation between epochs: time passes at the current limit, outside any step."""
        self.clock.advance(seconds)


def zeus_loop(plo: Any, training: FakeTraining, epochs: int, steps_per_epoch: int) -> None:
    """Zeus's documented loop (no on_train_begin / on_train_end), as in Zeus's README."""
    for _ in range(epochs):
        plo.on_epoch_begin()
        for _ in range(steps_per_epoch):
            plo.on_step_begin()
            training.step()
            plo.on_step_end()
        plo.on_epoch_end()
        training.between_epochs()


class ConsoleLines(logging.Handler):
    """Collects what ``zeus_core.console`` shows (its logger does not propagate to pytest's caplog)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def __enter__(self) -> "ConsoleLines":
        logging.getLogger(console.LOGGER_NAME).addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger(console.LOGGER_NAME).removeHandler(self)
