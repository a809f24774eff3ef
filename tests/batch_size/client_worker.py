"""Worker run by ``torch.distributed.run`` in test_client.py.

Every rank drives the same BatchSizeOptimizer calls; it writes what it saw to ``$BSO_OUT/rank<r>.txt``:
trial number, batch size, the stop decision after a converging epoch, and the error class raised
on every rank when rank 0's request fails (a decreasing cumulative time).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main() -> int:
    """Join the gloo group, run one trial, write the results."""
    import torch.distributed as dist

    from zeus_core.exceptions import ZeusError
    from zeus_core.optimizer.batch_size._client import BatchSizeOptimizer
    from zeus_core.optimizer.batch_size._spec import JobSpec

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    spec = JobSpec("job", (32, 64, 128, 256), 128, target_metric=0.9, max_power_w=300.0, seed=1, max_epochs=5)
    bso = BatchSizeOptimizer(os.environ["BSO_URL"], spec)
    batch_size = bso.get_batch_size()
    bso.on_epoch_end(1, time_s=10.0, energy_j=1000.0, metric=0.5)
    error = "none"
    try:
        bso.on_epoch_end(2, time_s=5.0, energy_j=1500.0, metric=0.5)  # rejected by the server (422)
    except ZeusError as err:
        error = type(err).__name__
    stopped = bso.on_epoch_end(2, time_s=20.0, energy_j=2000.0, metric=0.95)
    bso.close()
    Path(os.environ["BSO_OUT"], f"rank{rank}.txt").write_text(
        f"{bso.trial_number} {batch_size} {stopped} {error}\n"
    )
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    # Leave without interpreter finalisation, where gloo's threads can abort (pytorch/pytorch#179291).
    sys.stdout.flush()
    os._exit(code or 0)
