"""Measured profiles replayed in real time (the replay harness, and ``benchmarks/power_limit_replay.py``).

These run on the wall clock: a loaded machine slows the steps, so the assertions leave room for it.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from zeus_core.testing._fake_nvml import FakeNVML
from zeus_core.testing._realtime_replay import RealTimeReplay


@pytest.fixture(scope="module")
def replay_bench():
    path = REPO_ROOT / "benchmarks" / "power_limit_replay.py"
    spec = importlib.util.spec_from_file_location("power_limit_replay", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def test_a_replay_step_lasts_the_profiles_time_and_draws_its_power(shared_data: Path) -> None:
    replay = RealTimeReplay(
        shared_data / "power_limit_profiles" / "A40_resnet50_4gpu.csv", slowest_step_s=0.01
    )
    truth = replay.truth()
    assert len(replay.fake.devices) == 4 and max(t for t, _ in truth.values()) == pytest.approx(0.01)
    with replay.install():
        from zeus_core.device._nvidia import nvidia_gpus

        gpus = nvidia_gpus(environ={})
        gpus[0].set_power_limit(150)
        for g in gpus[1:]:
            g.set_power_limit(150)
        before, start = sum(g.get_total_energy() for g in gpus), time.perf_counter()
        for _ in range(20):
            replay.step()
        seconds, joules = time.perf_counter() - start, sum(g.get_total_energy() for g in gpus) - before
    t, e = truth[150]
    assert seconds == pytest.approx(20 * t, rel=0.5)  # the machine's other work only makes it longer
    assert joules == pytest.approx(20 * e + replay.idle_w * 4 * (seconds - 20 * t), rel=0.05)
    assert replay.steps == 20 and replay.fidelity() < 0.5


def test_both_optimizers_run_zeus_loop_on_one_replay_and_ours_costs_less(
    shared_data: Path, replay_bench
) -> None:
    fake = FakeNVML([], root=True)
    path = shared_data / "power_limit_profiles" / "A40_shufflenetv2_1gpu.csv"
    from benchmarks.power_limit_common import bind_zeus

    saved = sys.modules.get("pynvml")
    bind_zeus(fake)
    try:
        case = replay_bench.run_case(fake, path, "Energy")
    finally:
        if saved is not None:
            sys.modules["pynvml"] = saved
    assert case.optimal_w == 150 and case.zeus.steps == 451  # Zeus's sweep: 9 limits × 50 steps + 1
    assert case.ours.chosen_w == 150 and case.ours.steps <= 451
    assert case.ours.waste < 0.7 * case.zeus.waste
    summary = replay_bench.summarize([case])
    assert summary["ours"]["within_1pct"] == 1 and summary["ours"]["overhead_ms"]["median"] < 0.5
