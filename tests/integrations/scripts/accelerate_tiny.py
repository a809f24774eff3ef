"""A tiny model and a plain Accelerate loop for the adapter tests (in-process and under torchrun).

Every forward pass of the model runs one unit of work on a simulated A40 with a virtual clock:
0.1 s at 300 W (30 J) at the default power limit, and no time passes outside that work.
"""

from __future__ import annotations

from typing import Any

import torch
from accelerate import Accelerator
from accelerate.tracking import GeneralTracker
from torch.utils.data import DataLoader, TensorDataset

from zeus_core.testing import SimulatedGPU

UNIT_TIME_S = 0.1
UNIT_ENERGY_J = 30.0


class SimModel(torch.nn.Module):
    """Linear regression whose forward pass runs one unit of simulated GPU work."""

    def __init__(self, gpu: SimulatedGPU) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.gpu = gpu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.gpu.run_steps(1)
        return self.layer(x)


def loader(samples: int, batch_size: int = 2, seed: int = 0) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    data = TensorDataset(torch.randn(samples, 4, generator=g), torch.randn(samples, 1, generator=g))
    return DataLoader(data, batch_size=batch_size)


class RecordingTracker(GeneralTracker):
    """An Accelerate tracker that keeps every ``accelerator.log`` call."""

    name = "recording"
    requires_logging_directory = False

    def __init__(self) -> None:
        super().__init__()
        self.logged: list[tuple[dict[str, Any], int | None]] = []

    @property
    def tracker(self) -> "RecordingTracker":
        return self

    def store_init_configuration(self, values: dict) -> None:
        pass

    def log(self, values: dict, step: int | None = None, **kwargs: Any) -> None:
        self.logged.append((dict(values), step))

    def column(self, key: str) -> list[float]:
        return [values[key] for values, _ in self.logged if key in values]


def run_epochs(
    accelerator: Accelerator,
    model: torch.nn.Module,
    optimizer: Any,
    train: Any,
    epochs: int,
    evaluate: Any = None,
    fail_at_batch: int | None = None,
) -> int:
    """The user's loop: no Zeus calls inside. Returns the number of micro-batches run."""
    batches = 0
    for _ in range(epochs):
        model.train()
        for x, y in train:
            with accelerator.accumulate(model):
                loss = torch.nn.functional.mse_loss(model(x), y)
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
            batches += 1
            if fail_at_batch is not None and batches >= fail_at_batch:
                raise RuntimeError("training failed on purpose")
        if evaluate is not None:
            model.eval()
            with torch.no_grad():
                for x, _ in evaluate:
                    model(x)
    return batches
