"""Load the Zeus (NSDI'23) training and power traces for the trace-driven simulator.

Two CSV files describe a workload:

* ``summary_train.csv`` (``dataset,network,batch_size,optimizer,learning_rate,run,target_metric,
  target_epoch``): for each batch size and run (seed), the epoch at which the validation metric first
  reached each target (``nan`` when it never did).
* ``summary_power_<gpu>.csv`` (``dataset,network,batch_size,optimizer,power_limit,time_per_epoch,
  average_power``): seconds per epoch and average GPU power (W) per batch size and power limit (W).

A power trace for any other GPU in the same format can be given by path. Only batch sizes present
in both files are used, as in the published simulator.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

from zeus_core.exceptions import ZeusProfileError

__all__ = [
    "Workload",
    "EpochProfile",
    "WorkloadTrace",
    "NSDI23_WORKLOADS",
    "default_trace_dir",
    "load_workload_trace",
    "load_nsdi23_traces",
]

_TRAIN_COLUMNS = ("dataset", "network", "batch_size", "optimizer", "run", "target_metric", "target_epoch")
_POWER_COLUMNS = (
    "dataset",
    "network",
    "batch_size",
    "optimizer",
    "power_limit",
    "time_per_epoch",
    "average_power",
)


@dataclass(frozen=True)
class Workload:
    """A recurring training job of the paper's artifact.

    Attributes:
        dataset: Dataset name as in the traces.
        network: Network name as in the traces.
        optimizer: Optimizer name as in the traces.
        target_metric: Validation metric that counts as converged.
        max_epochs: Epoch budget of one trial.
        default_batch_size: The user's batch size (capped per GPU by :func:`load_workload_trace`).
        higher_is_better: ``False`` for error rates (LibriSpeech WER).

    Example:
        >>> NSDI23_WORKLOADS[4].name, NSDI23_WORKLOADS[4].default_batch_size
        ('squad/bert_base_uncased', 32)
    """

    dataset: str
    network: str
    optimizer: str
    target_metric: float
    max_epochs: int
    default_batch_size: int
    higher_is_better: bool = True

    @property
    def name(self) -> str:
        """``dataset/network``."""
        return f"{self.dataset}/{self.network}"


# The job settings of the paper's artifact (issue 5; `run_alibaba.py`, `run_single.py`).
NSDI23_WORKLOADS: tuple[Workload, ...] = (
    Workload("cifar100", "shufflenetv2", "adadelta", 0.6, 100, 1024),
    Workload("imagenet", "resnet50", "adadelta", 0.65, 100, 256),
    Workload("librispeech", "deepspeech2", "adamw", 40.0, 16, 192, higher_is_better=False),
    Workload("movielens-1m", "ncf", "adam", 0.41, 100, 1024),
    Workload("squad", "bert_base_uncased", "adamw", 84.0, 6, 32),
    Workload("sentiment140", "bert_base_uncased", "adamw", 0.84, 10, 128),
)
"""The six workloads of the NSDI'23 traces, with their target metrics and default batch sizes.

Example:
    >>> [w.dataset for w in NSDI23_WORKLOADS][:3]
    ['cifar100', 'imagenet', 'librispeech']
"""


@dataclass(frozen=True)
class EpochProfile:
    """One epoch at one (batch size, power limit).

    Attributes:
        time_s: Time per epoch, s.
        power_w: Average GPU power during the epoch, W.

    Example:
        >>> EpochProfile(time_s=10.0, power_w=200.0).energy_j
        2000.0
    """

    time_s: float
    power_w: float

    @property
    def energy_j(self) -> float:
        """Energy per epoch, J."""
        return self.time_s * self.power_w


@dataclass(frozen=True)
class WorkloadTrace:
    """Everything the simulator needs about one workload on one GPU.

    Attributes:
        workload: The job settings (default batch size already capped to this GPU's trace).
        gpu: GPU name (e.g. ``"a40"``).
        batch_sizes: Batch sizes present in both traces, ascending.
        power_limits: Power limits of the power trace for this workload, W, ascending.
        target_epochs: Batch size -> per run (in trace order), the epoch that reached the target
            (``None``: never).
        epochs: (batch size, power limit W) -> :class:`EpochProfile`.

    Example:
        >>> trace = load_nsdi23_traces("v100")[4]
        >>> trace.workload.name, trace.max_power_w, trace.num_recurrences()
        ('squad/bert_base_uncased', 250.0, 98)
    """

    workload: Workload
    gpu: str
    batch_sizes: tuple[int, ...]
    power_limits: tuple[int, ...]
    target_epochs: dict[int, tuple[int | None, ...]] = field(repr=False)
    epochs: dict[tuple[int, int], EpochProfile] = field(repr=False)

    @property
    def max_power_w(self) -> float:
        """MaxPower of the Zeus cost: the highest power limit (one GPU), W."""
        return float(max(self.power_limits))

    def power_limits_for(self, batch_size: int) -> list[int]:
        """Power limits measured for ``batch_size``, W, ascending."""
        return [p for p in self.power_limits if (batch_size, p) in self.epochs]

    def num_recurrences(self) -> int:
        """The paper's number of recurrences: 2 × (number of batch sizes) × (number of power limits)."""
        return 2 * len(self.batch_sizes) * len(self.power_limits)


def default_trace_dir() -> Path:
    """The NSDI'23 traces bundled with the package (``zeus_core.data.path("zeus_nsdi23")``).

    Example:
        >>> (default_trace_dir() / "summary_train.csv").exists()
        True
    """
    from zeus_core import data

    return data.path("zeus_nsdi23")


def _read_csv(path: Path, columns: Sequence[str]) -> list[dict[str, str]]:
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in columns if c not in (reader.fieldnames or ())]
            if missing:
                raise ZeusProfileError(
                    f"load_workload_trace: {path} lacks column(s) {missing}; "
                    f"expected at least {list(columns)}."
                )
            return list(reader)
    except FileNotFoundError as e:
        raise ZeusProfileError(f"load_workload_trace: trace file {path} does not exist.") from e


def _number(row: dict[str, str], column: str, path: Path, line: int) -> float:
    try:
        return float(row[column])
    except (TypeError, ValueError) as e:
        raise ZeusProfileError(f"{path}:{line}: column {column}={row[column]!r} is not a number.") from e


def _gpu_name(power_csv: Path) -> str:
    stem = power_csv.stem
    return stem[len("summary_power_") :] if stem.startswith("summary_power_") else stem


def _matches(row: dict[str, str], workload: Workload) -> bool:
    return (row["dataset"], row["network"], row["optimizer"]) == (
        workload.dataset,
        workload.network,
        workload.optimizer,
    )


def _read_epochs(workload: Workload, power_csv: Path) -> dict[tuple[int, int], EpochProfile]:
    """(batch size, power limit W) -> time and power per epoch, from the workload's power-trace rows."""
    epochs: dict[tuple[int, int], EpochProfile] = {}
    for line, row in enumerate(_read_csv(power_csv, _POWER_COLUMNS), start=2):
        if not _matches(row, workload):
            continue
        bs = int(_number(row, "batch_size", power_csv, line))
        pl = int(_number(row, "power_limit", power_csv, line))
        t, p = _number(row, "time_per_epoch", power_csv, line), _number(row, "average_power", power_csv, line)
        if not (t > 0 and p > 0 and math.isfinite(t) and math.isfinite(p)):
            raise ZeusProfileError(
                f"{power_csv}:{line}: time_per_epoch={t} and average_power={p} must be > 0."
            )
        epochs[(bs, pl)] = EpochProfile(t, p)
    if not epochs:
        key = (workload.dataset, workload.network, workload.optimizer)
        raise ZeusProfileError(f"load_workload_trace: {power_csv} has no rows for {key}.")
    return epochs


def _read_target_epochs(workload: Workload, train_csv: Path) -> dict[int, dict[str, int | None]]:
    """Batch size -> run -> the epoch that reached the workload's target (``None``: never)."""
    runs: dict[int, dict[str, int | None]] = {}
    for line, row in enumerate(_read_csv(train_csv, _TRAIN_COLUMNS), start=2):
        if not _matches(row, workload):
            continue
        if not math.isclose(_number(row, "target_metric", train_csv, line), workload.target_metric):
            continue
        bs = int(_number(row, "batch_size", train_csv, line))
        epoch = _number(row, "target_epoch", train_csv, line)
        runs.setdefault(bs, {})[row["run"]] = None if math.isnan(epoch) else int(epoch)
    return runs


def _capped_default_batch_size(workload: Workload, sizes: tuple[int, ...], power_sizes: set[int]) -> int:
    """The user's batch size, capped by the power trace, lowered to a batch size both traces have."""
    cap = min(workload.default_batch_size, max(power_sizes))
    below = [b for b in sizes if b <= cap]
    return below[-1] if below else sizes[0]


def load_workload_trace(
    workload: Workload, train_csv: str | Path, power_csv: str | Path, gpu: str | None = None
) -> WorkloadTrace:
    """Read one workload from a training trace and a power trace.

    The default batch size is capped at the largest batch size of the power trace for this workload
    (then, if it is not traced, lowered to the largest traced one below it).

    Args:
        workload: The job settings.
        train_csv: Path to ``summary_train.csv``.
        power_csv: Path to a ``summary_power_<gpu>.csv``-format file.
        gpu: GPU name for reports; defaults to the ``<gpu>`` part of the power file name.

    Returns:
        The workload's trace.

    Raises:
        ZeusProfileError: A file is missing or malformed, or holds no data for the workload.

    Example:
        >>> folder = default_trace_dir()
        >>> trace = load_workload_trace(
        ...     NSDI23_WORKLOADS[4], folder / "summary_train.csv", folder / "summary_power_v100.csv"
        ... )
        >>> trace.gpu, trace.batch_sizes[:3]
        ('v100', (8, 12, 16))
    """
    train_csv, power_csv = Path(train_csv), Path(power_csv)
    epochs = _read_epochs(workload, power_csv)
    runs = _read_target_epochs(workload, train_csv)
    power_sizes = {bs for bs, _ in epochs}
    sizes = tuple(sorted(power_sizes & set(runs)))
    if not sizes:
        raise ZeusProfileError(
            f"load_workload_trace: no batch size of {workload.name} (target {workload.target_metric}) "
            f"is in both {train_csv} and {power_csv}."
        )
    return WorkloadTrace(
        workload=replace(
            workload, default_batch_size=_capped_default_batch_size(workload, sizes, power_sizes)
        ),
        gpu=gpu or _gpu_name(power_csv),
        batch_sizes=sizes,
        power_limits=tuple(sorted({pl for bs, pl in epochs if bs in sizes})),
        target_epochs={bs: tuple(runs[bs].values()) for bs in sizes},
        epochs={k: v for k, v in epochs.items() if k[0] in sizes},
    )


def load_nsdi23_traces(
    gpu: str,
    trace_dir: str | Path | None = None,
    power_trace: str | Path | None = None,
    workloads: Sequence[Workload] = NSDI23_WORKLOADS,
) -> list[WorkloadTrace]:
    """Load the paper's workloads for one GPU.

    Args:
        gpu: GPU name; the power trace is ``<trace_dir>/summary_power_<gpu>.csv`` unless given.
        trace_dir: Folder with ``summary_train.csv``; defaults to :func:`default_trace_dir`.
        power_trace: A power trace file for another GPU, same format.
        workloads: Which workloads to load.

    Raises:
        ZeusProfileError: A trace file is missing or malformed.

    Example:
        >>> [t.workload.dataset for t in load_nsdi23_traces("a40")][:2]
        ['cifar100', 'imagenet']
    """
    folder = Path(trace_dir) if trace_dir is not None else default_trace_dir()
    power = Path(power_trace) if power_trace is not None else folder / f"summary_power_{gpu}.csv"
    return [load_workload_trace(w, folder / "summary_train.csv", power, gpu) for w in workloads]
