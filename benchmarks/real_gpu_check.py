"""Check Zeus Suite on a real NVIDIA GPU and print what it measured.

Needs an NVIDIA GPU, CUDA PyTorch, and root (or CAP_SYS_ADMIN) for the power-limit and clock parts,
which are skipped with a note otherwise. Every setting changed is restored (the script verifies it).

Sections:
1. devices found (``get_gpus``) and their capabilities;
2. energy-counter accuracy: the NVML counter vs integrating sampled power (PowerMonitor);
3. ``begin_window``/``end_window`` cost on real NVML;
4. throughput, power and energy per TFLOP at several power limits;
5. GlobalPowerLimitOptimizer on a real training loop (MLP, bf16), limits restored after;
6. time and energy of one matmul at several locked SM clocks (the effect Perseus exploits).

Usage: ``python benchmarks/real_gpu_check.py [--json FILE]``
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time

import torch

from zeus_core import Measurement, PowerMonitor, ZeusMonitor, get_gpus
from zeus_core.exceptions import ZeusError
from zeus_core.optimizer.power_limit import GlobalPowerLimitOptimizer, MaxSlowdownConstraint

N = 8192


def matmul_loop(seconds: float) -> int:
    """Run bf16 N×N matmuls for about ``seconds``; returns how many ran."""
    a = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    count, end = 0, time.time() + seconds
    while time.time() < end:
        for _ in range(20):
            a @ b
        count += 20
        torch.cuda.synchronize()
    return count


def measured_matmuls(gpu, warmup_s: float, seconds: float) -> tuple[int, Measurement]:
    """Warm the clocks up for ``warmup_s``, then run matmuls for ``seconds`` in a window of a fresh monitor.

    Returns:
        How many matmuls ran in the window, and the window's measurement.
    """
    monitor = ZeusMonitor(gpus=[gpu], cpu_indices=[])
    matmul_loop(warmup_s)
    monitor.begin_window("matmuls")
    count = matmul_loop(seconds)
    return count, monitor.end_window("matmuls")


def section_devices(results: dict) -> list:
    """Section 1: list the GPUs found and what each supports; returns them."""
    gpus = get_gpus()
    rows = []
    for g in gpus:
        c = g.power_limit_constraints()
        try:
            g.check_control_permission()
            control = "yes"
        except ZeusError as e:
            control = f"no ({e})"
        rows.append(
            {
                "gpu": g.describe(),
                "uuid": g.uuid,
                "limits_w": [c.min_w, c.max_w, c.default_w],
                "current_limit_w": g.get_power_limit(),
                "energy_counter": g.has_energy_counter,
                "sm_clocks": len(g.supported_sm_frequencies()),
                "control": control,
                "power_now_w": g.get_power(),
            }
        )
        print(f"[1] {rows[-1]}")
    results["devices"] = rows
    return gpus


def section_nvml(gpu, results: dict) -> None:
    """Latency of the NVML reads we use, and how often the energy counter changes under load."""
    import pynvml

    handle = pynvml.nvmlDeviceGetHandleByIndex(gpu.nvml_index)
    calls = {
        "nvmlDeviceGetTotalEnergyConsumption": lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle),
        "nvmlDeviceGetPowerUsage": lambda: pynvml.nvmlDeviceGetPowerUsage(handle),
        "nvmlDeviceGetPowerManagementLimit": lambda: pynvml.nvmlDeviceGetPowerManagementLimit(handle),
        "GPU.get_total_energy": gpu.get_total_energy,
        "GPU.get_power": gpu.get_power,
    }
    latency = {}
    for name, call in calls.items():
        t0 = time.perf_counter()
        for _ in range(200):
            call()
        latency[name] = (time.perf_counter() - t0) / 200 * 1e6
    # Counter update period under load: time between changes of the counter's value.
    a = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    changes, last, end = [], pynvml.nvmlDeviceGetTotalEnergyConsumption(handle), time.time() + 2.0
    while time.time() < end:
        a @ a
        value = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        if value != last:
            changes.append(time.perf_counter())
            last = value
    gaps = [b - a for a, b in zip(changes, changes[1:])]
    out = {
        "latency_us": latency,
        "counter_changes_in_2s": len(changes),
        "counter_update_period_ms_median": 1e3 * statistics.median(gaps) if gaps else None,
    }
    print(f"[0] NVML: {out}")
    results["nvml"] = out


def section_accuracy(gpu, results: dict) -> None:
    """Section 2: NVML energy counter vs integrated sampled power over the same interval, J."""
    monitor = ZeusMonitor(gpus=[gpu], cpu_indices=[])
    with PowerMonitor(gpus=[gpu], interval_s=0.02) as pm:
        time.sleep(0.5)
        matmul_loop(1.0)  # warm up clocks
        monitor.begin_window("acc")
        count = matmul_loop(8.0)
        m = monitor.end_window("acc")
        pm.sample_now()
        t1 = time.time()
        estimated = pm.get_energy(t1 - m.time, t1)[gpu.index]
    counter = m.gpu_energy[gpu.index]
    tflops = 2 * N**3 * count / m.time / 1e12
    out = {
        "seconds": m.time,
        "counter_j": counter,
        "sampled_power_j": estimated,
        "difference_pct": 100 * (estimated - counter) / counter,
        "avg_power_w": counter / m.time,
        "tflops": tflops,
    }
    print(f"[2] counter vs sampled power: {out}")
    results["accuracy"] = out


def section_overhead(gpu, results: dict) -> None:
    """Section 3: cost of one ``begin_window``/``end_window`` pair on real NVML, µs."""
    monitor = ZeusMonitor(gpus=[gpu], cpu_indices=[], sync_execution_with=None)
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for i in range(2000):
            monitor.begin_window("w", sync_execution=False)
            monitor.end_window("w", sync_execution=False)
        runs.append((time.perf_counter() - t0) / 2000 * 1e6)
    out = {"us_per_pair_median": statistics.median(runs), "runs": runs}
    print(f"[3] begin/end pair on real NVML: {out}")
    results["overhead"] = out


def section_power_limits(gpu, results: dict) -> None:
    """Section 4: throughput, power (W) and energy per TFLOP (J) at several power limits."""
    c = gpu.power_limit_constraints()
    original = gpu.get_power_limit()
    rows = []
    try:
        for limit in (c.max_w, round((c.max_w + c.min_w) / 2), c.min_w):
            gpu.set_power_limit(limit)
            count, m = measured_matmuls(gpu, warmup_s=1.0, seconds=4.0)
            tflop = 2 * N**3 * count / 1e12
            rows.append(
                {
                    "limit_w": limit,
                    "tflops": tflop / m.time,
                    "avg_power_w": m.gpu_total_energy / m.time,
                    "j_per_tflop": m.gpu_total_energy / tflop,
                }
            )
            print(f"[4] {rows[-1]}")
    finally:
        gpu.set_power_limit(original)
    restored = gpu.get_power_limit()
    print(f"[4] restored limit {restored} W (was {original} W)")
    results["power_limits"] = {"rows": rows, "original_w": original, "restored_w": restored}


def section_optimizer(gpu, results: dict) -> None:
    """Section 5: GlobalPowerLimitOptimizer on a real bf16 MLP training loop; limit restored after."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(8192, 8192) for _ in range(4)]).cuda().to(torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(4096, 8192, device="cuda", dtype=torch.bfloat16)
    monitor = ZeusMonitor(gpus=[gpu], cpu_indices=[])
    original = gpu.get_power_limit()
    # Steps here take ~10 ms: profile hundreds of them per limit, read the counter every 0.5 s.
    plo = GlobalPowerLimitOptimizer(
        monitor, MaxSlowdownConstraint(1.1), warmup_steps=20, profile_steps=300, pl_step=50, min_sample_s=0.5
    )
    steps = 0
    t0 = time.time()
    plo.on_train_begin()
    try:
        for _ in range(20):  # epochs of 1000 steps, until the optimizer decided
            plo.on_epoch_begin()
            for _ in range(1000):
                plo.on_step_begin()
                loss = model(x).float().pow(2).mean()
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                plo.on_step_end()
                steps += 1
            plo.on_epoch_end()
            if plo.optimal_power_limit_w is not None:
                break
        chosen = plo.optimal_power_limit_w
        applied = gpu.get_power_limit()
    finally:
        plo.on_train_end()
    restored = gpu.get_power_limit()
    profile = [
        {
            "limit_w": m.power_limit_w,
            "steps": m.steps,
            "time_per_step_s": m.time_per_step_s,
            "energy_per_step_j": m.energy_per_step_j,
        }
        for m in plo.measurements
    ]
    out = {
        "chosen_limit_w": chosen,
        "applied_w": applied,
        "restored_w": restored,
        "original_w": original,
        "steps_until_decision": steps,
        "wall_s": time.time() - t0,
        "profile": profile,
    }
    print(f"[5] GlobalPowerLimitOptimizer: {json.dumps(out, indent=1)}")
    results["optimizer"] = out


def section_clocks(gpu, results: dict) -> None:
    """Section 6: time (s) and energy (J) of one matmul at several locked SM clocks (MHz)."""
    freqs = gpu.supported_sm_frequencies()
    picks = sorted(
        {freqs[0], freqs[len(freqs) // 4], freqs[len(freqs) // 2], freqs[(3 * len(freqs)) // 4]}, reverse=True
    )
    rows = []
    try:
        for f in picks:
            gpu.set_locked_sm_frequency(f)
            count, m = measured_matmuls(gpu, warmup_s=0.5, seconds=3.0)
            rows.append(
                {
                    "sm_mhz": f,
                    "ms_per_matmul": 1e3 * m.time / count,
                    "j_per_matmul": m.gpu_total_energy / count,
                    "avg_power_w": m.gpu_total_energy / m.time,
                }
            )
            print(f"[6] {rows[-1]}")
    finally:
        gpu.reset_locked_sm_frequency()
    results["clocks"] = rows


def main() -> None:
    """Run every section the GPU and permissions allow; print (and optionally write) the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    results: dict = {"torch": torch.__version__}
    gpus = section_devices(results)
    gpu = gpus[0]
    section_nvml(gpu, results)
    section_accuracy(gpu, results)
    section_overhead(gpu, results)
    try:
        gpu.check_control_permission()
        can_control = True
    except ZeusError as e:
        print(f"[4-6] skipped: {e}")
        can_control = False
    if can_control:
        for section in (section_power_limits, section_optimizer, section_clocks):
            try:
                section(gpu, results)
            except Exception as e:  # report and go on: one failing section must not hide the others
                logging.exception("section %s failed", section.__name__)
                results[section.__name__] = f"failed: {e!r}"
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)


if __name__ == "__main__":
    main()
