"""Blocking power: what a GPU draws while it waits on pipeline communication, W.

The planner charges every GPU-second not spent computing at this power, so it is never a silent
0 W. The order of sources and where the documented figures come from: docs/optimizers/perseus.md
("Effective energy and blocking power").
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

    Example:
        >>> idle_power_w("NVIDIA A40"), idle_power_w("a mystery GPU")
        (30.0, None)
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

    Example:
        >>> resolve_blocking_power(None, measured_w=None, gpu_name="NVIDIA A100-SXM4-40GB")
        (70.0, 'documented idle power of NVIDIA A100-SXM4-40GB')
        >>> resolve_blocking_power(55.0, measured_w=61.2, gpu_name="")
        (55.0, 'given')
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
