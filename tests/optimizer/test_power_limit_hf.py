"""HFGlobalPowerLimitOptimizer in real tiny ``Trainer.train()`` runs on the CPU (simulated GPU)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.optimizer.plo_support import make_gpus, monitor_of
from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.power_limit import Energy, GlobalPowerLimitOptimizer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import Trainer, TrainerCallback, TrainingArguments  # noqa: E402

from zeus_integrations import HFGlobalPowerLimitOptimizer  # noqa: E402


class Tiny(torch.nn.Module):
    """y = w·x + b."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 1)

    def forward(self, x: Any, labels: Any = None) -> dict[str, Any]:
        out = self.lin(x).squeeze(-1)
        return {"loss": ((out - labels) ** 2).mean()}


def dataset(n: int) -> list[dict[str, Any]]:
    gen = torch.Generator().manual_seed(0)
    return [{"x": torch.randn(4, generator=gen), "labels": torch.tensor(1.0)} for _ in range(n)]


class StepTime(TrainerCallback):
    """Runs one simulated step on the GPUs' virtual clock per optimizer step (inside the step)."""

    def __init__(self, gpus: list) -> None:
        self.gpus = gpus
        self.limits: list[float] = []

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.limits.append(self.gpus[0].get_power_limit())
        self.gpus[0].run_steps(1)


def training_args(tmp_path: Path, epochs: int) -> TrainingArguments:
    return TrainingArguments(
        output_dir=str(tmp_path),
        use_cpu=True,
        per_device_train_batch_size=2,
        num_train_epochs=epochs,
        logging_strategy="epoch",
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=0,
    )


def test_short_epochs_decide_and_the_limit_reaches_log_history(tmp_path: Path) -> None:
    gpus = make_gpus(1)
    hf = HFGlobalPowerLimitOptimizer(
        monitor_of(gpus),
        Energy(),
        wait_steps=1,
        warmup_steps=2,
        profile_steps=4,
        pl_step=50,
        early_stopping=None,
    )
    timing = StepTime(gpus)
    # 8 optimizer steps per epoch: shorter than warm-up + profile steps of two limits.
    trainer = Trainer(
        model=Tiny(), args=training_args(tmp_path, 5), train_dataset=dataset(16), callbacks=[hf, timing]
    )
    trainer.train()
    plo = hf.optimizer
    assert plo.optimal_power_limit_w == 200  # least energy per step of the synthetic profile
    assert plo.steps_used <= 1 + 6 * 5  # within Zeus's sweep although epochs are 8 steps
    assert [m.steps for m in plo.measurements] == [4] * 5  # nothing lost at the epoch ends
    assert timing.limits[-5:] == [200.0] * 5
    assert gpus[0].get_power_limit() == 300  # on_train_end restored it
    logged = [e["power/limit_w"] for e in trainer.state.log_history if "power/limit_w" in e]
    assert len(logged) >= 5 and logged[-1] == 200


def test_a_plain_optimizer_in_trainer_callbacks_names_the_hf_class(tmp_path: Path) -> None:
    plo = GlobalPowerLimitOptimizer(monitor_of(make_gpus(1)), Energy())
    with pytest.raises(ZeusConfigError, match="HFGlobalPowerLimitOptimizer"):
        Trainer(model=Tiny(), args=training_args(tmp_path, 1), train_dataset=dataset(4), callbacks=[plo])
