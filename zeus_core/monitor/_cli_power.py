"""``zeus-suite power``: live power per device until Ctrl-C (or ``--duration``), then a summary.

GPU power is sampled every ``--interval`` seconds by a
:class:`~zeus_core.monitor._power.PowerMonitor`; CPU package and DRAM power come from RAPL
energy deltas. Each display line (or the live table, in a terminal) shows the average power
since the previous display. The summary's energy comes from the devices' energy counters where
they have one (a :class:`~zeus_core.monitor._energy.ZeusMonitor` window), else from the sampled
power. ``--csv`` writes the whole power timeline.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Sequence

from zeus_core._arg_types import number
from zeus_core.device._base import CPU, GPU
from zeus_core.exceptions import ZeusError
from zeus_core.monitor._cli_measure import (
    StopRequested,
    add_device_arguments,
    devices_to_read,
    make_console,
    render_report,
    stop_on_signals,
)

__all__ = ["add_arguments", "run"]

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``zeus-suite power``."""
    add_device_arguments(parser)
    parser.add_argument(
        "--interval",
        type=number(0.001, 3600.0, unit="s"),
        default=0.1,
        metavar="S",
        help="power sampling period, s (default 0.1)",
    )
    parser.add_argument(
        "--display-interval",
        type=number(0.01, 86400.0, unit="s"),
        default=1.0,
        metavar="S",
        help="how often the live power is shown, s (default 1.0)",
    )
    parser.add_argument(
        "--duration",
        type=number(0.0, 1e7, unit="s"),
        default=None,
        metavar="S",
        help="stop after this many seconds (default: run until Ctrl-C)",
    )
    parser.add_argument(
        "--csv",
        type=Path,
        metavar="FILE",
        help="write the power timeline (time_s,device,power_w,simulated) to this CSV file",
    )


def run(args: argparse.Namespace) -> int:
    """Show live power until interrupted, then the summary; returns 0, or 2 on a usage error."""
    for option, value in (("--interval", args.interval), ("--display-interval", args.display_interval)):
        if not value > 0:
            print(f"zeus-suite power: {option} {value}: must be > 0 s.", file=sys.stderr)
            return 2
    if args.duration is not None and args.duration < 0:
        print(f"zeus-suite power: --duration {args.duration}: must be >= 0 s.", file=sys.stderr)
        return 2
    chosen = devices_to_read("power", args, "measure")
    if isinstance(chosen, int):
        return chosen
    gpus, cpus = chosen
    try:
        from zeus_core.monitor._energy import ZeusMonitor
        from zeus_core.monitor._power import PowerMonitor

        energy = ZeusMonitor(
            gpus=gpus, cpus=cpus, sync_execution_with=None, power_sample_interval_s=args.interval
        )
        power = PowerMonitor(gpus=gpus, cpus=cpus, interval_s=args.interval)
    except ZeusError as e:
        print(f"zeus-suite power: {e}", file=sys.stderr)
        return 2

    console = make_console(stderr=False)
    sim = " [simulated]" if power.simulated else ""

    begun = False
    try:
        with stop_on_signals() as ignore_signals:
            try:
                power.start()
                energy.begin_window("power", sync_execution=False)
                begun = True
                _live(console, power, power.clock(), args.duration, args.display_interval, sim)
            except (KeyboardInterrupt, StopRequested):
                pass
            finally:
                ignore_signals()  # no second interruption while the summary is made
                power.stop()
            if not begun:
                print("zeus-suite power: interrupted before measuring started.", file=sys.stderr)
                return 130
            m = energy.end_window("power", sync_execution=False)
    finally:
        energy.close()
        power.stop()
    console.print(
        render_report(f"zeus-suite power: {len(gpus)} GPU(s), {len(cpus)} CPU package(s)", m, gpus, cpus),
        soft_wrap=True,
    )
    if args.csv is not None:
        try:
            power.to_csv(args.csv)
        except OSError as e:
            print(f"zeus-suite power: cannot write --csv {str(args.csv)!r}: {e}", file=sys.stderr)
            return 1
        console.print(f"Power timeline written to {args.csv}{sim}")
    for c in cpus:
        close = getattr(c, "close", None)
        if callable(close):
            close()
    return 0


def _live(console, power, start: float, duration: float | None, every_s: float, sim: str) -> None:
    """Show the average power of each device over each display period until the duration ends."""
    end = None if duration is None else time.monotonic() + duration
    last = start
    if console.is_terminal:
        from rich.live import Live

        with Live(_table(power, start, start, start, sim), console=console, auto_refresh=False) as live:
            while _wait(end, every_s):
                now = power.clock()
                live.update(_table(power, start, last, now, sim), refresh=True)
                last = now
        return
    while _wait(end, every_s):
        now = power.clock()
        readings = _readings(power, last, now)
        line = "  ".join(f"{label}: {w:.1f} W" for label, w in readings)
        console.print(f"{now - start:8.1f} s  {line}{sim}", soft_wrap=True)
        last = now


def _wait(end: float | None, every_s: float) -> bool:
    """Sleep one display period (less when the duration ends first); False once it has ended."""
    if end is None:
        time.sleep(every_s)
        return True
    left = end - time.monotonic()
    if left <= 0:
        return False
    time.sleep(min(every_s, left))
    return True


def _readings(power, t0: float, t1: float) -> list[tuple[str, float]]:
    """(label, average W over [t0, t1]) per GPU, CPU package and DRAM."""
    span = t1 - t0
    if span <= 0:
        return []
    out = [(f"GPU {i}", e / span) for i, e in power.get_energy(t0, t1).items()]
    out += [(f"CPU {i}", e / span) for i, e in power.get_cpu_energy(t0, t1).items()]
    out += [(f"DRAM {i}", e / span) for i, e in power.get_dram_energy(t0, t1).items()]
    return out


def _table(power, start: float, t0: float, t1: float, sim: str):  # -> rich.table.Table
    from rich.table import Table

    table = Table(title=f"Power, {t1 - start:.1f} s{sim} (Ctrl-C to stop)", title_justify="left")
    table.add_column("Device")
    table.add_column("Power (W)", justify="right")
    names = _names(power.gpus, power.cpus)
    for label, w in _readings(power, t0, t1):
        table.add_row(names.get(label, label), f"{w:.1f}")
    return table


def _names(gpus: Sequence[GPU], cpus: Sequence[CPU]) -> dict[str, str]:
    names = {f"GPU {g.index}": g.describe() for g in gpus}
    names.update({f"CPU {c.index}": c.describe() for c in cpus})
    return names
