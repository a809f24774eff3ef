"""Lightning Fabric DDP (2 CPU processes, gloo) with ZeusFabricCallback; ``python fabric_ddp.py OUT_DIR``.

Fabric re-executes this script for rank 1. Each rank trains on its own simulated A40 (virtual
clock; rank 1 at a 200 W limit so the ranks differ), validates after each epoch, saves a
checkpoint after epoch 1 and, with a fresh callback, loads it and trains epoch 2 again. Each rank
writes ``OUT_DIR/rank<r>.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).parent))

import torch  # noqa: E402
from lightning.fabric import Fabric  # noqa: E402
from lightning.fabric.loggers import CSVLogger  # noqa: E402
from lightning_accelerate_common import Recorder, leave_without_finalisation  # noqa: E402
from lightning_tiny import loader, simulated_monitor  # noqa: E402

from zeus_integrations import ZeusFabricCallback  # noqa: E402


def epoch(call: Callable[..., None], fabric: Fabric, gpu: Any, model: Any, opt: Any, data: Any) -> None:
    """One epoch and a validation run of 2 units; ``call`` is ``fabric.call`` or a direct call."""
    call("on_train_epoch_start")
    for x, y in data:
        call("on_train_batch_start")
        gpu.run_steps(1)
        fabric.backward(torch.nn.functional.mse_loss(model(x), y))
        opt.step()
        opt.zero_grad()
        call("on_train_batch_end")
    call("on_train_epoch_end")
    call("on_validation_start")
    model.eval()
    with torch.no_grad():
        for _ in range(2):
            gpu.run_steps(1)
    model.train()
    call("on_validation_end")


def main(out: Path) -> None:
    gpu, monitor = simulated_monitor()
    recorder = Recorder()
    zeus = ZeusFabricCallback(recorder, monitor=monitor)
    fabric = Fabric(
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        callbacks=[zeus],
        loggers=CSVLogger(str(out), name="csv"),
    )
    fabric.launch()
    if fabric.global_rank == 1:
        gpu.set_power_limit(200.0)
    net = torch.nn.Linear(4, 1)
    model, opt = fabric.setup(net, torch.optim.SGD(net.parameters(), lr=0.01))
    data = fabric.setup_dataloaders(loader(16))  # 8 batches -> 4 per rank

    fabric.call("on_train_start", fabric=fabric)
    epoch(fabric.call, fabric, gpu, model, opt, data)
    fabric.save(out / "ckpt.pt", {"zeus": zeus})
    epoch(fabric.call, fabric, gpu, model, opt, data)
    fabric.call("on_train_end")
    first = dict(zeus.train_metrics)

    # As a new run of this script would: a fresh callback loads the checkpoint and trains epoch 2.
    resumed_recorder = Recorder()
    resumed = ZeusFabricCallback(resumed_recorder, monitor=monitor)
    fabric.load(out / "ckpt.pt", {"zeus": resumed})

    def direct(name: str, **kwargs: Any) -> None:
        getattr(resumed, name)(**kwargs)

    direct("on_train_start", fabric=fabric)
    epoch(direct, fabric, gpu, model, opt, data)
    direct("on_train_end")
    record = {
        "first": first,
        "epochs": zeus.epoch_history,
        "vals": zeus.stage_history["val"],
        "events": recorder.events,
        "resumed": resumed.train_metrics,
        "resumed_epochs": resumed.epoch_history,
        "resumed_loaded": resumed_recorder.loaded,
        "gpu_energy_j": gpu.get_total_energy(),
    }
    (out / f"rank{fabric.global_rank}.json").write_text(json.dumps(record))
    fabric.logger.finalize("success")  # Fabric leaves flushing its loggers to the loop


if __name__ == "__main__":
    main(Path(sys.argv[1]))
    leave_without_finalisation()
