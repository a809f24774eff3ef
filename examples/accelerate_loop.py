"""A plain Hugging Face Accelerate training loop measured by Zeus Suite, with no calls inside the loop.

``attach(accelerator, model, optimizer)`` hooks the prepared model and optimizer once; its ``with``
block measures every epoch and optimizer step (gradient accumulation respected) and the whole run,
logs the figures through ``accelerator.log`` and, with ``--optimize``, drives the power-limit
optimizer. Under ``accelerate launch`` / ``torchrun`` every process measures its own GPU and the
printed figures are the job's (energy summed over processes).

Without an NVIDIA GPU a **simulated** NVIDIA A40 stands in: every forward pass runs one unit of
simulated GPU work on the wall clock (``SimulatedGPU.run_steps(1)``: 0.1 s at 300 W at the default
limit; 10 ms with ``--tiny``), and every line printed about energy says "simulated".

Run::

    python examples/accelerate_loop.py                  # about 20 s on a laptop CPU
    python examples/accelerate_loop.py --optimize       # with the power-limit optimizer
    torchrun --nproc-per-node 2 examples/accelerate_loop.py --tiny   # two processes (gloo on CPU)
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["main"]


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3, help="epochs (default 3)")
    parser.add_argument(
        "--batches", type=int, default=40, help="micro-batches per epoch and process (default 40)"
    )
    parser.add_argument(
        "--grad-accum", type=int, default=2, help="micro-batches per optimizer step (default 2)"
    )
    parser.add_argument("--optimize", action="store_true", help="drive the GlobalPowerLimitOptimizer too")
    parser.add_argument(
        "--simulate", action="store_true", help="use a simulated A40 even if a GPU is present"
    )
    parser.add_argument(
        "--tiny", action="store_true", help="a seconds-long run for tests (2 epochs, 8 batches)"
    )
    args = parser.parse_args(argv)
    if args.tiny:
        args.epochs, args.batches = min(args.epochs, 2), 8
    return args


def main(argv: list[str] | None = None) -> int:
    """Train, measure, print the table; returns the exit code."""
    args = _parse(argv)
    import torch
    from accelerate import Accelerator
    from rich.console import Console
    from rich.table import Table
    from torch.utils.data import DataLoader, TensorDataset

    from zeus_core.monitor import ZeusMonitor
    from zeus_core.testing import PhysicalModel, SimulatedGPU
    from zeus_integrations.accelerate import attach

    use_gpu = torch.cuda.is_available() and not args.simulate
    accelerator = Accelerator(cpu=not use_gpu, gradient_accumulation_steps=args.grad_accum)
    console = Console(width=None if sys.stdout.isatty() else 100)
    sim_gpu = None
    if use_gpu:
        monitor = None  # attach() measures the GPU of accelerator.device (and CPU/DRAM where readable)
    else:
        scale = 0.1 if args.tiny else 1.0
        sim_gpu = SimulatedGPU(PhysicalModel.a40(compute_time_s=0.08 * scale, memory_time_s=0.02 * scale))
        monitor = ZeusMonitor(gpus=[sim_gpu], cpu_indices=[])

    g = torch.Generator().manual_seed(0)
    n = 16 * args.batches * accelerator.num_processes
    x = torch.randn(n, 32, generator=g)
    y = (x[:, :4].sum(dim=1, keepdim=True) > 0).float()
    data = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, generator=g)
    model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
    if sim_gpu is not None:

        def simulated_gpu_work(*_: Any) -> None:  # one unit of simulated GPU work per forward pass
            sim_gpu.run_steps(1)

        model.register_forward_hook(simulated_gpu_work)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optimizer, data = accelerator.prepare(model, optimizer, data)

    plo = None
    if args.optimize:
        from zeus_core.optimizer.power_limit import GlobalPowerLimitOptimizer

        plo = GlobalPowerLimitOptimizer(
            monitor
            if monitor is not None
            else ZeusMonitor(gpu_indices=[accelerator.device.index or 0], cpu_indices=[]),
            wait_steps=1,
            warmup_steps=1,
            profile_steps=3 if args.tiny else 5,
        )

    with attach(accelerator, model, optimizer, monitor=monitor, zeus_optimizers=plo) as zeus:
        for _ in range(args.epochs):  # the user's loop, unchanged
            for inputs, targets in data:
                with accelerator.accumulate(model):
                    loss = torch.nn.functional.binary_cross_entropy_with_logits(model(inputs), targets)
                    accelerator.backward(loss)
                    optimizer.step()
                    optimizer.zero_grad()

    if accelerator.is_main_process:
        t = zeus.train_metrics
        tag = " (simulated)" if t.get("simulated") else ""
        where = f"{accelerator.num_processes} process(es)"
        table = Table(title=f"Energy per epoch — Accelerate loop, {where}{tag}")
        source_header = "Source (simulated)" if tag else "Source"
        for column in ("Epoch", "Time (s)", "Energy (J)", "Avg power (W)", source_header):
            table.add_column(column, justify="left" if column == source_header else "right")
        source = "simulated" if tag else "GPU counter"
        for i, m in enumerate(zeus.epoch_history, start=1):
            table.add_row(
                str(i),
                f"{m['time/epoch_s']:.2f}",
                f"{m['energy/epoch_j']:.1f}",
                f"{m['power/avg_w']:.1f}",
                source,
            )
        table.add_row(
            "Total",
            f"{t['time/train_s']:.2f}",
            f"{t['energy/train_j']:.1f}",
            f"{t['power/train_avg_w']:.1f}",
            source,
            style="bold",
        )
        console.print(table)
        steps = zeus.tracker.steps_done if zeus.tracker else 0
        console.print(
            f"{steps} optimizer steps of {args.grad_accum} micro-batches; energy per step "
            f"{t['energy/train_j'] / max(steps, 1):.2f} J{tag}.",
            soft_wrap=True,
        )
        if plo is not None:
            chosen = plo.optimal_power_limit_w
            console.print(
                f"Power-limit optimizer kept {chosen:g} W{tag}."
                if chosen is not None
                else f"Power-limit optimizer was still profiling at the end{tag}.",
                soft_wrap=True,
            )
    # end_training() destroys the process group: let every rank get here first.
    accelerator.wait_for_everyone()
    accelerator.end_training()
    return 0


if __name__ == "__main__":
    sys.exit(main())
