"""ZeusFabricCallback: Lightning Fabric loops driven through ``fabric.call`` (real tiny runs on CPU)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("lightning.fabric")
import torch  # noqa: E402
from lightning.fabric import Fabric  # noqa: E402

SCRIPTS = Path(__file__).parent / "scripts"
sys.path.insert(0, str(SCRIPTS))
from lightning_accelerate_common import Recorder, expected_events, run_script  # noqa: E402
from lightning_tiny import UNIT_ENERGY_J, UNIT_TIME_S, simulated_monitor  # noqa: E402

from zeus_integrations import ZeusFabricCallback  # noqa: E402


def test_a_fabric_loop_with_validation_and_a_failure(tmp_path: Path) -> None:
    gpu, monitor = simulated_monitor()
    recorder = Recorder()
    zeus = ZeusFabricCallback(recorder, monitor=monitor, log_every_n_steps=2)
    fabric = Fabric(accelerator="cpu", devices=1, callbacks=[zeus])
    fabric.call("on_train_start", fabric=fabric)
    for _ in range(2):
        fabric.call("on_train_epoch_start")
        for _ in range(4):
            fabric.call("on_train_batch_start")
            gpu.run_steps(1)
            fabric.call("on_train_batch_end")
        fabric.call("on_train_epoch_end")
        fabric.call("on_validation_start")
        gpu.run_steps(3)
        fabric.call("on_validation_end")
    fabric.call("on_train_end")

    assert recorder.events == expected_events(epochs=2, steps_per_epoch=4)
    assert [e["energy/epoch_j"] for e in zeus.epoch_history] == pytest.approx([4 * UNIT_ENERGY_J] * 2)
    assert [v["time/val/total_s"] for v in zeus.stage_history["val"]] == pytest.approx([3 * UNIT_TIME_S] * 2)
    assert zeus.train_metrics["energy/train_j"] == pytest.approx(8 * UNIT_ENERGY_J)  # validation excluded
    assert zeus.tracker is not None and zeus.tracker.steps_done == 8

    # A failing loop that calls on_exception ends the run once, with what was spent.
    failing = Recorder()
    zeus2 = ZeusFabricCallback(failing, monitor=monitor)
    fabric2 = Fabric(accelerator="cpu", devices=1, callbacks=[zeus2])
    with pytest.raises(RuntimeError, match="boom"):
        try:
            fabric2.call("on_train_start", fabric=fabric2)
            fabric2.call("on_train_epoch_start")
            fabric2.call("on_train_batch_start")
            gpu.run_steps(1)
            raise RuntimeError("boom")
        except BaseException as e:
            fabric2.call("on_exception", exception=e)
            raise
    assert failing.events[-1] == "train_end" and failing.events.count("train_end") == 1
    assert zeus2.train_metrics["energy/train_j"] == pytest.approx(UNIT_ENERGY_J)
    assert monitor.open_windows == []


def test_without_a_gpu_simulate_gives_simulated_figures() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    zeus = ZeusFabricCallback(simulate="a40", verbose=False)
    fabric = Fabric(accelerator="cpu", devices=1, callbacks=[zeus])
    fabric.call("on_train_start", fabric=fabric)
    fabric.call("on_train_epoch_start")
    fabric.call("on_train_batch_start")
    fabric.call("on_train_batch_end")
    fabric.call("on_train_epoch_end")
    fabric.call("on_train_end")
    assert zeus.train_metrics["simulated"] == 1.0 and zeus.monitor is not None and zeus.monitor.simulated


@pytest.mark.slow
def test_two_process_fabric_ddp_sums_ranks_and_resumes_from_fabric_save(tmp_path: Path) -> None:
    proc = run_script([sys.executable, str(SCRIPTS / "fabric_ddp.py"), str(tmp_path)], timeout_s=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    rank0_epoch = 4 * UNIT_ENERGY_J  # 4 batches at 300 W; rank 1 runs at 200 W, so it spends less
    assert ranks[0]["gpu_energy_j"] == pytest.approx(3 * (4 + 2) * UNIT_ENERGY_J)
    assert ranks[1]["gpu_energy_j"] < ranks[0]["gpu_energy_j"]
    for r in ranks:
        assert r["events"] == expected_events(epochs=2, steps_per_epoch=4)
        epochs = [e["energy/epoch_j"] for e in r["epochs"]]
        assert epochs[0] == pytest.approx(epochs[1]) and epochs[0] > rank0_epoch  # the job's sum
        assert r["epochs"][0]["energy/epoch_rank0_gpu0_j"] == pytest.approx(rank0_epoch)
        assert r["first"]["energy/train_j"] == pytest.approx(sum(epochs))  # validation excluded
        assert r["vals"][0]["energy/val/rank0_gpu0_j"] == pytest.approx(2 * UNIT_ENERGY_J)
        # The resumed run continued the totals saved after epoch 1 and its history.
        assert r["resumed"]["energy/train_j"] == pytest.approx(r["first"]["energy/train_j"])
        assert [e["energy/epoch_j"] for e in r["resumed_epochs"]] == pytest.approx(epochs)
        assert r["resumed_loaded"] == {"version": 1, "steps_seen": 4}
    (csv_file,) = tmp_path.glob("csv/version_*/metrics.csv")
    assert "energy/epoch_j" in csv_file.read_text()  # fabric.log_dict reached the logger
