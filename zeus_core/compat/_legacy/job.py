"""Zeus's ``zeus._legacy.job``: the ``Job`` specification of a recurring training job.

Example:
    >>> from zeus_core.compat._legacy.job import Job
    >>> Job("squad", "bert_base_uncased", "adamw", 84.0, 6, 32, 3e-5).scale_lr(128)
    6e-05
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zeus_core.optimizer.batch_size._lr_scaling import LinearScaler, SquareRootScaler

__all__ = ["Job"]


@dataclass(frozen=True, unsafe_hash=True)
class Job:
    """A recurring job, Zeus's fields: what the traces are filtered by and the user's defaults.

    Attributes:
        dataset: Dataset name, as in the traces.
        network: Model name, as in the traces.
        optimizer: Optimizer name, as in the traces (e.g. ``adamw``).
        target_metric: Validation metric that counts as reached.
        max_epochs: Epochs a run may take before it counts as failed.
        default_bs: The user's batch size (b0).
        default_lr: The learning rate of ``default_bs``.
        workdir: Working directory of the job command.
        command: Command template (see :meth:`gen_command`).

    Example:
        >>> Job("cifar100", "shufflenetv2", "adadelta", 0.6, 100, 1024).to_logdir()
        'cifar100+shufflenetv2+bs1024+adadelta+lrNone+tm0.6+me100'
    """

    dataset: str
    network: str
    optimizer: str
    target_metric: float
    max_epochs: int
    default_bs: int | None = None
    default_lr: float | None = None
    workdir: str | None = None
    command: list[str] | None = field(default=None, hash=False, compare=False)

    def __str__(self) -> str:
        bs = f",bs{self.default_bs}" if self.default_bs is not None else ""
        spec = f"{self.dataset},{self.network},{self.optimizer},{self.target_metric}"
        return f"Job({spec}{bs}~{self.max_epochs})"

    def to_logdir(self) -> str:
        """A log directory name that describes the job."""
        return (
            f"{self.dataset}+{self.network}+bs{self.default_bs}+{self.optimizer}+lr{self.default_lr}"
            f"+tm{self.target_metric}+me{self.max_epochs}"
        )

    def filter_df(self, df: Any) -> Any:
        """The rows of a trace ``pandas.DataFrame`` that belong to this job (target metric included)."""
        return df.loc[
            (df.dataset == self.dataset)
            & (df.network == self.network)
            & (df.optimizer == self.optimizer)
            & (df.target_metric == self.target_metric)
        ]

    def gen_command(self, batch_size: int, learning_rate: float, seed: int, rec_i: int) -> list[str]:
        """The job command with ``{bs}``, ``{lr}``, ``{seed}``, ``{epochs}``, ... filled in."""
        if not self.command:
            raise ValueError(f"{self}: give Job(command=[...]) to generate a command.")
        values = {
            "{bs}": batch_size,
            "{batch_size}": batch_size,
            "{lr}": learning_rate,
            "{learning_rate}": learning_rate,
            "{seed}": seed,
            "{epoch}": self.max_epochs,
            "{epochs}": self.max_epochs,
            "{slice_number}": rec_i,
            "{target_metric}": self.target_metric,
        }
        return [str(values[p]) if p in values else p for p in self.command]

    def scale_lr(self, batch_size: int) -> float:
        """``default_lr`` scaled to ``batch_size``: square root for Adam-like optimizers, linear for SGD."""
        if not self.default_bs or not self.default_lr:
            raise ValueError(f"{self}: give default_bs and default_lr to scale the learning rate.")
        optimizer = self.optimizer.lower()
        if optimizer in ("adam", "adadelta", "adamw"):
            return SquareRootScaler(bs=self.default_bs, lr=self.default_lr).compute_lr(batch_size)
        if optimizer == "sgd":
            return LinearScaler(bs=self.default_bs, lr=self.default_lr).compute_lr(batch_size)
        raise NotImplementedError(f"LR scaling for {self.optimizer} is not supported.")
