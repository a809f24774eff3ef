"""Perseus hook for Megatron-core's non-interleaved 1F1B pipeline schedule.

The schedules in ``megatron.core.pipeline_parallel.schedules`` call the module-level functions
``forward_step`` (with ``current_microbatch=i``) and ``backward_step`` for every microbatch, looking
them up as module globals at call time, after the p2p receive. Replacing those two globals (and
``forward_backward_pipelining_without_interleaving``, one call of which is one iteration) feeds
every instruction to the listener; :meth:`~zeus_integrations.pipeline.Attachment.detach` puts the
originals back. ``get_forward_backward_func()`` returns the module global when called, so call it
after attaching (or call it per step, as Megatron's training loop does).

Not covered: the interleaved (virtual pipeline) schedule, whose microbatches map to model chunks
the planner does not model yet, forward-only (evaluation) calls, and the combined 1F1B path used
with ``overlap_moe_expert_parallel_comm``.

Example:
    >>> from zeus_integrations.pipeline import megatron as zeus_megatron   # doctest: +SKIP
    >>> with PerseusRuntime(save_dir="perseus") as runtime, zeus_megatron.attach(runtime):
    ...     forward_backward = get_forward_backward_func()               # doctest: +SKIP
    ...     forward_backward(forward_step_func=step, data_iterator=it, model=model,
    ...                      num_microbatches=8, seq_length=512, micro_batch_size=2)
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from zeus_core.exceptions import ZeusConfigError, ZeusNotSupportedError
from zeus_core.optimizer.pipeline_frequency.runtime import InstructionListener
from zeus_core.optimizer.pipeline_frequency.schedule import InstructionKind
from zeus_integrations.pipeline import (
    Attachment,
    check_seam,
    patch_attribute,
    require,
    wrap_instruction,
    wrap_iteration,
)

__all__ = ["attach"]

_SCHEDULE = "forward_backward_pipelining_without_interleaving"


def _current_microbatch(args: tuple, kwargs: dict) -> int | None:
    mb = kwargs.get("current_microbatch")
    return int(mb) if mb is not None else None


def _counted(args: tuple, kwargs: dict) -> None:
    return None  # backward_step carries no microbatch id: the listener counts


def _training_only(listener: InstructionListener, schedule: Callable[..., Any]) -> Callable[..., Any]:
    as_iteration = wrap_iteration(listener, schedule)

    def run(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("forward_only", False):
            return schedule(*args, **kwargs)  # evaluation: not an iteration to plan
        return as_iteration(*args, **kwargs)

    run.__wrapped__ = schedule  # type: ignore[attr-defined]
    run.__doc__ = schedule.__doc__
    return run


def attach(
    listener: InstructionListener, stage: int | None = None, num_stages: int | None = None
) -> Attachment:
    """Feed Megatron-core's 1F1B schedule (this process's stage) to ``listener``.

    Call it on every rank after ``parallel_state.initialize_model_parallel`` and before the first
    training step.

    Args:
        listener: Usually a :class:`~zeus_core.optimizer.pipeline_frequency.runtime.PerseusRuntime`.
        stage: This rank's pipeline stage (default: ``parallel_state.get_pipeline_model_parallel_rank()``).
        num_stages: Pipeline stages (default: ``get_pipeline_model_parallel_world_size()``).

    Returns:
        An :class:`~zeus_integrations.pipeline.Attachment`; ``detach()`` restores the module.

    Raises:
        ModuleNotFoundError: megatron-core is not installed.
        ZeusNotSupportedError: A virtual pipeline (interleaved schedule) is configured, or this
            megatron-core lacks the schedule functions the hook wraps (the message names the
            supported versions).
        ZeusConfigError: Model parallelism is not initialized and no stage was given.
    """
    schedules = require("megatron.core.pipeline_parallel.schedules", "zeus_integrations.pipeline.megatron")
    parallel_state = require("megatron.core.parallel_state", "zeus_integrations.pipeline.megatron")
    if parallel_state.model_parallel_is_initialized():
        if parallel_state.get_virtual_pipeline_model_parallel_world_size() is not None:
            raise ZeusNotSupportedError(
                "megatron.attach: Megatron-core's interleaved (virtual pipeline) schedule calls "
                "backward_step without telling which model chunk it runs, so Perseus cannot plan it per "
                "instruction yet; run without virtual_pipeline_model_parallel_size, or use "
                "torch.distributed.pipelining's ScheduleInterleaved1F1B (supported)."
            )
        if stage is None:
            stage = parallel_state.get_pipeline_model_parallel_rank()
        if num_stages is None:
            num_stages = parallel_state.get_pipeline_model_parallel_world_size()
    if stage is None or num_stages is None:
        raise ZeusConfigError(
            "megatron.attach: model parallelism is not initialized; call "
            "parallel_state.initialize_model_parallel(...) first, or pass stage= and num_stages=."
        )
    # Megatron-core has no per-microbatch hook: its schedules call the module globals forward_step
    # (with current_microbatch=) and backward_step at call time, so check they are still there.
    forward_params = (
        inspect.signature(schedules.forward_step).parameters
        if callable(getattr(schedules, "forward_step", None))
        else {}
    )
    check_seam(
        "megatron",
        "schedules.forward_step(..., current_microbatch=...), schedules.backward_step and "
        f"schedules.{_SCHEDULE}",
        "current_microbatch" in forward_params
        and callable(getattr(schedules, "backward_step", None))
        and callable(getattr(schedules, _SCHEDULE, None)),
    )
    listener.set_pipeline(int(stage), int(num_stages), "1f1b", framework="megatron")
    undo = [
        patch_attribute(
            schedules,
            "forward_step",
            wrap_instruction(listener, InstructionKind.FORWARD, schedules.forward_step, _current_microbatch),
        ),
        patch_attribute(
            schedules,
            "backward_step",
            wrap_instruction(listener, InstructionKind.BACKWARD, schedules.backward_step, _counted),
        ),
        patch_attribute(schedules, _SCHEDULE, _training_only(listener, getattr(schedules, _SCHEDULE))),
    ]
    return Attachment(f"Megatron-core 1F1B stage {stage}", undo)
