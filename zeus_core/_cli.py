"""The ``zeus-suite`` command line.

Each subcommand lives next to the feature it drives, in a module that defines
``add_arguments(parser)`` and ``run(args) -> int`` (the exit code). Modules are imported only
when their subcommand runs, so ``zeus-suite env`` does not pay for FastAPI or matplotlib.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from typing import Sequence

__all__ = ["main"]

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "env": (
        "zeus_core.device._cli_env",
        "show the GPUs and CPUs found, what they support, and what is missing and why",
    ),
    "measure": ("zeus_core.monitor._cli_measure", "run a command and report its time and energy per device"),
    "power": ("zeus_core.monitor._cli_power", "print live power per device until Ctrl-C"),
    "metrics": (
        "zeus_core.monitor._cli_metrics",
        "serve Prometheus /metrics (energy, power) read from the devices at each scrape",
    ),
    "plan": (
        "zeus_core.optimizer.pipeline_frequency.planner._cli_plan",
        "plan Perseus GPU frequencies for a pipeline-parallel iteration",
    ),
    "daemon": (
        "zeus_core.daemon._cli_daemon",
        "serve Zeus's zeusd API as root, with leases: normal users change GPU settings, restored after",
    ),
    "bso-server": ("zeus_core.optimizer.batch_size._cli_bso_server", "run the batch-size optimizer service"),
    "report": (
        "zeus_core.report._cli_report",
        "turn a run's output folder into one HTML page with plots, and a terminal summary",
    ),
    "reproduce": (
        "zeus_core.simulate._cli_reproduce",
        "reproduce a paper's results with the trace-driven simulator",
    ),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; only ``command``'s module is imported (none for the top-level help)."""
    parser = argparse.ArgumentParser(
        prog="zeus-suite", description="Measure and cut the energy of deep-learning training."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if command == name:
            importlib.import_module(module).add_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``zeus-suite``; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if a in COMMANDS), None)
    args = build_parser(command).parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    return int(importlib.import_module(COMMANDS[args.command][0]).run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
