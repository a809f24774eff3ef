"""Perseus at scale: the zero-slowdown plan of large interleaved-1F1B pipelines, against the 60 s target.

For each size ``S×M`` (stages × microbatches, 2 model chunks per stage: ``2·2·S·M`` instructions)
it builds the interleaved 1F1B schedule (Megatron-core's order), takes a synthetic A100-like
profile from the documented physical model (**simulated**), keeps the clocks the default adaptive
profiler measures (at most 8 per stage), and plans the zero-slowdown point with
``plan_at_time`` (real-time LP with start-time windows as bounds, repair, slack reclaiming; no
full frontier). Columns: wall seconds for the DAG, the LP and the repair (with slack reclaiming),
their total against the 60 s target, and the plan's replayed saving and slowdown versus
all-highest clocks. With ``--check``, the smallest size is also planned through the full
frontier (``plan_frontier(...).zero_slowdown_plan()``) and both energies are printed side by side.

Run ``python benchmarks/perseus_scale.py`` (all sizes) or ``--sizes 8x64`` (quick).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from zeus_core.optimizer.pipeline_frequency import (
    FrequencySweep,
    InstructionProfile,
    interleaved_1f1b,
    plan_at_time,
    plan_frontier,
)
from zeus_core.testing import physical_instruction_profile

TARGET_S = 60.0


def adaptive_profile(num_stages: int) -> InstructionProfile:
    """The physical-model profile restricted to the clocks FrequencySweep() would measure."""
    full = physical_instruction_profile("a100", num_stages)
    sweep, clocks = FrequencySweep(), []
    supported = sorted({m.frequency_mhz for k in full.keys() for m in full.get(*k)}, reverse=True)
    blocking = full.blocking_power_w or 0.0
    while True:
        measured = {
            f: {
                k[1].value: m.energy_j - blocking * m.time_s
                for k in full.keys()
                if k[0] == 0
                for m in full.get(*k)
                if m.frequency_mhz == f
            }
            for f in clocks
        }
        nxt = sweep.next_frequency(supported, measured)
        if nxt is None:
            break
        clocks.append(nxt)
    rows = {k: [m for m in full.get(*k) if m.frequency_mhz in clocks] for k in full.keys()}
    return InstructionProfile(
        rows, gpu_name=full.gpu_name, simulated=True, blocking_power_w=full.blocking_power_w
    )


def main() -> None:
    """Plan every size and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="8x64,16x128,32x256", help="comma-separated SxM (default: all)")
    parser.add_argument(
        "--check", action="store_true", help="also plan the smallest size via the full frontier"
    )
    parser.add_argument(
        "--json", type=Path, default=None, metavar="PATH", help="also write the results as JSON"
    )
    args = parser.parse_args()
    rows = []
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")]
    print("Perseus zero-slowdown planning at scale; interleaved 1F1B, 2 chunks/stage; A100-like (simulated)")
    print(
        "| S×M | instructions | clocks | DAG s | LP s | repair s | total s | target s | saving | slowdown |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s, m in sizes:
        t0 = time.perf_counter()
        schedule = interleaved_1f1b(s, m, 2)
        profile = adaptive_profile(s)
        build = time.perf_counter() - t0
        plan = plan_at_time(schedule, profile)
        tm, base = plan.metadata["timing"], plan.metadata["baseline"]
        total = build + tm["dag_s"] + tm["lp_s"] + tm["repair_s"]
        print(
            f"| {s}×{m} | {schedule.num_instructions} | {len(profile.get(0, 'forward'))} | "
            f"{build + tm['dag_s']:.1f} | {tm['lp_s']:.1f} | {tm['repair_s']:.1f} | "
            f"**{total:.1f}** | {TARGET_S:.0f} | "
            f"{100 * (1 - plan.energy_j / base['energy_j']):.1f}% | "
            f"{100 * (plan.iteration_time_s / base['iteration_time_s'] - 1):+.2f}% |",
            flush=True,
        )
        rows.append(
            {
                "S": s,
                "M": m,
                "chunks": 2,
                "instructions": schedule.num_instructions,
                "clocks": len(profile.get(0, "forward")),
                "dag_s": build + tm["dag_s"],
                "lp_s": tm["lp_s"],
                "refine_s": tm["refine_s"],
                "total_s": total,
                "saving": 1 - plan.energy_j / base["energy_j"],
                "slowdown": plan.iteration_time_s / base["iteration_time_s"] - 1,
            }
        )
    if args.json:
        from _results import write_json  # benchmarks/_results.py, beside this script

        write_json(args.json, __file__, None, {"simulated": True, "gpu": "a100", "rows": rows})
    if args.check:
        s, m = sizes[0]
        schedule, profile = interleaved_1f1b(s, m, 2), adaptive_profile(s)
        t0 = time.perf_counter()
        full = plan_frontier(schedule, profile).zero_slowdown_plan()
        t_full = time.perf_counter() - t0
        point = plan_at_time(schedule, profile)
        print(
            f"\ncheck {s}×{m}: full frontier {t_full:.1f} s, {full.energy_j:.1f} J; "
            f"plan_at_time {point.metadata['timing']['lp_s']:.1f} s LP, {point.energy_j:.1f} J "
            f"({100 * (point.energy_j / full.energy_j - 1):+.2f}%)"
        )


if __name__ == "__main__":
    main()
