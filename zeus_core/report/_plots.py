"""The report's figures, drawn with matplotlib's Agg canvas (no pyplot, no global backend) as PNG bytes.

Each function returns ``None`` when the run holds nothing to draw for it.
"""

from __future__ import annotations

import io
from typing import Any, Callable

from zeus_core.report._load import RunData

__all__ = ["power_figure", "energy_figure", "forecast_figure", "power_limit_figure", "FIGURES"]

_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def _figure(width: float = 10.0, height: float = 3.6) -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ModuleNotFoundError as e:  # pragma: no cover - exercised with matplotlib hidden
        raise ModuleNotFoundError(
            "zeus-suite report draws with matplotlib: pip install 'zeus-suite[plot]'", name=e.name
        ) from e
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def _scale(joules: list[float]) -> tuple[float, str]:
    top = max((abs(j) for j in joules), default=0.0)
    for unit, scale in (("MJ", 1e6), ("kJ", 1e3)):
        if top >= 10 * scale:
            return scale, unit
    return 1.0, "J"


def _integer_ticks(ax: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def power_figure(run: RunData) -> bytes | None:
    """Power per GPU over time, temperature on a second axis, slowdowns, epochs and evaluation marked."""
    if not run.power:
        return None
    fig = _figure()
    ax = fig.add_subplot()
    for k, (device, series) in enumerate(sorted(run.power.items())):
        ts, ws = zip(*series)
        ax.step(ts, ws, where="post", color=_COLORS[k % len(_COLORS)], lw=1.4, label=f"{device} power")
    ax.set_xlabel("time since start (s)")
    ax.set_ylabel("power (W)")
    ax.set_ylim(bottom=0)
    for k, epoch in enumerate(run.epochs):
        if "start_s" in epoch and "end_s" in epoch and len(run.epochs) <= 40:
            ax.axvspan(
                epoch["start_s"], epoch["end_s"], color="#1f77b4" if k % 2 else "#9ecae1", alpha=0.07, lw=0
            )
            ax.axvline(epoch["end_s"], color="#777777", lw=0.6, ls=":")
    for n, stage in enumerate(run.stages):
        ax.axvspan(
            stage["start_s"],
            stage["end_s"],
            color="#999999",
            alpha=0.25,
            lw=0,
            label="evaluation (not in training figures)" if n == 0 else None,
        )
    first = True
    for spans in run.slowdown.values():
        for start, end in spans:
            ax.axvspan(
                start,
                max(end, start + 1e-3),
                color="#d62728",
                alpha=0.25,
                lw=0,
                label="thermal or hardware slowdown" if first else None,
            )
            first = False
    if run.temperature:
        tax = ax.twinx()
        for k, (device, series) in enumerate(sorted(run.temperature.items())):
            ts, cs = zip(*series)
            tax.plot(ts, cs, color=_COLORS[k % len(_COLORS)], lw=1.0, ls="--", label=f"{device} temperature")
        tax.set_ylabel("temperature (°C)")
        handles = ax.get_legend_handles_labels()[0] + tax.get_legend_handles_labels()[0]
        labels = ax.get_legend_handles_labels()[1] + tax.get_legend_handles_labels()[1]
        ax.legend(handles, labels, loc="lower right", fontsize=8)
    else:
        ax.legend(loc="lower right", fontsize=8)
    ax.set_title("Power per GPU" + (" (simulated)" if run.simulated else ""), fontsize=11)
    return _png(fig)


def energy_figure(run: RunData) -> bytes | None:
    """Energy per epoch (bars) and J/sample or J/token (line)."""
    energies = [e["metrics"].get("energy/epoch_j") for e in run.epochs]
    if not energies or None in energies:
        return None
    fig = _figure()
    ax = fig.add_subplot()
    scale, unit = _scale(energies)
    xs = [e.get("epoch", i + 1) for i, e in enumerate(run.epochs)]
    ax.bar(xs, [v / scale for v in energies], color="#9ecae1", edgecolor="#1f77b4", label="energy per epoch")
    ax.set_xlabel("epoch")
    _integer_ticks(ax)
    ax.set_ylabel(f"energy ({unit})")
    key = (
        "energy/j_per_token"
        if all("energy/j_per_token" in e["metrics"] for e in run.epochs)
        else "energy/j_per_sample"
    )
    values = [e["metrics"].get(key) for e in run.epochs]
    if all(v is not None for v in values):
        eax = ax.twinx()
        eax.plot(
            xs,
            values,
            color="#d62728",
            marker="o",
            lw=1.5,
            label=key.split("/")[1].replace("_", " ").replace("j ", "J "),
        )
        eax.set_ylabel("J/token" if key.endswith("token") else "J/sample")
        eax.set_ylim(bottom=0)
        handles = ax.get_legend_handles_labels()[0] + eax.get_legend_handles_labels()[0]
        labels = ax.get_legend_handles_labels()[1] + eax.get_legend_handles_labels()[1]
        ax.legend(handles, labels, loc="lower right", fontsize=8)
    ax.set_title("Energy per epoch (evaluation excluded)", fontsize=11)
    return _png(fig)


def forecast_figure(run: RunData) -> bytes | None:
    """The forecast after each epoch against the outcome, energy and time side by side."""
    outcome_j = run.train.get("energy/train_j")
    if not run.forecasts or outcome_j is None:
        return None
    fig = _figure()
    axes = fig.subplots(1, 2)
    xs = [f["after_epoch"] for f in run.forecasts]
    panels = [("energy_j", outcome_j, "energy"), ("time_s", run.train.get("time/train_s"), "time")]
    for ax, (key, outcome, what) in zip(axes, panels):
        raw = [f.get(key) for f in run.forecasts]
        if outcome is None or any(v is None for v in raw):
            ax.set_axis_off()
            continue
        values = [float(v) for v in raw if v is not None]
        scale, unit = _scale([*values, outcome]) if what == "energy" else (1.0, "s")
        ax.plot(xs, [v / scale for v in values], marker="o", color="#1f77b4", label="forecast after epoch")
        ax.axhline(outcome / scale, color="#2ca02c", lw=1.5, label="outcome")
        error = 100.0 * (values[0] - outcome) / outcome if outcome else 0.0
        ax.annotate(
            f"first forecast {error:+.1f} %",
            (xs[0], values[0] / scale),
            textcoords="offset points",
            xytext=(8, 8),
            fontsize=9,
        )
        ax.set_xlabel("epochs finished")
        _integer_ticks(ax)
        ax.set_ylabel(f"whole run {what} ({unit})")
        lo = min([*values, outcome]) / scale
        hi = max([*values, outcome]) / scale
        pad = max((hi - lo) * 0.3, hi * 0.05)
        ax.set_ylim(lo - pad, hi + pad)
        ax.legend(loc="lower right", fontsize=8)
        ax.set_title(f"Forecast {what} vs outcome", fontsize=11)
    return _png(fig)


def power_limit_figure(run: RunData) -> bytes | None:
    """The power-limit optimizer's profile: energy and time per step at each limit, the chosen one marked."""
    rows = (run.power_limit or {}).get("measurements") or []
    if not rows:
        return None
    rows = sorted(rows, key=lambda r: r["power_limit_w"])
    fig = _figure()
    ax = fig.add_subplot()
    limits = [r["power_limit_w"] for r in rows]
    ax.plot(
        limits, [r["energy_per_step_j"] for r in rows], marker="o", color="#1f77b4", label="energy per step"
    )
    ax.set_xlabel("power limit (W)")
    ax.set_ylabel("energy per step (J)")
    tax = ax.twinx()
    tax.plot(limits, [r["time_per_step_s"] for r in rows], marker="s", color="#ff7f0e", label="time per step")
    tax.set_ylabel("time per step (s)")
    chosen = (run.power_limit or {}).get("optimal_w")
    if chosen is not None:
        ax.axvline(chosen, color="#2ca02c", lw=2, label=f"chosen: {chosen:g} W")
    handles = ax.get_legend_handles_labels()[0] + tax.get_legend_handles_labels()[0]
    labels = ax.get_legend_handles_labels()[1] + tax.get_legend_handles_labels()[1]
    ax.legend(handles, labels, loc="upper center", fontsize=8)
    ax.set_title("Power-limit optimizer: profile and decision", fontsize=11)
    return _png(fig)


FIGURES: list[tuple[str, str, Callable[[RunData], bytes | None]]] = [
    ("power", "Power per GPU over time", power_figure),
    ("energy", "Energy per epoch and efficiency", energy_figure),
    ("forecast", "Forecast against the outcome", forecast_figure),
    ("power-limit", "Power-limit profile and decision", power_limit_figure),
]
"""``(id, caption, function)`` of every figure, in page order."""
