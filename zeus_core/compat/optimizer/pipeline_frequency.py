"""Zeus's ``zeus.optimizer.pipeline_frequency``: :class:`PipelineFrequencyOptimizer` on the suite's Perseus.

Zeus's optimizer is a client of Zeus's PFO server, which plans the GPU frequency of every
pipeline instruction. Here the same calls drive the suite's
:class:`~zeus_core.optimizer.pipeline_frequency.runtime.PerseusRuntime` of this rank's stage
(``pp_rank`` of ``pp_degree``): it profiles each instruction at each frequency, plans on rank 0
and applies the plan on every rank, with no server (``server_url`` and ``job_metadata`` are kept
but not contacted). How Perseus works: docs/optimizers/perseus.md.

Example:
    >>> from zeus_core.compat.optimizer.pipeline_frequency import PipelineFrequencyOptimizer
    >>> PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 1, 1, 1, "http://pfo:7787")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from zeus_core.callback import TrainingCallback
from zeus_core.optimizer.pipeline_frequency.runtime import PerseusRuntime

__all__ = ["PipelineFrequencyOptimizer"]


class PipelineFrequencyOptimizer(TrainingCallback):
    """Zeus's pipeline frequency optimizer: one per rank, told each step and instruction.

    Args:
        rank: Global rank of this process.
        dp_rank: Rank in the data-parallel group.
        pp_rank: Rank in the pipeline-parallel group (this rank's stage).
        tp_rank: Rank in the tensor-parallel group.
        device_id: The CUDA device this process drives.
        dp_degree: Size of the data-parallel group.
        pp_degree: Size of the pipeline-parallel group (the number of stages).
        tp_degree: Size of the tensor-parallel group.
        world_size: Ranks in training.
        server_url: Zeus's PFO server (not contacted: the suite plans on rank 0).
        job_metadata: A string describing the job (Zeus appends it to the job ID).
        **runtime_options: The suite's options (``planning=``, ``save_dir=``, ``sweep=``, ...; see
            :class:`~zeus_core.optimizer.pipeline_frequency.runtime.PerseusRuntime`).

    Raises:
        RuntimeError: ``torch.distributed`` is not initialised (as in Zeus).

    Example:
        >>> from zeus_core.compat.optimizer.pipeline_frequency import PipelineFrequencyOptimizer
        >>> pfo = PipelineFrequencyOptimizer(  # doctest: +SKIP
        ...     rank, dp_rank, pp_rank, tp_rank, local_rank, dp, pp, tp, world_size, "http://pfo:7787")
        >>> pfo.on_step_begin(); pfo.on_instruction_begin("forward")  # doctest: +SKIP
    """

    def __init__(
        self,
        rank: int,
        dp_rank: int,
        pp_rank: int,
        tp_rank: int,
        device_id: int,
        dp_degree: int,
        pp_degree: int,
        tp_degree: int,
        world_size: int,
        server_url: str,
        job_metadata: str | None = None,
        **runtime_options: Any,
    ) -> None:
        import torch
        import torch.distributed as dist

        if not dist.is_initialized():
            raise RuntimeError("Instantiate `PipelineFrequencyOptimizer` after `init_process_group`.")
        self.server_url = server_url
        self.job_metadata = job_metadata
        self.rank, self.dp_rank, self.pp_rank, self.tp_rank = rank, dp_rank, pp_rank, tp_rank
        self.device_id = device_id
        if torch.cuda.is_available():
            torch.cuda.set_device(device_id)
        self.runtime = PerseusRuntime(device_id, **runtime_options)
        self.runtime.set_pipeline(pp_rank, pp_degree, framework="torch")

    def on_step_begin(self) -> None:
        """A training step (one pipeline iteration) begins."""
        self.runtime.begin_iteration()

    def on_step_end(self) -> None:
        """The step ended: profiling advances, rank 0 plans when profiling is done."""
        self.runtime.end_iteration()

    def on_instruction_begin(self, name: str) -> None:
        """Instruction ``name`` (``"forward"`` or ``"backward"``) begins: its planned frequency is set."""
        self.runtime.begin_instruction(name)

    def on_instruction_end(self, name: str) -> None:
        """Instruction ``name`` ended."""
        self.runtime.end_instruction(name)

    def on_train_end(self) -> None:
        """Restore the GPU's clocks (Zeus leaves them; call it when training ends)."""
        self.runtime.close()
