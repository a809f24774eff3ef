"""A tiny LightningModule whose every batch runs one unit of work on a simulated GPU.

Shared by the in-process Lightning tests and the DDP script. The simulated GPU follows the
A40 physical model on a :class:`VirtualClock`: at its default 300 W limit one unit of work takes
exactly 0.1 s at 300 W (30 J), and no time passes outside that work, so every window's expected
time and energy is known exactly.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from lightning_accelerate_common import Recorder, expected_events  # noqa: F401  (re-exported for the tests)
from torch.utils.data import DataLoader, TensorDataset

from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock

UNIT_TIME_S = 0.1  # A40 model at 300 W: 0.02 s memory + 0.08 s compute
UNIT_ENERGY_J = 30.0


def simulated_monitor(index: int = 0) -> tuple[SimulatedGPU, ZeusMonitor]:
    """A simulated A40 on its own virtual clock, and a monitor reading only it."""
    gpu = SimulatedGPU(PhysicalModel.a40(), index=index, clock=VirtualClock())
    return gpu, ZeusMonitor(gpus=[gpu], cpu_indices=[])


class TinyModule(pl.LightningModule):
    """Linear regression; each training/validation batch runs ``gpu.run_steps(1)``."""

    def __init__(self, gpu: SimulatedGPU, fail_at_batch: int | None = None) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.gpu = gpu
        self.fail_at_batch = fail_at_batch
        self.batches_run = 0

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.gpu.run_steps(1)
        self.batches_run += 1
        if self.fail_at_batch is not None and self.batches_run > self.fail_at_batch:
            raise RuntimeError("training failed on purpose")
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.gpu.run_steps(1)
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.layer(x), y))

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self.gpu.run_steps(1)
        x, y = batch
        self.log("test_loss", torch.nn.functional.mse_loss(self.layer(x), y))

    def predict_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.gpu.run_steps(1)
        return self.layer(batch[0])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


class TwoOptimizerModule(TinyModule):
    """Manual optimization with two optimizers (like a GAN): two optimizer steps per batch."""

    def __init__(self, gpu: SimulatedGPU) -> None:
        super().__init__(gpu)
        self.automatic_optimization = False
        self.other = torch.nn.Linear(4, 1)

    def training_step(self, batch: Any, batch_idx: int) -> None:
        self.gpu.run_steps(1)
        x, y = batch
        for opt, layer in zip(self.optimizers(), (self.layer, self.other)):  # type: ignore[arg-type]
            opt.zero_grad()
            self.manual_backward(torch.nn.functional.mse_loss(layer(x), y))
            opt.step()

    def configure_optimizers(self) -> list[torch.optim.Optimizer]:  # type: ignore[override]
        return [
            torch.optim.SGD(self.layer.parameters(), lr=0.01),
            torch.optim.SGD(self.other.parameters(), lr=0.01),
        ]


def loader(samples: int, batch_size: int = 2, seed: int = 0) -> DataLoader:
    """A deterministic regression data set of ``samples`` rows."""
    g = torch.Generator().manual_seed(seed)
    data = TensorDataset(torch.randn(samples, 4, generator=g), torch.randn(samples, 1, generator=g))
    return DataLoader(data, batch_size=batch_size)


def trainer_kwargs(tmp: str, **overrides: Any) -> dict[str, Any]:
    """Quiet, fast Trainer settings for tests."""
    kwargs: dict[str, Any] = dict(
        accelerator="cpu",
        devices=1,
        max_epochs=2,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        default_root_dir=tmp,
        logger=pl.loggers.CSVLogger(tmp, name="csv"),
        log_every_n_steps=1,
    )
    kwargs.update(overrides)
    return kwargs
