"""Overhead of a ``begin_window``/``end_window`` pair: Zeus Suite vs the published ``zeus``.

Both monitors run in this one process over the same fake NVML (``zeus_core/testing/_fake_nvml.py``
in instant mode: an energy read costs a dictionary increment, no clock). For 1 and 8 GPUs the
script prints, per library: microseconds per pair, NVML calls per pair on the caller's thread,
what those calls cost inside the fake, and the overhead beyond them (the library's own cost).
Zeus Suite is timed twice: as it runs by default (a background reader samples the GPUs; the pair
only takes timestamps) and with ``read_in_background=False`` (reads at the window's edges, as
Zeus does). Runs are interleaved and the median over runs is reported. For the cost on a GPU
whose reads take milliseconds, see ``benchmarks/measurement_accuracy.py``.

Usage::

    python benchmarks/monitor_overhead.py            # 15 runs x 20,000 pairs per case
    python benchmarks/monitor_overhead.py --quick    # 5 runs x 2,000 pairs (a smoke test)

Exit status 0 when Zeus Suite's default overhead is at most half of zeus's with no more NVML
calls on the caller's thread, and 1 otherwise (2 where the published ``zeus`` package is not
installed).
"""

from __future__ import annotations

import argparse
import gc
import logging
import statistics
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from zeus_core.testing import FakeGPUSpec, FakeNVML  # noqa: E402

GPU_COUNTS = (1, 8)


@dataclass
class Result:
    """Median figures of one (library, GPU count) case."""

    library: str
    gpus: int
    us_per_pair: float
    calls_per_pair: float
    nvml_us: float

    @property
    def overhead_us(self) -> float:
        """Time per pair beyond the NVML calls, µs."""
        return self.us_per_pair - self.nvml_us


def _fake_call_cost_us(fake: FakeNVML, reps: int) -> float:
    """What one energy read costs inside the fake (the call itself included), µs."""
    read = fake.nvmlDeviceGetTotalEnergyConsumption
    handle = fake.devices[0]
    gc.collect()
    t0 = time.thread_time()
    for _ in range(reps):
        read(handle)
    return (time.thread_time() - t0) / reps * 1e6


def _time_pairs(begin: Callable[..., Any], end: Callable[..., Any], pairs: int) -> float:
    """µs per ``begin(name, False)``/``end(name, False)`` pair (both libraries take sync_execution second)."""
    gc.collect()
    t0 = time.thread_time()
    for _ in range(pairs):
        begin("w", False)
        end("w", False)
    return (time.thread_time() - t0) / pairs * 1e6


def _count_caller_reads(fake: FakeNVML) -> list[int]:
    """Wrap the fake's energy read so it also counts the calls made on this thread: ``[count]``."""
    count = [0]
    read = fake.nvmlDeviceGetTotalEnergyConsumption
    me = threading.get_ident()

    def nvmlDeviceGetTotalEnergyConsumption(handle: Any) -> int:
        if threading.get_ident() == me:
            count[0] += 1
        return read(handle)

    fake.nvmlDeviceGetTotalEnergyConsumption = nvmlDeviceGetTotalEnergyConsumption  # type: ignore[method-assign]
    return count


def _calls_per_pair(count: list[int], begin: Callable[..., Any], end: Callable[..., Any]) -> float:
    count[0] = 0
    for _ in range(100):
        begin("w", False)
        end("w", False)
    return count[0] / 100


def _make_monitors(fake: FakeNVML) -> dict[tuple[str, int], tuple[Callable, Callable]]:
    """(library, gpus) -> (begin_window, end_window), CPUs off; called with sync_execution=False."""
    monitors: dict[tuple[str, int], tuple[Callable, Callable]] = {}

    from zeus_core.device._nvidia import nvidia_gpus
    from zeus_core.monitor._energy import ZeusMonitor as SuiteMonitor

    ours = nvidia_gpus(environ={})
    for n in GPU_COUNTS:
        m = SuiteMonitor(gpus=ours[:n], cpu_indices=[], sync_execution_with=None)
        monitors[("zeus-suite", n)] = (m.begin_window, m.end_window)
        m = SuiteMonitor(gpus=ours[:n], cpu_indices=[], sync_execution_with=None, read_in_background=False)
        monitors[("zeus-suite (synchronous)", n)] = (m.begin_window, m.end_window)

    try:
        import zeus.device.cpu as zeus_cpu
    except ImportError:
        return monitors
    zeus_cpu.rapl_is_available = lambda: False  # published zeus finds no RAPL (like this machine)
    from zeus.monitor import ZeusMonitor as ZeusMonitorPublished

    for n in GPU_COUNTS:
        z = ZeusMonitorPublished(gpu_indices=list(range(n)), cpu_indices=[])
        monitors[("zeus 0.16", n)] = (z.begin_window, z.end_window)
    return monitors


def run(runs: int, pairs: int) -> list[Result]:
    """Benchmark every case; medians over ``runs`` interleaved runs of ``pairs`` pairs."""
    fake = FakeNVML([FakeGPUSpec.a40() for _ in range(max(GPU_COUNTS))], instant=True)
    sys.modules["pynvml"] = fake  # before zeus imports its NVML module
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    count = _count_caller_reads(fake)
    monitors = _make_monitors(fake)
    calls = {key: _calls_per_pair(count, *be) for key, be in monitors.items()}
    times: dict[tuple[str, int], list[float]] = {key: [] for key in monitors}
    costs: list[float] = []
    for key, be in monitors.items():  # warm-up
        _time_pairs(*be, pairs=min(pairs, 1000))
    for _ in range(runs):  # interleaved, so load changes hit every case alike
        costs.append(_fake_call_cost_us(fake, pairs * 2))
        for key, be in monitors.items():
            times[key].append(_time_pairs(*be, pairs=pairs))
    call_cost = statistics.median(costs)
    return [
        Result(lib, n, statistics.median(times[(lib, n)]), calls[(lib, n)], calls[(lib, n)] * call_cost)
        for (lib, n) in monitors
    ]


def _print(results: list[Result], runs: int, pairs: int) -> None:
    from rich.console import Console
    from rich.table import Table

    title = f"begin_window + end_window pair, fake NVML (instant), median of {runs} x {pairs:,} pairs"
    table = Table(title=title)
    columns = (
        "GPUs",
        "library",
        "µs / pair",
        "NVML calls / pair (caller)",
        "NVML cost (µs)",
        "overhead beyond NVML (µs)",
    )
    for col in columns:
        table.add_column(col, justify="right" if col != "library" else "left")
    for r in sorted(results, key=lambda r: (r.gpus, r.library)):
        table.add_row(
            str(r.gpus),
            r.library,
            f"{r.us_per_pair:.2f}",
            f"{r.calls_per_pair:g}",
            f"{r.nvml_us:.2f}",
            f"{r.overhead_us:.2f}",
        )
    Console(width=120).print(table)


def _verdict(results: list[Result]) -> int:
    by = {(r.library, r.gpus): r for r in results}
    if ("zeus 0.16", 1) not in by:
        print("published zeus is not installed (pip install zeus==0.16.0); only Zeus Suite was timed.")
        return 2
    ok = True
    for n in GPU_COUNTS:
        ours, theirs = by[("zeus-suite", n)], by[("zeus 0.16", n)]
        ratio = ours.overhead_us / theirs.overhead_us
        hit = ratio <= 0.5 and ours.calls_per_pair <= theirs.calls_per_pair
        ok &= hit
        print(
            f"{n} GPU(s): Zeus Suite overhead is {ratio:.0%} of zeus's "
            f"({ours.overhead_us:.2f} vs {theirs.overhead_us:.2f} µs), NVML calls "
            f"{ours.calls_per_pair:g} vs {theirs.calls_per_pair:g} -> "
            f"{'target met' if hit else 'TARGET MISSED'}"
        )
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 runs x 2,000 pairs (smoke test)")
    parser.add_argument("--runs", type=int, default=None, help="runs per case (default 15)")
    parser.add_argument("--pairs", type=int, default=None, help="pairs per run (default 20,000)")
    parser.add_argument(
        "--json", type=Path, default=None, metavar="PATH", help="also write the results as JSON"
    )
    args = parser.parse_args(argv)
    runs = args.runs or (5 if args.quick else 15)
    pairs = args.pairs or (2_000 if args.quick else 20_000)
    results = run(runs, pairs)
    _print(results, runs, pairs)
    if args.json:
        from _results import write_json  # benchmarks/_results.py, beside this script

        rows = [
            {
                "gpus": r.gpus,
                "library": r.library,
                "us_per_pair": r.us_per_pair,
                "nvml_calls_per_pair": r.calls_per_pair,
                "nvml_us": r.nvml_us,
                "overhead_us": r.overhead_us,
            }
            for r in sorted(results, key=lambda r: (r.gpus, r.library))
        ]
        write_json(args.json, __file__, argv, {"runs": runs, "pairs": pairs, "rows": rows})
    return _verdict(results)


if __name__ == "__main__":
    sys.exit(main())
