"""Perseus planner benchmark: zeus-suite's planner side by side with lowtime 0.3.0.

Both planners get the same inputs in the same run: a synthetic A100-like or A40-like instruction
profile from the documented physical model (``zeus_core.optimizer.pipeline_frequency.
physical_profiles``: imbalanced stages, backward ≈ 2× forward), the same blocking (P2P) power and
the same 1 ms time quantum. lowtime is driven through its public API the way zeus's
``examples/pipeline_frequency_optimizer/run_optimization.py`` drives it (effective energy, Pareto
filter, exponential cost model with the "best" grid search, synchronous 1F1B DAG,
``PhillipsDessouky.run``), with an O(N) dependency build instead of the example's O(N²) one.

Every plan is replayed the same way (real measured durations through the DAG, energy of all
GPUs including blocking power), so the energies compare like for like. Columns:

* ``solve s``: wall time from profile to frontier (option filtering, cost-model fit, solve);
* ``points``: frontier points produced;
* ``E@Tmin``: replayed energy of the plan at the shortest time (ours: the zero-slowdown plan;
  lowtime: its last plan); ``slow%``: its real slowdown versus all-maximum clocks;
* ``E min``: replayed energy of the least-energy plan;
* ``save%``: zero-slowdown saving versus all-maximum clocks;
* ``ΔE@Tmin``: our E@Tmin relative to lowtime's (negative: ours uses less).

Run ``python benchmarks/perseus_planner.py`` (full; lowtime capped at ``--lowtime-cap`` seconds
per size) or ``--quick`` (small sizes only).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from zeus_core.optimizer.pipeline_frequency import (
    FrequencyPlan,
    Frontier,
    InstructionKind,
    InstructionProfile,
    plan_frontier,
    synchronous_1f1b,
)
from zeus_core.testing import PHYSICAL_GPUS, physical_instruction_profile

FULL_SIZES = [(4, 8), (4, 16), (8, 16), (8, 32), (16, 64)]
QUICK_SIZES = [(4, 8), (4, 16)]


@dataclass
class LowtimeResult:
    """What one lowtime run produced (plans keyed like FrequencyPlan.frequencies)."""

    solve_s: float
    fit_s: float
    points: int
    capped: bool
    last_plan: FrequencyPlan | None
    least_plan: FrequencyPlan | None
    last_quant_time: int


def run_lowtime(
    profile: InstructionProfile,
    num_stages: int,
    num_mbs: int,
    unit_time: float,
    p2p_power: float,
    cap_s: float,
) -> LowtimeResult:
    """Plan with lowtime 0.3.0's public API; stops after ``cap_s`` seconds of solving."""
    import networkx as nx
    from lowtime.cost_model import ExponentialModel
    from lowtime.graph_utils import DependencyResolver, add_sink_node, add_source_node
    from lowtime.operation import CandidateExecutionOptions, ExecutionOption, OperationSpec
    from lowtime.perseus.instruction import Backward, Forward, Instruction, backward_dep, forward_dep
    from lowtime.perseus.schedule import Synchronous1F1B
    from lowtime.solver import PhillipsDessouky

    started = time.perf_counter()
    specs: dict[int, dict[type, OperationSpec]] = {}
    for stage in range(num_stages):
        specs[stage] = {}
        for cls, kind in ((Forward, InstructionKind.FORWARD), (Backward, InstructionKind.BACKWARD)):
            options = [
                ExecutionOption[int](
                    real_time=m.time_s, unit_time=unit_time, cost=m.energy_j, knob=m.frequency_mhz
                )
                for m in profile.get(stage, kind)
            ]
            for o in options:  # effective energy, as zeus's example computes it
                o.cost -= p2p_power * o.quant_time * o.unit_time
            cands = CandidateExecutionOptions[int](options=options)
            if len(cands.options) <= 3:
                cands = CandidateExecutionOptions[int](options=options, noise_factor=0.95)
            with warnings.catch_warnings():  # lowtime's grid search warns on starts that do not fit
                warnings.simplefilter("ignore")
                model = ExponentialModel(cands, search_strategy="best")
            specs[stage][cls] = OperationSpec[int](options=cands, cost_model=model)
    dag = nx.DiGraph()
    node = 2
    by_key: dict[tuple[type, int, int], int] = {}
    insts: list[Instruction] = []
    for stage in range(num_stages):
        ids = []
        for inst in Synchronous1F1B(
            num_stages=num_stages, num_micro_batches=num_mbs, stage_id=stage, operation_spec_map=specs[stage]
        ):
            dag.add_node(node, op=inst)
            by_key[(type(inst), inst.stage_id, inst.micro_batch_id)] = node
            insts.append(inst)
            ids.append(node)
            node += 1
        dag.add_edges_from(zip(ids, ids[1:]))
    resolver = DependencyResolver(dependency_rules=[forward_dep, backward_dep], node_type=Instruction)
    for (cls, stage, mb), u in by_key.items():  # only adjacent stages can depend on each other
        for other in (stage - 1, stage + 1):
            v = by_key.get((cls, other, mb))
            if v is not None and resolver.is_dependent(dag.nodes[u]["op"], dag.nodes[v]["op"]):
                dag.add_edge(u, v)
    add_source_node(dag, 0)
    add_sink_node(dag, 1)
    dag.graph["source_node"], dag.graph["sink_node"] = 0, 1
    fit_s = time.perf_counter() - started

    def snapshot(label: str) -> FrequencyPlan:
        freqs = {}
        from zeus_core.optimizer.pipeline_frequency import Instruction as Inst

        for inst in insts:
            kind = InstructionKind.FORWARD if isinstance(inst, Forward) else InstructionKind.BACKWARD
            freqs[Inst(inst.stage_id, kind, inst.micro_batch_id)] = inst.assigned_knob
        return FrequencyPlan("1f1b", num_stages, num_mbs, freqs, label=label)

    points, capped, last, least, least_total, last_q = 0, False, None, None, float("inf"), -1
    for result in PhillipsDessouky(dag).run():
        points += 1
        total = result.cost + num_stages * result.real_time * p2p_power
        last_q = result.quant_time
        if total < least_total:
            least_total, least = total, snapshot("lowtime-least")
        if time.perf_counter() - started > cap_s:
            capped = True
            break
    if points:
        last = snapshot("lowtime-last")
    return LowtimeResult(time.perf_counter() - started, fit_s, points + 1, capped, last, least, last_q)


def run_size(gpu: str, s: int, m: int, unit: float, cap: float, with_lowtime: bool) -> dict:
    """Plan one (GPU, S, M) with both planners; returns a table row."""
    spec = PHYSICAL_GPUS[gpu]
    profile = physical_instruction_profile(gpu, s, seed=0)
    sched = synchronous_1f1b(s, m)
    t0 = time.perf_counter()
    frontier = plan_frontier(sched, profile, unit_time_s=unit, blocking_power_w=spec.blocking_power_w)
    zero = frontier.zero_slowdown_plan()
    ours_s = time.perf_counter() - t0
    base = frontier.max_frequency_plan()
    least = frontier.least_energy_plan()
    row = {
        "gpu": gpu,
        "S": s,
        "M": m,
        "ours_s": ours_s,
        "ours_points": len(frontier),
        "ours_e_tmin": zero.energy_j,
        "ours_slow": zero.iteration_time_s / base.iteration_time_s - 1,
        "ours_e_min": least.energy_j,
        "base_e": base.energy_j,
        "base_t": base.iteration_time_s,
        "ours_save": 1 - zero.energy_j / base.energy_j,
        "frontier": frontier,
        "ours_tmin_q": int(frontier.quant_times[-1]),
        "ours_tmax_q": int(frontier.quant_times[0]),
    }
    if with_lowtime:
        lt = run_lowtime(profile, s, m, unit, spec.blocking_power_w, cap)
        row.update(
            lt_s=lt.solve_s,
            lt_fit_s=lt.fit_s,
            lt_points=lt.points,
            lt_capped=lt.capped,
            lt_tmin_q=lt.last_quant_time,
        )
        if lt.last_plan is not None and not lt.capped:
            rep = frontier.replay_plan(lt.last_plan)
            row.update(
                lt_e_tmin=rep.energy_j,
                lt_slow=rep.iteration_time_s / base.iteration_time_s - 1,
                lt_save=1 - rep.energy_j / base.energy_j,
            )
        if lt.least_plan is not None:
            row["lt_e_min"] = frontier.replay_plan(lt.least_plan).energy_j
    return row


def extrinsic(frontier: Frontier, slowdown: float = 0.2) -> dict:
    """Energy of one pipeline when another pipeline is ``slowdown`` slower and everyone waits for it."""
    base = frontier.max_frequency_plan()
    zero = frontier.zero_slowdown_plan()
    t_strag = base.iteration_time_s * (1 + slowdown)
    planned = frontier.plan_for_time(t_strag, label="straggler")
    stages, p = frontier.schedule.num_stages, frontier.blocking_power_w

    def padded(plan: FrequencyPlan) -> float:  # block until the straggler finishes
        return plan.energy_j + p * stages * (t_strag - plan.iteration_time_s)

    e_base, e_zero, e_plan = padded(base), padded(zero), padded(planned)
    return {
        "t_strag": t_strag,
        "e_base": e_base,
        "e_zero": e_zero,
        "e_plan": e_plan,
        "save_vs_base": 1 - e_plan / e_base,
        "save_vs_zero": 1 - e_plan / e_zero,
    }


def _fmt(x: float | None, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def print_tables(rows: list[dict], cap: float, ext: list[tuple[str, int, int, dict]]) -> None:
    """Print the comparison and extrinsic tables (plain text, Markdown-compatible)."""
    print(
        "\n| GPU | S×M | solve s (ours / lowtime) | speed-up | points (ours / lowtime) | "
        "E@Tmin J (ours / lowtime) | ΔE@Tmin | slow% (ours / lowtime) | E min J (ours / lowtime) | "
        "save% (ours / lowtime) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        lt_s = r.get("lt_s")
        capped = r.get("lt_capped")
        lt_time = (
            "—"
            if lt_s is None
            else (f">{cap:.0f} (capped)" if capped else f"{lt_s:.2f} (fit {r['lt_fit_s']:.1f})")
        )
        speed = (
            "—"
            if lt_s is None
            else (f">{lt_s / r['ours_s']:.0f}×" if capped else f"{lt_s / r['ours_s']:.1f}×")
        )
        de = None
        if r.get("lt_e_tmin"):
            de = 100 * (r["ours_e_tmin"] / r["lt_e_tmin"] - 1)
        lt_slow = None if r.get("lt_slow") is None else 100 * r["lt_slow"]
        lt_save = None if r.get("lt_save") is None else 100 * r["lt_save"]
        print(
            f"| {r['gpu'].upper()} | {r['S']}×{r['M']} | {r['ours_s']:.2f} / {lt_time} | {speed} | "
            f"{r['ours_points']} / {r.get('lt_points', '—')}{'+' if capped else ''} | "
            f"{r['ours_e_tmin']:.1f} / {_fmt(r.get('lt_e_tmin'), '.1f')} | "
            f"{_fmt(de, '+.2f')}{'%' if de is not None else ''} | "
            f"{100 * r['ours_slow']:.2f} / {_fmt(lt_slow, '.2f')} | "
            f"{r['ours_e_min']:.1f} / {_fmt(r.get('lt_e_min'), '.1f')}{' (partial)' if capped else ''} | "
            f"{100 * r['ours_save']:.1f} / {_fmt(lt_save, '.1f')} |"
        )
    if ext:
        print(
            "\nExtrinsic bloat: another pipeline is 20% slower; this pipeline waits for it every iteration.\n"
        )
        print(
            "| GPU | S×M | straggler time s | all-max J | zero-slowdown J | planned for straggler J | "
            "saving vs all-max | saving vs zero-slowdown |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for gpu, s, m, e in ext:
            print(
                f"| {gpu.upper()} | {s}×{m} | {e['t_strag']:.3f} | {e['e_base']:.1f} | {e['e_zero']:.1f} | "
                f"{e['e_plan']:.1f} | {100 * e['save_vs_base']:.1f}% | {100 * e['save_vs_zero']:.1f}% |"
            )


def run_benchmark(
    gpus: list[str],
    sizes: list[tuple[int, int]],
    unit: float = 1e-3,
    cap: float = 600.0,
    with_lowtime: bool = True,
    plots: Path | None = None,
) -> tuple[list[dict], list[tuple[str, int, int, dict]]]:
    """Plan every (GPU, size) with both planners; returns the comparison rows and extrinsic rows."""
    rows, ext = [], []
    for gpu in gpus:
        for s, m in sizes:
            row = run_size(gpu, s, m, unit, cap, with_lowtime)
            rows.append(row)
            ext.append((gpu, s, m, extrinsic(row["frontier"])))
            lt_note = f", lowtime {row['lt_s']:.2f} s" if "lt_s" in row else ""
            print(f"  done {gpu} {s}x{m}: ours {row['ours_s']:.2f} s{lt_note}", flush=True)
            if plots:
                from zeus_core.optimizer.pipeline_frequency import plot_frontier, plot_timeline

                fr = row["frontier"]
                plot_frontier(fr, plots / f"frontier_{gpu}_{s}x{m}.png")
                plot_timeline(fr, fr.zero_slowdown_plan(), plots / f"timeline_{gpu}_{s}x{m}.png")
    return rows, ext


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit code (1 if a target is missed)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"only sizes {QUICK_SIZES}, A100 only")
    parser.add_argument("--gpus", default="a100,a40", help="comma-separated: a100, a40")
    parser.add_argument("--sizes", default=None, help="e.g. 4x8,8x32 (default: all five)")
    parser.add_argument("--unit-time", type=float, default=1e-3, help="time quantum, s (default 1 ms)")
    parser.add_argument("--lowtime-cap", type=float, default=600.0, help="max seconds per lowtime run")
    parser.add_argument("--no-lowtime", action="store_true", help="skip lowtime")
    parser.add_argument("--plots", type=Path, default=None, help="folder for frontier/timeline PNGs")
    parser.add_argument(
        "--json", type=Path, default=None, metavar="PATH", help="also write the results as JSON"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.sizes:
        sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
    else:
        sizes = QUICK_SIZES if args.quick else FULL_SIZES
    gpus = ["a100"] if args.quick and args.gpus == "a100,a40" else args.gpus.split(",")
    print(
        f"Perseus planner vs lowtime 0.3.0; unit time {args.unit_time * 1e3:g} ms; synthetic physical-model "
        f"profiles (simulated); lowtime cap {args.lowtime_cap:.0f} s; python {sys.version.split()[0]}"
    )
    rows, ext = run_benchmark(gpus, sizes, args.unit_time, args.lowtime_cap, not args.no_lowtime, args.plots)
    print_tables(rows, args.lowtime_cap, ext)
    if args.json:
        from _results import write_json  # benchmarks/_results.py, beside this script

        results = {
            "unit_time_s": args.unit_time,
            "lowtime_cap_s": args.lowtime_cap,
            "simulated": True,
            "rows": [{k: v for k, v in r.items() if k != "frontier"} for r in rows],
            "extrinsic": [{"gpu": gpu, "S": s, "M": m, **e} for gpu, s, m, e in ext],
        }
        write_json(args.json, __file__, argv, results)
    ok = True
    for r in rows:
        if (
            r.get("lt_e_tmin")
            and abs(r["ours_e_tmin"] / r["lt_e_tmin"] - 1) > 0.005
            and r["ours_e_tmin"] > r["lt_e_tmin"]
        ):
            print(
                f"TARGET MISSED: {r['gpu']} {r['S']}x{r['M']} energy at Tmin above lowtime by more than 0.5%"
            )
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
