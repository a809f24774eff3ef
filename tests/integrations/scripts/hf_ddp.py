"""Run under torchrun (2 ranks, gloo, CPU): a Trainer with ZeusTrainerCallback on simulated GPUs.

Each rank measures its own simulated A40 (rank 1 under a 150 W power limit, so the ranks draw
different power) with a monitor that records every window it ends, and writes what it measured
and what it logged to ``<out>/rank<r>.json``.
"""

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import torch  # noqa: E402
from lightning_accelerate_common import leave_without_finalisation  # noqa: E402
from transformers import Trainer, TrainerCallback, TrainingArguments  # noqa: E402

from zeus_core import PhysicalModel, SimulatedGPU, ZeusMonitor  # noqa: E402
from zeus_core import _distributed as distributed  # noqa: E402
from zeus_core.monitor._measurement import Measurement  # noqa: E402
from zeus_integrations.huggingface import ZeusTrainerCallback  # noqa: E402


class TinyRegressor(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 1)
        self.micro_batches = 0

    def forward(self, x: Any, labels: Any = None) -> dict[str, Any]:
        self.micro_batches += int(self.training)
        out = self.lin(x).squeeze(-1)
        return {"loss": ((out - labels) ** 2).mean(), "logits": out}


class RecordingMonitor(ZeusMonitor):
    def __init__(self, gpu: SimulatedGPU) -> None:
        super().__init__(gpus=[gpu], cpu_indices=[])
        self.ended: dict[str, list[float]] = {"train": [], "epoch": [], "train_s": []}

    def end_window(self, name: str, sync_execution: bool = True, cancel: bool = False) -> Measurement:
        m = super().end_window(name, sync_execution, cancel)
        if not cancel and ".train." in name:
            self.ended["train"].append(m.total_energy)
            self.ended["train_s"].append(m.time)
        elif not cancel and ".epoch." in name:
            self.ended["epoch"].append(m.total_energy)
        return m


class Integration(TrainerCallback):
    def __init__(self) -> None:
        self.logs: list[dict[str, float]] = []

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        self.logs.append(dict(logs or {}))


def train(gpu: SimulatedGPU, out: str, resume: str | None = None) -> dict[str, Any]:
    """One Trainer run; what this rank measured and logged."""
    monitor, integration = RecordingMonitor(gpu), Integration()
    gen = torch.Generator().manual_seed(0)
    data = [{"x": torch.randn(4, generator=gen), "labels": torch.tensor(1.0)} for _ in range(16)]
    args = TrainingArguments(
        os.path.join(out, "trainer"),
        use_cpu=True,
        per_device_train_batch_size=2,
        gradient_accumulation_steps=2,
        num_train_epochs=2,
        logging_strategy="epoch",
        save_strategy="steps",
        save_steps=2,
        report_to="none",
        disable_tqdm=True,
        ddp_backend="gloo",
    )
    model = TinyRegressor()
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=data,
        callbacks=[integration],
    )
    ZeusTrainerCallback(monitor=monitor).attach(trainer)  # logs with Trainer.log: integrations see it
    result = trainer.train(resume_from_checkpoint=resume)
    return {
        "micro_batches": model.micro_batches,
        "global_step": trainer.state.global_step,
        "measured": monitor.ended,
        "logged": integration.logs,
        "metrics": {k: v for k, v in result.metrics.items() if isinstance(v, (int, float))},
    }


def main(out: str) -> None:
    """Train, then resume the same job from its step-2 checkpoint; write this rank's report."""
    rank = int(os.environ["RANK"])
    gpu = SimulatedGPU(PhysicalModel.a40(), index=0, busy=True)
    if rank == 1:
        gpu.set_power_limit(150)
    first = train(gpu, out)  # TrainingArguments set up the process group
    report = {"rank": rank, "world_size": distributed.world_size(), "first": first}
    report["resumed"] = train(gpu, out, resume=os.path.join(out, "trainer", "checkpoint-2"))
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(report, f)
    # Tear the process group down before exit: gloo's threads abort the process if left running.
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
    leave_without_finalisation()
