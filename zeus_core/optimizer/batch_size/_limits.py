"""What the batch-size optimizer accepts: every number bounded by what is physically meaningful.

A job spec or report outside these bounds is refused (HTTP 422 naming the field, the bound and why,
from :func:`explain`); within them the bandit's arithmetic stays finite (sums of up to
:data:`MAX_TRIALS_PER_JOB` costs, squares, precisions), so no accepted request can make a later one
fail. Values stored by older versions that lie outside are clamped when read
(:func:`clamp_spec_dict`). docs/optimizers/batch-size-security.md lists them.

Example:
    >>> MAX_ENERGY_J
    1000000000000000.0
    >>> explain("beta_knob")
    'within (1, 100], or null to disable early stopping'
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "MAX_INT",
    "MAX_TIME_S",
    "MAX_ENERGY_J",
    "MIN_MAX_POWER_W",
    "MAX_MAX_POWER_W",
    "MAX_COST_J",
    "MIN_PRIOR_STD_J",
    "MAX_BETA",
    "MAX_SLACK",
    "MAX_METRIC",
    "MAX_EPOCHS",
    "MAX_BATCH_SIZES",
    "MAX_WINDOW_SIZE",
    "MAX_PRUNING_ROUNDS",
    "MAX_SEED",
    "MAX_TRIALS_PER_JOB",
    "MAX_NUMBER_OF_GPUS",
    "explain",
    "clamp_spec_dict",
    "clamp_cost",
]

MAX_INT = 2**31 - 1
"""Largest batch size or trial number (a 32-bit database integer)."""

MAX_TIME_S = 1e9
"""Longest cumulative time of a trial, s (31.7 years)."""

MAX_ENERGY_J = 1e15
"""Largest cumulative energy of a trial, J (280 GWh: a 10 MW cluster for 3 years)."""

MIN_MAX_POWER_W = 1.0
"""Smallest ``max_power_w``, W (no GPU has a maximum power limit below 1 W)."""

MAX_MAX_POWER_W = 1e7
"""Largest ``max_power_w``, W (10 MW: 10,000 GPUs at 1 kW)."""

MAX_COST_J = MAX_ENERGY_J + MAX_MAX_POWER_W * MAX_TIME_S
"""Largest Zeus cost a bounded report can have, J (``eta·E + (1 − eta)·MaxPower·T``)."""

MIN_PRIOR_STD_J = 1e-3
"""Smallest prior standard deviation, J: below 1 mJ a cost's spread is not measurable."""

MAX_BETA = 100.0
"""Largest ``beta_knob``: stopping a trial only past 100 × the best cost already keeps every trial."""

MAX_SLACK = 100.0
"""Largest ``slack``: exploring at up to 101 × the default's cost is no budget at all (use ``None``)."""

MAX_METRIC = 1e12
"""Largest magnitude of a metric or target metric (losses, accuracies, perplexities are far below)."""

MAX_EPOCHS = 1_000_000
"""Most epochs of one trial."""

MAX_BATCH_SIZES = 1024
"""Most batch sizes of one job (the bandit's work per request grows with them)."""

MAX_WINDOW_SIZE = 100_000
"""Largest ``window_size``."""

MAX_PRUNING_ROUNDS = 100
"""Largest ``num_pruning_rounds``."""

MAX_SEED = 2**63 - 1
"""Largest ``seed``."""

MAX_TRIALS_PER_JOB = 10_000
"""Default cap on the trials of one job (each is one run of a recurring job); the history the
bandit reads is bounded by it. ``zeus-suite bso-server --max-trials-per-job`` changes it."""

MAX_NUMBER_OF_GPUS = 1_000_000
"""Largest ``number_of_gpus`` of a Zeus 0.16 job spec."""

_NOTES: dict[str, str] = {
    "time_s": f"s, cumulative; at most {MAX_TIME_S:g} s (31.7 years); a larger figure is not a measurement",
    "time": f"s, cumulative; at most {MAX_TIME_S:g} s (31.7 years); a larger figure is not a measurement",
    "energy_j": f"J, cumulative; at most {MAX_ENERGY_J:g} J (280 GWh: a 10 MW cluster for 3 years); "
    "a larger figure is not a measurement",
    "energy": f"J, cumulative; at most {MAX_ENERGY_J:g} J (280 GWh); a larger figure is not a measurement",
    "metric": f"a validation metric; its magnitude is at most {MAX_METRIC:g}",
    "target_metric": f"a validation metric; its magnitude is at most {MAX_METRIC:g}",
    "epoch": f"epochs completed; at most {MAX_EPOCHS}",
    "current_epoch": f"epochs completed; at most {MAX_EPOCHS}",
    "max_epochs": f"epochs; within [1, {MAX_EPOCHS}]",
    "batch_sizes": f"at most {MAX_BATCH_SIZES} batch sizes per job, each within [1, {MAX_INT}]",
    "default_batch_size": f"one of batch_sizes, within [1, {MAX_INT}]",
    "max_power_w": f"W: the maximum power limit × number of GPUs, within [{MIN_MAX_POWER_W:g}, "
    f"{MAX_MAX_POWER_W:g}] W (10,000 GPUs at 1 kW)",
    "max_power": f"W: the maximum power limit × number of GPUs, within [{MIN_MAX_POWER_W:g}, "
    f"{MAX_MAX_POWER_W:g}] W",
    "prior_mean": f"J; within (0, {MAX_COST_J:g}] J, the largest cost a trial can report",
    "prior_std": f"J; within [{MIN_PRIOR_STD_J:g}, {MAX_COST_J:g}] J: below 1 mJ a spread is not measurable "
    "and the posterior's arithmetic would overflow",
    "mab_prior_precision": f"1/J²; 0 (no prior) or within [{MAX_COST_J**-2:.3g}, {MIN_PRIOR_STD_J**-2:g}]",
    "mab_prior_mean": f"J; within (0, {MAX_COST_J:g}] J when a prior is given",
    "beta_knob": f"within (1, {MAX_BETA:g}], or null to disable early stopping",
    "slack": f"a fraction within [0, {MAX_SLACK:g}], or null for no budget",
    "eta_knob": "within [0, 1]",
    "window_size": f"within [0, {MAX_WINDOW_SIZE}] (0: every observation)",
    "num_pruning_rounds": f"within [0, {MAX_PRUNING_ROUNDS}]",
    "seed": f"within [0, {MAX_SEED}]",
    "mab_seed": f"within [0, {MAX_SEED}]",
    "number_of_gpus": f"within [1, {MAX_NUMBER_OF_GPUS}]",
}


def explain(field: str) -> str | None:
    """The unit, bound and reason of ``field`` (its last name: ``energy_j``), or ``None``."""
    return _NOTES.get(field)


def clamp_cost(cost: float | None) -> float:
    """A stored cost made safe for the bandit: NaN and negatives as 0, at most :data:`MAX_COST_J`, J."""
    if cost is None or not isinstance(cost, (int, float)) or math.isnan(cost) or cost < 0:
        return 0.0
    return float(min(cost, MAX_COST_J))


def _clamp(value: Any, low: float, high: float) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if isinstance(value, float) and math.isnan(value):
        return low
    clamped = min(max(value, low), high)
    return int(clamped) if isinstance(value, int) else float(clamped)


def clamp_spec_dict(data: dict[str, Any]) -> dict[str, Any]:
    """A stored spec with every number pulled within today's bounds (specs stored before them).

    Only numbers are changed; a spec that is wrong in another way stays wrong.
    """
    out = dict(data)
    bounds: dict[str, tuple[float, float]] = {
        "target_metric": (-MAX_METRIC, MAX_METRIC),
        "max_epochs": (1, MAX_EPOCHS),
        "eta_knob": (0.0, 1.0),
        "window_size": (0, MAX_WINDOW_SIZE),
        "num_pruning_rounds": (0, MAX_PRUNING_ROUNDS),
        "max_power_w": (MIN_MAX_POWER_W, MAX_MAX_POWER_W),
        "seed": (0, MAX_SEED),
    }
    optional: dict[str, tuple[float, float]] = {
        "beta_knob": (math.nextafter(1.0, 2.0), MAX_BETA),
        "slack": (0.0, MAX_SLACK),
        "prior_mean": (MIN_PRIOR_STD_J, MAX_COST_J),
        "prior_std": (MIN_PRIOR_STD_J, MAX_COST_J),
    }
    for name, (low, high) in bounds.items():
        if name in out:
            out[name] = _clamp(out[name], low, high)
    for name, (low, high) in optional.items():
        if out.get(name) is not None:
            out[name] = _clamp(out[name], low, high)
    sizes = out.get("batch_sizes")
    if isinstance(sizes, list) and len(sizes) > MAX_BATCH_SIZES:
        default = out.get("default_batch_size")
        kept = sizes[:MAX_BATCH_SIZES]
        if default in sizes and default not in kept:
            kept = sorted(kept[:-1] + [default])
        out["batch_sizes"] = kept
    return out
