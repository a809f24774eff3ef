"""Real-GPU check of the optimizer's samples (not a test: run it by hand on a machine with a GPU).

Trains a bf16 MLP whose optimizer step takes about 10 ms, measures what one NVML energy read
costs and how often the counter advances, then lets GlobalPowerLimitOptimizer profile the limits
with one read per step (``min_sample_s=0``, the old behaviour) and with samples of each
``--min-sample-s`` (0.25 s and 1 s). For each run it prints the limits chosen, the ``read_window`` calls,
the profiling time and the range of power implied by each sample (energy / time), which must lie
under the power limit. Needs root (power limits); limits are restored on every exit path.

Usage: python tests/optimizer/plo_real_gpu.py [--profile-steps 200] [--pl-step 100] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from zeus_core.monitor._energy import ZeusMonitor  # noqa: E402
from zeus_core.optimizer.power_limit import Done, GlobalPowerLimitOptimizer, MaxSlowdownConstraint  # noqa: E402


def counter_facts(gpu, n: int = 200) -> dict:
    """Latency of one energy read (ms) and the counter's update period (ms)."""
    t0 = time.perf_counter()
    for _ in range(20):
        gpu.get_total_energy()
    read_ms = (time.perf_counter() - t0) / 20 * 1e3
    changes, last, t_last = [], gpu.get_total_energy(), time.perf_counter()
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(n):
        _ = x @ x  # keep the GPU busy so the counter moves
        e = gpu.get_total_energy()
        if e != last:
            now = time.perf_counter()
            changes.append((now - t_last) * 1e3)
            last, t_last = e, now
    torch.cuda.synchronize()
    gaps = sorted(changes[1:]) or [float("nan")]
    return {"read_ms": read_ms, "update_ms_median": gaps[len(gaps) // 2], "updates_seen": len(changes)}


def _quantiles(values: list[float], qs: tuple[int, ...] = (0, 5, 50, 95, 100)) -> list[float] | None:
    if not values:
        return None
    v = sorted(values)
    return [round(v[min(len(v) - 1, int(q / 100 * len(v)))], 1) for q in qs]


def run(min_sample_s: float, profile_steps: int, pl_step: float) -> dict:
    """Profile with MaxSlowdownConstraint(1.1) on a ~10 ms training step; what happened."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(8192, 8192) for _ in range(3)]).cuda().to(torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(2048, 8192, device="cuda", dtype=torch.bfloat16)
    monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
    gpu = monitor.gpus[0]
    plo = GlobalPowerLimitOptimizer(
        monitor,
        MaxSlowdownConstraint(1.1),
        warmup_steps=10,
        profile_steps=profile_steps,
        pl_step=pl_step,
        min_sample_s=min_sample_s,
    )
    reads = {"n": 0}
    real_read = monitor.read_window

    def read_window(name, *a, **k):
        reads["n"] += 1
        return real_read(name, *a, **k)

    monitor.read_window = read_window  # type: ignore[method-assign]
    original = gpu.get_power_limit()
    steps = 0
    t0 = time.perf_counter()
    plo.on_train_begin()
    try:
        plo.on_epoch_begin()
        while not isinstance(plo.state, Done) and steps < 20000:
            plo.on_step_begin()
            loss = model(x).float().pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            plo.on_step_end()
            steps += 1
        plo.on_epoch_end()
        profiling_s = time.perf_counter() - t0
        # The plain step time at the chosen limit, for reference.
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        for _ in range(100):
            loss = model(x).float().pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        step_ms = (time.perf_counter() - t1) / 100 * 1e3
    finally:
        plo.on_train_end()
    samples = [
        (v.power_limit, t, e, n) for v in plo.visits for t, e, n in zip(v.times_s, v.energies_j, v.steps)
    ]
    implied = [(w, e / t) for w, t, e, _ in samples if t > 0]
    over = [(w, p) for w, p in implied if p > 1.05 * w]
    return {
        "min_sample_s": min_sample_s,
        "chosen_w": plo.optimal_power_limit_w,
        "steps": steps,
        "profiling_s": profiling_s,
        "read_window_calls": reads["n"],
        "samples": len(samples),
        "step_ms_at_choice": step_ms,
        "restored_w": gpu.get_power_limit(),
        "original_w": original,
        "implied_power_w_p0_p5_p50_p95_p100": _quantiles([p for _, p in implied]),
        "sample_ms_p0_p50_p100": _quantiles([t * 1e3 for _, t, _, _ in samples], (0, 50, 100)),
        "samples_over_limit": len(over),
        "measurements": [m.describe() for m in plo.measurements],
    }


def main() -> int:
    """Counter facts, then the per-step run and the sampled run, as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile-steps", type=int, default=200)
    parser.add_argument("--pl-step", type=float, default=100)
    parser.add_argument("--min-sample-s", type=float, nargs="+", default=[0.0, 0.25, 1.0])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
    out = {
        "gpu": monitor.gpus[0].describe(),
        "counter": counter_facts(monitor.gpus[0]),
        "limits_w": [
            monitor.gpus[0].power_limit_constraints().min_w,
            monitor.gpus[0].power_limit_constraints().max_w,
        ],
    }
    print(json.dumps(out, indent=1), flush=True)
    out["runs"] = []
    for mss in args.min_sample_s:
        r = run(mss, args.profile_steps, args.pl_step)
        out["runs"].append(r)
        print(json.dumps(r, indent=1), flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
