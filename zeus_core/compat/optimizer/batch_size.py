"""Zeus's ``zeus.optimizer.batch_size`` (its ``client``, ``common``, ``exceptions`` in one) over the suite's.

:class:`BatchSizeOptimizer` takes Zeus's ``(monitor, server_url, job, rank)``: it registers the
job when made, hands out the batch size on rank 0 (``get_batch_size``), measures each epoch with
the monitor from ``on_train_begin`` and reports at ``on_evaluate(metric)``; ``training_finished``
says when to stop, and a trial that stops without converging raises
:class:`ZeusBSOTrainFailError`. Underneath is the suite's client (its retries, heartbeats and
the service's budget); the server is ``zeus-suite bso-server``. Data-parallel ranks that are
given the trial (``bso.current_batch_size``/``bso.trial_number``, as Zeus's example broadcasts
them) report too, as Zeus's do.

Example:
    >>> from zeus_core.compat.optimizer.batch_size import JobSpec
    >>> job = JobSpec(job_id=None, job_id_prefix="mnist", default_batch_size=256,
    ...               batch_sizes=[32, 64, 256, 512, 1024, 4096, 2048], max_epochs=100)
    >>> job.batch_sizes[:3], job.target_metric  # sorted, and Zeus's default target
    ([32, 64, 256], 0.5)
"""

from __future__ import annotations

import atexit
import builtins
from dataclasses import asdict, dataclass
from typing import Any

from zeus_core.compat.callback import Callback
from zeus_core.exceptions import ZeusConfigError, ZeusError
from zeus_core.optimizer.batch_size import BatchSizeOptimizer as _Client
from zeus_core.optimizer.batch_size._zeus_spec import zeus_job_id, zeus_job_spec

__all__ = [
    "BatchSizeOptimizer",
    "JobSpec",
    "ZeusBSOTrainFailError",
    "ZeusBSOBadOperationError",
    "ZeusBSOOperationOrderError",
    "ZeusBSOConfigError",
    "ZeusBSORuntimError",
]

_WINDOW = "BatciSizeOptimizerClient"  # Zeus's window name (spelling included)


class ZeusBSOTrainFailError(ZeusError, RuntimeError):
    """The trial stopped without reaching the target (early stop or ``max_epochs``); relaunch to try another.

    Example:
        >>> from zeus_core.compat.optimizer.batch_size import ZeusBSOTrainFailError
        >>> issubclass(ZeusBSOTrainFailError, RuntimeError)
        True
    """


class ZeusBSOBadOperationError(ZeusError, RuntimeError):
    """An operation this rank may not do (only rank 0 asks for the batch size).

    Example:
        >>> from zeus_core.compat.optimizer.batch_size import ZeusBSOBadOperationError
        >>> str(ZeusBSOBadOperationError("rank 1"))
        'rank 1'
    """


class ZeusBSOOperationOrderError(ZeusError, RuntimeError):
    """Methods called out of order (``on_evaluate`` before ``get_batch_size``).

    Example:
        >>> from zeus_core.compat.optimizer.batch_size import ZeusBSOOperationOrderError
        >>> issubclass(ZeusBSOOperationOrderError, ZeusError)
        True
    """


class ZeusBSOConfigError(ZeusConfigError):
    """The job or the GPUs cannot be used (e.g. no GPU to measure).

    Example:
        >>> from zeus_core.compat.optimizer.batch_size import ZeusBSOConfigError
        >>> issubclass(ZeusBSOConfigError, ValueError)
        True
    """


ZeusBSORuntimError = ZeusError
"""The server refused or failed a request (Zeus's spelling; the suite's errors name the cause)."""


@dataclass
class JobSpec:
    """Zeus's job specification, with Zeus's defaults (validated when made).

    Attributes:
        job_id: The job's id across recurrences; ``None``: ``<job_id_prefix>-<8 hex>``.
        job_id_prefix: Prefix of the job id.
        batch_sizes: Batch sizes to choose from (sorted when made).
        default_batch_size: The batch size the job used so far (one of ``batch_sizes``).
        eta_knob: Weight of energy in the Zeus cost, in ``[0, 1]``.
        beta_knob: Early-stop threshold factor on the best cost, or ``None``.
        target_metric: Validation metric a trial must reach.
        higher_is_better_metric: Whether a higher metric is better.
        max_epochs: Epochs one trial may run.
        num_pruning_rounds: Rounds of pruning exploration.
        window_size: Recent trials per batch size the sampler uses (0: all).
        mab_prior_mean: Prior mean of each batch size's cost (with ``mab_prior_precision`` > 0).
        mab_prior_precision: Prior precision (0: no prior).
        mab_num_explorations: Accepted; the suite's sampler needs no forced explorations.
        mab_seed: Seed of the sampler.

    Raises:
        ValueError: An invalid value (a ``ZeusConfigError`` naming the Zeus field).

    Example:
        >>> from zeus_core.compat.optimizer.batch_size import JobSpec
        >>> JobSpec(job_id="mnist-1", job_id_prefix="mnist", batch_sizes=[64, 32], default_batch_size=32)
        ... # doctest: +ELLIPSIS
        JobSpec(job_id='mnist-1', job_id_prefix='mnist', batch_sizes=[32, 64], default_batch_size=32, ...)
    """

    job_id: str | None
    job_id_prefix: str
    batch_sizes: list[int]
    default_batch_size: int
    eta_knob: float = 0.5
    beta_knob: float | None = 2.0
    target_metric: float = 0.50
    higher_is_better_metric: bool = True
    max_epochs: int = 100
    num_pruning_rounds: int = 2
    window_size: int = 0
    mab_prior_mean: float = 0.0
    mab_prior_precision: float = 0.0
    mab_num_explorations: int = 2
    mab_seed: int | None = None

    def __post_init__(self) -> None:
        self.batch_sizes = sorted(self.batch_sizes)
        zeus_job_id(self.job_id, self.job_id_prefix)
        self.suite_spec(self.job_id or self.job_id_prefix, max_power_w=1.0, number_of_gpus=1)

    def dict(self) -> builtins.dict[str, Any]:
        """The fields as a dict (pydantic's ``.dict()``, which Zeus's model had)."""
        return asdict(self)

    def suite_spec(self, job_id: str, max_power_w: float, number_of_gpus: int) -> Any:
        """The suite's :class:`~zeus_core.optimizer.batch_size.JobSpec` for this job on these GPUs."""
        fields = self.dict()
        fields.pop("job_id")
        return zeus_job_spec(job_id, **fields, max_power=max_power_w, number_of_gpus=number_of_gpus)


class BatchSizeOptimizer(Callback):
    """Zeus's batch-size optimizer client: register, get the batch size, report at each evaluation.

    Args:
        monitor: A ``ZeusMonitor`` over all and only the GPUs that train (its GPU energy is reported).
        server_url: The service, e.g. ``"http://127.0.0.1:8000"`` (``zeus-suite bso-server``).
        job: The :class:`JobSpec`.
        rank: This process's rank; only rank 0 may call :meth:`get_batch_size`.

    Attributes:
        job: The registered job (the suite's spec, with its ``job_id``).
        current_batch_size: The trial's batch size (0 before :meth:`get_batch_size`).
        trial_number: The trial's number (0 before).
        training_finished: Whether the server said to stop.
        cur_epoch: Epochs reported in this trial.
        running_time: Measured time of the trial so far, s.
        consumed_energy: Measured GPU energy of the trial so far, J.

    Raises:
        ZeusBSOConfigError: The monitor measures no GPU.

    Example:
        >>> from zeus_core.compat.optimizer.batch_size import BatchSizeOptimizer, JobSpec
        >>> bso = BatchSizeOptimizer(monitor, "http://127.0.0.1:8000", JobSpec(  # doctest: +SKIP
        ...     job_id=None, job_id_prefix="mnist", batch_sizes=[32, 64], default_batch_size=64))
        >>> batch_size = bso.get_batch_size()  # doctest: +SKIP
        >>> bso.on_train_begin()  # then, after each epoch: bso.on_evaluate(accuracy)  # doctest: +SKIP
    """

    def __init__(self, monitor: Any, server_url: str, job: JobSpec, rank: int = 0) -> None:
        if not monitor.gpus:
            raise ZeusBSOConfigError("BatchSizeOptimizer: the monitor measures no GPU. No GPUs detected.")
        max_w = monitor.gpus[0].power_limit_constraints().max_w
        count = len(monitor.gpu_indices)
        job_id = zeus_job_id(job.job_id, job.job_id_prefix)
        self.monitor = monitor
        self.server_url = server_url
        self.rank = rank
        self.job = job.suite_spec(job_id, max_power_w=float(int(max_w) * count), number_of_gpus=count)
        self._client = _Client(server_url, self.job, distributed=False)
        self._client.register()
        self.current_batch_size = 0
        self.trial_number = 0
        self.cur_epoch = 0
        self.running_time = 0.0
        self.consumed_energy = 0.0
        self.training_finished = False
        self._exit_hook = False

    def get_batch_size(self) -> int:
        """The batch size of this run's trial, from the server (rank 0 only; the same on later calls).

        Raises:
            ZeusBSOBadOperationError: Called on a rank other than 0.
        """
        if self.rank != 0:
            raise ZeusBSOBadOperationError("Only rank 0 gpu can ask for a batch size.")
        if self.current_batch_size != 0:
            return self.current_batch_size
        self.cur_epoch = 0
        self.current_batch_size = self._client.get_batch_size()
        self.trial_number = self._client.trial_number or 0
        if not self._exit_hook:  # a run that ends before the server said stop gives the trial up
            atexit.register(self._end_trial)
            self._exit_hook = True
        return self.current_batch_size

    def on_train_begin(self) -> None:
        """Begin measuring the trial (a window of the monitor)."""
        self.training_finished = False
        self.monitor.begin_window(_WINDOW)

    def on_evaluate(self, metric: float) -> None:
        """Report this epoch (time and GPU energy so far, the metric); the answer sets ``training_finished``.

        Raises:
            ZeusBSOOperationOrderError: :meth:`get_batch_size` was not called (nor the trial given).
            ZeusBSOTrainFailError: The server stopped the trial before it converged.
        """
        if self.current_batch_size == 0:
            raise ZeusBSOOperationOrderError("Call get_batch_size to set the batch size first")
        if self.training_finished:
            return
        self.cur_epoch += 1
        m = self.monitor.end_window(_WINDOW)
        self.running_time += m.time
        self.consumed_energy += sum(m.gpu_energy.values())  # Zeus's total_energy: GPUs only
        if (
            self._client.trial_number != self.trial_number
            or self._client.batch_size != self.current_batch_size
        ):
            self._client.join_trial(self.trial_number, self.current_batch_size)  # a rank given the trial
        stop = self._client.on_epoch_end(self.cur_epoch, self.running_time, self.consumed_energy, metric)
        if not stop:
            self.monitor.begin_window(_WINDOW)
            return
        self.training_finished = True
        decision = self._client.last_decision or {}
        if decision.get("status") != "converged":
            raise ZeusBSOTrainFailError(
                f"Train failed: {decision.get('reason', self._client.stop_reason)} (cost "
                f"{decision.get('cost', 0.0):.1f} J). This batch size will not be selected again. "
                "Please re-launch the training"
            )

    def _end_trial(self) -> None:
        try:
            self._client.abandon()
        except ZeusError:
            pass
        self._client.close()
