"""Energy insights in real tiny fits (Lightning, Hugging Face Trainer, Accelerate) and their reports.

* A 10-epoch steady Lightning fit whose first three batches run five units of work (warm-up) on a
  simulated A40 on a virtual clock (one unit: 0.1 s at 300 W): the forecast after epoch one is
  within 5 % of the outcome (ten times the first epoch would be 20 % off), with the network cut off
  and a live carbon provider configured (it falls back to the table and says so).
* A tiny GPT-2 built from a config (no download) in Lightning, the Hugging Face ``Trainer`` and an
  Accelerate loop: J/sample and J/token (padding excluded) in each framework's own log.
* ``zeus-suite report`` for the Lightning run, the Trainer run and a command measured with
  ``zeus-suite measure --output``: the page parses and holds every figure; where Chromium is
  installed, it opens the page headless and checks each figure was decoded and drawn.
"""

from __future__ import annotations

import base64
import csv
import json
import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Iterator

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pl = pytest.importorskip("lightning.pytorch")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tests.insights.conftest import cut_network  # noqa: E402

SCRIPTS = Path(__file__).resolve().parents[1] / "integrations" / "scripts"
sys.path.insert(0, str(SCRIPTS))
from accelerate_tiny import RecordingTracker  # noqa: E402
from lightning_tiny import UNIT_ENERGY_J, UNIT_TIME_S, TinyModule, loader, simulated_monitor, trainer_kwargs  # noqa: E402

from zeus_core.carbon import ElectricityMapsProvider, Footprint  # noqa: E402
from zeus_core.monitor._energy import ZeusMonitor  # noqa: E402
from zeus_core.report import load_run, render_html  # noqa: E402
from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock  # noqa: E402
from zeus_core.training._insights import EnergyInsights  # noqa: E402
from zeus_integrations.lightning import ZeusCallback  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
EPOCHS, SAMPLES, BATCH = 10, 64, 2  # 32 steps per epoch
WARMUP_BATCHES, WARMUP_UNITS = 3, 4  # the first three batches run 1 + 4 units


class WarmingUp(TinyModule):
    """TinyModule whose first batches are slow, like compilation or autotuning on a real GPU."""

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        if self.batches_run < WARMUP_BATCHES:
            self.gpu.run_steps(WARMUP_UNITS)
        return super().training_step(batch, batch_idx)


def tiny_lm() -> Any:
    """A 1-layer GPT-2 from a config (random weights, nothing downloaded)."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    return transformers.GPT2LMHeadModel(config)


def lm_rows(n: int, seq: int = 8) -> list[dict[str, Any]]:
    """Causal-LM samples; sample i ends in ``i % 3`` padding tokens (masked, not counted)."""
    g = torch.Generator().manual_seed(0)
    rows = []
    for i in range(n):
        ids = torch.randint(0, 64, (seq,), generator=g)
        mask = torch.ones(seq, dtype=torch.long)
        mask[seq - i % 3 :] = 0
        rows.append({"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)})
    return rows


def lm_tokens(rows: list[dict[str, Any]]) -> int:
    return int(sum(int(r["attention_mask"].sum()) for r in rows))


def csv_column(folder: Path, key: str) -> list[float]:
    (path,) = folder.glob("csv/version_*/metrics.csv")
    with path.open(newline="") as f:
        return [float(row[key]) for row in csv.DictReader(f) if row.get(key)]


# -- the runs (each once per module) ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def lightning_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ZeusCallback, Path, list[str]]]:
    import logging

    from zeus_core import console

    folder = tmp_path_factory.mktemp("lightning")
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger(console.LOGGER_NAME).addHandler(handler)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("ZEUS_SUITE_QUIET", raising=False)
        tried = cut_network(mp)
        gpu, monitor = simulated_monitor()
        live = ElectricityMapsProvider("DE", token="test", timeout_s=1.0)
        footprint = Footprint("DE", provider=live, price_per_kwh=0.30, currency="EUR")
        zeus = ZeusCallback(monitor=monitor, insights=EnergyInsights(footprint=footprint))
        trainer = pl.Trainer(
            callbacks=[zeus], num_sanity_val_steps=0, **trainer_kwargs(str(folder), max_epochs=EPOCHS)
        )
        trainer.fit(WarmingUp(gpu), loader(SAMPLES, batch_size=BATCH), loader(4))  # 2 validation batches
        footprint.wait(5.0)
        lines.append(f"tried: {tried}")
    logging.getLogger(console.LOGGER_NAME).removeHandler(handler)
    yield zeus, folder, lines


@pytest.fixture(scope="module")
def hf_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path, list[dict[str, Any]]]:
    from transformers import Trainer, TrainingArguments

    from zeus_integrations.huggingface import ZeusTrainerCallback

    folder = tmp_path_factory.mktemp("hf")
    rows = lm_rows(16)
    monitor = ZeusMonitor(gpus=[SimulatedGPU(PhysicalModel.a40(), busy=True)], cpu_indices=[])
    zeus = ZeusTrainerCallback(monitor=monitor, insights=EnergyInsights(footprint=Footprint("FR")))
    args = TrainingArguments(
        output_dir=str(folder),
        use_cpu=True,
        per_device_train_batch_size=4,
        num_train_epochs=2,
        logging_strategy="epoch",
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=0,
    )
    trainer = Trainer(model=tiny_lm(), args=args, train_dataset=rows, callbacks=[zeus])
    trainer.train()
    return zeus, folder, trainer.state.log_history


@pytest.fixture(scope="module")
def measured_command(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("measure")
    busy = "import time\nt=time.time()\nwhile time.time()-t<1.2: sum(range(1000))"
    env = {**os.environ, "PYTHONPATH": str(REPO), "ZEUS_SUITE_CARBON_REGION": "US"}
    cmd = [sys.executable, "-m", "zeus_core._cli", "measure", "--simulate", "--cpu-indices"]
    out = subprocess.run(
        [*cmd, "--output", str(folder), "--", sys.executable, "-c", busy],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return folder


# -- Lightning: forecast, efficiency, carbon and cost offline ----------------------------------------------
def test_lightning_forecast_after_epoch_one_is_within_5_percent_of_a_10_epoch_run(
    lightning_run: tuple[ZeusCallback, Path, list[str]],
) -> None:
    zeus, folder, lines = lightning_run
    steps_per_epoch = SAMPLES // BATCH
    epoch_one_j = (steps_per_epoch + WARMUP_BATCHES * WARMUP_UNITS) * UNIT_ENERGY_J
    outcome_j = (EPOCHS * steps_per_epoch + WARMUP_BATCHES * WARMUP_UNITS) * UNIT_ENERGY_J
    train = zeus.train_metrics
    assert train["energy/train_j"] == pytest.approx(outcome_j)  # validation (20 units) is not in it
    assert [s["energy/val/total_j"] for s in zeus.stage_history["val"]] == pytest.approx(
        [2 * UNIT_ENERGY_J] * EPOCHS
    )
    first = zeus.epoch_history[0]
    assert first["energy/epoch_j"] == pytest.approx(epoch_one_j)
    assert abs(first["energy/forecast_j"] - outcome_j) / outcome_j < 0.05
    assert abs(first["energy/forecast_time_s"] - train["time/train_s"]) / train["time/train_s"] < 0.05
    assert abs(EPOCHS * epoch_one_j - outcome_j) / outcome_j > 0.10  # the naive forecast would miss
    assert (
        abs(train["energy/forecast_error_pct"]) < 5.0 and abs(train["energy/forecast_time_error_pct"]) < 5.0
    )
    assert csv_column(folder, "energy/forecast_error_pct") == pytest.approx(
        [train["energy/forecast_error_pct"]]
    )
    assert len(csv_column(folder, "energy/forecast_j")) == EPOCHS  # updated every epoch
    shown = [line for line in lines if line.startswith("Forecast for the whole run")]
    assert len(shown) == 1 and f"({EPOCHS * steps_per_epoch} steps)" in shown[0]  # shown once
    assert any("The forecast after epoch 1 was" in line and "off by" in line for line in lines)


def test_lightning_logs_joules_per_sample(lightning_run: tuple[ZeusCallback, Path, list[str]]) -> None:
    zeus, folder, _ = lightning_run
    for epoch in zeus.epoch_history:
        assert epoch["energy/j_per_sample"] == pytest.approx(epoch["energy/epoch_j"] / SAMPLES)
        assert "energy/j_per_token" not in epoch  # no language-model batches
    assert zeus.train_metrics["energy/train_j_per_sample"] == pytest.approx(
        zeus.train_metrics["energy/train_j"] / (EPOCHS * SAMPLES)
    )
    assert csv_column(folder, "energy/j_per_sample") == pytest.approx(
        [e["energy/epoch_j"] / SAMPLES for e in zeus.epoch_history]
    )
    assert UNIT_TIME_S > 0


def test_lightning_carbon_and_cost_with_the_network_cut_off(
    lightning_run: tuple[ZeusCallback, Path, list[str]],
) -> None:
    zeus, folder, lines = lightning_run
    assert lines[-1] != "tried: []"  # the live provider did try the network
    train = zeus.train_metrics
    kwh = train["energy/train_j"] / 3.6e6
    assert train["energy/train_co2_g"] == pytest.approx(kwh * 381)  # Germany, from the shipped table
    assert train["energy/train_cost"] == pytest.approx(kwh * 0.30)
    for epoch in zeus.epoch_history:
        assert epoch["energy/co2_g"] == pytest.approx(epoch["energy/epoch_j"] / 3.6e6 * 381)
    assert any("Electricity Maps (DE) failed" in line for line in lines)  # and said so
    record = json.loads(next(folder.glob("csv/version_*/zeus_run.json")).read_text())
    assert record["footprint"]["g_per_kwh"] == 381 and record["footprint"]["live_error"]
    assert record["footprint"]["source"].startswith("Ember via Our World in Data")


def test_lightning_logs_joules_per_token_for_a_causal_lm(tmp_path: Path) -> None:
    gpu, monitor = simulated_monitor()

    class TinyLM(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.lm = tiny_lm()

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            gpu.run_steps(1)
            return self.lm(**batch).loss

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    rows = lm_rows(8)
    zeus = ZeusCallback(monitor=monitor, insights=EnergyInsights(run_dir=False))
    trainer = pl.Trainer(callbacks=[zeus], **trainer_kwargs(str(tmp_path), max_epochs=2))
    trainer.fit(TinyLM(), torch.utils.data.DataLoader(rows, batch_size=4))
    tokens = lm_tokens(rows)
    assert tokens < 8 * 8  # padding left out
    for epoch in zeus.epoch_history:
        assert epoch["energy/j_per_token"] == pytest.approx(epoch["energy/epoch_j"] / tokens)
        assert epoch["energy/j_per_sample"] == pytest.approx(epoch["energy/epoch_j"] / 8)
    assert csv_column(tmp_path, "energy/j_per_token") == pytest.approx([2 * UNIT_ENERGY_J / tokens] * 2)
    assert zeus.train_metrics["energy/train_j_per_token"] == pytest.approx(4 * UNIT_ENERGY_J / (2 * tokens))
    assert not list(tmp_path.rglob("zeus_run.json"))  # run_dir=False writes nothing


# -- Hugging Face Trainer ----------------------------------------------------------------------------------
def test_trainer_logs_joules_per_sample_and_token_in_log_history(
    hf_run: tuple[Any, Path, list[dict[str, Any]]],
) -> None:
    zeus, folder, history = hf_run
    epochs = [e for e in history if "energy/epoch_j" in e]
    assert len(epochs) == 2
    tokens = lm_tokens(lm_rows(16))
    for entry in epochs:
        assert entry["energy/j_per_token"] == pytest.approx(entry["energy/epoch_j"] / tokens)
        assert entry["energy/j_per_sample"] == pytest.approx(entry["energy/epoch_j"] / 16)
        assert entry["energy/co2_g"] == pytest.approx(entry["energy/epoch_j"] / 3.6e6 * 56)  # France
        assert "energy/forecast_j" in entry  # the Trainer knows its max_steps
    (final,) = [e for e in history if "energy/train_j" in e]
    assert final["energy/train_j_per_token"] == pytest.approx(final["energy/train_j"] / (2 * tokens))
    assert "energy/forecast_error_pct" in final
    assert (folder / "zeus_run.json").is_file() and (folder / "zeus_power.csv").is_file()


# -- Accelerate ------------------------------------------------------------------------------------------
def test_accelerate_loop_logs_joules_per_sample_and_token(tmp_path: Path) -> None:
    from accelerate import Accelerator

    from zeus_integrations.accelerate import attach

    gpu = SimulatedGPU(PhysicalModel.a40(), clock=VirtualClock())
    monitor = ZeusMonitor(gpus=[gpu], cpu_indices=[])
    tracker = RecordingTracker()
    accelerator = Accelerator(cpu=True, log_with=[tracker])
    accelerator.init_trackers("zeus-insights")
    model = tiny_lm()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    rows = lm_rows(8)
    model, opt, data = accelerator.prepare(model, opt, torch.utils.data.DataLoader(rows, batch_size=4))
    insights = EnergyInsights(total_epochs=2, run_dir=tmp_path)
    with attach(accelerator, model, opt, monitor=monitor, insights=insights) as zeus:
        for _ in range(2):
            for batch in data:
                loss = model(**batch).loss  # the step opens at the forward pass
                gpu.run_steps(1)
                accelerator.backward(loss)
                opt.step()
                opt.zero_grad()
    tokens = lm_tokens(rows)
    assert tracker.column("energy/j_per_token") == pytest.approx([2 * UNIT_ENERGY_J / tokens] * 2)
    assert tracker.column("energy/j_per_sample") == pytest.approx([2 * UNIT_ENERGY_J / 8] * 2)
    assert tracker.column("energy/forecast_j") == pytest.approx([4 * UNIT_ENERGY_J] * 2)
    assert zeus.train_metrics["energy/forecast_error_pct"] == pytest.approx(0.0, abs=1e-6)
    assert (tmp_path / "zeus_run.json").is_file()


# -- Fabric ----------------------------------------------------------------------------------------------
def test_fabric_loop_logs_joules_per_sample_when_given_the_batch(tmp_path: Path) -> None:
    from lightning.fabric import Fabric

    from zeus_integrations.fabric import ZeusFabricCallback

    gpu, monitor = simulated_monitor()
    zeus = ZeusFabricCallback(monitor=monitor, insights=EnergyInsights(total_epochs=2, run_dir=tmp_path))
    fabric = Fabric(accelerator="cpu", devices=1, callbacks=[zeus])
    fabric.call("on_train_start", fabric=fabric)
    for _ in range(2):
        fabric.call("on_train_epoch_start")
        for batch in loader(8, batch_size=4):
            fabric.call("on_train_batch_start")
            gpu.run_steps(1)
            fabric.call("on_train_batch_end", batch=batch)
        fabric.call("on_train_epoch_end")
    fabric.call("on_train_end")
    assert [e["energy/j_per_sample"] for e in zeus.epoch_history] == pytest.approx(
        [2 * UNIT_ENERGY_J / 8] * 2
    )
    assert zeus.epoch_history[0]["energy/forecast_j"] == pytest.approx(4 * UNIT_ENERGY_J)
    assert zeus.train_metrics["energy/train_j_per_sample"] == pytest.approx(UNIT_ENERGY_J / 4)
    assert (tmp_path / "zeus_run.json").is_file()


# -- the report ------------------------------------------------------------------------------------------
class _Page(HTMLParser):
    """The images (with their data), headings, ids and table cells of a report page."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[dict[str, str]] = []
        self.ids: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "img":
            self.images.append(a)

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.text.append(data.strip())


def _parse(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    for img in parser.images:
        assert img["src"].startswith("data:image/png;base64,")  # self-contained
        png = base64.b64decode(img["src"].split(",", 1)[1])
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    return parser


def _report(folder: Path, out: Path, *extra: str) -> str:
    from zeus_core._cli import main

    assert main(["report", str(folder), "-o", str(out), *extra]) == 0
    return out.read_text(encoding="utf-8")


def test_report_of_the_lightning_run(
    lightning_run: tuple[ZeusCallback, Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    zeus, folder, _ = lightning_run
    page = _parse(_report(folder, tmp_path / "lightning.html"))
    plots = {img["data-plot"] for img in page.images}
    assert plots == {"power", "energy", "forecast"}  # no power-limit optimizer in this run
    assert {"simulated", "headline", "carbon", "epochs"} <= page.ids
    text = " ".join(page.text)
    error = zeus.train_metrics["energy/forecast_error_pct"]
    assert f"{error:+.1f} %" in text and "first forecast off (energy)" in text  # the error, shown
    assert "Germany (DE)" in text and "Ember via Our World in Data" in text and "EUR" in text
    summary = capsys.readouterr().out
    assert "[simulated]" in summary and "per sample" in summary and "lightning.html" in summary


def test_report_of_the_trainer_run_and_a_measured_command(
    hf_run: tuple[Any, Path, list[dict[str, Any]]], measured_command: Path, tmp_path: Path
) -> None:
    _, folder, _ = hf_run
    hf = _parse(_report(folder, tmp_path / "hf.html"))
    assert {img["data-plot"] for img in hf.images} == {"power", "energy", "forecast"}
    assert "per token" in " ".join(hf.text)
    cmd = _parse(_report(measured_command, tmp_path / "cmd.html", "--price-per-kwh", "0.2"))
    assert {img["data-plot"] for img in cmd.images} == {"power"}
    text = " ".join(cmd.text)
    assert "exit code" in text and "United States (US)" in text and "0.2 USD/kWh" in text
    assert load_run(measured_command).kind == "command"


def test_report_reads_what_older_runs_left(
    lightning_run: tuple[ZeusCallback, Path, list[str]], tmp_path: Path
) -> None:
    _, folder, _ = lightning_run
    old = tmp_path / "old"
    shutil.copytree(folder, old)
    for path in old.rglob("zeus_*"):
        path.unlink()  # what a run without the run record leaves: Lightning's metrics.csv only
    run = load_run(old)
    assert run.source.startswith("metrics.csv") and len(run.epochs) == EPOCHS and run.forecasts
    page = _parse(render_html(run))
    assert {img["data-plot"] for img in page.images} == {"energy", "forecast"}
    assert any("no power timeline" in n for n in run.notes)


@pytest.mark.skipif(
    shutil.which("chromium") is None, reason="Chromium is not installed (apt-get install chromium)"
)
def test_every_figure_is_drawn_in_a_real_browser(
    lightning_run: tuple[ZeusCallback, Path, list[str]],
    hf_run: tuple[Any, Path, list[dict[str, Any]]],
    measured_command: Path,
    tmp_path: Path,
) -> None:
    probe = (
        "<script>window.addEventListener('load', () => document.body.setAttribute('data-drawn', "
        "[...document.images].map(i => i.complete + ':' + i.naturalWidth + 'x' + i.naturalHeight).join(' ')))"
        "</script>"
    )
    for name, folder in (("lightning", lightning_run[1]), ("hf", hf_run[1]), ("cmd", measured_command)):
        page = _report(folder, tmp_path / f"{name}.html")
        probed = tmp_path / f"{name}-probe.html"
        probed.write_text(page.replace("</body>", probe + "</body>"), encoding="utf-8")
        out = subprocess.run(
            [
                "chromium",
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--virtual-time-budget=5000",
                "--dump-dom",
                probed.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        drawn = out.stdout.split('data-drawn="', 1)[1].split('"', 1)[0].split()
        assert len(drawn) == page.count('<img class="plot"') >= 1
        assert all(d.startswith("true:1000x") for d in drawn), drawn  # decoded at full size
