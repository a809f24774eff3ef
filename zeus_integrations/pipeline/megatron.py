"""Perseus hook for Megatron-core's pipeline schedules: 1F1B and interleaved 1F1B (virtual pipeline).

The schedules in ``megatron.core.pipeline_parallel.schedules`` call the module-level functions
``forward_step`` (with ``current_microbatch=i``) and ``backward_step`` for every microbatch, looking
them up as module globals at call time, after the p2p receive. Replacing those two globals and the
schedule function (one call of which is one iteration) feeds every instruction to the listener;
:meth:`~zeus_integrations.pipeline.Attachment.detach` puts the originals back.
``get_forward_backward_func()`` returns the module global when called, so call it after attaching
(or call it per step, as Megatron's training loop does).

With ``virtual_pipeline_model_parallel_size`` set, the hook wraps
``forward_backward_pipelining_with_interleaving`` instead and reports the pipeline as
``"interleaved-1f1b"``: model chunk ``c`` of pipeline rank ``s`` is virtual stage ``c·S + s``.
``forward_step`` names its chunk (``vp_stage=``; older versions set
``parallel_state``'s virtual pipeline rank before the call). ``backward_step`` names neither chunk
nor microbatch, so the hook remembers which forward produced each output tensor and names the
backward that consumes it.

Not covered: forward-only (evaluation) calls, which are run but not planned, and the combined
1F1B path used with ``overlap_moe_expert_parallel_comm`` (its forwards and backwards do not go
through ``forward_step`` / ``backward_step``).

Example:
    >>> from zeus_integrations.pipeline import megatron as zeus_megatron   # doctest: +SKIP
    >>> with PerseusRuntime(save_dir="perseus") as runtime, zeus_megatron.attach(runtime):
    ...     forward_backward = get_forward_backward_func()               # doctest: +SKIP
    ...     forward_backward(forward_step_func=step, data_iterator=it, model=model,
    ...                      num_microbatches=8, seq_length=512, micro_batch_size=2)
"""

from __future__ import annotations

import functools
import inspect
from types import ModuleType
from typing import Any, Callable

from zeus_core import console
from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.pipeline_frequency._schedule import InstructionKind
from zeus_core.optimizer.pipeline_frequency.runtime import InstructionListener
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
_INTERLEAVED = "forward_backward_pipelining_with_interleaving"


def _current_microbatch(args: tuple, kwargs: dict) -> int | None:
    mb = kwargs.get("current_microbatch")
    return int(mb) if mb is not None else None


def _counted(args: tuple, kwargs: dict) -> None:
    return None  # backward_step carries no microbatch id: the listener counts


def _training_only(
    listener: InstructionListener, schedule: Callable[..., Any], tracker: "_ChunkTracker | None" = None
) -> Callable[..., Any]:
    as_iteration = wrap_iteration(listener, schedule)

    def run(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("forward_only", False):
            return schedule(*args, **kwargs)  # evaluation: not an iteration to plan
        if tracker is None:
            return as_iteration(*args, **kwargs)
        tracker.begin()
        try:
            return as_iteration(*args, **kwargs)
        finally:
            tracker.end()

    run.__wrapped__ = schedule  # type: ignore[attr-defined]
    run.__doc__ = schedule.__doc__
    return run


class _ChunkTracker:
    """Names the model chunk (virtual stage) and microbatch of every interleaved instruction.

    ``forward_step`` is told its chunk; ``backward_step`` only gets the forward's output tensor, so
    each training forward's output is remembered (by identity) until its backward consumes it.
    """

    def __init__(
        self, listener: InstructionListener, stage: int, num_stages: int, parallel_state: ModuleType
    ) -> None:
        self.listener, self.stage, self.num_stages = listener, stage, num_stages
        self.parallel_state = parallel_state
        self.training = False  # inside a training call of the schedule (not forward-only)
        self._outputs: dict[int, tuple[Any, int | None, int]] = {}  # id -> (output, microbatch, virtual)

    def _virtual_stage(self, chunk: Any) -> int:
        if chunk is None:  # older megatron-core: the schedule sets the global before each step
            chunk = self.parallel_state.get_virtual_pipeline_model_parallel_rank()
        return int(chunk or 0) * self.num_stages + self.stage

    def _run(
        self, kind: InstructionKind, mb: int | None, v: int, fn: Callable[..., Any], args: tuple, kwargs: dict
    ) -> Any:
        self.listener.begin_instruction(kind, mb, v)
        try:
            result = fn(*args, **kwargs)
        except BaseException:
            self.listener.end_instruction(kind, mb, failed=True)
            raise
        self.listener.end_instruction(kind, mb)
        return result

    def forward(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``forward_step`` reporting ``(current_microbatch, vp_stage)`` and remembering its output."""

        @functools.wraps(fn)
        def forward_step(*args: Any, **kwargs: Any) -> Any:
            mb, v = _current_microbatch(args, kwargs), self._virtual_stage(kwargs.get("vp_stage"))
            result = self._run(InstructionKind.FORWARD, mb, v, fn, args, kwargs)
            if self.training:
                output = result[0] if isinstance(result, tuple) else result
                self._outputs[id(output)] = (output, mb, v)
            return result

        return forward_step

    def backward(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``backward_step`` reported as the backward of the forward that produced its output tensor."""

        @functools.wraps(fn)
        def backward_step(*args: Any, **kwargs: Any) -> Any:
            output = kwargs["output_tensor"] if "output_tensor" in kwargs else args[1]
            _, mb, v = self._outputs.pop(id(output), (None, None, None))
            if v is None:
                console.warn_once(
                    "megatron-unseen-backward",
                    "Perseus megatron hook: a backward_step whose forward_step was not seen (the hook was "
                    "attached mid-iteration?); it is counted on the current virtual pipeline rank, and the "
                    "plan may not fit that iteration.",
                )
                v = self._virtual_stage(None)
            return self._run(InstructionKind.BACKWARD, mb, v, fn, args, kwargs)

        return backward_step

    def begin(self) -> None:
        """A training call of the schedule starts."""
        self.training = True

    def end(self) -> None:
        """The call ended: forget outputs whose backward never ran (an exception)."""
        self.training = False
        self._outputs.clear()


def _stage_and_size(
    parallel_state: ModuleType, stage: int | None, num_stages: int | None, num_chunks: int | None
) -> tuple[int, int, int]:
    if parallel_state.model_parallel_is_initialized():
        if stage is None:
            stage = parallel_state.get_pipeline_model_parallel_rank()
        if num_stages is None:
            num_stages = parallel_state.get_pipeline_model_parallel_world_size()
        if num_chunks is None:
            num_chunks = parallel_state.get_virtual_pipeline_model_parallel_world_size()
    if stage is None or num_stages is None:
        raise ZeusConfigError(
            "megatron.attach: model parallelism is not initialized; call "
            "parallel_state.initialize_model_parallel(...) first, or pass stage= and num_stages=."
        )
    return int(stage), int(num_stages), int(num_chunks or 1)


def attach(
    listener: InstructionListener,
    stage: int | None = None,
    num_stages: int | None = None,
    num_chunks: int | None = None,
) -> Attachment:
    """Feed Megatron-core's 1F1B or interleaved 1F1B schedule (this process's stage) to ``listener``.

    Call it on every rank after ``parallel_state.initialize_model_parallel`` and before the first
    training step.

    Args:
        listener: Usually a :class:`~zeus_core.optimizer.pipeline_frequency.runtime.PerseusRuntime`.
        stage: This rank's pipeline stage (default: ``parallel_state.get_pipeline_model_parallel_rank()``).
        num_stages: Pipeline stages (default: ``get_pipeline_model_parallel_world_size()``).
        num_chunks: Model chunks per stage, ``virtual_pipeline_model_parallel_size`` (default:
            ``get_virtual_pipeline_model_parallel_world_size()``; ``None`` or 1: not interleaved).

    Returns:
        An :class:`~zeus_integrations.pipeline.Attachment`; ``detach()`` restores the module.

    Raises:
        ModuleNotFoundError: megatron-core is not installed.
        ZeusNotSupportedError: This megatron-core lacks the schedule functions the hook wraps (the
            message names the supported versions).
        ZeusConfigError: Model parallelism is not initialized and no stage was given.
    """
    schedules = require("megatron.core.pipeline_parallel.schedules", "zeus_integrations.pipeline.megatron")
    parallel_state = require("megatron.core.parallel_state", "zeus_integrations.pipeline.megatron")
    stage, num_stages, num_chunks = _stage_and_size(parallel_state, stage, num_stages, num_chunks)
    # Megatron-core has no per-microbatch hook: its schedules call the module globals forward_step
    # (with current_microbatch=) and backward_step at call time, so check they are still there.
    forward_params = (
        inspect.signature(schedules.forward_step).parameters
        if callable(getattr(schedules, "forward_step", None))
        else {}
    )
    schedule = _INTERLEAVED if num_chunks > 1 else _SCHEDULE
    check_seam(
        "megatron",
        "schedules.forward_step(..., current_microbatch=...), schedules.backward_step and "
        f"schedules.{schedule}",
        "current_microbatch" in forward_params
        and callable(getattr(schedules, "backward_step", None))
        and callable(getattr(schedules, schedule, None)),
    )
    if num_chunks > 1:
        return _attach_interleaved(listener, schedules, parallel_state, stage, num_stages, num_chunks)
    listener.set_pipeline(stage, num_stages, "1f1b", framework="megatron")
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


def _attach_interleaved(
    listener: InstructionListener,
    schedules: ModuleType,
    parallel_state: ModuleType,
    stage: int,
    num_stages: int,
    num_chunks: int,
) -> Attachment:
    """Hook ``forward_backward_pipelining_with_interleaving`` (virtual stages ``c·S + stage``)."""
    # The chunk of a forward: its vp_stage= argument (megatron-core >= 0.13), else the global
    # virtual pipeline rank that older schedules set before each step.
    check_seam(
        "megatron",
        "schedules.forward_step(..., vp_stage=...) or "
        "parallel_state.get_virtual_pipeline_model_parallel_rank",
        "vp_stage" in inspect.signature(schedules.forward_step).parameters
        or callable(getattr(parallel_state, "get_virtual_pipeline_model_parallel_rank", None)),
    )
    listener.set_pipeline(stage, num_stages, "interleaved-1f1b", framework="megatron")
    tracker = _ChunkTracker(listener, stage, num_stages, parallel_state)
    run = _training_only(listener, getattr(schedules, _INTERLEAVED), tracker)
    undo = [
        patch_attribute(schedules, "forward_step", tracker.forward(schedules.forward_step)),
        patch_attribute(schedules, "backward_step", tracker.backward(schedules.backward_step)),
        patch_attribute(schedules, _INTERLEAVED, run),
    ]
    return Attachment(f"Megatron-core interleaved 1F1B stage {stage} ({num_chunks} chunks)", undo)
