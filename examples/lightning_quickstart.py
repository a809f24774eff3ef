"""Zeus Suite quick start (``make demo``): measure a Lightning fit with one line, optionally optimize it.

A small MLP learns a synthetic classification task with ``Trainer(callbacks=[ZeusCallback()])``.
The script prints an energy table (time, energy and average power per epoch, and the totals) and
saves a plot of the GPU's power over the run. ``--optimize`` adds the
:class:`~zeus_core.optimizer.power_limit.GlobalPowerLimitOptimizer`, which profiles GPU power
limits during the first steps and keeps the best one (least energy within ``--max-slowdown`` of
the fastest).

Where is the GPU? With an NVIDIA GPU the model trains on it and its real energy counter is read.
Without one, the model trains on the CPU and a **simulated** NVIDIA A40 (the documented
``PhysicalModel``) stands in for the GPU, on a *virtual clock*: every forward pass of the model is
one unit of simulated GPU work (``SimulatedGPU.run_steps(1)`` advances the clock by the modelled
time, 0.1 s at the default 300 W limit and longer under lower limits, drawing the modelled power),
and each training step adds 10 ms of host-side work during which the GPU idles at 30 W. Times and
energies are therefore the model's, not this machine's: the output is the same on a fast laptop
and on a loaded CI box, run after run, and the ``--optimize`` decision with it. Power limits
change step time and energy just as the model says, and every line this script prints about
energy says "simulated".

Run::

    python examples/lightning_quickstart.py               # ~10 s of CPU; 3 simulated epochs
    python examples/lightning_quickstart.py --optimize    # with the power-limit optimizer
    python examples/lightning_quickstart.py --tiny        # a few seconds (CI)

Outputs go to ``--out`` (default ``out/``): Lightning's CSV metrics (the ``energy/...`` keys the
callback logs) and ``lightning_quickstart_power.png``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from pathlib import Path
from typing import Any

__all__ = ["main"]

logger = logging.getLogger("lightning_quickstart")


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--epochs",
        type=int,
        default=None,
        help="training epochs (default 3, or 5 with --optimize so profiling can finish)",
    )
    parser.add_argument("--batches", type=int, default=50, help="optimizer steps per epoch (default 50)")
    parser.add_argument("--hidden", type=int, default=256, help="MLP width (raise it to load a real GPU)")
    parser.add_argument(
        "--batch-size", type=int, default=32, help="samples per step (raise it to load a real GPU)"
    )
    parser.add_argument("--optimize", action="store_true", help="add the GlobalPowerLimitOptimizer")
    parser.add_argument(
        "--max-slowdown",
        type=float,
        default=1.1,
        help="optimizer goal: least energy within this factor of the fastest (default 1.1)",
    )
    parser.add_argument(
        "--simulate", action="store_true", help="use a simulated A40 even if a GPU is present"
    )
    parser.add_argument(
        "--tiny", action="store_true", help="a seconds-long run for tests (2 epochs of 30 short steps)"
    )
    parser.add_argument("--out", type=Path, default=Path("out"), help="output folder (default out/)")
    args = parser.parse_args(argv)
    if args.epochs is None:
        args.epochs = 5 if args.optimize else 3
    if args.tiny:
        args.epochs, args.batches, args.hidden = min(args.epochs, 2), 30, 32
    return args


#: Host-side time of one training step on the simulated path (data loading, optimizer), s.
HOST_STEP_S = 0.01


def _devices(args: argparse.Namespace) -> tuple[Any, Any, str]:
    """(monitor, simulated GPU or None, device label) for this machine."""
    import torch

    from zeus_core.monitor import ZeusMonitor
    from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock

    if not args.simulate and torch.cuda.is_available():
        from zeus_core.device import get_gpus

        real = [g for g in get_gpus() if g.index == torch.cuda.current_device()]
        if real:
            # GPU energy only, as on the simulated path.
            return ZeusMonitor(gpus=real, cpu_indices=[]), None, real[0].name
    # One unit of simulated work: 0.1 s at 300 W on the A40 model, on a virtual clock.
    gpu = SimulatedGPU(PhysicalModel.a40(), clock=VirtualClock())
    return ZeusMonitor(gpus=[gpu], cpu_indices=[]), gpu, gpu.behavior.gpu_name


def _data(args: argparse.Namespace, samples: int, seed: int) -> Any:
    """Two interleaved noisy spirals in 16 dimensions (a small, learnable task)."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    g = torch.Generator().manual_seed(seed)
    t = torch.rand(samples, generator=g) * 12.0
    label = torch.randint(0, 2, (samples,), generator=g)
    angle = t + label * torch.pi
    xy = torch.stack([t * torch.cos(angle), t * torch.sin(angle)], dim=1) / 12.0
    x = torch.cat([xy, 0.1 * torch.randn(samples, 14, generator=g)], dim=1)
    return DataLoader(TensorDataset(x, label), batch_size=args.batch_size, shuffle=seed == 0, generator=g)


def _model(args: argparse.Namespace) -> Any:
    import lightning.pytorch as pl
    import torch

    class SpiralMLP(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            h = args.hidden
            self.net = torch.nn.Sequential(
                torch.nn.Linear(16, h),
                torch.nn.ReLU(),
                torch.nn.Linear(h, h),
                torch.nn.ReLU(),
                torch.nn.Linear(h, 2),
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self(x), y)
            self.log("train_loss", loss, prog_bar=True)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            x, y = batch
            self.log("val_acc", (self(x).argmax(dim=1) == y).float().mean(), prog_bar=True)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.AdamW(self.parameters(), lr=3e-3)

    return SpiralMLP()


def _epoch_marks(gpu_of_record: Any, clock: Any) -> Any:
    """A callback noting epoch start/end times and the power limit at each step and epoch end."""
    import lightning.pytorch as pl

    class EpochMarks(pl.Callback):
        def __init__(self) -> None:
            self.starts: list[float] = []
            self.ends: list[float] = []
            self.limit_timeline: list[tuple[float, float]] = []  # (t s, W) at each step start

        def _limit(self) -> float | None:
            try:
                return gpu_of_record.get_power_limit() if gpu_of_record else None
            except Exception:  # a GPU that does not report its limit
                return None

        def on_train_batch_start(
            self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
        ) -> None:
            limit = self._limit()
            if limit is not None:
                self.limit_timeline.append((clock(), limit))

        def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
            self.starts.append(clock())

        def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
            self.ends.append(clock())

    return EpochMarks()


def _limit_in_force(marks: Any, epoch: int) -> str:
    """The power limit(s) in force during an epoch's steps: ``"275"``, or ``"300–200"`` while profiling."""
    if epoch >= len(marks.starts):
        return "—"
    end = marks.ends[epoch] if epoch < len(marks.ends) else float("inf")
    limits = [w for t, w in marks.limit_timeline if marks.starts[epoch] <= t <= end]
    if not limits:
        return "—"
    if min(limits) == max(limits):
        return f"{limits[0]:g}"
    return f"{max(limits):g}–{min(limits):g}"


def _print_report(console: Any, zeus: Any, marks: Any, label: str, simulated: bool, plo: Any) -> None:
    from rich.table import Table

    tag = " (simulated)" if simulated else ""
    table = Table(title=f"Energy per training epoch, validation excluded — {label}{tag}")
    source_header = "Source (simulated)" if simulated else "Source"
    for column in ("Epoch", "Time (s)", "Energy (J)", "Avg power (W)", "Limit (W)", source_header):
        table.add_column(column, justify="left" if column == source_header else "right")
    source = "simulated" if simulated else "GPU counter"
    for i, m in enumerate(zeus.epoch_history):
        table.add_row(
            str(i + 1),
            f"{m['time/epoch_s']:.2f}",
            f"{m['energy/epoch_j']:.1f}",
            f"{m['power/avg_w']:.1f}",
            _limit_in_force(marks, i),
            source,
        )
    t = zeus.train_metrics
    table.add_row(
        "Total",
        f"{t['time/train_s']:.2f}",
        f"{t['energy/train_j']:.1f}",
        f"{t['power/train_avg_w']:.1f}",
        "",
        source,
        style="bold",
    )
    console.print(table)
    if t.get("estimated"):
        console.print(
            f"GPU energy was estimated from sampled power (no energy counter){tag}.", soft_wrap=True
        )
    if plo is not None:
        chosen = plo.optimal_power_limit_w
        console.print(
            f"Power-limit optimizer: kept {chosen:g} W after profiling{tag}; the original limits "
            "were restored when training ended."
            if chosen is not None
            else f"Power-limit optimizer: still profiling when training ended{tag} (train longer).",
            soft_wrap=True,
        )


def _plot(pm: Any, marks: Any, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timeline = pm.get_power_timeline()
    origin = marks.starts[0] if marks.starts else 0.0
    fig, ax = plt.subplots(figsize=(9, 3.6))
    for index, samples in timeline.items():
        if samples:
            ts, ws = zip(*samples)
            ax.plot([x - origin for x in ts], ws, lw=0.8, label=f"GPU {index}")
    for i, (start, end) in enumerate(zip(marks.starts, marks.ends)):
        ax.axvspan(start - origin, end - origin, color="tab:green" if i % 2 else "tab:olive", alpha=0.08)
        ax.text(start - origin, ax.get_ylim()[1] * 0.97, f" epoch {i + 1}", va="top", fontsize=8)
    if marks.limit_timeline:
        ts, ws = zip(*marks.limit_timeline)
        ax.step(
            [x - origin for x in ts], ws, where="post", color="tab:red", ls="--", lw=1.2, label="power limit"
        )
    ax.set(xlabel="time since training start (s)", ylabel="power (W)", title=title)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _simulated_gpu_work(gpu: Any, pm: Any) -> Any:
    """A forward hook: host-side work at idle power, then one unit of simulated GPU work (virtual time)."""

    def simulated_gpu_work(*_: Any) -> None:
        gpu.clock.advance(HOST_STEP_S)
        pm.sample_now()  # idle until now
        gpu.set_busy(True)
        pm.sample_now()
        gpu.run_steps(1)
        pm.sample_now()  # busy until now
        gpu.set_busy(False)
        pm.sample_now()

    return simulated_gpu_work


def _tag_simulated(record: logging.LogRecord) -> bool:
    """Logging filter: make sure a log line about a simulated run says so."""
    message = record.getMessage()
    if "simulated" not in message:
        record.msg, record.args = message + " [simulated]", ()
    return True


def main(argv: list[str] | None = None) -> int:
    """Run the quick start; returns the exit code."""
    args = _parse(argv)
    from rich.console import Console

    console = Console(width=None if sys.stdout.isatty() else 100)  # no wrapping at 80 columns in logs
    logging.basicConfig(level=logging.WARNING, format="  [%(name)s] %(message)s")
    logging.getLogger("zeus_core.optimizer.power_limit").setLevel(logging.INFO)
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    warnings.filterwarnings("ignore", message=".*isinstance.treespec, LeafSpec.*")

    import lightning.pytorch as pl

    from zeus_core.exceptions import ZeusError
    from zeus_core.monitor import PowerMonitor
    from zeus_integrations.lightning import ZeusCallback

    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    monitor, sim_gpu, label = _devices(args)
    simulated = monitor.simulated
    tag = " (simulated)" if simulated else ""
    if simulated:  # log lines from the optimizer say "simulated" too, every one of them
        for handler in logging.getLogger().handlers:
            handler.addFilter(_tag_simulated)
    plo = None
    if args.optimize:
        from zeus_core.optimizer.power_limit import GlobalPowerLimitOptimizer, MaxSlowdownConstraint

        try:
            selector = MaxSlowdownConstraint(args.max_slowdown)
            plo = GlobalPowerLimitOptimizer(
                monitor,
                optimum_selector=selector,
                wait_steps=1,
                warmup_steps=1 if args.tiny else 2,
                profile_steps=3 if args.tiny else 16,
            )
        except ZeusError as e:
            console.print(f"[red]Cannot optimize power limits here:[/red] {e}")
            return 2
    zeus = ZeusCallback(plo, monitor=monitor)
    marks = _epoch_marks(monitor.gpus[0] if monitor.gpus else None, monitor.gpus[0].clock)
    model = _model(args)
    pm = PowerMonitor(gpus=monitor.gpus, interval_s=0.1)
    if sim_gpu is not None:  # every forward pass (training and validation) is one unit of simulated GPU work
        model.register_forward_hook(_simulated_gpu_work(sim_gpu, pm))
    out = args.out
    trainer = pl.Trainer(
        max_epochs=args.epochs,
        limit_train_batches=args.batches,
        limit_val_batches=4,
        accelerator="cpu" if sim_gpu is not None else "gpu",
        devices=1,
        callbacks=[zeus, marks],
        logger=pl.loggers.CSVLogger(out, name="lightning_quickstart"),
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        log_every_n_steps=10,
    )
    console.print(
        f"Training a {args.hidden}-wide MLP for {args.epochs} epoch(s) of {args.batches} steps; "
        f"energy measured on {label}{tag}"
        + (
            " — virtual time: each forward pass is one unit of simulated GPU work (0.1 s at 300 W), "
            f"each step adds {HOST_STEP_S * 1000:g} ms at idle power"
            if sim_gpu is not None
            else ""
        )
        + (f"; power-limit optimizer on (≤ {args.max_slowdown:g}× slowdown)" if plo else "")
        + ".",
        soft_wrap=True,
    )
    if sim_gpu is None:  # on the virtual clock, the hook samples power at every change instead
        pm.start()
    try:
        train = _data(args, args.batch_size * args.batches, seed=0)
        trainer.fit(model, train, _data(args, 4 * args.batch_size, seed=1))
    finally:
        pm.stop()
        monitor.close()
    _print_report(console, zeus, marks, label, simulated, plo)
    plot_path = out / "lightning_quickstart_power.png"
    _plot(pm, marks, plot_path, f"GPU power during training — {label}{tag}")
    console.print(
        f"Lightning logged the energy metrics to {trainer.logger.log_dir}/metrics.csv{tag}; "
        f"power plot{tag}: {plot_path}",
        soft_wrap=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
