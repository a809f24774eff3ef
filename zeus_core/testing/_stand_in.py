"""Simulated GPUs standing in for missing ones: ``simulate=``, ``--simulate``, ``ZEUS_SUITE_SIMULATE``.

Every way of asking for a simulated GPU by model name goes through :func:`simulated_gpu`: the
adapters' ``simulate="a40"`` option, the commands' ``--simulate`` flag, and the environment
variable ``ZEUS_SUITE_SIMULATE``, which discovery reads when it finds no real GPU
(:func:`simulated_gpus_from_env`). The simulated GPUs run on the wall clock and follow the CPU
time of the work they stand in for (docs/simulating.md).
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from zeus_core import console
from zeus_core.device._activity import ChildProcessActivity
from zeus_core.device._base import GPU
from zeus_core.exceptions import ZeusConfigError
from zeus_core.testing._gpu_models import PhysicalModel
from zeus_core.testing._simulated_gpu import SimulatedGPU

__all__ = [
    "SIMULATE_ENV",
    "SIMULATABLE_GPUS",
    "simulated_gpu",
    "simulated_gpus_from_env",
    "simulated_stand_in",
    "follow_child",
    "following_note",
]

SIMULATE_ENV = "ZEUS_SUITE_SIMULATE"
"""The environment variable that asks for simulated GPUs where no real one is found."""

SIMULATABLE_GPUS: tuple[str, ...] = PhysicalModel.PRESETS
"""The GPU models a simulated GPU can be asked for by name (``"a40"``, ``"a100"``, ``"h100"``)."""

_OFF = {"", "0", "false", "no", "off"}
_ON = {"1", "true", "yes", "on"}


def simulated_gpu(model: str, index: int = 0, **options: Any) -> SimulatedGPU:
    """A simulated GPU of a catalogued model, on the wall clock, following this process's CPU time.

    Args:
        model: One of :data:`SIMULATABLE_GPUS`, in any case.
        index: The index it appears under.
        **options: Further keyword arguments of :class:`~zeus_core.testing.SimulatedGPU`
            (``busy``, ``clock``, ``noise``, ...).

    Raises:
        ZeusConfigError: ``model`` names no simulatable GPU (the message lists them).

    Example:
        >>> from zeus_core.testing import simulated_gpu
        >>> simulated_gpu("a100").name
        'NVIDIA A100-SXM4-40GB (simulated)'
    """
    key = model.strip().lower()
    if key not in SIMULATABLE_GPUS:
        raise ZeusConfigError(
            f"simulate={model!r}: no such GPU model to simulate; use one of {', '.join(SIMULATABLE_GPUS)}."
        )
    return SimulatedGPU(PhysicalModel.preset(key), index, **options)


def _parse_simulate_env(raw: str) -> tuple[str, int]:
    """``"a100:2"`` → ``("a100", 2)``; ``"1"`` → ``("a40", 1)``."""
    model, _, count_text = raw.strip().lower().partition(":")
    model = "a40" if model in _ON else model
    try:
        count = int(count_text) if count_text else 1
    except ValueError:
        count = 0
    if model not in SIMULATABLE_GPUS or count < 1:
        raise ZeusConfigError(
            f"{SIMULATE_ENV}={raw!r} is not understood. Use 1 (a simulated A40), a model name "
            f"({', '.join(SIMULATABLE_GPUS)}), optionally with ':<number of GPUs>' (e.g. a100:2), "
            "or unset it."
        )
    return model, count


def simulated_gpus_from_env(environ: Mapping[str, str]) -> list[GPU]:
    """The GPUs to use when no real GPU was found: simulated ones if ``ZEUS_SUITE_SIMULATE`` asks.

    Says so once per process, visibly (``zeus_core.console``): with the variable unset, that no
    GPU was found and how to get a simulated one; with it set, which simulated GPUs are measured.

    Args:
        environ: The environment to read ``ZEUS_SUITE_SIMULATE`` from: unset/``0`` for none,
            ``1`` for one simulated A40, or ``a40``/``a100``/``h100``, optionally ``:<count>``.

    Raises:
        ZeusConfigError: The variable's value is not understood (the message shows the valid ones).

    Example:
        >>> [g.name for g in simulated_gpus_from_env({"ZEUS_SUITE_SIMULATE": "h100:2"})]
        ['NVIDIA H100 80GB HBM3 (simulated)', 'NVIDIA H100 80GB HBM3 (simulated)']
    """
    raw = environ.get(SIMULATE_ENV, "")
    if raw.strip().lower() in _OFF:
        console.warn_once(
            "no-gpu",
            "No GPU found (`zeus-suite env` says why), so GPU energy is not measured. To try Zeus Suite "
            f"with a simulated GPU, set {SIMULATE_ENV}=1 (or a40, a100, h100) or pass one: "
            "ZeusMonitor(gpus=[SimulatedGPU(PhysicalModel.a40())]). Its figures are marked simulated.",
        )
        return []
    model, count = _parse_simulate_env(raw)
    gpus: list[GPU] = [simulated_gpu(model, i) for i in range(count)]
    console.info_once(
        "simulated-gpus",
        f"No GPU found; {SIMULATE_ENV}={raw.strip()}: measuring {count} simulated "
        f"{gpus[0].name.replace(' (simulated)', '')} GPU(s), busy while this process uses the CPU. "
        "Every figure from them is marked simulated.",
    )
    return gpus


def simulated_stand_in(environ: Mapping[str, str] | None = None) -> list[int]:
    """GPU indices an adapter measures for a process that trains off-GPU (on the CPU).

    None, unless ``ZEUS_SUITE_SIMULATE`` asks for simulated GPUs: then the one this process stands
    in for, ``LOCAL_RANK`` modulo their number (so each local rank of a CPU run gets its own).

    Args:
        environ: Environment to read (default: ``os.environ``).

    Raises:
        ZeusConfigError: ``ZEUS_SUITE_SIMULATE`` is not understood.

    Example:
        >>> simulated_stand_in({"ZEUS_SUITE_SIMULATE": "a40:2", "LOCAL_RANK": "3"})
        [1]
    """
    env = os.environ if environ is None else environ
    raw = env.get(SIMULATE_ENV, "")
    if raw.strip().lower() in _OFF:
        return []
    _, count = _parse_simulate_env(raw)
    local_rank = env.get("LOCAL_RANK", "0").strip()
    return [int(local_rank) % count if local_rank.isdigit() else 0]


def follow_child(gpus: Sequence[GPU]) -> ChildProcessActivity:
    """Make the simulated GPUs among ``gpus`` follow a child process that is about to start.

    Used by ``zeus-suite measure --simulate -- CMD``: call it before the measurement begins (the
    GPUs idle until the command runs), then ``attach(pid)`` the returned activity once the command
    has started. Real GPUs are left alone.
    """
    activity = ChildProcessActivity()
    for g in gpus:
        if isinstance(g, SimulatedGPU):
            g.follow(activity)
    return activity


def following_note(gpus: Sequence[GPU], elapsed_s: float) -> str | None:
    """One line saying what the simulated GPUs among ``gpus`` assumed, or ``None`` without any.

    Args:
        gpus: The measured GPUs.
        elapsed_s: The measured window's length, s.
    """
    sims = [g for g in gpus if isinstance(g, SimulatedGPU)]
    if not sims:
        return None
    activity = sims[0].activity
    if activity is None:
        return "Simulated GPU(s) were busy throughout (they follow no activity)."
    used = activity.cpu_seconds()
    share = min(used / elapsed_s, 1.0) if elapsed_s > 0 else 0.0
    return (
        f"Simulated GPU(s) were busy while {activity.description}: {used:.2f} CPU-s in "
        f"{elapsed_s:.2f} s, busy {share:.0%} of the time, idle power otherwise (simulated)."
    )
