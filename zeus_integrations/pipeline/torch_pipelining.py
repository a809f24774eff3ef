"""Perseus hook for ``torch.distributed.pipelining``: single-stage, interleaved and zero-bubble schedules.

Every schedule runs its computation through three methods of ``PipelineStage``, after the
microbatch's receives completed: ``forward_one_chunk(i, ...)``, ``backward_one_chunk(i, ...,
full_backward=...)`` (a full backward, or with ``full_backward=False`` the input-gradient half of a
zero-bubble backward) and ``backward_weight_one_chunk(i, ...)`` (the weight-gradient half). The
hook wraps those methods *on the stage instances* of this rank (one for ``Schedule1F1B`` /
``ScheduleGPipe``, several for ``ScheduleInterleaved1F1B``, ``ScheduleInterleavedZeroBubble`` and
``ScheduleZBVZeroBubble``), with the microbatch index as first argument and ``stage.stage_index``
as the virtual stage, and ``schedule.step`` as one iteration. These are public methods of public
classes; the hook checks them at attach time (``backward_weight_one_chunk``, torch >= 2.5, only for
the zero-bubble schedules; :func:`schedule_class` names the release that added a schedule).
Nothing is subclassed; :meth:`~zeus_integrations.pipeline.Attachment.detach` removes the wrappers.

Example:
    >>> from zeus_integrations.pipeline import torch_pipelining            # doctest: +SKIP
    >>> stages = [PipelineStage(chunk, rank + c * world, 2 * world, device)   # doctest: +SKIP
    ...           for c, chunk in enumerate(chunks)]
    >>> schedule = ScheduleInterleaved1F1B(stages, n_microbatches=8, loss_fn=loss_fn)  # doctest: +SKIP
    >>> runtime = PerseusRuntime(save_dir="perseus")                      # doctest: +SKIP
    >>> with runtime, torch_pipelining.attach(runtime, stages, schedule):  # doctest: +SKIP
    ...     train()
"""

from __future__ import annotations

from typing import Any, Sequence

from zeus_core.exceptions import ZeusConfigError, ZeusNotSupportedError
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

__all__ = ["SUPPORTED_SCHEDULES", "schedule_class", "schedule_name", "attach"]

#: torch schedule class name -> Zeus schedule name.
SUPPORTED_SCHEDULES: dict[str, str] = {
    "Schedule1F1B": "1f1b",
    "ScheduleGPipe": "gpipe",
    "ScheduleInterleaved1F1B": "interleaved-1f1b",
    "ScheduleInterleavedZeroBubble": "interleaved-zero-bubble",
    "ScheduleZBVZeroBubble": "zbv",
}
_METHODS = ("forward_one_chunk", "backward_one_chunk", "backward_weight_one_chunk")
#: Schedules newer than the oldest supported torch -> the torch release that added them. Before
#: 2.5, PipelineStage has no backward_weight_one_chunk, which only zero-bubble schedules call.
_ADDED_IN = {"ScheduleInterleavedZeroBubble": "2.5", "ScheduleZBVZeroBubble": "2.6"}


def schedule_class(name: str) -> type:
    """The torch schedule class for a Zeus schedule name (``"zbv"`` -> ``ScheduleZBVZeroBubble``).

    Raises:
        ZeusNotSupportedError: An unknown name, or a schedule this torch does not have yet.
    """
    pipelining = require("torch.distributed.pipelining", "zeus_integrations.pipeline.torch_pipelining")
    cls_name = next((c for c, n in SUPPORTED_SCHEDULES.items() if n == name), None)
    if cls_name is None:
        raise ZeusNotSupportedError(
            f"torch_pipelining: unknown schedule {name!r}; use one of {sorted(SUPPORTED_SCHEDULES.values())}."
        )
    cls = getattr(pipelining, cls_name, None)
    if cls is None:
        import torch

        added = _ADDED_IN.get(cls_name, "2.4")
        raise ZeusNotSupportedError(
            f"torch_pipelining: torch {torch.__version__} has no {cls_name} (added in torch {added}); "
            f"upgrade with pip install 'torch>={added}' or use another schedule."
        )
    return cls


def schedule_name(schedule: Any) -> str:
    """Zeus's name for a torch pipeline schedule instance (e.g. ``"1f1b"``, ``"zbv"``).

    Raises:
        ZeusNotSupportedError: Another schedule type (e.g. ``ScheduleLoopedBFS``, ``ScheduleDualPipeV``).
    """
    pipelining = require("torch.distributed.pipelining", "zeus_integrations.pipeline.torch_pipelining")
    for cls_name, name in SUPPORTED_SCHEDULES.items():
        cls = getattr(pipelining, cls_name, None)
        if cls is not None and type(schedule) is cls:
            return name
    raise ZeusNotSupportedError(
        f"torch_pipelining.attach: schedule {type(schedule).__name__} is not supported; use one of "
        f"{sorted(SUPPORTED_SCHEDULES)}."
    )


def _microbatch(args: tuple, kwargs: dict) -> int:
    return int(args[0] if args else kwargs.get("fwd_chunk_id", kwargs.get("bwd_chunk_id", -1)))


def _backward_kind(args: tuple, kwargs: dict) -> InstructionKind:
    full = kwargs.get("full_backward", args[2] if len(args) > 2 else True)
    return InstructionKind.BACKWARD if full else InstructionKind.BACKWARD_INPUT


def attach(listener: InstructionListener, stage: Any | Sequence[Any], schedule: Any) -> Attachment:
    """Feed this rank's stage(s) and the schedule's iterations to ``listener``.

    Call it on every rank, after building the schedule and before the first ``schedule.step``.

    Args:
        listener: Usually a :class:`~zeus_core.optimizer.pipeline_frequency.runtime.PerseusRuntime`.
        stage: This rank's ``PipelineStage``, or the list of them for a multi-stage schedule.
        schedule: The schedule that runs them (see :data:`SUPPORTED_SCHEDULES`).

    Returns:
        An :class:`~zeus_integrations.pipeline.Attachment`; ``detach()`` restores every object.

    Raises:
        ModuleNotFoundError: torch is not installed.
        ZeusNotSupportedError: Another schedule type, or a torch without the stage methods the
            hook wraps (the message names the supported versions).
        ZeusConfigError: ``stage`` is not a pipeline stage, or the stages of one rank disagree.
    """
    name = schedule_name(schedule)
    # Only zero-bubble schedules call backward_weight_one_chunk (torch >= 2.5 has it).
    methods = _METHODS if type(schedule).__name__ in _ADDED_IN else _METHODS[:2]
    stages: list[Any] = list(stage) if isinstance(stage, (list, tuple)) else [stage]
    for st in stages:
        if not hasattr(st, "stage_index") or not hasattr(st, "group_rank"):
            raise ZeusConfigError(f"torch_pipelining.attach: {type(st).__name__} is not a PipelineStage.")
        check_seam(
            "torch",
            f"PipelineStage.{', '.join(methods)}",
            all(callable(getattr(st, m, None)) for m in methods),
        )
    ranks = {(int(st.group_rank), int(st.group_size)) for st in stages}
    if len(ranks) != 1:
        raise ZeusConfigError(
            f"torch_pipelining.attach: the stages belong to different ranks {sorted(ranks)}."
        )
    rank, size = ranks.pop()
    listener.set_pipeline(rank, size, name, framework="torch")
    undo = []
    for st in stages:
        v = int(st.stage_index)
        undo += [
            patch_attribute(
                st,
                "forward_one_chunk",
                wrap_instruction(listener, InstructionKind.FORWARD, st.forward_one_chunk, _microbatch, v),
            ),
            patch_attribute(
                st,
                "backward_one_chunk",
                wrap_instruction(listener, _backward_kind, st.backward_one_chunk, _microbatch, v),
            ),
        ]
        if callable(getattr(st, "backward_weight_one_chunk", None)):
            undo.append(
                patch_attribute(
                    st,
                    "backward_weight_one_chunk",
                    wrap_instruction(
                        listener,
                        InstructionKind.BACKWARD_WEIGHT,
                        st.backward_weight_one_chunk,
                        _microbatch,
                        v,
                    ),
                )
            )
    undo.append(patch_attribute(schedule, "step", wrap_iteration(listener, schedule.step)))
    return Attachment(f"torch.distributed.pipelining {type(schedule).__name__} rank {rank}", undo)
