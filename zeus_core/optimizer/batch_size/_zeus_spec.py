"""Zeus 0.16's job spec fields mapped onto the suite's :class:`JobSpec`, in one place.

Used by the service's Zeus routes (Zeus's own client registers with these fields) and by
``zeus_core.compat.optimizer.batch_size`` (Zeus's client API over the suite's client). The meaning
of each field is kept: ``higher_is_better_metric`` -> ``higher_is_better``, ``max_power`` ->
``max_power_w``, ``mab_seed`` -> ``seed`` (``None`` -> 0), ``mab_prior_mean`` and
``mab_prior_precision`` -> ``prior_mean`` and ``prior_std = precision ** -0.5`` (precision 0 = no
prior), ``batch_sizes`` sorted and de-duplicated as Zeus does, and ``number_of_gpus`` ->
``reporters``: Zeus's data-parallel example reports every epoch from every rank, each rank
measuring the node's GPUs. ``mab_num_explorations`` and ``gpu_model`` are accepted but not used.
"""

from __future__ import annotations

import secrets
from typing import Any, Sequence

from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.batch_size._spec import JobSpec

__all__ = ["ZEUS_FIELD", "zeus_job_id", "zeus_job_spec"]

ZEUS_FIELD = {
    "higher_is_better": "higher_is_better_metric",
    "max_power_w": "max_power",
    "seed": "mab_seed",
    "prior_mean": "mab_prior_mean",
    "prior_std": "mab_prior_precision",
    "reporters": "number_of_gpus",
}
"""The suite's field name -> Zeus's, for messages about a refused value."""


def zeus_job_id(job_id: str | None, job_id_prefix: str) -> str:
    """``job_id``, or a new ``<job_id_prefix>-<8 hex>`` (Zeus's server names a job without an id so).

    Raises:
        ZeusConfigError: ``job_id`` does not start with ``job_id_prefix`` (a Zeus rule).

    Example:
        >>> from zeus_core.optimizer.batch_size._zeus_spec import zeus_job_id
        >>> zeus_job_id("mnist-7", "mnist"), len(zeus_job_id(None, "mnist"))
        ('mnist-7', 14)
    """
    if job_id is None:
        return f"{job_id_prefix}-{secrets.token_hex(4)}"
    if not job_id.startswith(job_id_prefix):
        raise ZeusConfigError(
            f"job_id={job_id!r} must start with job_id_prefix={job_id_prefix!r} (a Zeus rule)."
        )
    return job_id


def zeus_job_spec(
    job_id: str,
    *,
    batch_sizes: Sequence[int],
    default_batch_size: int,
    max_power: float,
    eta_knob: float = 0.5,
    beta_knob: float | None = 2.0,
    target_metric: float = 0.5,
    higher_is_better_metric: bool = True,
    max_epochs: int = 100,
    num_pruning_rounds: int = 2,
    window_size: int = 0,
    mab_prior_mean: float = 0.0,
    mab_prior_precision: float = 0.0,
    mab_seed: int | None = None,
    number_of_gpus: int = 1,
    **unused: Any,
) -> JobSpec:
    """The suite's :class:`JobSpec` with the meaning of Zeus's fields (Zeus's defaults).

    Raises:
        ZeusConfigError: A value the suite refuses; the message names the Zeus field.

    Example:
        >>> from zeus_core.optimizer.batch_size._zeus_spec import zeus_job_spec
        >>> spec = zeus_job_spec("mnist-1", batch_sizes=[256, 32], default_batch_size=32, max_power=300.0)
        >>> spec.batch_sizes, spec.num_pruning_rounds, spec.target_metric, spec.window_size
        ((32, 256), 2, 0.5, 0)
    """
    prior_mean = prior_std = None
    if mab_prior_precision > 0:
        prior_mean, prior_std = mab_prior_mean, mab_prior_precision**-0.5
    try:
        return JobSpec(
            job_id,
            tuple(sorted(set(batch_sizes))),
            default_batch_size,
            target_metric,
            higher_is_better=higher_is_better_metric,
            max_epochs=max_epochs,
            eta_knob=eta_knob,
            beta_knob=beta_knob,
            window_size=window_size,
            num_pruning_rounds=num_pruning_rounds,
            prior_mean=prior_mean,
            prior_std=prior_std,
            max_power_w=max_power,
            seed=mab_seed or 0,
            reporters=number_of_gpus,
        )
    except ZeusConfigError as err:
        field = str(err).removeprefix("JobSpec: ").partition("=")[0]
        zeus_field = ZEUS_FIELD.get(field, field)
        error = ZeusConfigError(f"Zeus job spec: {zeus_field}: {err}")
        error.zeus_field = zeus_field  # type: ignore[attr-defined]
        raise error from err
