"""Counting samples and tokens of batches, and forecasting a run's totals after its first epoch."""

from __future__ import annotations

import pytest
import torch
from transformers import BatchEncoding

from zeus_core.training._efficiency import WorkCounter, count_batch, count_call, efficiency_metrics
from zeus_core.training._forecast import Forecaster


def test_count_batches_as_data_loaders_yield_them() -> None:
    assert count_batch(torch.zeros(8, 3)) == (8, None)
    assert count_batch((torch.zeros(4, 3), torch.zeros(4))) == (4, None)
    assert count_batch({"x": torch.zeros(5, 2), "labels": torch.zeros(5)}) == (5, None)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    lm = {"input_ids": torch.zeros(2, 4, dtype=torch.long), "attention_mask": mask}
    assert count_batch(lm) == (2, 5)  # padding is not a token
    assert count_batch(BatchEncoding({"input_ids": torch.zeros(3, 7, dtype=torch.long)})) == (3, 21)
    assert count_batch([[torch.zeros(6, 1)], "meta"]) == (6, None)  # nested
    assert count_batch(None) == (0, None)


def test_count_model_calls_as_forward_hooks_see_them() -> None:
    ids = torch.zeros(2, 8, dtype=torch.long)
    assert count_call((), {"input_ids": ids, "labels": ids}) == (2, 16)  # model(**batch)
    assert count_call((torch.zeros(4, 3),), {}) == (4, None)  # model(x)
    assert count_call((torch.zeros(4, 3), torch.zeros(4)), {}) == (4, None)


def test_efficiency_per_epoch_and_for_the_run() -> None:
    counter = WorkCounter()
    counter.add(4, None)
    counter.add(4, 40)
    assert counter.take() == (8, 40) and counter.take() == (0, 0) and counter.saw_tokens
    assert efficiency_metrics(80.0, 8, 40, "epoch") == {
        "energy/j_per_sample": 10.0,
        "energy/j_per_token": 2.0,
    }
    assert efficiency_metrics(80.0, 8, None, "train") == {"energy/train_j_per_sample": 10.0}
    assert efficiency_metrics(80.0, 0, None, "epoch") == {}


def _run(
    forecaster: Forecaster, epochs: int, steps: int, warmup: int, warm_j: float = 5.0
) -> tuple[float, float]:
    """Feed ``epochs`` epochs of ``steps`` steps (1 J, 0.1 s each; the first ``warmup`` cost ``warm_j``)."""
    total_e = total_t = 0.0
    for epoch in range(epochs):
        e = t = 0.0
        for step in range(1, steps + 1):
            slow = epoch == 0 and step <= warmup
            e += warm_j if slow else 1.0
            t += 0.5 if slow else 0.1
            if forecaster.wants_snapshot(step):
                forecaster.snapshot(step, t, e)
        forecaster.epoch_end(steps, t, e)
        total_e, total_t = total_e + e, total_t + t
    return total_e, total_t


def test_a_steady_run_is_forecast_exactly_after_its_first_epoch() -> None:
    f = Forecaster(total_epochs=10)
    energy, time_s = _run(f, epochs=10, steps=50, warmup=0)
    assert f.first is not None and f.first.after_epoch == 1 and f.first.total_steps == 500
    assert f.first.energy_j == pytest.approx(energy) and f.first.time_s == pytest.approx(time_s)
    assert f.error_pct(energy, time_s) == pytest.approx((0.0, 0.0), abs=1e-9)


def test_warm_up_is_left_out_of_the_rate() -> None:
    f = Forecaster(total_epochs=10)
    energy, time_s = _run(f, epochs=10, steps=64, warmup=3)  # 3 slow steps: 5 J and 0.5 s each
    assert f.first is not None and 3 <= f.first.warmup_steps <= 8
    energy_err, time_err = f.error_pct(energy, time_s)  # type: ignore[misc]
    assert abs(energy_err) < 1.0 and abs(time_err) < 1.0
    naive = 10 * (3 * 5.0 + 61 * 1.0)  # ten times the first epoch
    assert abs(naive - energy) / energy > 0.15  # what warm-up would have cost the forecast


def test_planned_steps_win_and_unknown_length_gives_no_forecast() -> None:
    f = Forecaster()
    f.plan(total_steps=float("inf"), total_epochs=-1)  # Lightning's "no limit"
    assert f.epoch_end(10, 1.0, 10.0) is None and f.first is None
    g = Forecaster(total_epochs=99)
    g.plan(total_steps=25)
    forecast = g.epoch_end(10, 1.0, 10.0)
    assert forecast is not None and forecast.total_steps == 25 and forecast.energy_j == pytest.approx(25.0)
    assert g.error_pct(0.0, 1.0) is None


def test_what_the_run_spent_outside_epochs_is_part_of_the_forecast() -> None:
    f = Forecaster(total_epochs=4)
    forecast = f.epoch_end(10, 1.0, 10.0, spent=(3.0, 25.0))  # 2 s and 15 J of set-up before epoch 1
    assert forecast is not None
    assert forecast.energy_j == pytest.approx(25.0 + 3 * 10.0) and forecast.time_s == pytest.approx(
        3.0 + 3 * 1.0
    )
