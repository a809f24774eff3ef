"""Replay measured power-limit profiles: early-stopping GlobalPowerLimitOptimizer vs Zeus's sweep.

For every profile bundled in ``zeus_core/data/power_limit_profiles`` (A40 GPUs; one simulated GPU per
``gpu<i>_energy`` column, all on one virtual clock) and every selector, the optimizer is driven
through the training protocol on simulated GPUs whose step time and power follow the profile
with seeded Gaussian noise (``--noise``, relative, per step and per GPU). Two sweeps are compared:

* ``zeus``: the exhaustive sweep with Zeus's defaults (every limit, 10 warm-up + 40 measured
  steps), i.e. ``early_stopping=None``;
* ``early``: the default early stopping (:class:`EarlyStopping`).

Reported per case: the limit chosen; the limit the noise-free profile says is optimal; whether
the choice is within 1 % of the optimum's cost (for the slowdown constraint: energy within 1 %
and time within 1 % of the allowed slowdown); the profiling steps; and the extra energy and time
of all steps before the decision compared with running those steps at the optimal limit. Extra
energy and time are computed from the noise-free profile and the number of steps spent at each
limit (so the noise of one run does not blur the comparison).

Usage::

    python benchmarks/power_limit_replay.py            # seed 0 table + 10-seed robustness summary
    python benchmarks/power_limit_replay.py --quick    # seed 0 table only
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from zeus_core.data import path as data_path
from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.optimizer.power_limit import (
    Done,
    EarlyStopping,
    Energy,
    GlobalPowerLimitOptimizer,
    LinearCostSelector,
    MaxSlowdownConstraint,
    OptimumSelector,
    PowerLimitMeasurement,
    Time,
    ZeusCost,
)
from zeus_core.testing import MeasuredProfile, SimulatedGPU, VirtualClock, simulate_steps

__all__ = ["Case", "Run", "SELECTORS", "profile_files", "run_case", "run_all", "summarize", "main"]

DATA = data_path("power_limit_profiles")
TOLERANCE = 0.01
SELECTORS: dict[str, Callable[[], OptimumSelector]] = {
    "Time": Time,
    "Energy": Energy,
    "ZeusCost(0.5)": lambda: ZeusCost(0.5),
    "MaxSlowdown(1.1)": lambda: MaxSlowdownConstraint(1.1),
}
_MAX_STEPS = 5000
MIN_SAMPLE_S = 0.25


@dataclass(frozen=True)
class Run:
    """One optimizer run on one case.

    Attributes:
        chosen_w: The limit the optimizer chose, W.
        ok: Whether the choice is the optimum or within 1 % of its cost.
        excess: How much worse the choice is than the optimum, as a fraction (0 for the optimum;
            for the slowdown constraint the larger of its energy excess and its time beyond the
            allowed slowdown).
        steps: Steps run before the decision (wait + warm-up + measured), all limits.
        limits: Number of limits profiled.
        extra_energy_j: Energy of those steps minus the same steps at the optimal limit, J.
        extra_time_s: Likewise for time, s.
    """

    chosen_w: float
    ok: bool
    steps: int
    limits: int
    extra_energy_j: float
    extra_time_s: float
    excess: float = 0.0


@dataclass(frozen=True)
class Case:
    """One profile × selector, with both sweeps.

    Attributes:
        profile: Profile file name.
        selector: Selector label.
        optimal_w: Optimum according to the noise-free profile, W.
        zeus: The exhaustive sweep.
        early: The early-stopping sweep.
    """

    profile: str
    selector: str
    optimal_w: float
    zeus: Run
    early: Run


def profile_files(data: Path = DATA) -> list[Path]:
    """The measured profiles, sorted by name."""
    return sorted(data.glob("*.csv"))


def _gpu_columns(path: Path) -> int:
    header = path.read_text().splitlines()[0].split(",")
    return sum(1 for h in header if h.startswith("gpu") and h.endswith("_energy"))


def _behaviors(path: Path) -> list[MeasuredProfile]:
    return [MeasuredProfile.from_zeus_csv(path, gpu=i) for i in range(_gpu_columns(path))]


def _truth(behaviors: Sequence[MeasuredProfile], limit: float) -> tuple[float, float]:
    """Noise-free job time per step (s) and GPU energy per step (J) at ``limit``."""
    points = [b.step(limit, None) for b in behaviors]
    step_time = max(t for t, _ in points)
    return step_time, sum(p for _, p in points) * step_time


def _excess(
    selector: OptimumSelector, truth: dict[float, tuple[float, float]], chosen: float, optimal: float
) -> float:
    """Relative excess of ``chosen`` over ``optimal`` by the noise-free profile (see :class:`Run`)."""
    if chosen == optimal:
        return 0.0
    if isinstance(selector, MaxSlowdownConstraint):
        allowed = selector.factor * truth[max(truth)][0]  # against the highest limit, as the selector
        return max(truth[chosen][1] / truth[optimal][1] - 1, truth[chosen][0] / allowed - 1)
    assert isinstance(selector, LinearCostSelector)
    ms = [PowerLimitMeasurement(w, 1, t, e, num_gpus=1) for w, (t, e) in truth.items()]
    a, b = selector.cost_weights(ms)
    cost = {w: a * e + b * t for w, (t, e) in truth.items()}
    return cost[chosen] / cost[optimal] - 1


def _drive(
    path: Path,
    selector: OptimumSelector,
    early: EarlyStopping | None,
    noise: float,
    seed: int,
    min_sample_s: float = MIN_SAMPLE_S,
) -> tuple[float, dict[float, int]]:
    clock = VirtualClock()
    gpus = [
        SimulatedGPU(b, index=i, clock=clock, noise=noise, seed=seed * 1000 + i)
        for i, b in enumerate(_behaviors(path))
    ]
    monitor = ZeusMonitor(gpus=gpus, cpu_indices=[])
    plo = GlobalPowerLimitOptimizer(monitor, selector, early_stopping=early, min_sample_s=min_sample_s)
    steps_at: dict[float, int] = {}
    plo.on_train_begin()
    plo.on_epoch_begin()
    try:
        for _ in range(_MAX_STEPS):
            plo.on_step_begin()
            if isinstance(plo.state, Done):
                break
            limit = gpus[0].get_power_limit()
            steps_at[limit] = steps_at.get(limit, 0) + 1
            simulate_steps(gpus, 1)
            plo.on_step_end()
        else:
            raise RuntimeError(f"{path.name}: no decision after {_MAX_STEPS} steps")
        chosen = plo.optimal_power_limit_w
        assert chosen is not None
        plo.on_epoch_end()
    finally:
        plo.on_train_end()
    return chosen, steps_at


def run_case(
    path: Path, label: str, noise: float = 0.03, seed: int = 0, min_sample_s: float = MIN_SAMPLE_S
) -> Case:
    """Run both sweeps for one profile and one selector (see :data:`SELECTORS`)."""
    behaviors = _behaviors(path)
    selector = SELECTORS[label]()
    limits = GlobalPowerLimitOptimizer(
        ZeusMonitor(gpus=[SimulatedGPU(behaviors[0], clock=VirtualClock())], cpu_indices=[])
    ).power_limits
    truth = {w: _truth(behaviors, w) for w in limits}
    exact = [PowerLimitMeasurement(w, 40, t, e, num_gpus=len(behaviors)) for w, (t, e) in truth.items()]
    optimal = selector.select(exact)
    runs = []
    for early in (None, EarlyStopping()):
        chosen, steps_at = _drive(path, selector, early, noise, seed, min_sample_s)
        opt_t, opt_e = truth[optimal]
        extra_e = sum(n * (_truth(behaviors, w)[1] - opt_e) for w, n in steps_at.items())
        extra_t = sum(n * (_truth(behaviors, w)[0] - opt_t) for w, n in steps_at.items())
        profiled = len([w for w in steps_at if w in truth]) if early is None else len(steps_at)
        excess = _excess(selector, truth, chosen, optimal)
        runs.append(
            Run(chosen, excess <= TOLERANCE, sum(steps_at.values()), profiled, extra_e, extra_t, excess)
        )
    return Case(path.name.removesuffix(".csv"), label, optimal, runs[0], runs[1])


def run_all(
    noise: float = 0.03, seed: int = 0, data: Path = DATA, min_sample_s: float = MIN_SAMPLE_S
) -> list[Case]:
    """Every profile × every selector."""
    return [run_case(p, label, noise, seed, min_sample_s) for p in profile_files(data) for label in SELECTORS]


def summarize(cases: Sequence[Case]) -> dict[str, float]:
    """Totals: extra energy/time of both sweeps, their ratio, and how many choices were within 1 %."""
    zeus_e = sum(c.zeus.extra_energy_j for c in cases)
    early_e = sum(c.early.extra_energy_j for c in cases)
    return {
        "zeus_extra_energy_j": zeus_e,
        "early_extra_energy_j": early_e,
        "energy_ratio": early_e / zeus_e if zeus_e else float("nan"),
        "zeus_extra_time_s": sum(c.zeus.extra_time_s for c in cases),
        "early_extra_time_s": sum(c.early.extra_time_s for c in cases),
        "zeus_steps": sum(c.zeus.steps for c in cases),
        "early_steps": sum(c.early.steps for c in cases),
        "zeus_ok": sum(c.zeus.ok for c in cases),
        "early_ok": sum(c.early.ok for c in cases),
        "zeus_worst_excess": max(c.zeus.excess for c in cases),
        "early_worst_excess": max(c.early.excess for c in cases),
        "cases": len(cases),
    }


def _table(cases: Sequence[Case]) -> str:
    cols = f"{'steps':>5} {'extra J':>8} {'extra s':>7}"
    head = (
        f"{'profile':<27} {'selector':<17} {'opt W':>5} | {'Zeus sweep: W':>13} {cols} | "
        f"{'early stop: W':>13} {cols}"
    )
    lines = [head, "-" * len(head)]
    for c in cases:

        def cell(r: Run) -> str:
            mark = "" if r.ok else " ✗"
            return f"{r.chosen_w:>11g}{mark:<2} {r.steps:>5} {r.extra_energy_j:>8.0f} {r.extra_time_s:>7.1f}"

        lines.append(f"{c.profile:<27} {c.selector:<17} {c.optimal_w:>5g} | {cell(c.zeus)} | {cell(c.early)}")
    s = summarize(cases)
    lines.append("-" * len(head))
    lines.append(
        f"{'total':<51} | {'':>13} {s['zeus_steps']:>5} {s['zeus_extra_energy_j']:>8.0f} "
        f"{s['zeus_extra_time_s']:>7.1f} | {'':>13} {s['early_steps']:>5} "
        f"{s['early_extra_energy_j']:>8.0f} {s['early_extra_time_s']:>7.1f}"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the comparison table (and a robustness summary over seeds unless ``--quick``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one seed only (the table)")
    parser.add_argument("--noise", type=float, default=0.03, help="relative per-step noise (default 0.03)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the table's run (default 0)")
    parser.add_argument("--seeds", type=int, default=10, help="seeds in the robustness summary (default 10)")
    parser.add_argument("--data", type=Path, default=DATA, help="folder of Zeus profile CSVs")
    parser.add_argument(
        "--min-sample-s",
        type=float,
        default=MIN_SAMPLE_S,
        help=f"shortest energy-counter sample, s (default {MIN_SAMPLE_S}; 0: one per step)",
    )
    parser.add_argument(
        "--json", type=Path, default=None, metavar="PATH", help="also write the results as JSON"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if not profile_files(args.data):
        print(f"No profiles in {args.data}; pass --data.", file=sys.stderr)
        return 1
    start = time.perf_counter()
    cases = run_all(args.noise, args.seed, args.data, args.min_sample_s)
    s = summarize(cases)
    table_summary, robustness = s, []
    print(
        f"Power-limit replay: simulated A40 GPUs, noise {args.noise:.0%} per step, seed {args.seed} "
        "(✗ = not within 1 % of the optimum's cost)\n"
    )
    print(_table(cases))
    print(
        f"\nExtra profiling energy, early stop / Zeus sweep: {s['energy_ratio']:.1%} "
        f"({s['early_extra_energy_j']:.0f} J / {s['zeus_extra_energy_j']:.0f} J); extra time "
        f"{s['early_extra_time_s']:.0f} s / {s['zeus_extra_time_s']:.0f} s; profiling steps "
        f"{s['early_steps']} / {s['zeus_steps']}."
    )
    print(
        f"Within 1 % of the optimum: early stop {s['early_ok']}/{s['cases']} (worst "
        f"{s['early_worst_excess']:.2%} off), Zeus sweep {s['zeus_ok']}/{s['cases']} (worst "
        f"{s['zeus_worst_excess']:.2%} off)."
    )
    if not args.quick:
        print(f"\nRobustness over seeds 0–{args.seeds - 1}:")
        print(f"{'seed':>4} {'energy ratio':>12} {'early ok':>8} {'worst':>6} {'zeus ok':>7} {'worst':>6}")
        for seed in range(args.seeds):
            s = summarize(
                cases if seed == args.seed else run_all(args.noise, seed, args.data, args.min_sample_s)
            )
            robustness.append({"seed": seed, **s})
            print(
                f"{seed:>4} {s['energy_ratio']:>12.1%} {s['early_ok']:>5}/{s['cases']} "
                f"{s['early_worst_excess']:>6.2%} {s['zeus_ok']:>4}/{s['cases']} "
                f"{s['zeus_worst_excess']:>6.2%}"
            )
    print(f"\n({time.perf_counter() - start:.1f} s)")
    if args.json:
        from _results import write_json  # benchmarks/_results.py, beside this script

        def run_json(r: Run) -> dict[str, Any]:
            keys = ("chosen_w", "steps", "extra_energy_j", "extra_time_s", "ok")
            return {k: getattr(r, k) for k in keys}

        rows = [
            {
                "profile": c.profile,
                "selector": c.selector,
                "optimal_w": c.optimal_w,
                "zeus": run_json(c.zeus),
                "early": run_json(c.early),
            }
            for c in cases
        ]
        meta = {"noise": args.noise, "seed": args.seed, "simulated": True}
        write_json(
            args.json,
            __file__,
            argv,
            {**meta, "summary": table_summary, "rows": rows, "robustness": robustness},
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
