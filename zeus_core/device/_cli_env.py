"""``zeus-suite env``: the devices found, what they support, and what is missing and why.

Prints a rich table per kind of device (GPUs with their energy source, power-limit range, clock
tables and whether this process may change them; CPU packages and DRAM metered by RAPL), the
device-visibility variables and how they map indices, then one line per missing kind of device
with its fix. ``--json`` prints the same as JSON; ``--simulate`` adds a simulated NVIDIA A40,
marked as simulated, to try Zeus Suite on a machine without a GPU.

``env`` never changes a setting: whether this process may set limits and clocks is answered without
writing (the device's capability queries and the process's ``CAP_SYS_ADMIN``/root). Only
``--check-control`` writes, and says so: it writes each GPU's current power limit again, the one
certain test (it could undo a change another process makes at the same moment).
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from zeus_core.device._base import GPU
from zeus_core.device._discovery import DeviceReport, discover
from zeus_core.device._zeusd import daemon_status, describe_status
from zeus_core.exceptions import ZeusError, ZeusNotSupportedError, ZeusPermissionError

__all__ = ["add_arguments", "run", "gpu_capabilities", "report_dict"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``zeus-suite env``."""
    parser.add_argument(
        "--simulate", action="store_true", help="also show a simulated NVIDIA A40 (marked simulated)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--check-control",
        action="store_true",
        help="test control by WRITING each GPU's current power limit again (the default asks without "
        "writing; this is the certain test)",
    )
    parser.add_argument(
        "--sysfs-root",
        default="/sys/class/powercap",
        help="where the RAPL powercap tree is (default: %(default)s)",
    )


def _try(fn: Any) -> tuple[Any, str | None]:
    try:
        return fn(), None
    except ZeusError as e:
        return None, str(e)


def gpu_capabilities(gpu: GPU, check_by_writing: bool = False) -> dict[str, Any]:
    """What ``gpu`` offers, as JSON-safe values (W, MHz); a failed query becomes an ``error`` text.

    Nothing is written unless ``check_by_writing``: then the control check writes the current
    power limit again (:meth:`~zeus_core.device._base.GPU.check_control_by_writing`) and
    ``control_checked_by`` says ``"write"`` instead of ``"query"``.

    Keys: ``index``, ``name``, ``vendor``, ``simulated``, ``uuid``, ``backend_index`` (NVML or HIP
    index, where it differs from ``index``), ``energy`` (``"counter"`` or ``"estimated"``),
    ``power_limit_w`` (``min``/``max``/``default``/``current``), ``sm_clocks`` and
    ``memory_clocks`` (counts and ranges, MHz), ``control`` (``"yes"``, ``"no"`` or
    ``"not supported"``) with ``control_detail``.
    """
    info: dict[str, Any] = {"index": gpu.index, "vendor": gpu.vendor, "simulated": gpu.simulated}
    info["name"], _ = _try(lambda: gpu.name)
    info["uuid"], _ = _try(lambda: gpu.uuid)
    backend = getattr(gpu, "backend_index", None)  # the vendor library's index (NVML or HIP)
    info["backend_index"] = backend
    counter, err = _try(lambda: gpu.has_energy_counter)
    info["energy"] = "counter" if counter else "estimated"
    if err:
        info["energy_error"] = err
    limits, err = _try(gpu.power_limit_constraints)
    current, err2 = _try(gpu.get_power_limit)
    info["power_limit_w"] = (
        {"min": limits.min_w, "max": limits.max_w, "default": limits.default_w, "current": current}
        if limits is not None
        else {"error": err}
    )
    queries = (
        ("sm_clocks", gpu.supported_sm_frequencies),
        ("memory_clocks", gpu.supported_memory_frequencies),
    )
    for key, query in queries:
        clocks, err = _try(query)
        info[key] = (
            {"count": len(clocks), "max": max(clocks, default=None), "min": min(clocks, default=None)}
            if clocks is not None
            else {"error": err}
        )
    info["control_checked_by"] = "write" if check_by_writing else "query"
    try:
        if check_by_writing:
            gpu.check_control_by_writing()
        else:
            gpu.check_control_permission()
        info["control"], info["control_detail"] = "yes", ""
    except ZeusPermissionError as e:
        info["control"], info["control_detail"] = "no", str(e)
    except ZeusNotSupportedError as e:
        info["control"], info["control_detail"] = "not supported", str(e)
    except ZeusError as e:
        info["control"], info["control_detail"] = "unknown", str(e)
    return info


def report_dict(report: DeviceReport, check_by_writing: bool = False) -> dict[str, Any]:
    """The whole report as JSON-safe values (see :func:`gpu_capabilities` for ``check_by_writing``)."""
    return {
        "gpus": [gpu_capabilities(g, check_by_writing) for g in report.gpus],
        "cpus": [
            {"index": c.index, "name": c.name, "dram": c.has_dram, "simulated": c.simulated}
            for c in report.cpus
        ],
        "visibility": dict(report.visibility),
        "missing": [{"what": m.what, "reason": m.reason, "fix": m.fix} for m in report.missing],
        "simulated": any(g.simulated for g in report.gpus),
        "daemon": daemon_status(),  # ZEUSD_SOCK_PATH / ZEUSD_HOST_PORT: configured, reachable, what it allows
    }


def _simulated_a40(index: int) -> GPU:
    from zeus_core.testing._stand_in import simulated_gpu

    return simulated_gpu("a40", index)


def _fmt_range(d: dict[str, Any], unit: str) -> str:
    if "error" in d:
        return f"[red]{d['error']}[/red]"
    if not d["count"]:
        return "none"
    return f"{d['count']} ({d['min']}-{d['max']} {unit})"


def _gpu_row(g: dict[str, Any]) -> list[str]:
    """One row of the GPU table (rich markup)."""
    from rich.markup import escape

    simulated = g["simulated"] and "simulated" not in str(g["name"])
    name = escape(str(g["name"])) + (" [yellow](simulated)[/yellow]" if simulated else "")
    remapped = g["backend_index"] not in (None, g["index"])
    backend = f"{g['vendor'].upper()} {g['backend_index']}" if remapped else ""
    energy = "hardware counter" if g["energy"] == "counter" else "estimated (power sampling)"
    pl = g["power_limit_w"]
    limit = (
        f"{pl['min']:g}-{pl['max']:g} (default {pl['default']:g}, now {pl['current']:g})"
        if "error" not in pl and pl["current"] is not None
        else escape(str(pl.get("error", "unknown")))
    )
    control = {"yes": "[green]yes[/green]", "no": "[red]no[/red]"}.get(g["control"], g["control"])
    return [
        f"cuda:{g['index']}",
        name,
        backend,
        energy,
        limit,
        _fmt_range(g["sm_clocks"], "MHz"),
        _fmt_range(g["memory_clocks"], "MHz"),
        control,
    ]


def _render_gpus(console: Any, data: dict[str, Any]) -> None:
    from rich.markup import escape
    from rich.table import Table

    if not data["gpus"]:
        console.print("[bold]GPUs:[/bold] none found (see below)")
        return
    gpus = Table(title="GPUs", title_justify="left")
    for col in _GPU_COLUMNS:
        gpus.add_column(col)
    for g in data["gpus"]:
        gpus.add_row(*_gpu_row(g))
    console.print(gpus)
    if any(g["control_checked_by"] == "write" for g in data["gpus"]):
        console.print(
            "  Control was checked by writing each GPU's current power limit again (--check-control)."
        )
    else:
        console.print(
            "  Control was checked without writing (admin rights, GPU capability); --check-control writes."
        )
    details: dict[str, list[str]] = {}
    for g in data["gpus"]:  # one line per distinct reason, not one per GPU
        if g["control"] != "yes" and g["control_detail"]:
            detail = re.sub(r"^GPU \d+: ", "", g["control_detail"])
            details.setdefault(detail, []).append(f"cuda:{g['index']}")
    for detail, where in details.items():
        console.print(f"  {', '.join(where)}: {escape(detail)}")


def _render_visibility(console: Any, data: dict[str, Any]) -> None:
    from rich.markup import escape

    if not data["visibility"]:
        return
    console.print(
        "[bold]Device visibility:[/bold] " + ", ".join(f"{k}={v!r}" for k, v in data["visibility"].items())
    )
    for g in data["gpus"]:
        if g["backend_index"] is not None:
            console.print(
                f"  cuda:{g['index']} -> {g['vendor'].upper()} device {g['backend_index']} "
                f"({escape(str(g['uuid']))})"
            )


def _render_cpus_and_missing(console: Any, data: dict[str, Any]) -> None:
    from rich.markup import escape
    from rich.table import Table

    if data["cpus"]:
        cpus = Table(title="CPU packages (RAPL)", title_justify="left")
        for col in ("CPU", "Zone", "DRAM metered"):
            cpus.add_column(col)
        for c in data["cpus"]:
            cpus.add_row(str(c["index"]), escape(str(c["name"])), "yes" if c["dram"] else "no")
        console.print(cpus)
    if data["missing"]:
        missing = Table(title="Missing, why, and the fix", title_justify="left")
        for col in ("What", "Why", "Fix"):
            missing.add_column(col)
        for m in data["missing"]:
            missing.add_row(escape(m["what"]), escape(m["reason"]), escape(m["fix"]))
        console.print(missing)


_GPU_COLUMNS = (
    "GPU",
    "Name",
    "Backend index",
    "Energy",
    "Power limit (W)",
    "SM clocks",
    "Memory clocks",
    "May set limits/clocks",
)


def _render(data: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape

    console = Console()
    tag = " [yellow](includes a SIMULATED GPU)[/yellow]" if data["simulated"] else ""
    console.print(f"[bold]Zeus Suite environment[/bold]{tag}")
    _render_gpus(console, data)
    _render_visibility(console, data)
    _render_cpus_and_missing(console, data)
    console.print(f"[bold]Daemon:[/bold] {escape(describe_status(data['daemon']))}")
    if not data["gpus"]:
        console.print(
            "Without a GPU, ZeusMonitor measures CPU/DRAM only. Try `zeus-suite env --simulate`, set "
            "ZEUS_SUITE_SIMULATE=1 (a simulated A40 wherever a GPU is looked for), "
            "or measure a SimulatedGPU (zeus_core.SimulatedGPU)."
        )


def run(args: argparse.Namespace) -> int:
    """Print the environment report; always exits 0 (missing devices are reported, not errors)."""
    report = discover(sysfs_root=args.sysfs_root)
    try:
        if args.simulate:
            report.gpus.append(_simulated_a40(len(report.gpus)))
        data = report_dict(report, check_by_writing=args.check_control)
    finally:
        for cpu in report.cpus:
            close = getattr(cpu, "close", None)
            if callable(close):
                close()
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        _render(data)
    return 0
