"""Benchmark tables for docs/benchmarks.md, built from the results files in benchmarks/results/.

``render(name, table)`` returns the Markdown of one table (or generated sentence) from
``benchmarks/results/<name>.json``, followed by where it came from: the file, the command that
wrote it, when, and on what machine. Each figure on the benchmarks page is produced here from a
results file; ``TABLES`` lists every table this module can build.

Example:
    >>> sorted(TABLES)[:2]
    ['adapter_overhead', 'h100_real_gpu_check']
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable, Sequence

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"

#: Results files written before the scripts recorded their command: the command that writes them.
KNOWN_COMMANDS = {
    "h100_real_gpu_check": "python benchmarks/real_gpu_check.py (on a machine with an NVIDIA GPU)",
    "daemon_latency": "python benchmarks/daemon_latency.py",
}


class ResultsMissing(Exception):
    """A marker names a results file or table that does not exist."""


# --- formatting ---------------------------------------------------------------------------------


def _num(x: float | None, digits: int = 1, unit: str = "") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    return f"{x:,.{digits}f}{' ' + unit if unit else ''}"


def _pct(x: float | None, digits: int = 1, sign: bool = False) -> str:
    """A fraction as a percentage (0.123 -> 12.3 %)."""
    if x is None or not math.isfinite(x):
        return "—"
    return f"{100 * x:{'+' if sign else ''}.{digits}f} %"


def _bold(text: str) -> str:
    return f"**{text}**"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool] | None = None) -> str:
    """A Markdown table; ``right[i]`` right-aligns column ``i`` (default: all but the first)."""
    right = right if right is not None else [i > 0 for i in range(len(headers))]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---:" if r else "---" for r in right) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# --- monitors -----------------------------------------------------------------------------------


def accuracy_windows(r: dict[str, Any]) -> str:
    """Window cost and energy error per window length, both libraries."""
    libs = list(r["pair_ms"])
    rows = [
        ["`begin_window` + `end_window` pair (median)", *[_num(r["pair_ms"][lib], 3, "ms") for lib in libs]]
    ]
    for length, by_lib in r["errors"].items():
        n = next(iter(by_lib.values()))["windows"]
        rows.append(
            [
                f"{length} windows ({n}): \\|error\\| median / worst",
                *[
                    f"{_num(by_lib[lib]['median_pct'])} % / {_num(by_lib[lib]['worst_pct'])} %"
                    for lib in libs
                ],
            ]
        )
    return table(["", *libs], rows)


def accuracy_steps(r: dict[str, Any]) -> str:
    """The monitor's cost per optimizer step, and the reader's CPU use."""
    steps = dict(r["steps"])
    bare = steps.pop("no monitor")
    rows = [["no monitor", _num(bare["wall_ms"], 3), "", ""]]
    for name, s in steps.items():
        rows.append(
            [
                name,
                _num(s["wall_ms"], 3),
                f"{s['wall_ms'] - bare['wall_ms']:+.3f}",
                f"{s['cpu_ms'] - bare['cpu_ms']:+.3f}",
            ]
        )
    text = table(
        ["per optimizer step (tiny torch MLP)", "wall ms", "cost, wall ms", "cost, training thread CPU ms"],
        rows,
    )
    return (
        f"{text}\n\nThe Zeus Suite reader thread used {_pct(r['reader_cpu'])} of one core; one RAPL "
        f"package + DRAM read (on the caller's thread at each window edge) took {_num(r['rapl_us'])} µs."
    )


def monitor_pairs(r: dict[str, Any]) -> str:
    """Time per begin/end pair and NVML calls on the caller's thread."""
    rows = []
    for row in r["rows"]:
        lib = row["library"]
        rows.append(
            [
                str(row["gpus"]),
                _bold(lib) if lib == "zeus-suite" else lib,
                _num(row["us_per_pair"], 2),
                f"{row['nvml_calls_per_pair']:g}",
                _num(row["nvml_us"], 2),
                _num(row["overhead_us"], 2),
            ]
        )
    headers = [
        "GPUs",
        "library",
        "µs / pair",
        "NVML calls / pair (caller)",
        "NVML cost µs",
        "overhead beyond NVML µs",
    ]
    return table(headers, rows, [True, False, True, True, True, True]) + (
        f"\n\nMedians of {r['runs']} interleaved runs of {r['pairs']:,} pairs each."
    )


def adapter_hooks(r: dict[str, Any]) -> str:
    """Time inside ZeusCallback's hooks per step, and wall time per step."""
    rows = []
    for c in r["cases"]:
        hooks = c["hooks_ms_per_step"]
        rows.append(
            [
                f"`{c['case']}`" if c["case"] != "no callback" else "no callback",
                "" if hooks is None else _num(hooks, 3),
                _num(c["wall_ms_per_step"], 3),
                "" if hooks is None else f"{c['wall_diff_ms']:+.3f}",
            ]
        )
    return table(
        ["case", "in the hooks, ms per step", "wall ms per step", "wall vs no callback, ms"], rows
    ) + (f"\n\nMedians of {r['runs']} fits of {r['steps']} steps per case.")


# --- a real GPU -----------------------------------------------------------------------------------


def real_gpu_accuracy(r: dict[str, Any]) -> str:
    """Energy counter against the integral of sampled power on a real GPU."""
    a = r["accuracy"]
    rows = [
        ["GPU", r["devices"][0]["gpu"].split(": ", 1)[-1]],
        ["load", f"bf16 matrix products for {_num(a['seconds'])} s at {_num(a['avg_power_w'])} W"],
        ["energy counter", _num(a["counter_j"], 1, "J")],
        ["integral of sampled power", _num(a["sampled_power_j"], 1, "J")],
        ["difference", f"{a['difference_pct']:+.2f} %"],
    ]
    return table(["", "measured"], rows, [False, True])


def real_gpu_limits(r: dict[str, Any]) -> str:
    """Throughput and energy per TFLOP under several power limits."""
    p = r["power_limits"]
    rows = [
        [_num(x["limit_w"], 0), _num(x["tflops"], 0), _num(x["avg_power_w"], 0), _num(x["j_per_tflop"], 2)]
        for x in p["rows"]
    ]
    text = table(["power limit W", "TFLOP/s", "average W", "J per TFLOP"], rows)
    return (
        f"{text}\n\nLimit before: {_num(p['original_w'], 0)} W; after the runs: {_num(p['restored_w'], 0)} W."
    )


def real_gpu_clocks(r: dict[str, Any]) -> str:
    """Time and energy per matrix product under locked SM clocks."""
    rows = [
        [str(c["sm_mhz"]), _num(c["ms_per_matmul"], 2), _num(c["j_per_matmul"], 2), _num(c["avg_power_w"], 0)]
        for c in r["clocks"]
    ]
    return table(["locked SM clock MHz", "ms per matmul", "J per matmul", "average W"], rows)


# --- power-limit optimizer ----------------------------------------------------------------------


def _plo_groups(groups: dict[str, dict[str, Any]]) -> str:
    rows = []
    for label, g in groups.items():
        rows.append(
            [
                _bold(label) if label == "all" else label.replace("=", " = "),
                f"{g['cases']:,}",
                _pct(g["ours_in_budget"]),
                _pct(g["zeus_in_budget"]),
                _pct(g["ours_ok"], 2),  # two digits: 98.96 % is not 99 %
                _pct(g["zeus_ok"], 2),
                _pct(g["informed_ok"], 2) if "informed_ok" in g else "—",
                _pct(g["extra_ratio"]),
                _pct(g["extra_ratio_zeus_decided"]),
                _pct(g["deterministic"]),
            ]
        )
    headers = [
        "cases",
        "n",
        "in budget: ours",
        "Zeus",
        "within 1 %: ours",
        "Zeus",
        "informed",
        "extra cost ours/Zeus: all",
        "where Zeus decided",
        "same twice",
    ]
    return table(headers, rows)


def plo_generated(r: dict[str, Any]) -> str:
    """The power-limit comparison on generated profiles, overall and by selector, noise, epoch and GPU."""
    noises = sum(label.startswith("noise=") for label in r["generated"])
    per_seed = r.get("generated_per_seed") or {}
    if len(per_seed) > 1:
        figures = ", ".join(f"{_pct(g['ours_ok'], 2)} (seed {k})" for k, g in per_seed.items())
        seeds = f"for each of {len(per_seed)} seeds (new profiles and noise each), pooled. Within 1 % per "
        seeds += f"seed, ours: {figures}."
        if all("informed_ok" in g for g in per_seed.values()):
            informed = ", ".join(f"{_pct(g['informed_ok'], 2)} (seed {k})" for k, g in per_seed.items())
            seeds += f" Informed: {informed}."
    else:
        seeds = f"seed {r['seed']}."
    return _plo_groups(r["generated"]) + (
        f"\n\n{r['profiles']} generated workloads × 4 selectors × {noises} noise levels × epochs of "
        f"{', '.join(str(e) for e in r['epochs'])} steps, {seeds}"
    )


def plo_measured(r: dict[str, Any]) -> str:
    """The same grid on the measured A40 profiles (virtual clock, generated noise)."""
    if not r.get("measured_a40"):
        raise ResultsMissing("power_limit_generated.json holds no measured A40 cases")
    return _plo_groups(r["measured_a40"]) + "\n\nThe measured A40 profiles, same grid and seeds."


def plo_noise_floor(r: dict[str, Any]) -> str:
    """Misses per selector: ours beside the two references that know the optimum."""
    rows = [
        [x["selector"], f"{x['cases']:,}", f"{x['ours']:,}", f"{x['informed']:,}",
         "—" if x["ideal"] is None else f"{x['ideal']:,}"]
        for x in r["rows"]
    ]  # fmt: skip
    total = [sum(x[k] for x in r["rows"]) for k in ("ours", "informed")]
    rows.append([_bold("all"), _bold(f"{r['cases']:,}"), _bold(f"{total[0]:,}"), _bold(f"{total[1]:,}"), ""])
    seeds = f"seeds {r['seeds'][0]}–{r['seeds'][-1]}" if len(r["seeds"]) > 1 else f"seed {r['seeds'][0]}"
    return table(["selector", "cases", "missed: ours", "informed", "ideal"], rows) + (
        f"\n\n{r['profiles']} generated profiles, {seeds}, as in the table above. 99 % within 1 % allows "
        f"{r['allowed_misses']:,} misses of {r['cases']:,}."
    )


def plo_replay(r: dict[str, Any]) -> str:
    """Measured profiles replayed in real time: ours beside Zeus 0.16, the headline figures."""
    s = r["summary"]
    o, z, n = s["ours"], s["zeus"], s["cases"]
    rows = [
        ["within 1 % of the optimum", f"{o['within_1pct']}/{n}", f"{z['within_1pct']}/{n}"],
        ["MaxSlowdown(1.1) choices that break the bound", str(o["bound_broken"]), str(z["bound_broken"])],
        ["worst excess over the optimum", _pct(o["worst_excess"], 2), _pct(z["worst_excess"], 2)],
        ["profiling steps", f"{o['steps']:,}", f"{z['steps']:,}"],
        ["waste (optimal steps)", _num(o["waste"], 0), _num(z["waste"], 0)],
        ["waste, ours / Zeus's", _pct(s["waste_ratio"]), "100 %"],
    ]
    for key in ("median", "p90", "p99", "max"):
        rows.append(
            [f"own time per step, {key} (ms)", _num(o["overhead_ms"][key], 3), _num(z["overhead_ms"][key], 3)]
        )
    rows.append(["steps above 5 ms", str(o["overhead_ms"]["above_5ms"]), str(z["overhead_ms"]["above_5ms"])])
    return table(["", "ours", "zeus 0.16"], rows, [False, True, True]) + (
        f"\n\n{n} cases: the six measured A40 profiles × Time, Energy, ZeusCost(0.5), MaxSlowdown(1.1)"
        f"{' × ' + str(r['repeats']) + ' runs' if r.get('repeats', 1) > 1 else ''}, on the wall clock"
        + (
            f", with {r['cpu_load_processes']} CPU-bound processes beside it."
            if r.get("cpu_load_processes")
            else "."
        )
    )


def plo_replay_cases(r: dict[str, Any]) -> str:
    """Each replayed case: the optimum, and each optimizer's choice, profiling steps and waste."""

    def run(x: dict[str, Any]) -> list[str]:
        mark = "" if x["ok"] else " ✗"
        return [
            f"{x['chosen_w']:g}{mark}" if x["chosen_w"] is not None else "—",
            str(x["steps"]),
            _num(x["waste"], 0),
        ]

    rows = [
        [f"`{c['profile']}`", c["selector"], f"{c['optimal_w']:g}", *run(c["ours"]), *run(c["zeus"])]
        for c in r["cases"]
    ]
    headers = ["profile", "selector", "optimum W", "ours: W", "steps", "waste", "Zeus: W", "steps", "waste"]
    text = table(headers, rows, [False, False, True, True, True, True, True, True, True])
    return f"{text}\n\n✗: not within 1 % of the optimum's cost."


# --- batch-size optimizer -------------------------------------------------------------------------


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def nsdi23_costs(r: dict[str, Any]) -> str:
    """Cumulative cost per measured workload: Default / Zeus / ours / oracle, cuts, gaps, ours/Zeus."""
    return _nsdi23_pairs(r["measured"]["pairs"]) + "\n\n" + _nsdi23_summary(r, r["measured"]["summary"])


def nsdi23_generated(r: dict[str, Any]) -> str:
    """The same comparison summarised over generated trace variants (GPUs never measured)."""
    g = r.get("generated")
    if not g:
        raise ResultsMissing("nsdi23.json has no generated variants: run benchmarks/nsdi23.py --generated N")
    summary = g["summary"]
    rows = [
        [
            "variants at or below Default",
            f"{summary['ours_at_most_default']} / {summary['pairs']}",
            f"{summary['zeus_at_most_default']} / {summary['pairs']}",
        ],
        [
            "mean cost vs Default",
            _pct(summary["ours_mean_vs_default"], 1, True),
            _pct(summary["zeus_mean_vs_default"], 1, True),
        ],
        ["mean gap to the oracle", _pct(summary["ours_mean_gap"], 2), _pct(summary["zeus_mean_gap"], 2)],
        ["variants where ours ≤ Zeus", f"{summary['ours_at_most_zeus']} / {summary['pairs']}", ""],
        ["mean ours/Zeus", f"{summary['mean_ours_over_zeus']:.4f}", ""],
        [
            "variants where the default batch size with JIT power limits alone costs more than Default",
            f"{summary['default_jit_costlier_than_default']} / {summary['pairs']}",
            "",
        ],
    ]
    seeds = g["seeds"]
    return (
        table(["", "ours", "Zeus"], rows)
        + f"\n\n{g['variants']} variants, seeds {seeds[0]}–{seeds[-1]} each; **simulated**."
    )


def nsdi23_slack(r: dict[str, Any]) -> str:
    """Ours at several slacks: runs dearer than Default, gap to the oracle, wins over Zeus."""
    sweep = r.get("slack_sweep")
    if not sweep:
        raise ResultsMissing("nsdi23.json has no slack sweep: run benchmarks/nsdi23.py --slack-sweep ...")

    def both(entry: dict[str, Any], fmt: Callable[[dict[str, Any]], str]) -> str:
        parts = [fmt(entry["measured"])]
        if "generated" in entry:
            parts.append(fmt(entry["generated"]))
        return " / ".join(parts)

    rows = [
        [
            "`None` (no budget)"
            if e["slack"] is None
            else f"{e['slack']:g}" + (" (default)" if i == 0 else ""),
            both(e, lambda s: f"{s['pairs'] - s['ours_at_most_default']}/{s['pairs']}"),
            both(e, lambda s: f"{s['ours_seeds_costlier_than_default']}/{s['seeds']}"),
            both(e, lambda s: _pct(s["ours_mean_gap"], 2)),
            both(e, lambda s: f"{s['ours_at_most_zeus']}/{s['pairs']}"),
            both(e, lambda s: f"{s['mean_ours_over_zeus']:.3f}"),
        ]
        for i, e in enumerate(sweep)
    ]
    headers = [
        "`slack`",
        "pairs dearer than Default",
        "runs dearer than Default",
        "mean gap to the oracle",
        "ours ≤ Zeus",
        "mean ours/Zeus",
    ]
    return table(headers, rows) + "\n\nEach cell: measured traces / generated variants; **simulated**."


def _nsdi23_pairs(pairs: list[dict[str, Any]]) -> str:
    rows = []
    for w in pairs:
        ratio = w["ours_over_zeus"]
        rows.append(
            [
                w["gpu"].upper(),
                w["workload"].split("/")[0],
                _num(w["default_mj"], 2),
                _num(w["zeus_mj"], 2),
                _num(w["ours_mj"], 2),
                _num(w["oracle_mj"], 2),
                f"{_pct(w['zeus_vs_default'], 1, True)} / {_pct(w['ours_vs_default'], 1, True)}",
                f"{w['zeus_seeds_costlier_than_default']} / {w['ours_seeds_costlier_than_default']}",
                f"{_pct(w['zeus_gap'], 2)} / {_pct(w['ours_gap'], 2)}",
                _bold(f"{ratio:.3f}") if ratio <= 1 else f"{ratio:.3f}",
                f"{w['ours_over_zeus_no_luck']:.3f}",
            ]
        )
    headers = [
        "GPU",
        "workload",
        "Default MJ",
        "Zeus MJ",
        "ours MJ",
        "oracle MJ",
        "vs Default Zeus / ours",
        "seeds dearer than Default Zeus / ours",
        "gap Zeus / ours",
        "ours/Zeus",
        "same, no luck",
    ]
    return table(headers, rows, [False, False, *[True] * 9])


def _nsdi23_summary(r: dict[str, Any], summary: dict[str, Any]) -> str:
    """One generated sentence: against Default, against Zeus, the gaps, the simulator check."""
    seeds = r["seeds"]
    text = (
        f"Seeds {seeds[0]}–{seeds[-1]} ({len(seeds)}), eta {r['eta_knob']:g}, beta {r['beta_knob']:g}, "
        f"slack {r['slack']}; **simulated** from measured traces. At or below Default on "
        f"{summary['ours_at_most_default']} of {summary['pairs']} workloads (Zeus "
        f"{summary['zeus_at_most_default']}); runs dearer than Default "
        f"{summary['ours_seeds_costlier_than_default']} of {summary['seeds']} (Zeus "
        f"{summary['zeus_seeds_costlier_than_default']}). Ours ≤ Zeus on "
        f"{summary['ours_at_most_zeus']} of {summary['pairs']}; mean ours/Zeus "
        f"{summary['mean_ours_over_zeus']:.4f}; mean gap to the oracle {_pct(summary['zeus_mean_gap'], 2)} "
        f"(Zeus) and {_pct(summary['ours_mean_gap'], 2)} (ours)."
    )
    checks = [w.get("sim_check") for w in r["measured"]["pairs"] if w.get("sim_check") is not None]
    if checks:
        text += (
            " Driving the published policy through this simulator reproduces the published simulator's "
            f"cost to within {max(checks):.0e} (relative) on every workload and seed."
        )
    return text


# --- Perseus ---------------------------------------------------------------------------------------


def perseus_planner(r: dict[str, Any]) -> str:
    """Planner against lowtime: solve time, frontier size, energy, slowdown, saving."""
    rows = []
    cap = r["lowtime_cap_s"]
    for x in r["rows"]:
        lt_s, capped = x.get("lt_s"), x.get("lt_capped")
        if lt_s is None:
            lt_time, speed = "—", "—"
        elif capped:
            lt_time, speed = f">{cap:.0f} (capped)", f">{lt_s / x['ours_s']:.0f}×"
        else:
            lt_time, speed = _num(lt_s, 2), f"{lt_s / x['ours_s']:.1f}×"
        lt_e = x.get("lt_e_tmin")
        delta = (
            f"{100 * (x['ours_e_tmin'] / lt_e - 1) + 0.0:+.2f} %".replace("-0.00", "0.00") if lt_e else "—"
        )
        lt_slow = x.get("lt_slow")
        rows.append(
            [
                x["gpu"].upper(),
                f"{x['S']}×{x['M']}",
                f"{_num(x['ours_s'], 2)} / {lt_time}",
                speed,
                f"{x['ours_points']} / {x.get('lt_points', '—')}{'+' if capped else ''}",
                f"{_num(x['ours_e_tmin'])} / {_num(lt_e)}",
                delta,
                f"{_num(100 * x['ours_slow'], 2)} / {_num(None if lt_slow is None else 100 * lt_slow, 2)}",
                _pct(x["ours_save"]),
            ]
        )
    headers = [
        "GPU",
        "S×M",
        "solve s (ours / lowtime)",
        "speed-up",
        "points",
        "energy at the shortest time J (ours / lowtime)",
        "Δ energy",
        "slowdown % (ours / lowtime)",
        "zero-slowdown saving",
    ]
    return table(headers, rows, [False, False, *[True] * 7]) + (
        f"\n\nUnit time {r['unit_time_s'] * 1e3:g} ms; lowtime capped at {cap:.0f} s per run; **simulated** "
        "profiles from the documented physical model."
    )


def perseus_extrinsic(r: dict[str, Any]) -> str:
    """Planning for a straggler's iteration time."""
    rows = [
        [
            e["gpu"].upper(),
            f"{e['S']}×{e['M']}",
            _num(e["t_strag"], 3),
            _num(e["e_base"]),
            _num(e["e_zero"]),
            _num(e["e_plan"]),
            _pct(e["save_vs_base"]),
            _pct(e["save_vs_zero"]),
        ]
        for e in r["extrinsic"]
    ]
    headers = [
        "GPU",
        "S×M",
        "straggler's time s",
        "all-max J",
        "zero-slowdown J",
        "planned for the straggler J",
        "saving vs all-max",
        "saving vs zero-slowdown",
    ]
    return table(headers, rows, [False, False, *[True] * 6])


def perseus_scale(r: dict[str, Any]) -> str:
    """One-point planning of large interleaved pipelines."""
    rows = [
        [
            f"{x['S']}×{x['M']}",
            f"{x['instructions']:,}",
            str(x["clocks"]),
            _num(x["dag_s"]),
            _num(x["lp_s"]),
            _num(x["refine_s"]),
            _bold(_num(x["total_s"])),
            _pct(x["saving"]),
            _pct(x["slowdown"], 2, sign=True),
        ]
        for x in r["rows"]
    ]
    headers = ["S×M", "instructions", "clocks", "DAG s", "LP s", "refine s", "total s", "saving", "slowdown"]
    return table(headers, rows, [False, *[True] * 8])


def daemon_latency(r: dict[str, Any]) -> str:
    """A power-limit set through the daemon on the Unix socket against the same set made directly."""
    labels = {
        "direct": "direct (`set_power_limit`, root)",
        "held": "through the daemon, lease already held (every set after a job's first)",
        "open": "through the daemon, opening a lease (journal fsync)",
        "close": "through the daemon, closing a lease (journal fsync)",
    }
    added = r.get("added_median_ms", {})
    rows = [
        [
            labels.get(case, case),
            _num(c["median_ms"], 3 if case == "direct" else 2, "ms"),
            _num(c["p90_ms"], 3 if case == "direct" else 1, "ms"),
            _num(added.get(case), 2, "ms") if case in added else "",
        ]
        for case, c in r["cases"].items()
    ]
    return table(["Set", "Median", "p90", "Added to a direct set (median)"], rows)


def zeus_compat_summary(r: dict[str, Any]) -> str:
    """How many of Zeus's documented items run with only the imports changed, by kind."""
    names = {
        "docs block": "Python blocks of the docs, README, skill file",
        "example": "example files",
        "command": "module-style commands",
    }
    rows = [[names[k], f"{ran} of {total}"] for k, (ran, total) in r["by_kind"].items()]
    rows.append([_bold("all"), _bold(f"{r['run']} of {r['corpus']} ({_pct(r['run'] / r['corpus'], 0)})")])
    return table(
        [f"Zeus's documented code (commit {r['zeus_commit']})", "Runs with only the imports changed"], rows
    )


def zeus_compat_items(r: dict[str, Any]) -> str:
    """The items of Zeus's corpus that do not run in CI, with why and the change they need."""
    rows = [[f"`{x['source']}`", x["why"], x["change"]] for x in r["items"] if not x["runs"]]
    return table(["Zeus's item", "Why it does not run here", "The change"], rows, [False, False, False])


TABLES: dict[str, dict[str, Callable[[dict[str, Any]], str]]] = {
    "zeus_compat": {"summary": zeus_compat_summary, "items": zeus_compat_items},
    "measurement_accuracy": {"windows": accuracy_windows, "steps": accuracy_steps},
    "monitor_overhead": {"pairs": monitor_pairs},
    "adapter_overhead": {"hooks": adapter_hooks},
    "h100_real_gpu_check": {
        "accuracy": real_gpu_accuracy,
        "limits": real_gpu_limits,
        "clocks": real_gpu_clocks,
    },
    "power_limit_generated": {"generated": plo_generated, "measured": plo_measured},
    "power_limit_noise_floor": {"table": plo_noise_floor},
    "power_limit_replay": {"table": plo_replay, "cases": plo_replay_cases},
    "power_limit_replay_loaded": {"table": plo_replay},
    "nsdi23": {"costs": nsdi23_costs, "generated": nsdi23_generated, "slack": nsdi23_slack},
    "perseus_planner": {"planner": perseus_planner, "extrinsic": perseus_extrinsic},
    "perseus_scale": {"scale": perseus_scale},
    "daemon_latency": {"sets": daemon_latency},
}


def load(name: str) -> dict[str, Any]:
    """The results file ``benchmarks/results/<name>.json``."""
    path = RESULTS / f"{name}.json"
    if not path.is_file():
        raise ResultsMissing(
            f"no results file benchmarks/results/{name}.json: run its benchmark with "
            f"--json {path.relative_to(ROOT)}"
        )
    return json.loads(path.read_text(encoding="utf-8"))


def provenance(name: str, payload: dict[str, Any]) -> str:
    """Where a table came from: the file, the command, the date and the machine."""
    command = payload.get("command") or KNOWN_COMMANDS.get(name, f"benchmarks/{name}.py")
    parts = [f"`{command}`"]
    if payload.get("generated"):
        parts.append(payload["generated"])
    machine = payload.get("machine") or {}
    if machine:
        load_avg = machine.get("load_average", machine.get("load_average_1m"))
        parts.append(
            f"{machine.get('system', '')}, {machine.get('cpus')} CPUs"
            + (f", load average {load_avg:.1f} when it finished" if load_avg is not None else "")
        )
    elif payload.get("torch"):
        parts.append(f"torch {payload['torch']}")
    return f"<small>From `benchmarks/results/{name}.json`, written by {'; '.join(parts)}.</small>"


def render(name: str, which: str) -> str:
    """The Markdown of table ``which`` of results file ``name``, with its provenance."""
    builders = TABLES.get(name)
    if builders is None or which not in builders:
        raise ResultsMissing(f"no table {which!r} for results {name!r} (docs/_hooks/benchmark_tables.py)")
    payload = load(name)
    results = payload.get("results", payload)
    return f"{builders[which](results)}\n\n{provenance(name, payload)}\n"
