"""Blocking power: what a GPU draws while it waits on pipeline communication, W.

Every GPU-second of an iteration that is not spent computing is spent blocked (in a receive, or
waiting for the iteration to end). The planner charges that time at the *blocking power*, so it
is part of every energy it optimises and reports; charging it at 0 W would make idle time free,
overstate savings and move the least-energy plan. This module picks the figure in one place, in
this order:

1. a value the user gives (``--blocking-power`` / ``PlanSettings(blocking_power_w=...)``);
2. the value measured while profiling (:meth:`~.profiler.InstructionProfiler.blocking_power_w`,
   saved in ``profile.json`` beside ``profile.csv``);
3. the GPU's idle power from :data:`IDLE_POWER_W` (by product name), or a simulated GPU's own
   model (``SimulatedGPU.behavior.idle_power_w``).

With none of these, :func:`resolve_blocking_power` raises an error that names the three fixes.

Sources of :data:`IDLE_POWER_W`: the 70 W that Perseus measured on A100s blocked in NCCL P2P
(zeus ``examples/pipeline_frequency_optimizer``: ``profile_p2p.py`` and the ``--p2p-power``
default of ``run_optimization.py``), and for other GPUs the idle power of the documented DVFS
models in :class:`zeus_core.testing.PhysicalModel` (A40 30 W, H100 70 W). They are
typical figures; measured ones are better, which is why profiling measures it.

Example:
    >>> resolve_blocking_power(None, measured_w=None, gpu_name="NVIDIA A100-SXM4-40GB")
    (70.0, 'documented idle power of NVIDIA A100-SXM4-40GB')
    >>> resolve_blocking_power(55.0, measured_w=61.2, gpu_name="")
    (55.0, 'given')
"""

from __future__ import annotations

from zeus_core.exceptions import ZeusConfigError

__all__ = ["IDLE_POWER_W", "idle_power_w", "resolve_blocking_power"]

#: Typical idle / P2P-blocked board power per GPU product, W (name fragment, lower case -> W).
IDLE_POWER_W: dict[str, float] = {
    "a100": 70.0,
    "h100": 70.0,
    "h200": 70.0,
    "a40": 30.0,
    "v100": 40.0,
}


def idle_power_w(gpu_name: str) -> float | None:
    """Documented idle power of a GPU product (matched by name fragment), W; ``None`` if unknown.

    Args:
        gpu_name: The product name, e.g. ``"NVIDIA A100-SXM4-40GB"`` or ``"a100"``.
    """
    name = gpu_name.lower()
    for fragment, watts in IDLE_POWER_W.items():
        if fragment in name:
            return watts
    return None


def resolve_blocking_power(
    given_w: float | None, measured_w: float | None = None, gpu_name: str = ""
) -> tuple[float, str]:
    """The blocking power to plan with, W, and where it came from.

    Args:
        given_w: A value the user set, W (wins).
        measured_w: The value measured while profiling, W.
        gpu_name: The GPU product name (``" / "``-separated for mixed pipelines: the highest
            idle power of the named GPUs is used).

    Returns:
        ``(watts, source)``, the source in words for reports.

    Raises:
        ZeusConfigError: A value is negative, or none of the three is known.
    """
    for label, value in (("given", given_w), ("measured while profiling", measured_w)):
        if value is not None:
            if value < 0:
                raise ZeusConfigError(f"Blocking power {value} W ({label}) must be >= 0 W.")
            return float(value), label
    known = [w for w in (idle_power_w(n) for n in gpu_name.split(" / ")) if w is not None]
    if known:
        return max(known), f"documented idle power of {gpu_name}"
    raise ZeusConfigError(
        "The GPUs' blocking (idle) power is unknown"
        + (f" for {gpu_name!r}" if gpu_name else "")
        + ": the planner would treat idle GPU time as free. Pass it (zeus-suite plan --blocking-power W, "
        "or PlanSettings(blocking_power_w=W)), name the GPU (zeus-suite plan --gpu a100; known: "
        f"{sorted(IDLE_POWER_W)}), or plan from a profile.json measured by PerseusRuntime."
    )
