"""``zeus-suite measure -- CMD ...``: run a command and report its time and energy per device.

The command runs as a child process with this terminal's stdin, stdout and stderr; its energy
is measured by a :class:`~zeus_core.monitor._energy.ZeusMonitor` window around its whole run.
The report goes to stderr (like ``time``), so the command's own output stays clean. The exit
code is the command's (``128 + N`` when signal ``N`` killed it; 127 when it does not exist).

Ctrl-C, SIGTERM, SIGHUP (terminal closed), SIGQUIT and SIGUSR1/2 (Slurm's ``--signal``) are passed
on to the command, and the report (and ``--csv`` row) is still written when it ends.
(In a terminal, Ctrl-C already reaches the command directly, so it is not sent twice.) The command
dies with ``zeus-suite measure``, however that ends, ``kill -9`` included: on Linux it is started
with ``PR_SET_PDEATHSIG`` = SIGTERM, so it gets SIGTERM (and its own restore of GPU settings runs)
when ``measure`` is gone. On other systems a ``kill -9`` of ``measure`` leaves the command running.

The device options and the report table are shared with ``zeus-suite power``.
"""

from __future__ import annotations

import argparse
import csv
import logging
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Sequence

from zeus_core.device._base import CPU, GPU
from zeus_core.exceptions import ZeusConfigError, ZeusDeviceError, ZeusError, ZeusPermissionError
from zeus_core.monitor._measurement import Measurement
from zeus_core.testing._stand_in import follow_child, following_note

__all__ = [
    "add_arguments",
    "run",
    "StopRequested",
    "stop_on_signals",
    "add_device_arguments",
    "select_devices",
    "devices_to_read",
    "render_report",
    "make_console",
]

logger = logging.getLogger(__name__)

# Every signal that would end this process by default and that a user, a terminal or a scheduler
# sends to stop a job: SIGHUP (terminal or ssh closed), SIGQUIT (Ctrl-backslash), SIGUSR1/2 (Slurm's
# --signal). Each is passed on to the command, whose exit then ends the measurement with its report.
_FORWARDED = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
    if hasattr(signal, name)
)
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


# -- shared with `zeus-suite power` and `zeus-suite metrics` ------------------------------------
class StopRequested(Exception):
    """Raised in the main thread by SIGINT/SIGTERM inside :func:`stop_on_signals`."""


def _raise_stop(signum: int, frame: object) -> None:
    raise StopRequested(signal.Signals(signum).name)


@contextmanager
def stop_on_signals() -> Iterator[Callable[[], None]]:
    """Inside the block, SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGUSR1/2 raise :class:`StopRequested`.

    Explicit handlers, because SIGINT may be inherited as ignored (a command started with ``&`` from
    a script). Outside the main thread no handler can be installed and only ``KeyboardInterrupt``
    stops. The previous handlers come back when the block ends.

    Yields:
        A function that ignores further such signals until the block ends (while a summary is made).
    """
    main = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, _raise_stop) for s in _FORWARDED} if main else {}

    def ignore_from_now_on() -> None:
        for s in previous:
            signal.signal(s, signal.SIG_IGN)

    try:
        yield ignore_from_now_on
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def add_device_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--simulate``, ``--gpu-indices`` and ``--cpu-indices`` to ``parser``."""
    parser.add_argument(
        "--simulate",
        action="store_true",
        help="measure simulated NVIDIA A40 GPUs instead of real ones, for machines without a GPU "
        "(measure: busy while the command uses the CPU; power, metrics: busy throughout). "
        "Every output line then says 'simulated'.",
    )
    parser.add_argument(
        "--gpu-indices",
        type=int,
        nargs="+",
        metavar="I",
        help="GPUs to measure, as CUDA numbers them (default: all; with --simulate: 0)",
    )
    parser.add_argument(
        "--cpu-indices",
        type=int,
        nargs="*",
        metavar="I",
        help="CPU packages to measure through RAPL (default: all readable; no value: none)",
    )


def select_devices(
    simulate: bool, gpu_indices: Sequence[int] | None, cpu_indices: Sequence[int] | None
) -> tuple[list[GPU], list[CPU], list[str]]:
    """The GPUs and CPUs a command measures, and notes on what is not measured and why.

    Args:
        simulate: Use simulated A40 GPUs (busy, wall clock) numbered by ``gpu_indices`` (default 0).
        gpu_indices: GPUs to keep (``None``: all).
        cpu_indices: CPU packages to keep (``None``: all readable, ``[]``: none).

    Raises:
        ZeusDeviceNotFoundError: A requested index does not exist.
        ZeusPermissionError: ``cpu_indices`` was given and RAPL is unreadable.
    """
    notes: list[str] = []
    if simulate:
        from zeus_core.testing._stand_in import simulated_gpu

        gpus: list[GPU] = [simulated_gpu("a40", i, busy=True) for i in dict.fromkeys(gpu_indices or [0])]
    else:
        from zeus_core.device._discovery import get_gpus

        gpus = _pick(get_gpus(), gpu_indices, "GPU", "--gpu-indices")
        if not gpus:
            notes.append("No GPU found (see `zeus-suite env`); use --simulate to try a simulated one.")
    cpus: list[CPU] = []
    if cpu_indices is None or len(cpu_indices) > 0:
        from zeus_core.device._discovery import get_cpus

        try:
            cpus = _pick(get_cpus(), cpu_indices, "CPU", "--cpu-indices")
        except (ZeusPermissionError, ZeusDeviceError) as e:
            if cpu_indices is not None:
                raise
            notes.append(f"CPU/DRAM energy not measured: {e}")
    return gpus, cpus, notes


def devices_to_read(command: str, args: argparse.Namespace, task: str) -> tuple[list[GPU], list[CPU]] | int:
    """The devices a command's ``--simulate``/``--gpu-indices``/``--cpu-indices`` choose.

    Notes on what is left out go to the log. Returns the exit status instead (said on stderr)
    when the options are wrong (2) or there is nothing to read (1).

    Args:
        command: The subcommand, for messages (e.g. ``"power"``).
        args: Its parsed arguments (see :func:`add_device_arguments`).
        task: What it would do with the devices, for the message (e.g. ``"measure"``).
    """
    try:
        gpus, cpus, notes = select_devices(args.simulate, args.gpu_indices, args.cpu_indices)
    except ZeusError as e:
        print(f"zeus-suite {command}: {e}", file=sys.stderr)
        return 2
    for note in notes:
        logger.warning("%s", note)
    if not gpus and not cpus:
        print(
            f"zeus-suite {command}: nothing to {task} (no GPU, no readable RAPL). See `zeus-suite env`, "
            "or try --simulate.",
            file=sys.stderr,
        )
        return 1
    return gpus, cpus


def _pick(devices: Sequence, indices: Sequence[int] | None, kind: str, option: str) -> list:
    if indices is None:
        return list(devices)
    by_index = {d.index: d for d in devices}
    for i in indices:
        if i not in by_index:
            from zeus_core.exceptions import ZeusDeviceNotFoundError

            raise ZeusDeviceNotFoundError(
                f"{option} {' '.join(map(str, indices))}: there is no {kind} {i}; this machine has "
                f"{kind}s {sorted(by_index)}. See `zeus-suite env`."
            )
    return [by_index[i] for i in dict.fromkeys(indices)]


def make_console(stderr: bool):  # -> rich.console.Console
    """A rich console without markup (``[simulated]`` stays text) that does not wrap lines in files."""
    from rich.console import Console

    console = Console(stderr=stderr, highlight=False, markup=False)
    if not console.is_terminal:
        console = Console(stderr=stderr, highlight=False, markup=False, width=160)
    return console


def render_report(title: str, m: Measurement, gpus: Sequence[GPU], cpus: Sequence[CPU]):  # -> rich Group
    """A report of a measurement: a title line, then energy and average power per device and the total.

    Every row names its source (energy counter, sampled-power estimate, RAPL); in a simulated
    measurement every line (title, header and rows) says "simulated".
    """
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    sim = m.simulated
    tag = " [simulated]" if sim else ""
    table = Table(box=None, pad_edge=False)
    table.add_column("Device")
    table.add_column("Energy (J)", justify="right")
    table.add_column("Avg power (W)", justify="right")
    table.add_column("Source (simulated run)" if sim else "Source")

    def power(e: float) -> str:
        return f"{e / m.time:.1f}" if m.time > 0 else "-"

    def source(device_sim: bool, what: str) -> str:
        if device_sim:
            return "simulated"
        return f"{what}; simulated run" if sim else what

    for g in gpus:
        e = m.gpu_energy.get(g.index, 0.0)
        what = "estimated from sampled power" if g.index in m.estimated_gpus else "energy counter"
        table.add_row(g.describe(), f"{e:.1f}", power(e), source(g.simulated, what))
    for c in cpus:
        if c.index in m.cpu_energy:
            e = m.cpu_energy[c.index]
            table.add_row(c.describe(), f"{e:.1f}", power(e), source(c.simulated, "RAPL counter"))
        if c.index in m.dram_energy:
            e = m.dram_energy[c.index]
            table.add_row(f"DRAM {c.index}", f"{e:.1f}", power(e), source(c.simulated, "RAPL counter"))
    estimated = " (includes estimates)" if m.estimated else ""
    table.add_row(
        "Total",
        f"{m.total_energy:.1f}",
        power(m.total_energy),
        ("simulated" if sim else "all devices above") + estimated,
    )
    return Group(Text(f"{title}{tag}"), Text(f"Time: {m.time:.2f} s{tag}"), table)


# -- zeus-suite measure -------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``zeus-suite measure``."""
    add_device_arguments(parser)
    parser.add_argument(
        "--csv",
        type=Path,
        metavar="FILE",
        help="append one row (time, energy per device, exit code) to this CSV file",
    )
    parser.add_argument(
        "--output",
        type=Path,
        metavar="DIR",
        help="write zeus_run.json and a power timeline zeus_power.csv here, for `zeus-suite report DIR`",
    )
    parser.add_argument(
        "cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the command to run and measure"
    )
    parser.epilog = "Example: zeus-suite measure -- python train.py --epochs 3"


def run(args: argparse.Namespace) -> int:
    """Run ``args.cmd`` and report its energy; returns the command's exit code."""
    command = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print(
            "zeus-suite measure: give the command to run, e.g. `zeus-suite measure -- python train.py`.",
            file=sys.stderr,
        )
        return 2
    try:
        gpus, cpus, notes = select_devices(args.simulate, args.gpu_indices, args.cpu_indices)
        from zeus_core.monitor._energy import ZeusMonitor

        monitor = ZeusMonitor(gpus=gpus, cpus=cpus, sync_execution_with=None)
        header = _csv_header(gpus, cpus)
        if args.csv is not None:
            _check_csv(args.csv, header)
    except ZeusError as e:
        print(f"zeus-suite measure: {e}", file=sys.stderr)
        return 2
    for note in notes:
        logger.warning("%s", note)

    timeline = _start_timeline(gpus, args.output)
    try:
        returncode, signals, start_time, m = _measure(command, monitor)
    except OSError as e:
        missing = isinstance(e, FileNotFoundError)
        hint = " (command not found; check its name and your PATH)" if missing else ""
        print(f"zeus-suite measure: cannot run {command[0]!r}: {e.strerror or e}{hint}", file=sys.stderr)
        return 127 if missing else 126
    finally:
        _stop_timeline(timeline)
        monitor.close()
        for c in cpus:
            close = getattr(c, "close", None)
            if callable(close):
                close()

    exit_code = returncode if returncode >= 0 else 128 - returncode
    shown = shlex.join(command).replace("\r", "\\r").replace("\n", "\\n")  # one line, whatever the command
    title = f"zeus-suite measure: `{shown}` exited with code {exit_code}"
    if signals:
        title += " after " + ", ".join(signal.Signals(s).name for s in dict.fromkeys(signals))
    console = make_console(stderr=True)
    console.print(render_report(title, m, gpus, cpus), soft_wrap=True)
    followed = following_note(gpus, m.time)
    if followed is not None:
        console.print(followed, soft_wrap=True)
    _write_output(args.output, shown, exit_code, m, gpus, cpus, start_time, timeline)
    if args.csv is not None:
        try:
            _append_csv(args.csv, header, _csv_row(start_time, command, exit_code, m, gpus, cpus))
        except OSError as e:  # the report above still has the numbers
            print(f"zeus-suite measure: cannot append to --csv {str(args.csv)!r}: {e}", file=sys.stderr)
    return exit_code


def _start_timeline(gpus: Sequence[GPU], output: Path | None):  # -> Timeline | None
    """Sample the GPUs' power and temperature for --output (from before the command starts)."""
    if output is None:
        return None
    from zeus_core.training._run_record import Timeline

    timeline = Timeline(gpus)
    timeline.start()
    return timeline


def _stop_timeline(timeline) -> None:
    if timeline is not None:
        timeline.stop()


def _write_output(
    folder: Path | None,
    shown: str,
    exit_code: int,
    m: Measurement,
    gpus: Sequence[GPU],
    cpus: Sequence[CPU],
    start_time: float,
    timeline,
) -> None:
    """Write the run record of --output (carbon and cost from ZEUS_SUITE_CARBON_REGION and friends)."""
    if folder is None:
        return
    from zeus_core.carbon import Footprint
    from zeus_core.training._run_record import command_record, write_record

    try:
        record = command_record(shown, exit_code, m, gpus, cpus, start_time, Footprint.from_env())
        path = write_record(folder, record, timeline.rows() if timeline is not None else None)
        print(
            f"zeus-suite measure: run record written to {path} (`zeus-suite report {folder}`)",
            file=sys.stderr,
        )
    except (OSError, ZeusError) as e:  # the report above still has the numbers
        print(f"zeus-suite measure: cannot write --output {str(folder)!r}: {e}", file=sys.stderr)


def _measure(command: list[str], monitor) -> tuple[int, list[int], float, Measurement]:
    """Run the command inside one monitor window; signals go on to the child."""
    proc: subprocess.Popen | None = None
    received: list[int] = []
    pending: list[int] = []

    def forward(signum: int, frame: object) -> None:
        received.append(signum)
        if proc is None:
            pending.append(signum)  # sent once the child exists
            return
        send(proc, signum)

    def send(child: subprocess.Popen, signum: int, always: bool = False) -> None:
        if not always and signum == signal.SIGINT and _terminal_signals_child():
            return  # the terminal delivered Ctrl-C to the child's process group already
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    previous = {s: signal.signal(s, forward) for s in _FORWARDED}
    try:
        start_time = time.time()
        command_activity = follow_child(monitor.gpus)  # simulated GPUs: busy while the command computes
        monitor.begin_window("command", sync_execution=False)
        try:
            proc = subprocess.Popen(command, preexec_fn=_die_with_parent())
        except OSError:
            monitor.end_window("command", sync_execution=False, cancel=True)
            raise
        command_activity.attach(proc.pid)
        for s in pending:  # arrived before the child existed: it cannot have seen them
            send(proc, s, always=True)
        returncode = proc.wait()
        m = monitor.end_window("command", sync_execution=False)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return returncode, received, start_time, m


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child get SIGTERM when this process dies (Linux; else ``None``).

    ``prctl(PR_SET_PDEATHSIG)`` through ctypes; libc is loaded here, before the fork, so the child
    only makes two system calls. If this process died before the call took effect, the child ends
    itself the same way.
    """
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        logger.debug("prctl unavailable: the command may outlive a killed `zeus-suite measure`.")
        return None
    parent = os.getpid()

    def set_parent_death_signal() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent is already gone
            os.kill(os.getpid(), signal.SIGTERM)

    return set_parent_death_signal


def _terminal_signals_child() -> bool:
    """Whether this process runs in its terminal's foreground process group (shared by the child)."""
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd):
                return os.tcgetpgrp(fd) == os.getpgrp()
        except OSError:
            continue
    return False


# -- CSV ----------------------------------------------------------------------------------------
def _csv_header(gpus: Sequence[GPU], cpus: Sequence[CPU]) -> list[str]:
    return (
        ["start_time", "command", "exit_code", "elapsed_time"]
        + [f"gpu{g.index}_energy" for g in gpus]
        + [f"cpu{c.index}_energy" for c in cpus]
        + [f"dram{c.index}_energy" for c in cpus if c.has_dram]
        + ["total_energy", "estimated_gpus", "simulated"]
    )


def _check_csv(path: Path, header: list[str]) -> None:
    if path.exists() and path.stat().st_size > 0:
        with path.open(newline="") as f:
            existing = next(csv.reader(f), [])
        if existing != header:
            raise ZeusConfigError(
                f"--csv {str(path)!r} has columns {existing}, but this run writes {header}. "
                "Use a new file for a different set of devices."
            )


def _csv_row(
    start_time: float,
    command: list[str],
    exit_code: int,
    m: Measurement,
    gpus: Sequence[GPU],
    cpus: Sequence[CPU],
) -> list[object]:
    return (
        [start_time, shlex.join(command), exit_code, m.time]
        + [m.gpu_energy.get(g.index, 0.0) for g in gpus]
        + [m.cpu_energy.get(c.index, 0.0) for c in cpus]
        + [m.dram_energy.get(c.index, 0.0) for c in cpus if c.has_dram]
        + [m.total_energy, " ".join(map(str, sorted(m.estimated_gpus))), int(m.simulated)]
    )


def _append_csv(path: Path, header: list[str], row: list[object]) -> None:
    new = not path.exists() or path.stat().st_size == 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", newline="") as f:
        writer = csv.writer(f)
        if new:
            writer.writerow(header)
        writer.writerow(row)
