"""PNG plots of a planned frontier and of a plan's pipeline timeline.

matplotlib is imported only when a plot is drawn, through its object-oriented API on the Agg
canvas (no ``pyplot``, no global backend switch), so plotting works headless.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from zeus_core.optimizer.pipeline_frequency._frequency_plan import FrequencyPlan
from zeus_core.optimizer.pipeline_frequency._schedule import InstructionKind
from zeus_core.optimizer.pipeline_frequency.planner._frontier import Frontier

__all__ = ["plot_frontier", "plot_timeline"]


def _figure(width: float, height: float) -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError("Plotting needs matplotlib: pip install 'zeus-suite[plot]'") from exc
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path


def plot_frontier(
    frontier: Frontier,
    path: str | Path,
    *,
    others: Mapping[str, tuple[Sequence[float], Sequence[float]]] | None = None,
    title: str | None = None,
) -> Path:
    """Iteration time (s) versus energy (J) of every frontier point, with the key plans marked.

    Frontier points are drawn at their quantised times; the marked plans at their real (replayed)
    times.

    Args:
        frontier: The planned frontier.
        path: Output PNG.
        others: Extra series to overlay, ``{label: (times_s, energies_j)}`` (e.g. another planner).
        title: Figure title (default: schedule, size and "simulated" when it is).

    Returns:
        ``path``.

    Raises:
        ModuleNotFoundError: matplotlib is missing (``pip install 'zeus-suite[plot]'``).

    Example:
        >>> import pathlib, tempfile
        >>> from zeus_core.optimizer.pipeline_frequency import plan_frontier, synchronous_1f1b
        >>> from zeus_core.testing import physical_instruction_profile
        >>> fr = plan_frontier(synchronous_1f1b(2, 3), physical_instruction_profile("a40", 2))
        >>> plot_frontier(fr, pathlib.Path(tempfile.mkdtemp()) / "frontier.png").stat().st_size > 0
        True
    """
    fig = _figure(7.0, 4.5)
    ax = fig.add_subplot()
    ax.plot(frontier.times_s, frontier.energy_j, color="0.75", lw=1, label="frontier (quantised time)")
    p = frontier.pareto_indices()
    real_t, real_e = frontier.replay_points(p)
    order = np.argsort(real_t)
    ax.plot(real_t[order], real_e[order], color="C0", lw=2, label="Pareto-optimal points (real time)")
    for label, (t, e) in (others or {}).items():
        ax.plot(t, e, ls="--", lw=1, label=label)
    marks = [
        (frontier.max_frequency_plan(), "s", "C3", "all max clock"),
        (frontier.zero_slowdown_plan(), "o", "C2", "zero slowdown"),
        (frontier.least_energy_plan(), "^", "C1", "least energy"),
    ]
    for plan, marker, color, label in marks:
        ax.plot(
            [plan.iteration_time_s],
            [plan.energy_j],
            marker,
            color=color,
            ms=8,
            label=f"{label}: {plan.iteration_time_s:.3f} s, {plan.energy_j:.0f} J",
        )
    ax.set_xlabel("iteration time (s)")
    ax.set_ylabel("energy per iteration, all GPUs (J)")
    s = frontier.schedule
    sim = " [simulated profile]" if frontier.profile.simulated else ""
    ax.set_title(
        title or f"Perseus frontier: {s.name} {s.num_stages} stages x {s.num_microbatches} microbatches{sim}"
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_timeline(
    frontier: Frontier, plan: FrequencyPlan, path: str | Path, *, title: str | None = None
) -> Path:
    """One row per stage; each instruction a bar at its as-soon-as-possible start, coloured by clock.

    Forward passes are drawn plain and backward passes hatched; bars wide enough carry
    ``F<microbatch>``/``B<microbatch>``.

    Args:
        frontier: Gives the DAG and the measured durations.
        plan: The plan to draw (its clocks must be in the profile).
        path: Output PNG.
        title: Figure title.

    Returns:
        ``path``.

    Raises:
        ModuleNotFoundError: matplotlib is missing (``pip install 'zeus-suite[plot]'``).
        ZeusProfileError: The plan uses a clock the profile has no measurement for.

    Example:
        >>> import pathlib, tempfile
        >>> from zeus_core.optimizer.pipeline_frequency import plan_frontier, synchronous_1f1b
        >>> from zeus_core.testing import physical_instruction_profile
        >>> fr = plan_frontier(synchronous_1f1b(2, 3), physical_instruction_profile("a40", 2))
        >>> out = pathlib.Path(tempfile.mkdtemp()) / "timeline.png"
        >>> plot_timeline(fr, fr.zero_slowdown_plan(), out).exists()
        True
    """
    chosen = frontier.measured_options(plan)
    times = np.array([o.time_s for o in chosen])
    starts = frontier.dag.start_times(times)
    freqs = np.array([o.frequency_mhz for o in chosen], dtype=float)
    all_f = [m.frequency_mhz for k in frontier.options for m in frontier.profile.get(*k)]
    lo, hi = min(all_f), max(all_f)
    s = frontier.schedule
    fig = _figure(max(8.0, min(24.0, 0.35 * 2 * s.num_microbatches + 4)), 1.0 + 0.45 * s.num_stages)
    ax = fig.add_subplot()
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    cmap, norm = colormaps["viridis"], Normalize(vmin=lo, vmax=hi if hi > lo else lo + 1)
    makespan = float((starts + times).max())
    for i, inst in enumerate(frontier.dag.instructions):
        backward = inst.kind is InstructionKind.BACKWARD
        ax.barh(
            inst.stage,
            times[i],
            left=starts[i],
            height=0.8,
            color=cmap(norm(freqs[i])),
            edgecolor="black",
            lw=0.3,
            hatch="//" if backward else None,
        )
        if times[i] > makespan / (4.0 * s.num_microbatches):
            ax.text(
                starts[i] + times[i] / 2,
                inst.stage,
                inst.short_name,
                ha="center",
                va="center",
                fontsize=6,
                color="white" if norm(freqs[i]) < 0.5 else "black",
            )
    ax.set_yticks(range(s.num_stages), [f"stage {k}" for k in range(s.num_stages)])
    ax.invert_yaxis()
    ax.set_xlabel("time (s)")
    ax.set_xlim(0, makespan * 1.01)
    fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="SM clock (MHz)", pad=0.01)
    sim = " [simulated profile]" if frontier.profile.simulated else ""
    energy = f", {plan.energy_j:.0f} J" if plan.energy_j is not None else ""
    ax.set_title(title or f"{plan.label or 'plan'}: {makespan:.3f} s{energy}{sim} (hatched: backward)")
    return _save(fig, path)
