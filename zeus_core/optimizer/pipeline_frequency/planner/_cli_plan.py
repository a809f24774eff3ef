"""``zeus-suite plan``: plan Perseus GPU frequencies for one pipeline-parallel iteration.

Reads a profile CSV, plans the frontier, prints a summary and writes the frontier, the plans, a
summary and two plots into ``--out`` (the files and options: docs/optimizers/perseus.md,
"zeus-suite plan").

Example:
    zeus-suite plan --profile prof.csv --stages 4 --microbatches 8 --gpu a100 --deadline 0.8
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from zeus_core._arg_types import number
from zeus_core.exceptions import ZeusError

if TYPE_CHECKING:
    from zeus_core.optimizer.pipeline_frequency._profile import InstructionProfile

__all__ = ["add_arguments", "run"]

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``plan`` options on ``parser``."""
    parser.add_argument(
        "--profile",
        required=True,
        type=Path,
        help="instruction profile CSV: stage,instruction,frequency,time,energy (MHz, s, J)",
    )
    parser.add_argument(
        "--stages",
        type=number(1, 4096, integer=True),
        default=None,
        help="pipeline stages (default: the profile's)",
    )
    parser.add_argument(
        "--microbatches",
        type=number(1, 100_000, integer=True),
        required=True,
        help="microbatches per iteration",
    )
    parser.add_argument(
        "--schedule",
        default="1f1b",
        help="schedule: 1f1b (default), gpipe, interleaved-1f1b (with --chunks), zb-1f1b (split backward)",
    )
    parser.add_argument(
        "--chunks",
        type=number(1, 1024, integer=True),
        default=1,
        help="model chunks per stage for interleaved-1f1b (default 1)",
    )
    parser.add_argument(
        "--deadline",
        type=number(0.0, 1e6, unit="s", low_open=True),
        default=None,
        help="also plan for an iteration that may take this long, s (deadline or straggler time)",
    )
    parser.add_argument(
        "--blocking-power",
        type=number(0.0, 10_000.0, unit="W"),
        default=None,
        help="GPU power while blocked on pipeline communication, W (default: measured, from the "
        "profile's .json beside the CSV as PerseusRuntime writes it, else the --gpu's idle power)",
    )
    parser.add_argument(
        "--gpu",
        default="",
        help="GPU product the profile was measured on, e.g. a100 (for its documented idle power)",
    )
    parser.add_argument(
        "--unit-time",
        type=number(1e-6, 10.0, unit="s"),
        default=1e-3,
        help="time quantum of the planner, s (default 0.001)",
    )
    parser.add_argument(
        "--cost-model",
        choices=["hull", "exponential"],
        default="hull",
        help="convex cost model per instruction (default: hull)",
    )
    parser.add_argument(
        "--rounding",
        choices=["floor", "ceil"],
        default="floor",
        help="quantisation of durations (default: floor)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("perseus_plan"), help="output folder (default ./perseus_plan)"
    )
    parser.add_argument(
        "--timeline",
        choices=["zero-slowdown", "deadline", "least-energy"],
        default=None,
        help="plan drawn in timeline.png (default: deadline if given, else zero-slowdown)",
    )
    parser.add_argument(
        "--all-plans", action="store_true", help="write the plan of every Pareto point (JSON lines)"
    )
    parser.add_argument(
        "--simulated", action="store_true", help="mark the profile as simulated (reports say so)"
    )
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")


def run(args: argparse.Namespace) -> int:
    """Plan and write the outputs; returns 0, or 2 on bad input (message on stderr)."""
    try:
        return _run(args)
    except ZeusError as exc:
        print(f"zeus-suite plan: error: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from zeus_core.optimizer.pipeline_frequency._profile import InstructionProfile
    from zeus_core.optimizer.pipeline_frequency._schedule import make_schedule
    from zeus_core.optimizer.pipeline_frequency.planner._frontier import plan_frontier

    profile = InstructionProfile.from_csv(args.profile, simulated=args.simulated)
    blocking_w, blocking_source = _blocking_power(args, profile)
    stages = args.stages if args.stages is not None else len(profile.stages)
    schedule = make_schedule(args.schedule, stages, args.microbatches, args.chunks)
    frontier = plan_frontier(
        schedule,
        profile,
        unit_time_s=args.unit_time,
        blocking_power_w=blocking_w,
        cost_model=args.cost_model,
        rounding=args.rounding,
    )
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    plans = {
        "max_frequency": frontier.max_frequency_plan(),
        "zero_slowdown": frontier.zero_slowdown_plan(),
        "least_energy": frontier.least_energy_plan(),
    }
    if args.deadline is not None:
        plans["deadline"] = frontier.plan_for_time(args.deadline)
    for name, plan in plans.items():
        plan.save(out / f"plan_{name}.json")
    frontier.to_csv(out / "frontier.csv")
    if args.all_plans:
        with (out / "pareto_plans.jsonl").open("w") as f:
            for i in frontier.pareto_indices().tolist():
                f.write(json.dumps(frontier.plan(i).to_dict()) + "\n")
    base = plans["max_frequency"]
    summary = {
        "schedule": schedule.name,
        "stages": stages,
        "microbatches": args.microbatches,
        "simulated": profile.simulated,
        "blocking_power_w": blocking_w,
        "blocking_power_source": blocking_source,
        "unit_time_s": args.unit_time,
        "frontier_points": len(frontier),
        "pareto_points": int(len(frontier.pareto_indices())),
        "solve_time_s": frontier.solver.solve_time_s,
        "plans": {
            name: {
                "iteration_time_s": p.iteration_time_s,
                "energy_j": p.energy_j,
                "saving_vs_max_frequency": 1.0 - p.prediction()[1] / base.prediction()[1],
                "slowdown_vs_max_frequency": p.prediction()[0] / base.prediction()[0] - 1.0,
            }
            for name, p in plans.items()
        },
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    _print_summary(summary, out)
    if not args.no_plots:
        from zeus_core.optimizer.pipeline_frequency.planner._plots import plot_frontier, plot_timeline

        choice = args.timeline or ("deadline" if "deadline" in plans else "zero-slowdown")
        if choice == "deadline" and "deadline" not in plans:
            print(
                "zeus-suite plan: --timeline deadline needs --deadline; drawing zero-slowdown.",
                file=sys.stderr,
            )
            choice = "zero-slowdown"
        plot_frontier(frontier, out / "frontier.png")
        plot_timeline(frontier, plans[choice.replace("-", "_")], out / "timeline.png")
        print(f"plots: {out / 'frontier.png'}, {out / 'timeline.png'} (timeline: {choice})")
    return 0


def _blocking_power(args: argparse.Namespace, profile: "InstructionProfile") -> tuple[float, str]:
    """``--blocking-power``, else the value measured while profiling, else ``--gpu``'s idle power."""
    from zeus_core.optimizer.pipeline_frequency.planner._blocking_power import resolve_blocking_power

    return resolve_blocking_power(args.blocking_power, profile.blocking_power_w, args.gpu or profile.gpu_name)


def _print_summary(summary: dict, out: Path) -> None:
    sim = " [SIMULATED profile]" if summary["simulated"] else ""
    print(
        f"Perseus plan: {summary['schedule']} {summary['stages']} stages x "
        f"{summary['microbatches']} microbatches{sim}\n"
        f"frontier: {summary['frontier_points']} points ({summary['pareto_points']} Pareto-optimal), "
        f"solved in {summary['solve_time_s']:.2f} s; blocking power {summary['blocking_power_w']:g} W "
        f"({summary['blocking_power_source']}), "
        f"unit {summary['unit_time_s'] * 1e3:g} ms"
    )
    print(f"{'plan':<15} {'time (s)':>10} {'energy (J)':>12} {'saving':>8} {'slowdown':>9}")
    for name, p in summary["plans"].items():
        print(
            f"{name.replace('_', '-'):<15} {p['iteration_time_s']:>10.4f} {p['energy_j']:>12.1f} "
            f"{100 * p['saving_vs_max_frequency']:>7.1f}% {100 * p['slowdown_vs_max_frequency']:>8.2f}%"
        )
    print(f"plans and frontier written to {out}/")
