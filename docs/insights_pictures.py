"""Regenerate the pictures of docs/insights.md: ``python docs/insights_pictures.py`` (needs Chromium).

Every run here measures simulated devices (a simulated A40 on a virtual clock, or a fake NVML GPU
that heats up), so the pictures illustrate the report; they are not measurements of real hardware.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "integrations" / "scripts")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["ZEUS_SUITE_QUIET"] = "1"
IMG = ROOT / "docs" / "img"


def lightning_run(folder: Path) -> Path:
    """A 6-epoch Lightning fit with a power-limit optimizer and a warm-up, carbon for Germany, a price."""
    import lightning.pytorch as pl
    from lightning_tiny import TinyModule, loader, simulated_monitor, trainer_kwargs

    from zeus_core.carbon import Footprint
    from zeus_core.optimizer.power_limit import GlobalPowerLimitOptimizer
    from zeus_core.training import EnergyInsights
    from zeus_integrations.lightning import ZeusCallback

    class WarmingUp(TinyModule):
        def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
            if self.batches_run < 3:
                self.gpu.run_steps(4)
            return super().training_step(batch, batch_idx)

    gpu, monitor = simulated_monitor()
    plo = GlobalPowerLimitOptimizer(monitor, wait_steps=1, warmup_steps=2, profile_steps=10, pl_step=25)
    insights = EnergyInsights(footprint=Footprint("DE", price_per_kwh=0.30, currency="EUR"))
    zeus = ZeusCallback(plo, monitor=monitor, insights=insights)
    trainer = pl.Trainer(callbacks=[zeus], **trainer_kwargs(str(folder), max_epochs=6))
    trainer.fit(WarmingUp(gpu), loader(256, batch_size=2), loader(16))
    return next(folder.glob("csv/version_*"))


def hf_run(folder: Path) -> Path:
    """A tiny GPT-2 (from a config) trained by the Hugging Face Trainer, carbon for France."""
    import torch
    import transformers

    from zeus_core.carbon import Footprint
    from zeus_core.monitor._energy import ZeusMonitor
    from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock
    from zeus_core.training import EnergyInsights
    from zeus_integrations.huggingface import ZeusTrainerCallback

    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    rows = []
    for i in range(64):
        ids = torch.randint(0, 64, (8,))
        mask = torch.ones(8, dtype=torch.long)
        mask[8 - i % 3 :] = 0
        rows.append({"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)})
    gpu = SimulatedGPU(PhysicalModel.a40(), clock=VirtualClock())  # 0.1 s at 300 W per forward pass
    monitor = ZeusMonitor(gpus=[gpu], cpu_indices=[])
    zeus = ZeusTrainerCallback(monitor=monitor, insights=EnergyInsights(footprint=Footprint("FR")))

    class Busy(transformers.GPT2LMHeadModel):
        def forward(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            if self.training:
                gpu.run_steps(1)
            return super().forward(*args, **kwargs)

    args = transformers.TrainingArguments(
        output_dir=str(folder),
        use_cpu=True,
        per_device_train_batch_size=4,
        num_train_epochs=4,
        logging_strategy="epoch",
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        remove_unused_columns=False,
    )
    transformers.Trainer(model=Busy(config), args=args, train_dataset=rows, callbacks=[zeus]).train()
    return folder


def hot_command(folder: Path) -> Path:
    """A command's record on a fake NVML GPU that heats up and slows down (virtual clock)."""
    from zeus_core.carbon import Footprint
    from zeus_core.device import _base as device_base
    from zeus_core.monitor._measurement import Measurement
    from zeus_core.testing import FakeGPUSpec, FakeNVML, VirtualClock
    from zeus_core.training._run_record import Timeline, command_record, write_record

    clock = VirtualClock(0.0)
    spec = FakeGPUSpec.a40(
        power_w=60.0,
        thermal_resistance_c_per_w=0.2,
        thermal_time_constant_s=25.0,
        slowdown_c=80.0,
        leakage_per_c=0.003,
    )
    fake = FakeNVML([spec], clock=clock)
    device_base.wall_clock = clock  # type: ignore[assignment]
    with fake.install():
        from zeus_core.device._nvidia import nvidia_gpus

        gpu = nvidia_gpus(environ={})[0]
        timeline = Timeline([gpu], interval_s=1.0, clock=clock)
        timeline.start()
        e0 = gpu.get_total_energy()
        rng = random.Random(0)
        for phase_s, watts in ((20, 60.0), (150, 300.0), (60, 60.0), (100, 300.0)):
            for _ in range(int(phase_s / 0.5)):
                fake.set_power(0, watts * rng.gauss(1.0, 0.01))
                clock.advance(0.5)
                timeline.tick()
        timeline.stop()
        m = Measurement(time=clock() - timeline.start_s, gpu_energy={0: gpu.get_total_energy() - e0})
        record = command_record("python train.py", 0, m, [gpu], [], 0.0, Footprint("US", price_per_kwh=0.15))
        record["simulated"] = True
        write_record(folder, record, timeline.rows())
    return folder


def shot(html: Path, png: Path, height: int) -> None:
    """Screenshot ``html`` with headless Chromium, 1100 px wide."""
    subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--window-size=1100,{height}",
            f"--screenshot={png}",
            html.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )


def main() -> None:
    """Run the three runs, write their reports, and save the pictures into docs/img."""
    from zeus_core._cli import main as cli
    from zeus_core.report import load_run
    from zeus_core.report._plots import energy_figure, forecast_figure, power_figure, power_limit_figure

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        runs = {
            "lightning": lightning_run(tmp_path / "lightning"),
            "hf": hf_run(tmp_path / "hf"),
            "thermal": hot_command(tmp_path / "thermal"),
        }
        for name, folder in runs.items():
            out = tmp_path / f"{name}.html"
            cli(["report", str(folder), "-o", str(out), "--quiet"])
            if shutil.which("chromium"):
                shot(out, IMG / f"insights-report-{name}.png", {"thermal": 1080, "hf": 1900}.get(name, 2300))
        lightning, hf, thermal = (load_run(runs[k]) for k in ("lightning", "hf", "thermal"))
        pictures = {
            "insights-energy-per-token.png": energy_figure(hf),
            "insights-forecast.png": forecast_figure(lightning),
            "insights-thermal.png": power_figure(thermal),
            "insights-power-limit.png": power_limit_figure(lightning),
        }
        for name, png in pictures.items():
            if png is not None:
                (IMG / name).write_bytes(png)
    print("written:", sorted(p.name for p in IMG.glob("insights-*.png")))


if __name__ == "__main__":
    main()
