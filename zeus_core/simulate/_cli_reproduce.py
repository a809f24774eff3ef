"""``zeus-suite reproduce``: reproduce a paper's results with the trace-driven simulator.

``zeus-suite reproduce nsdi23 --gpu a40|v100 [--trace-dir DIR] [--power-trace FILE]
[--recurrences N] [--seeds 1 2 ...] [--out DIR]`` prints, per workload, the cumulative energy to
accuracy (ETA), time to accuracy (TTA) and Zeus cost of Default, Grid Search, ours, Zeus 0.16 (the
published optimizer, when ``zeus==0.16.0`` is installed) and the best fixed configuration in
hindsight; "vs Default" is the cumulative cost against Default's (negative: cheaper) and on how
many seeds it was costlier. Writes ``nsdi23_<gpu>.json`` and, unless ``--no-plots``, PNG plots
to ``--out``. All figures are simulated from measured traces.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Sequence

from zeus_core.exceptions import ZeusConfigError
from zeus_core.simulate._nsdi23 import WorkloadReport, run_nsdi23
from zeus_core.simulate._traces import NSDI23_WORKLOADS

__all__ = ["add_arguments", "run", "format_table"]

logger = logging.getLogger(__name__)

_ORDER = ("default", "grid", "zeus", "zeus-0.16", "oracle")
_LABELS = {
    "default": "Default",
    "grid": "Grid Search",
    "zeus": "Zeus Suite (ours)",
    "zeus-0.16": "Zeus 0.16",
    "oracle": "Oracle",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``reproduce`` options."""
    parser.add_argument("paper", choices=["nsdi23"], help="which paper: nsdi23 = Zeus (NSDI'23)")
    parser.add_argument("--gpu", default="v100", help="GPU of the power trace: a40 or v100 (default v100)")
    parser.add_argument(
        "--trace-dir",
        type=Path,
        default=None,
        help="folder with summary_train.csv and "
        "summary_power_<gpu>.csv (default: the traces bundled with the package)",
    )
    parser.add_argument(
        "--power-trace",
        type=Path,
        default=None,
        help="power trace of another GPU, same format as summary_power_<gpu>.csv",
    )
    parser.add_argument(
        "--recurrences",
        type=int,
        default=None,
        help="recurrences per job (default: 2 x batch sizes x power limits, as in the paper)",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[1], help="seeds, averaged (default 1)")
    parser.add_argument("--eta-knob", type=float, default=0.5, help="weight of energy in the Zeus cost (0.5)")
    parser.add_argument("--beta-knob", type=float, default=2.0, help="early-stop factor (2.0; 0 disables)")
    parser.add_argument(
        "--workloads",
        nargs="+",
        default=None,
        metavar="DATASET",
        choices=[w.dataset for w in NSDI23_WORKLOADS],
        help="only these datasets",
    )
    parser.add_argument("--out", type=Path, default=Path("zeus_nsdi23_out"), help="output folder (JSON, PNG)")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")


def _mj(joules: float) -> str:
    return f"{joules / 1e6:,.2f}"


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:,.1f}"


def _pct(fraction: float) -> str:
    return f"{100 * fraction:+.1f}%"


def _vs_default(report: WorkloadReport, name: str) -> str:
    """Cumulative cost against Default's, and the seeds on which it was costlier (red when it was)."""
    if name == "default":
        return "—"
    change = -report.reduction(name, "cost_j")
    costlier = report.seeds_costlier(name)
    text = f"{100 * change:+.1f}%" + ("" if costlier is None else f" ({costlier}/{len(report.seeds)})")
    return f"[red]{text}[/red]" if change > 0 else text


def format_table(reports: Sequence[WorkloadReport]) -> object:
    """A ``rich`` table: per workload and policy, ETA (MJ), TTA (h), Zeus cost (MJ) and vs Default."""
    from rich.table import Table

    gpu = reports[0].gpu if reports else "?"
    seeds = ",".join(str(s) for s in reports[0].seeds) if reports else ""
    table = Table(
        title=f"Zeus NSDI'23 reproduction on {gpu}, seeds {seeds} (SIMULATED from measured traces); "
        "vs Default: cumulative cost against Default's (seeds on which it was costlier)"
    )
    for col in ("workload", "policy", "ETA (MJ)", "TTA (h)", "cost (MJ)", "vs Default", "ETA cut", "TTA cut"):
        table.add_column(col, justify="left" if col in ("workload", "policy") else "right", no_wrap=True)
    for report in reports:
        names = [n for n in _ORDER if n in report.summaries]
        details = [report.workload, f"b0={report.default_batch_size}, {report.recurrences} recurrences"]
        for i, name in enumerate(names):
            s = report.summaries[name]
            label = _LABELS.get(name, name) + (f" {s.note}" if s.note else "")
            table.add_row(
                details[i] if i < len(details) else "",
                label,
                _mj(s.energy_j),
                _hours(s.time_s),
                _mj(s.cost_j),
                _vs_default(report, name),
                _pct(report.reduction(name, "energy_j")),
                _pct(report.reduction(name, "time_s")),
            )
        table.add_section()
    return table


def run(args: argparse.Namespace) -> int:
    """Run the reproduction; returns the exit code (2 for bad input)."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=132)
    beta = None if args.beta_knob == 0 else args.beta_knob
    workloads = NSDI23_WORKLOADS
    if args.workloads:
        workloads = tuple(w for w in NSDI23_WORKLOADS if w.dataset in set(args.workloads))
    try:
        reports = run_nsdi23(
            args.gpu,
            trace_dir=args.trace_dir,
            power_trace=args.power_trace,
            seeds=args.seeds,
            recurrences=args.recurrences,
            eta_knob=args.eta_knob,
            beta_knob=beta,
            workloads=workloads,
        )
    except ZeusConfigError as e:
        console.print(f"[red]zeus-suite reproduce: {e}[/red]")
        return 2
    console.print(format_table(reports))
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / f"nsdi23_{args.gpu}.json"
    json_path.write_text(json.dumps([r.to_dict() for r in reports], indent=1))
    console.print(f"results: {json_path}")
    if not args.no_plots:
        from zeus_core.simulate._plots import plot_choices, plot_cumulative_cost

        for path in (
            plot_cumulative_cost(reports, out / f"nsdi23_{args.gpu}_cumulative_cost.png"),
            plot_choices(reports, out / f"nsdi23_{args.gpu}_choices.png"),
        ):
            console.print(f"plot: {path}")
    return 0
