"""Measured power-limit profiles replayed in real time: our optimizer and ``zeus==0.16.0`` side by side.

Every profile in ``zeus_core/data/power_limit_profiles`` (A40; 1 or 4 GPUs) is replayed on the wall
clock (:class:`zeus_core.testing._realtime_replay.RealTimeReplay`): fake NVML GPUs whose steps last
the profile's time at the limit in force, scaled so a step at the highest limit lasts 20 ms (20-90
ms at the others), drawing the profile's power. The GPUs run one step behind the host, as CUDA's
asynchronous launches make them: the loop's work between steps overlaps theirs, and host work longer
than a step (a stall) leaves them idle, which is measured. Both optimizers run Zeus's documented loop
(``on_epoch_begin``; per step ``on_step_begin`` / ``on_step_end``; ``on_epoch_end``) with Zeus's
defaults, one after the other on the same replay, for Time, Energy, ZeusCost(0.5) and
MaxSlowdown(1.1). No noise is injected: the wall clock's own (sleep, scheduling, the machine's
load) is the noise.

Reported per case and in total (see ``power_limit_common.py`` for the scoring): the choice and
whether it is within 1 % of the optimum, MaxSlowdown choices that break the bound, the profiling
steps and waste (ours / Zeus's), and each optimizer's own time per step (``on_step_begin`` +
``on_step_end``, wall clock). ``--repeats`` runs the grid several times (misses that come and go).
Results go to ``benchmarks/results/power_limit_replay.json``; ``--trace`` also writes the samples of
every visit of our runs that miss.

Usage::

    nice -n 10 python benchmarks/power_limit_replay.py               # 24 cases, about 10 minutes
    nice -n 10 python benchmarks/power_limit_replay.py --repeats 3
    python benchmarks/power_limit_replay.py --profiles A40_resnet50_1gpu --selectors Energy
    python benchmarks/power_limit_replay.py --load 2    # two CPU-bound processes beside the run
"""

from __future__ import annotations

import argparse
import logging
import statistics
import subprocess
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.power_limit_common import (  # noqa: E402
    SELECTORS,
    bind_zeus,
    bound_broken,
    excess,
    optimal,
    reset_zeus_gpus,
    waste,
    zeus_selector,
)
from zeus_core import console, data  # noqa: E402
from zeus_core.testing._fake_nvml import FakeNVML  # noqa: E402
from zeus_core.testing._realtime_replay import RealTimeReplay  # noqa: E402

__all__ = ["Run", "Case", "run_case", "run_grid", "summarize", "main"]

DATA = data.path("power_limit_profiles")
EPOCH = 1000
"""Steps per epoch of Zeus's loop (long enough for Zeus to decide within one epoch)."""


@dataclass
class Run:
    """One optimizer's run on one replay.

    Attributes:
        chosen_w: The decision, W (``None``: none before the cut).
        ok: Within 1 % of the optimum.
        excess: How much worse than the optimum, as a fraction.
        broken: A MaxSlowdown choice truly slower than the bound.
        steps: Steps before the decision.
        waste: Extra selector cost of those steps, in optimal steps.
        overhead_ms: The optimizer's own time in each of those steps, ms.
        trace: Our runs' visits, ``(limit W, first step, [(time s, energy J, steps) per sample])``.
    """

    chosen_w: float | None
    ok: bool
    excess: float
    broken: bool
    steps: int
    waste: float
    overhead_ms: list[float] = field(repr=False)
    fidelity: float = 0.0
    trace: list[tuple[Any, ...]] = field(default_factory=list, repr=False)


@dataclass
class Case:
    """One profile × selector (× repeat), both optimizers."""

    profile: str
    selector: str
    repeat: int
    optimal_w: float
    ours: Run
    zeus: Run


def _drive(
    plo: Any, decided: Callable[[], float | None], replay: RealTimeReplay, epoch: int, cap: int
) -> tuple[float | None, dict[float, int], list[float]]:
    """Zeus's documented loop until a decision or ``cap`` steps."""
    steps_at: dict[float, int] = {}
    overhead: list[float] = []
    clock = time.perf_counter
    plo.on_epoch_begin()
    for i in range(cap):
        if i and i % epoch == 0:
            plo.on_epoch_end()
            replay.between_epochs()
            plo.on_epoch_begin()
        t0 = clock()
        plo.on_step_begin()
        t1 = clock()
        if decided() is not None:
            overhead.append((t1 - t0) * 1e3)
            break
        limit = replay.limit_w
        steps_at[limit] = steps_at.get(limit, 0) + 1
        replay.step()
        t2 = clock()
        plo.on_step_end()
        overhead.append((t1 - t0 + clock() - t2) * 1e3)
    return decided(), steps_at, overhead


def _score(
    label: str,
    replay: RealTimeReplay,
    chosen: float | None,
    steps_at: dict[float, int],
    overhead: list[float],
    gpus: int,
) -> Run:
    truth = replay.truth()
    off = excess(label, truth, chosen, gpus) if chosen is not None else float("inf")
    return Run(
        chosen,
        off <= 0.01,
        off,
        bound_broken(label, truth, chosen),
        sum(steps_at.values()),
        waste(label, truth, steps_at, gpus),
        overhead,
        replay.fidelity(),
    )


def run_case(
    fake: FakeNVML,
    path: Path,
    label: str,
    repeat: int = 0,
    epoch: int = EPOCH,
    trace: bool = False,
    top_step_s: float = 0.02,
) -> Case:
    """Zeus's sweep, then ours, on one replay of ``path`` (a step at the highest limit: ``top_step_s``)."""
    from zeus.monitor import ZeusMonitor as ZeusZeusMonitor
    from zeus.optimizer.power_limit import Done as ZeusDone
    from zeus.optimizer.power_limit import GlobalPowerLimitOptimizer as ZeusPLO

    from zeus_core.monitor._energy import ZeusMonitor
    from zeus_core.optimizer.power_limit import GlobalPowerLimitOptimizer

    replay = RealTimeReplay(path, fake=fake, top_step_s=top_step_s)
    gpus = len(fake.devices)
    indices = list(range(gpus))
    cap = 3 * (1 + 50 * len(replay.limits))
    truth = replay.truth()

    reset_zeus_gpus()
    zeus_plo = ZeusPLO(ZeusZeusMonitor(gpu_indices=indices, cpu_indices=[]), zeus_selector(label, gpus))

    def zeus_decided() -> float | None:
        state = zeus_plo.state
        return state.optimal_power_limit // 1000 if isinstance(state, ZeusDone) else None

    chosen, steps_at, overhead = _drive(zeus_plo, zeus_decided, replay, epoch, cap)
    zeus_run = _score(label, replay, chosen, steps_at, overhead, gpus)

    replay = RealTimeReplay(path, fake=fake, top_step_s=top_step_s)  # fresh: GPUs back at the top limit
    monitor = ZeusMonitor(gpu_indices=indices, cpu_indices=[])
    plo = GlobalPowerLimitOptimizer(monitor, SELECTORS[label]())
    try:
        chosen, steps_at, overhead = _drive(plo, lambda: plo.optimal_power_limit_w, replay, epoch, cap)
    finally:
        plo.on_train_end()
    ours = _score(label, replay, chosen, steps_at, overhead, gpus)
    if trace:  # every visit's samples: limit, first step, (time s, energy J, steps) per sample
        ours.trace = [
            (v.power_limit, v.first_step, list(zip(v.times_s, v.energies_j, v.steps))) for v in plo.visits
        ]
    monitor.close()
    return Case(replay.name, label, repeat, optimal(label, truth, gpus), ours, zeus_run)


def run_grid(
    paths: Sequence[Path], labels: Sequence[str], repeats: int = 1, epoch: int = EPOCH, trace: bool = False
) -> list[Case]:
    """Every profile × selector × repeat."""
    fake = FakeNVML([], root=True)
    bind_zeus(fake)
    cases = []
    for repeat in range(repeats):
        for path in paths:
            for label in labels:
                case = run_case(fake, path, label, repeat, epoch, trace)
                cases.append(case)
                print(_line(case), flush=True)
    return cases


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def summarize(cases: Sequence[Case]) -> dict[str, Any]:
    """The headline figures, ours and Zeus's."""
    out: dict[str, Any] = {"cases": len(cases)}
    for who in ("ours", "zeus"):
        runs = [getattr(c, who) for c in cases]
        over = [x for r in runs for x in r.overhead_ms]
        out[who] = {
            "within_1pct": sum(r.ok for r in runs),
            "bound_broken": sum(r.broken for r in runs),
            "decided": sum(r.chosen_w is not None for r in runs),
            "steps": sum(r.steps for r in runs),
            "waste": sum(r.waste for r in runs),
            "worst_excess": max(r.excess for r in runs),
            "replay_fidelity": max(r.fidelity for r in runs),
            "overhead_ms": {
                "median": statistics.median(over) if over else float("nan"),
                "p90": _percentile(over, 0.9),
                "p99": _percentile(over, 0.99),
                "max": max(over, default=float("nan")),
                "steps": len(over),
                "above_5ms": sum(x > 5 for x in over),
            },
        }
    out["waste_ratio"] = out["ours"]["waste"] / out["zeus"]["waste"] if out["zeus"]["waste"] else float("nan")
    return out


def _line(c: Case) -> str:
    def cell(r: Run) -> str:
        mark = "" if r.ok else " ✗"
        mark += " (bound broken)" if r.broken else ""
        return f"{r.chosen_w!s:>6}{mark:<3} {r.steps:>5} {r.waste:>7.1f}"

    return (
        f"{c.profile:<27} {c.selector:<17} {c.repeat:>2} {c.optimal_w:>5g} | {cell(c.ours)} | {cell(c.zeus)}"
    )


def report(cases: Sequence[Case]) -> str:
    """The summary table, ours beside Zeus's."""
    s = summarize(cases)
    o, z = s["ours"], s["zeus"]
    rows = [
        ("within 1 % of the optimum", f"{o['within_1pct']}/{s['cases']}", f"{z['within_1pct']}/{s['cases']}"),
        ("MaxSlowdown bound broken", str(o["bound_broken"]), str(z["bound_broken"])),
        ("worst excess", f"{o['worst_excess']:.2%}", f"{z['worst_excess']:.2%}"),
        ("profiling steps", str(o["steps"]), str(z["steps"])),
        ("waste (optimal steps)", f"{o['waste']:.0f}", f"{z['waste']:.0f}"),
        ("waste, ours / Zeus", f"{s['waste_ratio']:.1%}", "100%"),
        ("replay: worst step-time gap", f"{o['replay_fidelity']:.2%}", f"{z['replay_fidelity']:.2%}"),
    ]
    for key in ("median", "p90", "p99", "max"):
        rows.append(
            (f"own time per step, {key} (ms)", f"{o['overhead_ms'][key]:.3f}", f"{z['overhead_ms'][key]:.3f}")
        )
    rows.append(("steps above 5 ms", str(o["overhead_ms"]["above_5ms"]), str(z["overhead_ms"]["above_5ms"])))
    width = max(len(r[0]) for r in rows)
    lines = [f"{'':<{width}} | {'ours':>10} | {'zeus 0.16':>10}", "-" * (width + 27)]
    lines += [f"{a:<{width}} | {b:>10} | {c:>10}" for a, b, c in rows]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the grid, print the table, write the results file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="folder of Zeus profile CSVs")
    parser.add_argument("--profiles", nargs="*", help="profile names (default: all)")
    parser.add_argument("--selectors", nargs="*", choices=list(SELECTORS), help="selectors (default: all)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of the grid (default 1)")
    parser.add_argument("--epoch", type=int, default=EPOCH, help=f"steps per epoch (default {EPOCH})")
    parser.add_argument("--trace", action="store_true", help="keep the samples of our runs that miss")
    parser.add_argument(
        "--load", type=int, default=0, metavar="N", help="N CPU-bound processes beside the run (default 0)"
    )
    parser.add_argument(
        "--json", type=Path, default=None, metavar="PATH", help="also write the results as JSON"
    )
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    console.set_enabled(False)
    paths = sorted(args.data.glob("*.csv"))
    if args.profiles:
        paths = [p for p in paths if p.stem in args.profiles]
    if not paths:
        print(f"No profiles in {args.data}; pass --data.", file=sys.stderr)
        return 1
    labels = args.selectors or list(SELECTORS)
    start = time.perf_counter()
    print(
        f"{'profile':<27} {'selector':<17} {'#':>2} {'opt W':>5} | "
        f"{'ours: W':>9} {'steps':>5} {'waste':>7} | "
        f"{'Zeus: W':>9} {'steps':>5} {'waste':>7}"
    )
    # A loaded machine, as a data loader's workers make it: the optimizer's threads then wait for CPU.
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
    try:
        cases = run_grid(paths, labels, args.repeats, args.epoch, args.trace)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    print()
    print(report(cases))
    payload = {
        "benchmark": "power_limit_replay",
        "epoch_steps": args.epoch,
        "repeats": args.repeats,
        "cpu_load_processes": args.load,
        "summary": summarize(cases),
        "cases": [
            {
                "profile": c.profile,
                "selector": c.selector,
                "repeat": c.repeat,
                "optimal_w": c.optimal_w,
                **{
                    who: {
                        k: v for k, v in asdict(getattr(c, who)).items() if k not in ("overhead_ms", "trace")
                    }
                    for who in ("ours", "zeus")
                },
                **({"trace": c.ours.trace} if args.trace and not c.ours.ok else {}),
            }
            for c in cases
        ],
    }
    print(f"\n({time.perf_counter() - start:.0f} s)")
    if args.json:
        from benchmarks._results import write_json

        write_json(args.json, __file__, list(sys.argv[1:] if argv is None else argv), payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
