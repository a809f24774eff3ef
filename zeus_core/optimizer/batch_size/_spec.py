"""The specification of a recurring training job for the batch-size optimizer.

A :class:`JobSpec` is plain data: the batch sizes a job may use, its target metric, and the knobs
of the bandit that picks among them. It is validated on construction, round-trips through JSON
(:meth:`JobSpec.to_dict` / :meth:`JobSpec.from_dict`), and two specs are equal exactly when every
field is equal, so a server can tell an identical re-registration from a conflicting one.

The knobs, their defaults and what they do:

==================== ========= ===============================================================
knob                 default   meaning
==================== ========= ===============================================================
eta_knob             0.5       weight of energy in the Zeus cost ``eta·ETA + (1-eta)·MaxPower·TTA``;
                               1 = only energy, 0 = only time. In ``[0, 1]``.
beta_knob            2.0       early stopping: a trial whose accumulated cost exceeds
                               ``beta_knob`` × the best converged cost so far (the lowest mean
                               of a batch size's converged trials) is stopped and
                               counts as failed; pruning also drops an arm that costs more than
                               that. Must be > 1; ``None`` disables both.
window_size          10        only the last ``window_size`` observations of each arm feed its
                               posterior, so a drifting cost is tracked; 0 = all observations.
num_pruning_rounds   1         most rounds of pruning exploration before Thompson sampling: each
                               round tries the surviving batch sizes from the default downwards,
                               then upwards, and drops those that fail. Pruning ends early after a
                               round in which every surviving batch size passed. 0 skips pruning.
                               (Zeus uses 2 because its sampling needs two trials per arm; ours
                               pools the noise variance over arms, see ``bandit.py``.)
prior_mean/prior_std None      Gaussian prior on every arm's mean cost, J. ``None`` (both) is the
                               uninformative prior: the posterior is the data alone.
max_epochs           100       a trial that has not reached the target after this many epochs
                               is stopped and counts as failed.
max_power_w          0.0       MaxPower of the Zeus cost: the maximum power limit × number of GPUs,
                               W. It must be given (> 0) because it converts time into joules.
seed                 0         seeds Thompson sampling; the choice for a trial is a function of
                               (seed, trial number, history, pending trials).
slack                0.0       conservative exploration: a batch size other than the best known
                               is tried only while the job's cumulative cost, plus that trial's
                               pessimistic cost, stays within ``(1 + slack)`` × the default's
                               (the default batch size as the job ran before). 0 = never worse
                               than the default; 0.05 lets exploration cost up to 5 % more;
                               ``None`` turns the budget off (Zeus's behaviour).
reporters            1         how many processes report each epoch: 1 when one process reports
                               for the job (the suite's client, on rank zero); Zeus's
                               data-parallel example reports from every rank, so a Zeus job
                               registers its number of GPUs. Up to this many different reports of
                               one epoch are taken (the first decides); one more is refused.
==================== ========= ===============================================================

See docs/optimizers/batch-size.md for what the budget guarantees and what ``slack`` trades.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Mapping

from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.batch_size import _limits as limits
from zeus_core.optimizer.batch_size._limits import MAX_INT

__all__ = ["JobSpec", "MAX_INT"]


def _bad(field_name: str, value: Any, problem: str) -> ZeusConfigError:
    shown = repr(value)
    if len(shown) > 200:  # a huge value is not echoed back in full (server replies, logs)
        shown = f"{shown[:200]}... ({len(shown)} characters)"
    return ZeusConfigError(f"JobSpec: {field_name}={shown} {problem}")


def _finite(value: Any) -> bool:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _checked_batch_sizes(sizes: Any) -> tuple[int, ...]:
    """``sizes`` as a tuple, or a ZeusConfigError naming what is wrong with it."""
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__iter__"):
        raise _bad("batch_sizes", sizes, "must be a sequence of positive integers.")
    sizes = tuple(sizes)
    if not sizes:
        raise _bad("batch_sizes", sizes, "must not be empty; list the batch sizes the job may use.")
    if len(sizes) > limits.MAX_BATCH_SIZES:
        raise _bad(
            "batch_sizes",
            f"<{len(sizes)} batch sizes>",
            f"lists more than {limits.MAX_BATCH_SIZES} batch sizes; a job explores a few dozen at most.",
        )
    for b in sizes:
        if not _integer(b) or not 0 < b <= MAX_INT:
            raise _bad(
                "batch_sizes", sizes, f"must hold positive integers up to {MAX_INT}; {b!r} is not one."
            )
    if list(sizes) != sorted(set(sizes)):
        raise _bad("batch_sizes", sizes, f"must be sorted and unique, e.g. {tuple(sorted(set(sizes)))}.")
    return sizes


@dataclass(frozen=True)
class JobSpec:
    """A recurring job and the knobs of its batch-size bandit (see the module table).

    Attributes:
        job_id: Name that identifies the job across recurrences (non-empty).
        batch_sizes: Allowed batch sizes: positive, sorted ascending, unique, non-empty.
        default_batch_size: The user's batch size; pruning starts here. Must be in ``batch_sizes``.
        target_metric: Validation metric a trial must reach to count as converged.
        higher_is_better: ``True`` for accuracy-like metrics, ``False`` for error rates / loss.
        max_epochs: Epoch budget of one trial (>= 1).
        eta_knob: Weight of energy in the Zeus cost, in ``[0, 1]``.
        beta_knob: Early-stop / pruning threshold factor (> 1), or ``None`` to disable.
        window_size: Observations per arm used by the posterior (>= 0; 0 = all).
        num_pruning_rounds: Most pruning rounds before Thompson sampling (>= 0); pruning ends
            early after a round in which every surviving batch size passed.
        prior_mean: Prior mean of each arm's cost, J (> 0), or ``None``.
        prior_std: Prior standard deviation of each arm's mean cost, J (> 0), or ``None``.
        max_power_w: MaxPower of the Zeus cost (max power limit × number of GPUs), W (> 0).
        seed: Seed of Thompson sampling.
        slack: How much more than the default the job may cost while exploring, as a fraction of
            the default's cumulative cost (>= 0; 0 = never more), or ``None`` for no budget.
        reporters: Processes that each report every epoch (>= 1; see the module table).

    Example:
        >>> spec = JobSpec("cifar100", (256, 512, 1024), 1024, target_metric=0.6, max_power_w=300.0)
        >>> JobSpec.from_dict(spec.to_dict()) == spec
        True
    """

    job_id: str
    batch_sizes: tuple[int, ...]
    default_batch_size: int
    target_metric: float
    higher_is_better: bool = True
    max_epochs: int = 100
    eta_knob: float = 0.5
    beta_knob: float | None = 2.0
    window_size: int = 10
    num_pruning_rounds: int = 1
    prior_mean: float | None = None
    prior_std: float | None = None
    max_power_w: float = 0.0
    seed: int = 0
    slack: float | None = 0.0
    reporters: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.job_id, str) or not self.job_id.strip():
            raise _bad("job_id", self.job_id, "must be a non-empty string.")
        object.__setattr__(self, "batch_sizes", _checked_batch_sizes(self.batch_sizes))
        if not _integer(self.default_batch_size) or self.default_batch_size not in self.batch_sizes:
            raise _bad(
                "default_batch_size",
                self.default_batch_size,
                f"must be one of batch_sizes {self.batch_sizes}.",
            )
        if not _finite(self.target_metric) or abs(self.target_metric) > limits.MAX_METRIC:
            raise _bad(
                "target_metric",
                self.target_metric,
                f"must be a finite number ({limits.explain('target_metric')}).",
            )
        if not isinstance(self.higher_is_better, bool):
            raise _bad("higher_is_better", self.higher_is_better, "must be True or False.")
        self._check_integers()
        self._check_knobs()
        self._check_prior()
        if (
            not _finite(self.max_power_w)
            or not limits.MIN_MAX_POWER_W <= self.max_power_w <= limits.MAX_MAX_POWER_W
        ):
            raise _bad(
                "max_power_w",
                self.max_power_w,
                f"must be the maximum power limit × number of GPUs ({limits.explain('max_power_w')}; "
                "e.g. 300.0 for one A40).",
            )

    def _check_integers(self) -> None:
        if not _integer(self.max_epochs) or not 1 <= self.max_epochs <= limits.MAX_EPOCHS:
            raise _bad("max_epochs", self.max_epochs, f"must be an integer within [1, {limits.MAX_EPOCHS}].")
        for name, high in (
            ("window_size", limits.MAX_WINDOW_SIZE),
            ("num_pruning_rounds", limits.MAX_PRUNING_ROUNDS),
            ("seed", limits.MAX_SEED),
        ):
            value = getattr(self, name)
            if not _integer(value) or not 0 <= value <= high:
                raise _bad(name, value, f"must be an integer within [0, {high}].")
        if not _integer(self.reporters) or not 1 <= self.reporters <= limits.MAX_NUMBER_OF_GPUS:
            raise _bad(
                "reporters",
                self.reporters,
                f"must be an integer within [1, {limits.MAX_NUMBER_OF_GPUS}] (ranks reporting each epoch).",
            )

    def _check_knobs(self) -> None:
        if not _finite(self.eta_knob) or not 0.0 <= self.eta_knob <= 1.0:
            raise _bad("eta_knob", self.eta_knob, "must be within [0, 1].")
        beta = self.beta_knob
        if beta is not None and (not _finite(beta) or not 1.0 < beta <= limits.MAX_BETA):
            raise _bad(
                "beta_knob",
                beta,
                f"must be > 1 and at most {limits.MAX_BETA:g}, or None to disable early stopping.",
            )
        if self.slack is not None and (not _finite(self.slack) or not 0.0 <= self.slack <= limits.MAX_SLACK):
            raise _bad(
                "slack",
                self.slack,
                f"must be a fraction within [0, {limits.MAX_SLACK:g}] (0 = never cost more than the "
                "default), or None for no budget.",
            )

    def _check_prior(self) -> None:
        if (self.prior_mean is None) != (self.prior_std is None):
            raise _bad(
                "prior_std" if self.prior_std is None else "prior_mean",
                None,
                "prior_mean and prior_std must be given together (or both None for no prior).",
            )
        mean, std = self.prior_mean, self.prior_std
        if mean is not None and (not _finite(mean) or not 0 < mean <= limits.MAX_COST_J):
            raise _bad("prior_mean", mean, f"must be a positive cost ({limits.explain('prior_mean')}).")
        if std is not None and (not _finite(std) or not limits.MIN_PRIOR_STD_J <= std <= limits.MAX_COST_J):
            raise _bad("prior_std", std, f"must be a standard deviation in {limits.explain('prior_std')}.")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict of every field (``batch_sizes`` as a list)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["batch_sizes"] = list(self.batch_sizes)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobSpec:
        """Build a spec from :meth:`to_dict`'s output.

        Args:
            data: Field name -> value. Missing optional fields take their defaults.

        Raises:
            ZeusConfigError: An unknown field, a missing required field or an invalid value.
        """
        if not isinstance(data, Mapping):
            raise ZeusConfigError(f"JobSpec.from_dict: expected a mapping, got {type(data).__name__}.")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known, key=repr)
        if unknown:
            raise ZeusConfigError(f"JobSpec.from_dict: unknown field(s) {unknown}; known: {sorted(known)}.")
        missing = [
            n for n in ("job_id", "batch_sizes", "default_batch_size", "target_metric") if n not in data
        ]
        if missing:
            raise ZeusConfigError(f"JobSpec.from_dict: missing required field(s) {missing}.")
        kwargs = dict(data)
        sizes = kwargs["batch_sizes"]
        if isinstance(sizes, (list, tuple)):
            kwargs["batch_sizes"] = tuple(sizes)
        return cls(**kwargs)
