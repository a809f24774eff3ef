"""Cost of one batch-size service request against the job's history (issue 30).

Fills a SQLite database with a job of N finished trials (rows written directly, as a long-lived
job would have them), then times the service's hot calls on it, in process (no HTTP): starting a
trial (``POST /jobs/{id}/trials``), an epoch report (``POST .../epochs``) and the budget
(``GET /jobs/{id}/budget``). Before issue 30 every call rebuilt the bandit from every row; now the
bandit is kept between requests and only the trials that ended since are read.

Usage:
    python benchmarks/bso_request_cost.py --trials 0 1000 3000 10000 --repeat 20 [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from zeus_core.optimizer.batch_size._api_models import EpochReport
from zeus_core.optimizer.batch_size._db import Database, JobRow, TrialRow
from zeus_core.optimizer.batch_size._service import BatchSizeService
from zeus_core.optimizer.batch_size._spec import JobSpec

SPEC = JobSpec("bench", (32, 64, 128, 256, 512), 128, target_metric=0.9, max_power_w=300.0, window_size=0)


async def _fill(db: Database, trials: int) -> None:
    """``trials`` finished trials over the batch sizes, converged most of the time (a cost curve)."""
    async with db.transaction() as session:
        job = await session.get(JobRow, SPEC.job_id)
        assert job is not None
        for i in range(trials):
            b = SPEC.batch_sizes[i % len(SPEC.batch_sizes)]
            cost = 1000.0 + abs(b - 128) * 3 + (i * 37 % 100)
            session.add(
                TrialRow(
                    job_id=SPEC.job_id,
                    trial_number=i + 1,
                    batch_size=b,
                    status="converged" if i % 7 else "failed",
                    end_reason="reported",
                    created_at=0.0,
                    last_seen_at=0.0,
                    ended_at=0.0,
                    completion_order=i,
                    epochs=5,
                    time_s=cost / 300,
                    energy_j=cost,
                    cost=cost,
                    converged=bool(i % 7),
                )
            )
        job.next_trial_number = trials + 1
        job.next_completion = trials


async def _measure(trials: int, repeat: int) -> dict[str, Any]:
    path = Path(tempfile.mkdtemp(prefix="bso-bench-")) / "bso.sqlite3"
    db = Database(path)
    await db.init_schema()
    service = (
        BatchSizeService(db, max_trials_per_job=trials + 10 * repeat + 10)
        if _has_cap()
        else BatchSizeService(db)
    )
    await service.register(SPEC)
    await _fill(db, trials)
    times: dict[str, list[float]] = {"start trial": [], "epoch report": [], "budget": []}
    for i in range(repeat):
        t0 = time.perf_counter()
        trial, _ = await service.new_trial(SPEC.job_id)
        t1 = time.perf_counter()
        report = EpochReport(epoch=1, time_s=10.0, energy_j=500.0 + i, metric=0.1)
        await service.report_epoch(SPEC.job_id, trial.trial_number, report)
        t2 = time.perf_counter()
        await service.job_budget(SPEC.job_id)
        t3 = time.perf_counter()
        times["start trial"].append(t1 - t0)
        times["epoch report"].append(t2 - t1)
        times["budget"].append(t3 - t2)
    await db.dispose()
    return {name: statistics.median(v) * 1e3 for name, v in times.items()}


def _has_cap() -> bool:
    import inspect

    return "max_trials_per_job" in inspect.signature(BatchSizeService).parameters


def main(argv: list[str] | None = None) -> int:
    """Measure each request kind at each history size and print the medians (ms)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[0, 1000, 3000, 10000])
    parser.add_argument("--repeat", type=int, default=20, help="requests of each kind per history size")
    parser.add_argument("--json", type=Path, default=None, help="also write the medians (ms) to this file")
    args = parser.parse_args(argv)
    rows = {}
    print(f"{'finished trials':>15} {'start trial (ms)':>17} {'epoch report (ms)':>18} {'budget (ms)':>12}")
    for n in args.trials:
        r = asyncio.run(_measure(n, args.repeat))
        rows[n] = r
        print(
            f"{n:>15} {r['start trial']:>17.1f} {r['epoch report']:>18.1f} {r['budget']:>12.1f}", flush=True
        )
    if args.json is not None:
        args.json.write_text(json.dumps({"median_ms": rows, "repeat": args.repeat}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
