"""A Hugging Face ``train()`` that fails while a power-limit optimizer profiles; ``hf_failing_train.py OUT``.

The callback is added with ``trainer.add_callback(...)`` and the failure is not caught, so the
process exits with the traceback. A finalizer made before anything else (so it runs last at exit)
writes what the GPU and the monitor look like when the process is about to exit.
"""

from __future__ import annotations

import json
import sys
import weakref
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

OUT = Path(sys.argv[1])
seen: dict[str, Any] = {}


class _Witness:
    pass


witness = _Witness()


def _at_exit() -> None:
    gpu, monitor, recorder = seen.pop("gpu"), seen.pop("monitor"), seen.pop("recorder")
    seen["limit_at_exit_w"] = gpu.get_power_limit()
    seen["open_windows_at_exit"] = list(monitor.open_windows)
    seen["events"] = recorder.events
    OUT.write_text(json.dumps(seen))


weakref.finalize(witness, _at_exit)  # finalizers run newest first at exit: this one runs last

import torch  # noqa: E402
from lightning_accelerate_common import Recorder  # noqa: E402
from transformers import Trainer, TrainingArguments  # noqa: E402

from zeus_core import GlobalPowerLimitOptimizer, PhysicalModel, SimulatedGPU, ZeusMonitor  # noqa: E402
from zeus_integrations.huggingface import ZeusTrainerCallback  # noqa: E402


class Failing(torch.nn.Module):
    def __init__(self, gpu: SimulatedGPU) -> None:
        super().__init__()
        self.lin, self.gpu, self.batches = torch.nn.Linear(4, 1), gpu, 0

    def forward(self, x: Any, labels: Any = None) -> dict[str, Any]:
        self.gpu.run_steps(1)
        self.batches += 1
        if self.batches == 6:
            seen["limit_during_training_w"] = self.gpu.get_power_limit()
            raise RuntimeError("injected training failure")
        return {"loss": ((self.lin(x).squeeze(-1) - labels) ** 2).mean()}


gpu = SimulatedGPU(PhysicalModel.a40(), busy=False)
monitor = ZeusMonitor(gpus=[gpu], cpu_indices=[])
recorder = Recorder()
seen.update(gpu=gpu, monitor=monitor, recorder=recorder, default_limit_w=gpu.get_power_limit())
plo = GlobalPowerLimitOptimizer(monitor, wait_steps=0, warmup_steps=0, profile_steps=2, min_sample_s=0.0)
data = [{"x": torch.randn(4), "labels": torch.tensor(1.0)} for _ in range(16)]
args = TrainingArguments(
    str(OUT.parent / "out"), use_cpu=True, per_device_train_batch_size=2, report_to="none", save_strategy="no"
)
trainer = Trainer(model=Failing(gpu), args=args, train_dataset=data)
trainer.add_callback(ZeusTrainerCallback([plo, recorder], monitor=monitor))
trainer.train()  # fails at batch 6, with a lower limit set for profiling
