"""``python -m zeus.monitor energy|power`` as ``python -m zeus_core.monitor`` (or ``.compat.monitor``).

``energy`` opens a window over the GPUs and prints its :class:`Measurement` at Ctrl-C; ``power``
prints each GPU's power every ``--update-period`` seconds, then the total time and energy at
Ctrl-C. Same arguments and output as Zeus 0.16's module command, on the compat monitors.

Example:
    >>> from zeus_core.compat.monitor.__main__ import build_parser
    >>> build_parser().parse_args(["power", "--gpu-indices", "0", "1"]).gpu_indices
    [0, 1]
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from datetime import datetime
from typing import Sequence

__all__ = ["build_parser", "energy", "power", "main"]


def energy(gpu_indices: list[int] | None = None) -> None:
    """Measure the GPUs' time and energy from now until Ctrl-C (SIGINT or SIGTERM), then print it.

    Example:
        >>> from zeus_core.compat.monitor.__main__ import energy
        >>> energy([0])  # doctest: +SKIP
        Measurement(time=3.4, gpu_energy={0: 224.3}, ...)
    """
    from zeus_core.compat.monitor import ZeusMonitor

    monitor = ZeusMonitor(gpu_indices)
    monitor.begin_window("zeus.monitor.energy")
    try:
        _wait()
    except KeyboardInterrupt:
        measurement = monitor.end_window("zeus.monitor.energy")
        print("Total energy (J):")
        print(measurement, flush=True)


def power(
    gpu_indices: list[int] | None = None, update_period: float = 1.0, power_domain: str = "device_instant"
) -> None:
    """Print the GPUs' power every ``update_period`` s until Ctrl-C, then the total time and energy.

    Example:
        >>> from zeus_core.compat.monitor.__main__ import power
        >>> power([0], 1.0)  # doctest: +SKIP
        2023-08-22 22:40:00.800576 {'GPU0': 66.176}
    """
    from zeus_core.compat.monitor import PowerMonitor

    monitor = PowerMonitor(gpu_indices=gpu_indices, update_period=update_period)
    start_time = time.time()
    try:
        while True:
            _wait(monitor.update_period)
            watts = monitor.get_power(power_domain=power_domain)
            if watts is not None:
                print(datetime.now(), {f"GPU{k}": v for k, v in watts.items()}, flush=True)
    except KeyboardInterrupt:
        end_time = time.time()
        print("\nTotal time (s):", end_time - start_time)
        joules = monitor.get_energy(start_time, end_time, power_domain=power_domain)
        if joules is not None:
            print("Total energy (J):", {f"GPU{k}": v for k, v in joules.items()}, flush=True)
    finally:
        monitor.stop()


def _wait(seconds: float = 365 * 24 * 3600.0) -> None:
    """Sleep; SIGTERM ends the wait as Ctrl-C does (a supervisor's stop prints the result too)."""
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        time.sleep(seconds)
    finally:
        signal.signal(signal.SIGTERM, previous)


def build_parser() -> argparse.ArgumentParser:
    """Zeus's ``python -m zeus.monitor`` arguments."""
    parser = argparse.ArgumentParser(prog="python -m zeus_core.monitor", description="Zeus Monitor CLI")
    sub = parser.add_subparsers(dest="subcommand", required=True)
    for name, text in (
        ("energy", "Measure the time and energy of the GPUs until Ctrl-C."),
        ("power", "Print the GPUs' power; total energy at Ctrl-C."),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("--gpu-indices", nargs="+", type=int, help="GPUs to monitor (default: all)")
        if name == "power":
            p.add_argument("--update-period", type=float, default=1.0, help="seconds between samples")
            p.add_argument(
                "--power-domain",
                choices=["device_instant", "device_average", "memory_average"],
                default="device_instant",
                help="the power domain to print",
            )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``energy`` or ``power``; returns the exit code."""
    args = build_parser().parse_args(argv)
    if args.subcommand == "energy":
        energy(args.gpu_indices)
    else:
        power(args.gpu_indices, args.update_period, args.power_domain)
    return 0


if __name__ == "__main__":
    sys.exit(main())
