"""Training-efficiency metrics: energy/time to accuracy and the Zeus cost that trades them off."""

from __future__ import annotations

from zeus_core.exceptions import ZeusConfigError

__all__ = ["zeus_cost"]


def zeus_cost(energy_j: float, time_s: float, eta_knob: float, max_power_w: float) -> float:
    """The Zeus cost ``eta·E + (1 − eta)·MaxPower·T`` (NSDI'23), in J.

    ``eta_knob = 1`` cares only about energy, ``0`` only about time; ``max_power_w`` (the highest
    power limit times the number of GPUs) turns time into joules so the two terms are comparable.

    Args:
        energy_j: Energy, J (e.g. energy to accuracy, or per step).
        time_s: Time, s (e.g. time to accuracy, or per step).
        eta_knob: Weight of energy, in ``[0, 1]``.
        max_power_w: Power that converts time into energy, W.

    Raises:
        ZeusConfigError: ``eta_knob`` is outside ``[0, 1]``.

    Example:
        >>> from zeus_core import zeus_cost
        >>> zeus_cost(energy_j=2000.0, time_s=10.0, eta_knob=0.5, max_power_w=300.0)
        2500.0
    """
    if not 0.0 <= eta_knob <= 1.0:
        raise ZeusConfigError(f"zeus_cost: eta_knob={eta_knob} must be within [0, 1].")
    return eta_knob * energy_j + (1.0 - eta_knob) * max_power_w * time_s
