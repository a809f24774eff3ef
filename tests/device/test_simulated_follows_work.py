"""Simulated GPUs follow the work (CPU time), and no GPU found is said once, with how to simulate."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO_ROOT
from tests.fakes.fake_amdsmi import FakeAMDSMI
from zeus_core import PhysicalModel, SimulatedGPU, VirtualClock, ZeusMonitor
from zeus_core.device._activity import Activity, ChildProcessActivity, ProcessActivity
from zeus_core.device._discovery import discover, get_gpus
from zeus_core.exceptions import ZeusConfigError
from zeus_core.testing._fake_nvml import FakeNVML
from zeus_core.testing._stand_in import (
    SIMULATE_ENV,
    following_note,
    simulated_gpus_from_env,
    simulated_stand_in,
)


class CountedActivity(Activity):
    """CPU seconds set by the test."""

    description = "the test's counter"

    def __init__(self) -> None:
        self.cpu = 0.0

    def cpu_seconds(self) -> float:
        return self.cpu


def spin(cpu_s: float) -> None:
    start = time.process_time()
    while time.process_time() - start < cpu_s:
        pass


def test_energy_is_idle_plus_busy_share_of_each_interval() -> None:
    clock, work = VirtualClock(), CountedActivity()
    gpu = SimulatedGPU(PhysicalModel.a40(), clock=clock, activity=work)
    clock.advance(2.0)
    work.cpu = 0.5  # busy a quarter of the interval
    assert gpu.get_total_energy() == pytest.approx(2.0 * 30.0 + 0.5 * 270.0)
    assert gpu.utilization == pytest.approx(0.25)
    clock.advance(1.0)
    work.cpu = 3.5  # three CPU-s in one second (threads): one GPU, busy the whole second
    assert gpu.get_power() == pytest.approx(300.0)
    assert gpu.get_total_energy() == pytest.approx(60.0 + 135.0 + 300.0)
    gpu.set_power_limit(200)  # lower limit, lower busy power
    clock.advance(1.0)
    work.cpu = 4.5
    assert gpu.get_total_energy() - 495.0 == pytest.approx(PhysicalModel.a40().step(200, None)[1])


def test_explicit_busy_and_run_steps_override_the_activity() -> None:
    clock, work = VirtualClock(), CountedActivity()
    gpu = SimulatedGPU(PhysicalModel.a40(), clock=clock, activity=work)
    elapsed = gpu.run_steps(5)
    assert gpu.get_total_energy() == pytest.approx(300.0 * elapsed)  # no CPU used, busy anyway
    gpu.follow(None)
    clock.advance(1.0)
    assert gpu.get_total_energy() == pytest.approx(300.0 * elapsed + 30.0)


def test_wall_clock_gpu_follows_this_process_and_virtual_clock_does_not() -> None:
    assert isinstance(SimulatedGPU(PhysicalModel.a40()).activity, ProcessActivity)
    assert SimulatedGPU(PhysicalModel.a40(), clock=VirtualClock()).activity is None
    assert SimulatedGPU(PhysicalModel.a40(), activity=None).activity is None
    with pytest.raises(ZeusConfigError, match="pass an Activity"):
        SimulatedGPU(PhysicalModel.a40(), activity="process")  # type: ignore[arg-type]


def test_injected_gpu_draws_power_while_the_user_computes_and_idles_while_asleep() -> None:
    monitor = ZeusMonitor(gpus=[SimulatedGPU(PhysicalModel.a40())], cpu_indices=[])
    with monitor.window("sleep") as asleep:
        time.sleep(0.4)
    with monitor.window("compute") as computing:
        spin(0.4)
    idle_w = asleep.measurement.gpu_energy[0] / asleep.measurement.time
    busy_j = computing.measurement.gpu_energy[0]
    assert idle_w == pytest.approx(30.0, abs=5.0)  # a little CPU for the bookkeeping itself
    # 0.4 CPU-s at 300 W on top of idle power, whatever the wall time on a loaded machine.
    assert busy_j == pytest.approx(30.0 * computing.measurement.time + 270.0 * 0.4, rel=0.1)
    assert computing.measurement.simulated


def test_follows_a_child_process_and_its_end() -> None:
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass",
        ]
    )
    activity = ChildProcessActivity(child.pid)
    gpu = SimulatedGPU(PhysicalModel.a40(), activity=activity)
    started = time.time()
    child.wait()
    energy, elapsed = gpu.get_total_energy(), time.time() - started
    assert activity.cpu_seconds() >= 0.5
    assert energy >= 30.0 * elapsed + 270.0 * 0.45
    assert "used the CPU" in (following_note([gpu], elapsed) or "")


def test_pickled_gpu_keeps_following() -> None:
    gpu = pickle.loads(pickle.dumps(SimulatedGPU(PhysicalModel.a40())))
    assert isinstance(gpu.activity, ProcessActivity)
    spin(0.05)
    assert gpu.get_total_energy() > 0


@pytest.mark.parametrize(
    ("value", "name", "count"),
    [("1", "NVIDIA A40", 1), ("a100", "NVIDIA A100-SXM4-40GB", 1), ("H100:2", "NVIDIA H100 80GB HBM3", 2)],
)
def test_environment_variable_selects_simulated_gpus(value: str, name: str, count: int) -> None:
    gpus = simulated_gpus_from_env({SIMULATE_ENV: value})
    assert [g.index for g in gpus] == list(range(count))
    assert all(g.simulated and g.name == f"{name} (simulated)" for g in gpus)
    assert all(isinstance(g.activity, ProcessActivity) for g in gpus)  # type: ignore[attr-defined]


@pytest.mark.parametrize("value", ["v100", "a40:0", "a40:x", "yes please"])
def test_bad_environment_value_names_the_valid_ones(value: str) -> None:
    with pytest.raises(ZeusConfigError, match="a40, a100, h100"):
        simulated_gpus_from_env({SIMULATE_ENV: value})


@pytest.mark.parametrize("value", ["", "0", "off"])
def test_environment_variable_off_gives_no_gpu(value: str) -> None:
    assert simulated_gpus_from_env({SIMULATE_ENV: value}) == []


def test_discovery_simulates_only_when_no_real_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeNVML(driver_loaded=False).patch(monkeypatch)
    FakeAMDSMI(driver_loaded=False).patch(monkeypatch)
    assert [g.simulated for g in get_gpus({SIMULATE_ENV: "a40:2"})] == [True, True]
    report = discover({SIMULATE_ENV: "1"})
    assert [g.name for g in report.gpus] == ["NVIDIA A40 (simulated)"]
    assert report.missing  # the real GPUs' absence is still explained
    assert "not understood" in " ".join(m.reason for m in discover({SIMULATE_ENV: "v100"}).missing)


def test_real_gpus_win_over_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from zeus_core.testing._fake_nvml import FakeGPUSpec

    FakeNVML([FakeGPUSpec.a40()]).patch(monkeypatch)
    assert [g.simulated for g in get_gpus({SIMULATE_ENV: "1"})] == [False]


NO_GPU_SCRIPT = """
from zeus_core import PowerMonitor, ZeusMonitor
from zeus_core.device._discovery import get_gpus
monitor = ZeusMonitor(cpu_indices=[])
with PowerMonitor(interval_s=0.05, cpus=[]) as pm:
    pass
print("gpus:", [g.name for g in monitor.gpus])
"""


def run_no_gpu_script(**env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in {SIMULATE_ENV, "ZEUS_SUITE_QUIET", "RANK"}}
    full.update(env)
    return subprocess.run(
        [sys.executable, "-c", NO_GPU_SCRIPT],
        env=full,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def no_real_gpu() -> None:
    if get_gpus({}):
        pytest.skip("this machine has a real GPU")


@pytest.mark.usefixtures("no_real_gpu")
def test_no_gpu_is_said_once_with_how_to_simulate() -> None:
    r = run_no_gpu_script()
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "gpus: []"
    assert r.stderr.count("No GPU found") == 1  # ZeusMonitor and PowerMonitor both looked
    assert f"{SIMULATE_ENV}=1" in r.stderr and "SimulatedGPU(PhysicalModel.a40())" in r.stderr
    assert run_no_gpu_script(ZEUS_SUITE_QUIET="1").stderr == ""


@pytest.mark.usefixtures("no_real_gpu")
def test_variable_gives_a_simulated_gpu_and_says_so() -> None:
    r = run_no_gpu_script(**{SIMULATE_ENV: "h100"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "gpus: ['NVIDIA H100 80GB HBM3 (simulated)']"
    assert r.stderr.count("simulated NVIDIA H100") == 1


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, []),
        ({SIMULATE_ENV: "0"}, []),
        ({SIMULATE_ENV: "1"}, [0]),
        ({SIMULATE_ENV: "a40:2", "LOCAL_RANK": "1"}, [1]),
        ({SIMULATE_ENV: "a40:2", "LOCAL_RANK": "3"}, [1]),
    ],
)
def test_off_gpu_adapters_stand_in_the_simulated_gpu(env: dict[str, str], expected: list[int]) -> None:
    assert simulated_stand_in(env) == expected


def test_cpu_time_spent_while_explicitly_busy_is_not_counted_again() -> None:
    clock, work = VirtualClock(), CountedActivity()
    gpu = SimulatedGPU(PhysicalModel.a40(), clock=clock, activity=work)
    gpu.set_busy(True)
    clock.advance(1.0)
    work.cpu = 1.0  # the CPU worked during the busy second
    gpu.set_busy(False)
    clock.advance(1.0)  # then an idle second with no CPU time
    assert gpu.get_total_energy() == pytest.approx(300.0 + 30.0)


ACCELERATE_SCRIPT = """
import torch
from accelerate import Accelerator
from zeus_integrations.accelerate import attach

accelerator = Accelerator(cpu=True)
model = torch.nn.Linear(64, 64)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(256, 64)), batch_size=32)
model, optimizer, data = accelerator.prepare(model, optimizer, data)
with attach(accelerator, model, optimizer) as zeus:
    for (x,) in data:
        for _ in range(200):  # a little CPU work per step
            y = model(x)
        accelerator.backward(y.pow(2).mean()); optimizer.step(); optimizer.zero_grad()
print("energy", zeus.train_metrics["energy/train_j"], "simulated", zeus.train_metrics.get("simulated"))
"""


@pytest.mark.slow
@pytest.mark.usefixtures("no_real_gpu")
def test_accelerate_attach_off_gpu_says_so_or_measures_the_simulated_gpu() -> None:
    pytest.importorskip("accelerate")

    def run(**env: str) -> subprocess.CompletedProcess[str]:
        full = {k: v for k, v in os.environ.items() if k not in {SIMULATE_ENV, "ZEUS_SUITE_QUIET", "RANK"}}
        full.update(env)
        cmd = [sys.executable, "-c", ACCELERATE_SCRIPT]
        return subprocess.run(cmd, env=full, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)

    plain = run()
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert plain.stderr.count("No GPU found") == 1 and f"{SIMULATE_ENV}=1" in plain.stderr
    simulated = run(**{SIMULATE_ENV: "1"})
    assert simulated.returncode == 0, simulated.stderr[-3000:]
    energy = float(simulated.stdout.split("energy ")[1].split()[0])
    assert energy > 0 and "simulated 1.0" in simulated.stdout


def test_child_activity_reads_zero_until_attached() -> None:
    activity = ChildProcessActivity()
    assert activity.cpu_seconds() == 0.0 and "not started" in activity.description
    activity.attach(os.getpid())  # any live process will do for the reading
    assert activity.cpu_seconds() > 0.0 and str(os.getpid()) in activity.description
