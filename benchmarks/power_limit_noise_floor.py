"""How often the noise alone misleads a power-limit choice within Zeus's budget, beside ours.

The accuracy floor under ``benchmarks/power_limit_generated.py``: on the same generated profiles,
noise and seeds, two references that know the optimum choose from noisy measurements made within
the same step budget (Zeus's sweep length):

* *informed*: the optimum, the limits on either side and (for MaxSlowdown) the highest limit, the
  budget split among them (:func:`benchmarks.power_limit_common.informed_choice`);
* *ideal* (MaxSlowdown only): the optimum and the highest limit alone, the budget split between
  the two (:func:`benchmarks.power_limit_common.ideal_slowdown_choice`).

Neither is an optimizer: they need the answer to know where to look. Ours is read from the
generated benchmark's results file, whose profiles, seeds and epoch lengths this script replays.
A case is missed when the choice is not within 1 % of the optimum, as the generated benchmark
scores it; the last line is how many misses 99 % within 1 % allows over the whole grid.

Usage::

    python benchmarks/power_limit_noise_floor.py   # reads benchmarks/results/power_limit_generated.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.power_limit_common import (  # noqa: E402
    SELECTORS,
    TOLERANCE,
    excess,
    ideal_slowdown_choice,
    informed_choice,
)
from benchmarks.power_limit_generated import NOISES, case_seed, noise_free_truth  # noqa: E402
from zeus_core.testing._power_limit_generator import NoisyRun, generate  # noqa: E402

__all__ = ["floor", "main"]

RESULTS = ROOT / "benchmarks" / "results" / "power_limit_generated.json"


def floor(profiles: int, seeds: Sequence[int], epochs: int) -> dict[str, dict[str, int]]:
    """Cases and the references' misses per selector (``ideal``: MaxSlowdown only), as the generated grid.

    The references' draws do not depend on the epoch length, so each choice counts ``epochs`` times.
    """
    out = {label: {"cases": 0, "informed": 0, "ideal": 0} for label in SELECTORS}
    for seed in seeds:
        for i, workload in enumerate(generate(profiles, seed)):
            truth = noise_free_truth(workload)
            budget = 1 + 50 * len(workload.gpu.limits())
            for label, row in out.items():
                for noise in NOISES.values():
                    row["cases"] += epochs
                    run = NoisyRun(workload, noise, case_seed(seed, i))
                    chosen = informed_choice(label, truth, lambda w: run.step(w)[:2], budget)
                    row["informed"] += epochs * (excess(label, truth, chosen) > TOLERANCE)
                    if label.startswith("MaxSlowdown"):
                        run = NoisyRun(workload, noise, case_seed(seed, i))
                        chosen = ideal_slowdown_choice(truth, lambda w: run.step(w)[:2], budget)
                        row["ideal"] += epochs * (excess(label, truth, chosen) > TOLERANCE)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Print misses per selector: ours (from the results file), informed, ideal."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="the generated benchmark's JSON")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write the results")
    args = parser.parse_args(argv)
    if not args.results.is_file():
        parser.error(f"no results file {args.results}: run power_limit_generated.py with --json PATH first")
    ours = json.loads(args.results.read_text(encoding="utf-8"))
    r = ours["results"]
    references = floor(r["profiles"], r["seeds"], len(r["epochs"]))
    rows: list[dict[str, Any]] = []
    for label, ref in references.items():
        group = r["generated"][f"selector={label}"]
        informed = round(group["cases"] * (1 - group["informed_ok"]))
        if (group["cases"], informed) != (ref["cases"], ref["informed"]):  # not the same grid or code
            raise SystemExit(
                f"{args.results} holds {group['cases']} {label} cases, {informed} missed by the informed "
                f"reference; this replay: {ref['cases']}, {ref['informed']}. Run both on the same checkout."
            )
        ideal = ref["ideal"] if label.startswith("MaxSlowdown") else None
        missed = round(group["cases"] * (1 - group["ours_ok"]))
        rows.append({"selector": label, "cases": ref["cases"], "ours": missed, "informed": ref["informed"],
                     "ideal": ideal})  # fmt: skip
    total = sum(row["cases"] for row in rows)
    allowed = total // 100  # 99 % within 1 %
    print(f"Misses (not within 1 % of the optimum), {r['profiles']} profiles × seeds {r['seeds']}:\n")
    print(f"{'selector':<18} {'cases':>6} {'ours':>6} {'informed':>9} {'ideal':>6}")
    for row in rows:
        ideal = "—" if row["ideal"] is None else row["ideal"]
        print(f"{row['selector']:<18} {row['cases']:>6} {row['ours']:>6} {row['informed']:>9} {ideal:>6}")
    print(f"{'all':<18} {total:>6} {sum(x['ours'] for x in rows):>6} {sum(x['informed'] for x in rows):>9}")
    print(f"\n99 % within 1 % allows {allowed} misses of {total}.")
    if args.json:
        from benchmarks._results import write_json

        payload = {"source": ours.get("command"), "seeds": r["seeds"], "profiles": r["profiles"],
                   "rows": rows, "cases": total, "allowed_misses": allowed}  # fmt: skip
        write_json(args.json, __file__, list(sys.argv[1:] if argv is None else argv), payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
