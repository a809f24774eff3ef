"""Zeus NSDI'23 reproduction, side by side with the published simulator (``zeus==0.16.0``).

For each GPU (A40, V100) and each of the paper's six workloads, over seeds 1-10:

* **Zeus**: the published simulator ``zeus._legacy.simulate.Simulator`` with
  ``PruningGTSBatchSizeOptimizer`` and ``JITPowerLimitOptimizer``, exactly as the paper's artifact
  runs it (eta 0.5, beta 2).
* **Ours**: ``zeus_core.simulate`` with :class:`~zeus_core.simulate.ZeusPolicy`: the suite's bandit
  with its defaults, conservative exploration included (``slack`` 0; ``--slack`` to change it).
* **Default** (default batch size at the maximum power limit) and the **oracle** (best fixed
  configuration in hindsight, expected cost), from our simulator.
* **Default + JIT**: the default batch size with just-in-time power limits, no exploration: the
  least any policy that profiles power limits pays. Where it alone costs more than Default (the
  power limit saves less than profiling costs), no such policy can be at or below Default.
* **Same, no luck**: ours/Zeus with each converged trial's epochs-to-target replaced by its batch
  size's mean (:func:`~zeus_core.simulate.noise_free_cost`; Zeus from the sim-check runs). Two
  policies on the same seed draw different runs once they choose differently, so over ten seeds
  their realised costs differ by luck as well as by their choices; this compares the choices alone.
* **Sim check**: the published policy driven by *our* simulator
  (:class:`~zeus_core.simulate.PublishedZeusPolicy`) must reproduce the published simulator's cost
  exactly, which shows that the difference between Zeus and ours is the algorithm alone.

Per pair and overall it reports the cumulative cost against Default's for ours and Zeus (and on
how many seeds each was costlier), the gap to the oracle and ours/Zeus, and checks the targets of
issue 32 (ours <= Default on every pair, mean gap <= 2.5 %, ours <= Zeus on every pair with mean
<= 0.99). ``--generated N`` adds the same figures over N generated variants of the traces
(:func:`~zeus_core.simulate.generate_variant`: GPUs that were never measured; the policy was tuned
on such variants and the measured pairs are the check), with the published policy run in our
simulator. Results go to ``benchmarks/results/nsdi23/benchmark.json`` (``--json`` to change).

Run ``python benchmarks/nsdi23.py`` (about 40 s), ``--quick`` (seeds 1-2), or with the generated
variants ``python benchmarks/nsdi23.py --generated 120 --generated-seeds 4`` (about 5 min on two
cores). ``--published-in-ours`` runs the published policy in our simulator only (no sim check;
about 20x faster, e.g. ``--seeds $(seq 11 310)``). Every number is simulated from measured traces.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from zeus_core._cost import zeus_cost
from zeus_core.optimizer.batch_size import JobSpec
from zeus_core.simulate import (
    DefaultPolicy,
    FixedPolicy,
    PublishedZeusPolicy,
    WorkloadTrace,
    ZeusPolicy,
    default_trace_dir,
    generate_variant,
    load_nsdi23_traces,
    noise_free_cost,
    oracle,
    simulate,
)

RESULTS = Path(__file__).resolve().parent / "results" / "nsdi23.json"
ETA, BETA = 0.5, 2.0
TARGET_GAP = 0.025
TARGET_RATIO = 0.99

# Issue 5's reference: ETA cut vs Default by the published simulator, seed 1, workload order.
_REFERENCE_ETA_CUT = {
    "a40": (65.5, 12.0, 63.2, 58.8, 17.4, 14.0),
    "v100": (70.9, 14.4, 36.2, 62.6, 19.1, 19.2),
}


def _legacy_job(trace: WorkloadTrace) -> Any:
    from zeus._legacy.job import Job

    w = trace.workload
    return Job(w.dataset, w.network, w.optimizer, w.target_metric, w.max_epochs, w.default_batch_size)


def run_published(
    trace: WorkloadTrace, train_df: Any, power_df: Any, seed: int, eta: float, beta: float
) -> dict[str, float]:
    """The published simulator and policy: cumulative energy (J), time (s) and Zeus cost (J)."""
    from zeus._legacy.policy.optimizer import JITPowerLimitOptimizer, PruningGTSBatchSizeOptimizer
    from zeus._legacy.simulate import Simulator

    sim = Simulator(
        train_df,
        power_df,
        PruningGTSBatchSizeOptimizer(seed=seed, verbose=False),
        JITPowerLimitOptimizer(verbose=False),
        seed=seed,
        verbose=False,
    )
    max_power = float(power_df.power_limit.max())
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        history = sim.simulate_one_job(_legacy_job(trace), trace.num_recurrences(), beta, eta)
    energy = sum(h.energy for h in history)
    time_s = sum(h.time for h in history)
    return {"energy": energy, "time": time_s, "cost": zeus_cost(energy, time_s, eta, max_power)}


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def run_pair(
    trace: WorkloadTrace,
    seeds: list[int],
    published: list[dict[str, float]] | None,
    slack: float | None = JobSpec.slack,
) -> dict[str, Any]:
    """One (GPU, workload) over the seeds; ``published`` = the published simulator's runs, if run.

    Returns:
        Per policy the per-seed cumulative Zeus cost (J), plus the oracle, noise-free costs and
        the sim check (largest relative difference between the two simulators).
    """
    check = [simulate(trace, PublishedZeusPolicy(trace, s, BETA), seed=s) for s in seeds]
    ours = [simulate(trace, ZeusPolicy(trace, s, ETA, BETA, slack=slack), seed=s) for s in seeds]
    default = [simulate(trace, DefaultPolicy(trace), seed=s) for s in seeds]
    default_jit = [
        simulate(trace, FixedPolicy(trace, trace.workload.default_batch_size, None), seed=s) for s in seeds
    ]
    zeus = published or [{"energy": c.energy_j, "time": c.time_s, "cost": c.cost_j} for c in check]
    _, _, (_, _, per_recurrence) = oracle(trace, ETA)
    return {
        "gpu": trace.gpu,
        "workload": trace.workload.name,
        "recurrences": trace.num_recurrences(),
        "default": [r.cost_j for r in default],
        "default_jit": [r.cost_j for r in default_jit],
        "zeus": [z["cost"] for z in zeus],
        "ours": [r.cost_j for r in ours],
        "default_energy": [r.energy_j for r in default],
        "zeus_energy": [z["energy"] for z in zeus],
        "ours_energy": [r.energy_j for r in ours],
        "oracle": trace.num_recurrences() * per_recurrence,
        "zeus_noise_free": _mean([noise_free_cost(trace, c) for c in check]),
        "ours_noise_free": _mean([noise_free_cost(trace, r) for r in ours]),
        "sim_check": None
        if published is None
        else max(abs(c.cost_j / p["cost"] - 1) for c, p in zip(check, published)),
    }


def figures(row: dict[str, Any]) -> dict[str, Any]:
    """What the issue asks per pair: cost against Default, gap to the oracle, ours/Zeus."""
    d, z, o = _mean(row["default"]), _mean(row["zeus"]), _mean(row["ours"])
    return {
        "gpu": row["gpu"],
        "workload": row["workload"],
        "default_mj": d / 1e6,
        "zeus_mj": z / 1e6,
        "ours_mj": o / 1e6,
        "oracle_mj": row["oracle"] / 1e6,
        "zeus_vs_default": z / d - 1,
        "default_jit_vs_default": _mean(row["default_jit"]) / d - 1,
        "ours_vs_default": o / d - 1,
        "zeus_seeds_costlier_than_default": sum(a > b for a, b in zip(row["zeus"], row["default"])),
        "ours_seeds_costlier_than_default": sum(a > b for a, b in zip(row["ours"], row["default"])),
        "zeus_gap": z / row["oracle"] - 1,
        "ours_gap": o / row["oracle"] - 1,
        "ours_over_zeus": o / z,
        "ours_over_zeus_no_luck": row["ours_noise_free"] / row["zeus_noise_free"],
        "zeus_eta_cut": 1 - _mean(row["zeus_energy"]) / _mean(row["default_energy"]),
        "ours_eta_cut": 1 - _mean(row["ours_energy"]) / _mean(row["default_energy"]),
        "sim_check": row["sim_check"],
        "seeds": len(row["ours"]),
    }


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Overall figures and the targets of issue 32."""
    n = len(rows)
    out = {
        "pairs": n,
        "ours_at_most_default": sum(r["ours_vs_default"] <= 0 for r in rows),
        # Pairs where no policy that profiles power limits can be at or below Default.
        "default_jit_costlier_than_default": sum(r["default_jit_vs_default"] > 0 for r in rows),
        "zeus_at_most_default": sum(r["zeus_vs_default"] <= 0 for r in rows),
        "ours_seeds_costlier_than_default": sum(r["ours_seeds_costlier_than_default"] for r in rows),
        "zeus_seeds_costlier_than_default": sum(r["zeus_seeds_costlier_than_default"] for r in rows),
        "seeds": sum(r["seeds"] for r in rows),
        "ours_worst_vs_default": max(r["ours_vs_default"] for r in rows),
        "ours_mean_vs_default": _mean([r["ours_vs_default"] for r in rows]),
        "zeus_mean_vs_default": _mean([r["zeus_vs_default"] for r in rows]),
        "ours_mean_gap": _mean([r["ours_gap"] for r in rows]),
        "zeus_mean_gap": _mean([r["zeus_gap"] for r in rows]),
        "ours_at_most_zeus": sum(r["ours_over_zeus"] <= 1 for r in rows),
        "ours_at_most_zeus_no_luck": sum(r["ours_over_zeus_no_luck"] <= 1 for r in rows),
        "mean_ours_over_zeus": _mean([r["ours_over_zeus"] for r in rows]),
        "worst_ours_over_zeus": max(r["ours_over_zeus"] for r in rows),
    }
    out["targets"] = {
        "ours <= Default on every pair": out["ours_at_most_default"] == n,
        f"mean gap to the oracle <= {100 * TARGET_GAP:.1f} %": out["ours_mean_gap"] <= TARGET_GAP,
        "ours <= Zeus on every pair": out["ours_at_most_zeus"] == n,
        f"mean ours/Zeus <= {TARGET_RATIO}": out["mean_ours_over_zeus"] <= TARGET_RATIO,
    }
    return out


def _pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def print_pairs(console: Console, rows: list[dict[str, Any]], title: str) -> None:
    """The per-pair table."""
    table = Table(title=title)
    cols = (
        "GPU",
        "workload",
        "Default",
        "Zeus",
        "ours",
        "oracle",
        "Default+JIT vs Default",
        "Zeus vs Default",
        "ours vs Default",
        "gap Zeus",
        "gap ours",
        "ours/Zeus",
        "same, no luck",
        "sim check",
    )
    for col in cols:
        table.add_column(col, justify="left" if col in ("GPU", "workload") else "right", no_wrap=True)
    for r in rows:
        worse = r["ours_vs_default"] > 0
        table.add_row(
            r["gpu"],
            r["workload"].split("/")[0],
            f"{r['default_mj']:,.2f}",
            f"{r['zeus_mj']:,.2f}",
            f"{r['ours_mj']:,.2f}",
            f"{r['oracle_mj']:,.2f}",
            _pct(r["default_jit_vs_default"]),
            f"{_pct(r['zeus_vs_default'])} ({r['zeus_seeds_costlier_than_default']}/{r['seeds']})",
            f"[{'red' if worse else 'green'}]{_pct(r['ours_vs_default'])}[/] "
            f"({r['ours_seeds_costlier_than_default']}/{r['seeds']})",
            f"{100 * r['zeus_gap']:.2f}%",
            f"{100 * r['ours_gap']:.2f}%",
            f"[{'red' if r['ours_over_zeus'] > 1 else 'green'}]{r['ours_over_zeus']:.4f}[/]",
            f"{r['ours_over_zeus_no_luck']:.4f}",
            "not run" if r["sim_check"] is None else f"{r['sim_check']:.0e}",
        )
    console.print(table)


def print_summary(console: Console, s: dict[str, Any], what: str) -> None:
    """The overall line and the targets."""
    console.print(
        f"{what}: ours <= Default on {s['ours_at_most_default']}/{s['pairs']} "
        f"(Zeus {s['zeus_at_most_default']}), "
        f"costlier than Default on {s['ours_seeds_costlier_than_default']}/{s['seeds']} seeds "
        f"(Zeus {s['zeus_seeds_costlier_than_default']}); mean cost vs Default: ours "
        f"{_pct(s['ours_mean_vs_default'])}, Zeus {_pct(s['zeus_mean_vs_default'])}; mean gap to the oracle: "
        f"ours {100 * s['ours_mean_gap']:.2f}%, Zeus {100 * s['zeus_mean_gap']:.2f}%; ours <= Zeus on "
        f"{s['ours_at_most_zeus']}/{s['pairs']} ({s['ours_at_most_zeus_no_luck']} without the luck of the "
        f"draws), mean ours/Zeus {s['mean_ours_over_zeus']:.4f}, worst {s['worst_ours_over_zeus']:.4f}"
    )
    for name, ok in s["targets"].items():
        console.print(f"  {'[green]met[/]' if ok else '[red]missed[/]'}: {name}")
    if s["default_jit_costlier_than_default"]:
        console.print(
            f"  on {s['default_jit_costlier_than_default']} of {s['pairs']} pairs the default batch size "
            "with JIT power limits alone costs more than Default: no policy that profiles power limits "
            "can be at or below Default there"
        )


def _variant_row(args: tuple[int, list[int], str, float | None]) -> dict[str, Any]:
    index, seeds, trace_dir, slack = args
    traces = [t for gpu in ("a40", "v100") for t in load_nsdi23_traces(gpu, trace_dir)]
    variant = generate_variant(traces[index % len(traces)], 1000 + index)
    return figures(run_pair(variant, seeds, None, slack))


def run_generated(
    count: int, seeds: list[int], trace_dir: Path, workers: int, slack: float | None
) -> list[dict[str, Any]]:
    """Variant ``i`` is ``generate_variant(trace i mod 12, seed 1000 + i)``, traces in GPU, workload order."""
    jobs = [(i, seeds, str(trace_dir), slack) for i in range(count)]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(_variant_row, jobs))


def sweep_slack(
    slack: float | None, args: argparse.Namespace, seeds: list[int], trace_dir: Path
) -> dict[str, Any]:
    """Ours at one slack, on the measured pairs and the generated variants (Zeus simulated here)."""
    rows = [
        figures(run_pair(trace, seeds, None, slack))
        for gpu in args.gpus
        for trace in load_nsdi23_traces(gpu, trace_dir)
        if not args.workloads or trace.workload.dataset in args.workloads
    ]
    entry: dict[str, Any] = {"slack": slack, "measured": summarise(rows)}
    if args.generated:
        gseeds = list(range(1, args.generated_seeds + 1))
        entry["generated"] = summarise(run_generated(args.generated, gseeds, trace_dir, args.workers, slack))
    print(f"slack {slack} done", file=sys.stderr)
    return entry


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns 0 when every target of issue 32 holds on the measured pairs, else 1."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seeds 1-2 only")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds (default 1-10)")
    parser.add_argument("--gpus", nargs="+", default=["a40", "v100"])
    parser.add_argument("--workloads", nargs="+", default=None, metavar="DATASET", help="only these datasets")
    parser.add_argument("--trace-dir", type=Path, default=None)
    parser.add_argument(
        "--published-in-ours",
        action="store_true",
        help="run the published policy in our simulator only (no sim check; for many seeds)",
    )
    parser.add_argument("--generated", type=int, default=0, metavar="N", help="also N generated variants")
    parser.add_argument("--generated-seeds", type=int, default=4, metavar="K", help="seeds 1..K per variant")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument(
        "--slack",
        type=lambda text: None if text.lower() == "none" else float(text),
        default=JobSpec.slack,
        help="ours' exploration slack (default the JobSpec default, 0; 'none': no budget)",
    )
    parser.add_argument(
        "--slack-sweep",
        type=lambda text: None if text.lower() == "none" else float(text),
        nargs="*",
        default=[],
        metavar="S",
        help="also summarise ours at these slacks ('none': no budget), Zeus run in this simulator",
    )
    parser.add_argument("--json", type=Path, default=RESULTS, help=f"results file (default {RESULTS})")
    args = parser.parse_args(argv)
    try:
        import pandas as pd
        import zeus._legacy.simulate  # noqa: F401
    except ModuleNotFoundError as e:
        print(f"needs the published simulator: pip install zeus==0.16.0 pandas ({e})", file=sys.stderr)
        return 2
    trace_dir = args.trace_dir or default_trace_dir()
    seeds = args.seeds or ([1, 2] if args.quick else list(range(1, 11)))
    console = Console(width=max(Console().width, 200))
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    reference: list[tuple[str, str, float, float | None]] = []
    for gpu in args.gpus:
        if not args.published_in_ours:  # only the published simulator reads the CSVs with pandas
            train_df = pd.read_csv(trace_dir / "summary_train.csv")
            power_df = pd.read_csv(trace_dir / f"summary_power_{gpu}.csv")
        for idx, trace in enumerate(load_nsdi23_traces(gpu, trace_dir)):
            if args.workloads and trace.workload.dataset not in args.workloads:
                continue
            published = None
            if not args.published_in_ours:
                published = [run_published(trace, train_df, power_df, s, ETA, BETA) for s in seeds]
            row = run_pair(trace, seeds, published, args.slack)
            rows.append(figures(row))
            if published is not None and 1 in seeds:
                i = seeds.index(1)
                cut = 1 - published[i]["energy"] / row["default_energy"][i]
                reference.append(
                    (gpu, trace.workload.name, cut, _REFERENCE_ETA_CUT.get(gpu, (None,) * 6)[idx])
                )
            print(f"{gpu} {trace.workload.name} done", file=sys.stderr)
    measured = summarise(rows)
    print_pairs(
        console,
        rows,
        f"Zeus NSDI'23: cumulative Zeus cost (MJ), mean over seeds {seeds[0]}-{seeds[-1]}; vs Default: cost "
        "change (seeds costlier); gap: excess over the oracle; 'same, no luck': ours/Zeus with each "
        "converged trial's epochs set to its batch size's mean (SIMULATED from measured traces)",
    )
    if reference:
        ref = Table(title="Published simulator, seed 1: ETA cut vs Default (issue 5's reference numbers)")
        for col in ("GPU", "workload", "measured here", "issue reference"):
            ref.add_column(col, justify="left" if col in ("GPU", "workload") else "right")
        for gpu, name, cut, expected in reference:
            ref.add_row(gpu, name, f"{100 * cut:.1f}%", "" if expected is None else f"{expected:.1f}%")
        console.print(ref)
    print_summary(console, measured, "Measured A40/V100 traces (the check)")
    results: dict[str, Any] = {
        "simulated": True,
        "seeds": seeds,
        "eta_knob": ETA,
        "beta_knob": BETA,
        "slack": args.slack,
        "measured": {"pairs": rows, "summary": measured},
    }
    if args.generated:
        gseeds = list(range(1, args.generated_seeds + 1))
        generated = run_generated(args.generated, gseeds, Path(trace_dir), args.workers, args.slack)
        gsummary = summarise(generated)
        worst = sorted(generated, key=lambda r: -r["ours_vs_default"])[:5]
        print_pairs(
            console,
            worst,
            f"Generated variants: the five where ours fares worst against Default (seeds 1-{len(gseeds)})",
        )
        print_summary(
            console, gsummary, f"{args.generated} generated variants, seeds 1-{len(gseeds)} (tuning set)"
        )
        results["generated"] = {
            "variants": args.generated,
            "seeds": gseeds,
            "pairs": generated,
            "summary": gsummary,
        }
    if args.slack_sweep:
        results["slack_sweep"] = [
            sweep_slack(slack, args, seeds, Path(trace_dir)) for slack in [args.slack, *args.slack_sweep]
        ]
    from _results import write_json  # benchmarks/_results.py, beside this script

    write_json(args.json, __file__, argv, results)
    console.print(f"{time.perf_counter() - started:.0f} s")
    return 0 if all(measured["targets"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
