"""Lightning DDP (2 CPU processes, gloo) with ZeusCallback; run as ``python lightning_ddp.py OUT_DIR``.

Lightning re-executes this script for rank 1. Each rank trains on its own simulated A40 (virtual
clock); rank 1 runs at a 200 W power limit so the ranks' energies differ. Phase 1 fits one epoch
and saves a checkpoint; phase 2 resumes from it to a second epoch with a fresh callback. Each rank
writes ``OUT_DIR/rank<r>.json`` with its own GPU's energy counter and what its callback logged.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import lightning.pytorch as pl  # noqa: E402
from lightning_accelerate_common import leave_without_finalisation  # noqa: E402
from lightning_tiny import Recorder, TinyModule, loader, simulated_monitor, trainer_kwargs  # noqa: E402

from zeus_integrations.lightning import ZeusCallback  # noqa: E402


class RankedModule(TinyModule):
    def setup(self, stage: str) -> None:
        if self.global_rank == 1 and self.gpu.get_power_limit() != 200.0:
            self.gpu.set_power_limit(200.0)


def main(out: Path) -> None:
    gpu, monitor = simulated_monitor()
    ddp: dict[str, Any] = dict(strategy="ddp", devices=2)

    first = Recorder()
    zeus = ZeusCallback(first, monitor=monitor)
    ckpt = pl.callbacks.ModelCheckpoint(dirpath=out / "ckpt", save_last=True)
    trainer = pl.Trainer(
        callbacks=[zeus, ckpt],
        accumulate_grad_batches=2,
        **trainer_kwargs(str(out / "first"), max_epochs=1, enable_checkpointing=True, **ddp),
    )
    model = RankedModule(gpu)
    trainer.fit(model, loader(16))  # 8 batches -> 4 per rank
    rank = trainer.global_rank
    after_first = gpu.get_total_energy()
    first_metrics = dict(zeus.train_metrics)

    resumed = ZeusCallback(Recorder(), monitor=monitor)
    trainer2 = pl.Trainer(
        callbacks=[resumed],
        accumulate_grad_batches=2,
        **trainer_kwargs(str(out / "resumed"), max_epochs=2, **ddp),
    )
    trainer2.fit(model, loader(16), ckpt_path=out / "ckpt" / "last.ckpt")

    (out / f"rank{rank}.json").write_text(
        json.dumps(
            {
                "rank": rank,
                "gpu_energy_after_first_fit_j": after_first,
                "gpu_energy_j": gpu.get_total_energy(),
                "first": first_metrics,
                "events_first": first.events,
                "resumed": resumed.train_metrics,
            }
        )
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
    leave_without_finalisation()
