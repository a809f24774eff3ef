"""``zeus-suite metrics``: a Prometheus ``/metrics`` endpoint for this machine's GPUs and CPUs.

Values are read from the devices when Prometheus scrapes (a
:class:`~zeus_core.monitor._prometheus.PrometheusExporter` over a
:class:`~zeus_core.monitor._energy.ZeusMonitor`): no background sampling, no spawned processes.
The first line on stdout is ``zeus-suite metrics: serving <url> ...`` (with the port the OS
picked under ``--port 0``). Runs until Ctrl-C or SIGTERM, then exits with 0.

The device options (``--simulate``, ``--gpu-indices``, ``--cpu-indices``) are those of
``zeus-suite power``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from zeus_core.exceptions import ZeusError
from zeus_core.monitor._cli_measure import (
    StopRequested,
    add_device_arguments,
    devices_to_read,
    stop_on_signals,
)

__all__ = ["add_arguments", "run"]

logger = logging.getLogger(__name__)

DEFAULT_PORT = 9400
"""Default port of ``zeus-suite metrics``. NVIDIA's DCGM exporter defaults to it too: to run both,
give one of them another port."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``zeus-suite metrics``."""
    add_device_arguments(parser)
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        metavar="PORT",
        help=f"TCP port to listen on (default {DEFAULT_PORT}; 0 picks a free one, printed)",
    )
    parser.add_argument(
        "--addr",
        default="127.0.0.1",
        metavar="ADDR",
        help="address to listen on (default 127.0.0.1: this machine only; "
        "0.0.0.0 lets other machines scrape)",
    )


def run(args: argparse.Namespace) -> int:
    """Serve ``/metrics`` until interrupted; returns 0, 1 when nothing can be exported, 2 on a usage error."""
    chosen = devices_to_read("metrics", args, "export")
    if isinstance(chosen, int):
        return chosen
    gpus, cpus = chosen
    from zeus_core.monitor._energy import ZeusMonitor
    from zeus_core.monitor._prometheus import PrometheusExporter

    monitor = ZeusMonitor(gpus=gpus, cpus=cpus, sync_execution_with=None)
    try:
        try:
            exporter = PrometheusExporter(monitor)
            server = exporter.serve(args.port, args.addr)
        except ModuleNotFoundError as e:
            print(f"zeus-suite metrics: {e}", file=sys.stderr)
            return 1
        except ZeusError as e:
            print(f"zeus-suite metrics: {e}", file=sys.stderr)
            return 2
        with exporter:
            sim = " [simulated]" if monitor.simulated else ""
            print(
                f"zeus-suite metrics: serving {server.url} for {len(gpus)} GPU(s), {len(cpus)} CPU "
                f"package(s){sim}; Ctrl-C to stop",
                flush=True,
            )
            for line in [g.describe() for g in gpus] + [c.describe() for c in cpus]:
                print(f"  {line}", flush=True)
            _wait_for_signal()
        print("zeus-suite metrics: stopped.", flush=True)
        return 0
    finally:
        monitor.close()
        for cpu in cpus:  # given to the monitor, so not closed by it (e.g. RAPL's wraparound poller)
            close = getattr(cpu, "close", None)
            if callable(close):
                close()


def _wait_for_signal() -> None:
    """Block until Ctrl-C or SIGTERM (KeyboardInterrupt only, outside the main thread)."""
    try:
        with stop_on_signals():
            while True:
                time.sleep(3600.0)
    except (KeyboardInterrupt, StopRequested):
        pass
