"""Two-process Accelerate loop with the Zeus hook (CPU, gloo); run under torchrun with ``OUT_DIR``.

Each process trains on its own simulated A40 (virtual clock); rank 1 runs at a 200 W power limit so
the processes' energies differ. Each writes ``OUT_DIR/rank<r>.json`` with its own GPU's energy
counter and what the hook reported.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import torch  # noqa: E402
from accelerate import Accelerator  # noqa: E402
from accelerate_tiny import RecordingTracker, SimModel, loader, run_epochs  # noqa: E402
from lightning_accelerate_common import Recorder, leave_without_finalisation  # noqa: E402

from zeus_core.monitor._energy import ZeusMonitor  # noqa: E402
from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock  # noqa: E402
from zeus_integrations.accelerate import attach  # noqa: E402


def main(out: Path) -> None:
    logged = RecordingTracker()
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=2, log_with=[logged])
    accelerator.init_trackers("zeus-ddp")
    rank = accelerator.process_index
    gpu = SimulatedGPU(PhysicalModel.a40(), clock=VirtualClock())
    if rank == 1:
        gpu.set_power_limit(200.0)
    model = SimModel(gpu)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    model, opt, train = accelerator.prepare(model, opt, loader(16))  # 8 batches -> 4 per process
    events = Recorder()
    with attach(
        accelerator, model, opt, zeus_optimizers=events, monitor=ZeusMonitor(gpus=[gpu], cpu_indices=[])
    ) as zeus:
        run_epochs(accelerator, model, opt, train, epochs=2)
    (out / f"rank{rank}.json").write_text(
        json.dumps(
            {
                "world_size": accelerator.num_processes,
                "gpu_energy_j": gpu.get_total_energy(),
                "train": zeus.train_metrics,
                "epochs": zeus.epoch_history,
                "events": events.events,
                "logged_train": logged.column("energy/train_j"),
            }
        )
    )
    # end_training() destroys the process group; without a barrier first, a rank that gets there early
    # can tear gloo down while the other still reads the last reduction, and that rank aborts.
    accelerator.wait_for_everyone()
    accelerator.end_training()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
    leave_without_finalisation()
