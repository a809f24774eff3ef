"""2-rank DeepSpeed PipelineEngine run (gloo, CPU) with a given Perseus plan on simulated A40s.

Writes ``deepspeed-rank<r>.json``: the runtime's iterations (instructions with their clocks), the
controller's requests and changes, and the clock after close. The plan gives every instruction a
distinct clock.
Usage: python -m torch.distributed.run --nproc-per-node 2 deepspeed_pipeline.py OUT_DIR
"""

from __future__ import annotations

import faulthandler
import os
import sys

os.environ.setdefault("DS_BUILD_OPS", "0")
os.environ.setdefault("DS_ACCELERATOR", "cpu")

import deepspeed  # noqa: E402
import torch  # noqa: E402
from _emulation import dump, make_gpu, runtime_report, work  # noqa: E402
from _support import cpu_shims  # noqa: E402
from deepspeed.pipe import PipelineModule  # noqa: E402

from zeus_core.optimizer.pipeline_frequency import (
    FrequencyPlan,  # noqa: E402
    synchronous_1f1b,  # noqa: E402
)
from zeus_core.optimizer.pipeline_frequency.runtime import PerseusRuntime  # noqa: E402
from zeus_integrations.pipeline import deepspeed as zeus_ds  # noqa: E402

MICROBATCHES = 4


def main(out: str) -> None:
    faulthandler.dump_traceback_later(150, exit=True)
    cpu_shims.deepspeed_on_cpu()  # no minutes-long JIT build of DeepSpeed's shm op on CPU
    deepspeed.init_distributed(dist_backend="gloo")
    rank = torch.distributed.get_rank()
    gpu = make_gpu(rank)
    torch.manual_seed(0)
    works = [work(gpu, 0.004), work(gpu, 0.008)]
    layers = [torch.nn.Linear(16, 16), works[0], torch.nn.Linear(16, 16), works[1]]
    model = PipelineModule(
        layers=layers, num_stages=2, loss_fn=torch.nn.MSELoss(), partition_method="uniform"
    )
    config = {
        "train_batch_size": 8,
        "train_micro_batch_size_per_gpu": 2,
        "gradient_accumulation_steps": 4,
        "steps_per_print": 10**6,
        "optimizer": {"type": "SGD", "params": {"lr": 0.01}},
    }
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)

    clocks = gpu.supported_sm_frequencies()
    sched = synchronous_1f1b(2, MICROBATCHES)
    plan = FrequencyPlan(
        "1f1b",
        2,
        MICROBATCHES,
        {
            inst: clocks[2 * (inst.stage * 8 + (inst.kind.value == "backward") * 4 + inst.microbatch)]
            for inst in sched.instructions()
        },
        label="test",
    )

    data = [(torch.randn(2, 16), torch.randn(2, 16)) for _ in range(4 * MICROBATCHES)]
    runtime = PerseusRuntime(gpu, plan=plan)
    with runtime, zeus_ds.attach(runtime, engine) as attachment:
        it = iter(data)
        for _ in range(3):
            engine.train_batch(it)
        engine.eval_batch(iter(data[:MICROBATCHES]))  # forwards outside an iteration: ignored
    assert not attachment.attached and "_INSTRUCTION_MAP" not in vars(engine)
    report = runtime_report(runtime)
    report["given_plan"] = plan.to_dict()
    report["work_clocks"] = works[rank].clocks
    dump(out, "deepspeed", report)
    # Tear the process group down before exit: gloo's threads can abort the process if left running.
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
    # Leave without interpreter finalisation, where gloo's threads can abort (pytorch/pytorch#179291).
    sys.stdout.flush()
    os._exit(0)
