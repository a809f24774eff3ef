"""PNG plots of simulated recurring jobs (matplotlib, imported lazily, Agg backend).

* :func:`plot_cumulative_cost`: cumulative Zeus cost over recurrences, one panel per workload,
  one line per policy (the first seed), with the oracle's straight line.
* :func:`plot_choices`: the batch size and power limit ours chose at each recurrence.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

from zeus_core.simulate._nsdi23 import WorkloadReport

__all__ = ["plot_cumulative_cost", "plot_choices"]

_COLORS = {
    "default": "tab:gray",
    "grid": "tab:orange",
    "zeus": "tab:blue",
    "zeus-0.16": "tab:green",
    "oracle": "black",
}
_NAMES = {"zeus": "ours", "zeus-0.16": "Zeus 0.16"}


def _pyplot() -> Any:
    try:
        import matplotlib
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError(
            "Plotting needs matplotlib: pip install 'zeus-suite[plot]' (or pass --no-plots)."
        ) from e
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _grid(n: int) -> tuple[int, int]:
    cols = min(3, n)
    return math.ceil(n / cols), cols


def _save(plt: Any, fig: Any, axes: Any, used: int, title: str, path: str | Path) -> Path:
    """Blank the grid's unused panels, title the figure, write it to ``path`` and close it."""
    for ax in list(axes.flat)[used:]:
        ax.axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def plot_cumulative_cost(reports: Sequence[WorkloadReport], path: str | Path) -> Path:
    """Save the cumulative-cost figure (first seed of each policy) as a PNG.

    Args:
        reports: One report per workload (same GPU).
        path: Output file.

    Returns:
        The written path.
    """
    plt = _pyplot()
    rows, cols = _grid(len(reports))
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, report in zip(axes.flat, reports):
        for name, runs in report.runs.items():
            costs = runs[0].cumulative_costs()
            ax.plot(
                range(1, len(costs) + 1),
                [c / 1e6 for c in costs],
                label=_NAMES.get(name, name),
                color=_COLORS.get(name),
            )
        oracle = report.summaries.get("oracle")
        if oracle is not None:
            n = report.recurrences
            ax.plot(
                [0, n],
                [0, oracle.cost_j / 1e6],
                "--",
                color=_COLORS["oracle"],
                label=f"oracle ({oracle.note})",
            )
        ax.set_title(f"{report.workload} (seed {report.seeds[0]})", fontsize=10)
        ax.set_xlabel("recurrence")
        ax.set_ylabel("cumulative Zeus cost (MJ)")
        ax.legend(fontsize=7)
    gpu = reports[0].gpu if reports else ""
    title = f"Zeus NSDI'23 reproduction on {gpu} (simulated from measured traces)"
    return _save(plt, fig, axes, len(reports), title, path)


def plot_choices(reports: Sequence[WorkloadReport], path: str | Path, policy: str = "zeus") -> Path:
    """Save, per workload, the batch size and power limit ``policy`` converged with at each recurrence.

    Args:
        reports: One report per workload (same GPU).
        path: Output file.
        policy: Which policy's first-seed run to draw.

    Returns:
        The written path.
    """
    plt = _pyplot()
    rows, cols = _grid(len(reports))
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, report in zip(axes.flat, reports):
        run = report.runs[policy][0]
        chosen = run.chosen()
        x = range(1, len(chosen) + 1)
        ax.step(x, [b for b, _ in chosen], where="mid", color="tab:blue", label="batch size")
        ax.set_yscale("log", base=2)
        sizes = sorted({b for b, _ in chosen})
        ax.set_yticks(sizes, [str(b) for b in sizes], fontsize=7)
        ax.minorticks_off()
        ax.set_xlabel("recurrence")
        ax.set_ylabel("batch size", color="tab:blue")
        twin = ax.twinx()
        twin.step(x, [p for _, p in chosen], where="mid", color="tab:red", alpha=0.6, label="power limit")
        twin.set_ylabel("power limit (W)", color="tab:red")
        limits = sorted({p for _, p in chosen})
        twin.set_ylim(min(limits) - 15, max(limits) + 15)
        ax.set_title(f"{report.workload}: {_NAMES.get(policy, policy)} (seed {report.seeds[0]})", fontsize=10)
    gpu = reports[0].gpu if reports else ""
    title = f"Batch size and power limit chosen on {gpu} (simulated)"
    return _save(plt, fig, axes, len(reports), title, path)
