"""The figure of docs/optimizers/power-limit.md: one run of the optimizer on a measured profile, in real time.

A measured A40 profile is replayed on the wall clock (``RealTimeReplay``: steps of 20-90 ms) and the
optimizer runs Zeus's documented loop until it decides. The figure shows the power limit at every
step (warm-up, measured and planning steps), every sample's time and energy per step, and the
decision.

Usage::

    python benchmarks/power_limit_figure.py                      # docs/optimizers/power-limit-run.png
    python benchmarks/power_limit_figure.py --profile A40_bert-base-uncased_1gpu --selector "Energy"
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._results import write_json  # noqa: E402
from benchmarks.power_limit_common import SELECTORS, optimal  # noqa: E402
from zeus_core import console, data  # noqa: E402
from zeus_core.testing._realtime_replay import RealTimeReplay  # noqa: E402

OUT = ROOT / "docs" / "optimizers" / "power-limit-run.png"


def run(profile: str, label: str) -> dict[str, Any]:
    """One replayed run: the limit and state at each step, the visits, the decision and the truth."""
    replay = RealTimeReplay(data.path("power_limit_profiles") / f"{profile}.csv")
    with replay.install():
        from zeus_core import ZeusMonitor
        from zeus_core.optimizer.power_limit import GlobalPowerLimitOptimizer

        monitor = ZeusMonitor(gpu_indices=list(range(len(replay.fake.devices))), cpu_indices=[])
        plo = GlobalPowerLimitOptimizer(monitor, SELECTORS[label]())
        steps: list[tuple[float, str]] = []
        plo.on_epoch_begin()
        while plo.optimal_power_limit_w is None:
            plo.on_step_begin()
            steps.append((replay.limit_w, type(plo.state).__name__))
            replay.step()
            plo.on_step_end()
        plo.on_epoch_end()
        plo.close()
        visits = [
            (v.power_limit, v.first_step, list(zip(v.times_s, v.energies_j, v.steps))) for v in plo.visits
        ]
        truth = replay.truth()
        return {
            "profile": profile,
            "selector": label,
            "steps": steps,
            "visits": visits,
            "chosen_w": plo.optimal_power_limit_w,
            "optimal_w": optimal(label, truth, len(replay.fake.devices)),
            "truth": {w: list(v) for w, v in truth.items()},
            "reason": plo.state.reason,  # type: ignore[union-attr]
        }


def plot(result: dict[str, Any], out: Path) -> None:
    """Three panels over the steps: the limit, each sample's time per step, each sample's energy per step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    limits = sorted({w for w, _ in result["steps"]}, reverse=True)
    colors = {w: plt.get_cmap("viridis")(i / max(len(limits) - 1, 1)) for i, w in enumerate(limits)}
    fig, (ax_w, ax_t, ax_e) = plt.subplots(3, 1, figsize=(9, 7), sharex=True, height_ratios=[1.2, 1, 1])
    xs = range(len(result["steps"]))
    ax_w.step(xs, [w for w, _ in result["steps"]], where="post", color="0.4", lw=1)
    measured = [i for i, (_, s) in enumerate(result["steps"]) if s == "Measuring"]
    ax_w.scatter(
        measured,
        [result["steps"][i][0] for i in measured],
        s=4,
        c=[colors[result["steps"][i][0]] for i in measured],
    )
    ax_w.axvline(len(xs) - 1, color="crimson", ls="--", lw=1)
    ax_w.set_ylabel("power limit (W)")
    ax_w.set_title(
        f"{result['profile']}, {result['selector']}: chose {result['chosen_w']:g} W "
        f"(optimum {result['optimal_w']:g} W) after {len(xs)} steps",
        fontsize=10,
    )
    for limit, first, samples in result["visits"]:
        x = first
        for t, e, n in samples:
            ax_t.hlines(1e3 * t / n, x, x + n, color=colors[limit], lw=2)
            ax_e.hlines(e / n, x, x + n, color=colors[limit], lw=2)
            x += n
    for w in limits:  # the truth each sample estimates
        t, e = result["truth"][w]
        ax_t.axhline(1e3 * t, color=colors[w], lw=0.5, ls=":")
        ax_e.axhline(e, color=colors[w], lw=0.5, ls=":")
    ax_t.set_ylabel("time per step (ms)")
    ax_e.set_ylabel("energy per step (J)")
    ax_e.set_xlabel("training step (dots: measured steps; bars: samples; dotted: the profile's truth)")
    handles = [plt.Line2D([], [], color=colors[w], lw=2, label=f"{w:g} W") for w in limits]
    ax_t.legend(handles=handles, ncol=len(limits), fontsize=7, loc="upper left")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)


def main(argv: Sequence[str] | None = None) -> int:
    """Run, plot, and keep the run's figures (``benchmarks/results/power_limit_figure.json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="A40_resnet50_1gpu")
    parser.add_argument("--selector", default="MaxSlowdown(1.1)", choices=list(SELECTORS))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    console.set_enabled(False)
    result = run(args.profile, args.selector)
    plot(result, args.out)
    write_json(ROOT / "benchmarks" / "results" / "power_limit_figure.json", __file__, [], result)
    print(f"{args.out.relative_to(ROOT)}: chose {result['chosen_w']:g} W ({result['reason']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
