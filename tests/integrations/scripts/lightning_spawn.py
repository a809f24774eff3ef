"""Lightning ``ddp_spawn`` (2 CPU processes, gloo) with ZeusCallback: ``lightning_spawn.py OUT_DIR MODE``.

MODE ``passed``: the callback gets a monitor built in the launching process (a simulated A40 on a
virtual clock), which travels to the spawned processes by pickling. MODE ``default``: the callback
builds its own monitor in each spawned process (``simulate="a40"``, as there is no GPU). Each rank
writes ``OUT_DIR/rank<r>.json`` with what its callback measured and its GPU's own counter.
"""

from __future__ import annotations

import atexit
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import lightning.pytorch as pl  # noqa: E402
from lightning_accelerate_common import leave_without_finalisation  # noqa: E402
from lightning_tiny import Recorder, TinyModule, loader, simulated_monitor, trainer_kwargs  # noqa: E402

from zeus_integrations.lightning import ZeusCallback  # noqa: E402


class Report(pl.Callback):
    """Listed after ZeusCallback: writes what it measured in this (spawned) process."""

    def __init__(self, zeus: ZeusCallback, recorder: Recorder, out: Path) -> None:
        self.zeus, self.recorder, self.out = zeus, recorder, out

    def on_train_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        gpus = self.zeus.monitor.gpus if self.zeus.monitor is not None else []
        record = {
            "train": self.zeus.train_metrics,
            "epochs": self.zeus.epoch_history,
            "events": self.recorder.events,
            "gpu_energy_j": sum(g.get_total_energy() for g in gpus),
        }
        (self.out / f"rank{trainer.global_rank}.json").write_text(json.dumps(record))
        # This spawned rank ends through multiprocessing, not this script: once its training is over, it
        # leaves without interpreter finalisation. A later exception still reaches the launcher through
        # torch.multiprocessing's error queue.
        atexit.register(leave_without_finalisation)


def main(out: Path, mode: str) -> None:
    recorder = Recorder()
    if mode == "passed":
        gpu, monitor = simulated_monitor()
        zeus = ZeusCallback(recorder, monitor=monitor)
        model = TinyModule(gpu)
    else:
        zeus = ZeusCallback(recorder, simulate="a40")
        model = TinyModule(simulated_monitor()[0])  # its GPU is only the model's work clock here
    trainer = pl.Trainer(
        callbacks=[zeus, Report(zeus, recorder, out)],
        **trainer_kwargs(str(out), max_epochs=1, strategy="ddp_spawn", devices=2),
    )
    trainer.fit(model, loader(16))  # 8 batches -> 4 per rank


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
