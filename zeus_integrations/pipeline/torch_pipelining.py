"""Perseus hook for ``torch.distributed.pipelining`` (``Schedule1F1B`` and ``ScheduleGPipe``).

Single-stage schedules call ``stage.forward_one_chunk(i, ...)`` and ``stage.backward_one_chunk(i, ...)``
after the microbatch's receives completed, so wrapping those two methods *on the stage instance*
gives the exact instruction boundaries, with the microbatch index as first argument and
``stage.stage_index`` as the stage. ``schedule.step`` (wrapped on the schedule instance) is one
iteration. Nothing is subclassed; :meth:`~zeus_integrations.pipeline.Attachment.detach` removes
the wrappers.

Example:
    >>> from zeus_integrations.pipeline import torch_pipelining            # doctest: +SKIP
    >>> stage = PipelineStage(submodule, rank, world_size, torch.device("cuda", rank))  # doctest: +SKIP
    >>> schedule = Schedule1F1B(stage, n_microbatches=8, loss_fn=loss_fn)  # doctest: +SKIP
    >>> with PerseusRuntime(save_dir="perseus") as runtime, torch_pipelining.attach(runtime, stage, schedule):
    ...     train()                                                         # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from zeus_core.exceptions import ZeusConfigError, ZeusNotSupportedError
from zeus_core.optimizer.pipeline_frequency.runtime import InstructionListener
from zeus_core.optimizer.pipeline_frequency.schedule import InstructionKind
from zeus_integrations.pipeline import Attachment, patch_attribute, require, wrap_instruction, wrap_iteration

__all__ = ["SUPPORTED_SCHEDULES", "schedule_name", "attach"]

#: torch schedule class name -> Zeus schedule name.
SUPPORTED_SCHEDULES: dict[str, str] = {"Schedule1F1B": "1f1b", "ScheduleGPipe": "gpipe"}


def schedule_name(schedule: Any) -> str:
    """Zeus's name for a torch pipeline schedule instance (``"1f1b"`` / ``"gpipe"``).

    Raises:
        ZeusNotSupportedError: Not a ``Schedule1F1B`` or ``ScheduleGPipe`` (multi-stage and
            zero-bubble schedules split instructions in ways the planner does not model yet).
    """
    pipelining = require("torch.distributed.pipelining", "zeus_integrations.pipeline.torch_pipelining")
    for cls_name, name in SUPPORTED_SCHEDULES.items():
        if isinstance(schedule, getattr(pipelining, cls_name)):
            return name
    raise ZeusNotSupportedError(
        f"torch_pipelining.attach: schedule {type(schedule).__name__} is not supported; use one of "
        f"{sorted(SUPPORTED_SCHEDULES)} (one stage per rank, full backward)."
    )


def _first_arg(args: tuple, kwargs: dict) -> int:
    return int(args[0] if args else kwargs.get("fwd_chunk_id", kwargs.get("bwd_chunk_id", -1)))


def attach(listener: InstructionListener, stage: Any, schedule: Any) -> Attachment:
    """Feed a stage's instructions and the schedule's iterations to ``listener``.

    Call it on every rank, after building the schedule and before the first ``schedule.step``.

    Args:
        listener: Usually a :class:`~zeus_core.optimizer.pipeline_frequency.runtime.PerseusRuntime`.
        stage: This rank's ``PipelineStage``.
        schedule: The ``Schedule1F1B`` or ``ScheduleGPipe`` that runs ``stage``.

    Returns:
        An :class:`~zeus_integrations.pipeline.Attachment`; ``detach()`` restores both objects.

    Raises:
        ModuleNotFoundError: torch is not installed.
        ZeusNotSupportedError: Another schedule type.
        ZeusConfigError: ``stage`` is not a pipeline stage.
    """
    name = schedule_name(schedule)
    for method in ("forward_one_chunk", "backward_one_chunk"):
        if not callable(getattr(stage, method, None)):
            raise ZeusConfigError(
                f"torch_pipelining.attach: {type(stage).__name__} has no {method}(); pass the PipelineStage."
            )
    listener.set_pipeline(int(stage.stage_index), int(stage.num_stages), name, framework="torch")

    backward = stage.backward_one_chunk

    def full_backward_only(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("full_backward", True) is False or (len(args) > 2 and args[2] is False):
            raise ZeusNotSupportedError(
                "torch_pipelining: split input/weight backward (zero-bubble schedules) is not supported."
            )
        return backward(*args, **kwargs)

    undo = [
        patch_attribute(
            stage,
            "forward_one_chunk",
            wrap_instruction(listener, InstructionKind.FORWARD, stage.forward_one_chunk, _first_arg),
        ),
        patch_attribute(
            stage,
            "backward_one_chunk",
            wrap_instruction(listener, InstructionKind.BACKWARD, full_backward_only, _first_arg),
        ),
        patch_attribute(schedule, "step", wrap_iteration(listener, schedule.step)),
    ]
    return Attachment(
        f"torch.distributed.pipelining {type(schedule).__name__} stage {stage.stage_index}", undo
    )
