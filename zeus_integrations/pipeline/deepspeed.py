"""Perseus hook for DeepSpeed's ``PipelineEngine`` (its 1F1B ``TrainSchedule``).

``PipelineEngine._exec_schedule`` looks every ``PipeInstruction`` up in ``self._INSTRUCTION_MAP``,
so an *instance* attribute with wrapped ``ForwardPass`` / ``BackwardPass`` entries sees every
instruction of that engine, after its ``RecvActivation`` / ``RecvGrad`` completed, without
subclassing. ``engine.train_batch`` (wrapped on the instance) is one iteration; ``eval_batch``
forwards run outside an iteration and are ignored. DeepSpeed passes a pipe *buffer* id, not a
microbatch id, so the listener counts microbatches per instruction type.

Example:
    >>> from zeus_integrations.pipeline import deepspeed as zeus_ds      # doctest: +SKIP
    >>> engine, *_ = deepspeed.initialize(model=pipeline_module, config=cfg)  # doctest: +SKIP
    >>> with PerseusRuntime(save_dir="perseus") as runtime, zeus_ds.attach(runtime, engine):
    ...     for _ in range(steps):                                      # doctest: +SKIP
    ...         engine.train_batch(data_iter)
"""

from __future__ import annotations

from typing import Any

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


def _counted(args: tuple, kwargs: dict) -> None:
    return None  # buffer_id is not a microbatch id: the listener counts


def attach(listener: InstructionListener, engine: Any) -> Attachment:
    """Feed a DeepSpeed pipeline engine's instructions and ``train_batch`` iterations to ``listener``.

    Call it on every rank after ``deepspeed.initialize`` and before the first ``train_batch``.

    Args:
        listener: Usually a :class:`~zeus_core.optimizer.pipeline_frequency.runtime.PerseusRuntime`.
        engine: The ``deepspeed.runtime.pipe.engine.PipelineEngine``.

    Returns:
        An :class:`~zeus_integrations.pipeline.Attachment`; ``detach()`` restores the engine.

    Raises:
        ModuleNotFoundError: DeepSpeed is not installed.
        ZeusConfigError: ``engine`` is not a ``PipelineEngine``.
        ZeusNotSupportedError: This DeepSpeed lacks the dispatch table the hook uses (the message
            names the supported versions).
    """
    pipe_engine = require("deepspeed.runtime.pipe.engine", "zeus_integrations.pipeline.deepspeed")
    pipe_schedule = require("deepspeed.runtime.pipe.schedule", "zeus_integrations.pipeline.deepspeed")
    if not isinstance(engine, pipe_engine.PipelineEngine):
        raise ZeusConfigError(
            f"deepspeed.attach: {type(engine).__name__} is not a PipelineEngine; pass the engine that "
            "deepspeed.initialize returns for a PipelineModule."
        )
    # DeepSpeed has no public per-instruction hook: the engine dispatches through the private
    # class attribute _INSTRUCTION_MAP (looked up through self), so check its shape first.
    seam = getattr(engine, "_INSTRUCTION_MAP", None)
    check_seam(
        "deepspeed",
        "PipelineEngine._INSTRUCTION_MAP with ForwardPass/BackwardPass",
        isinstance(seam, dict)
        and callable(seam.get(pipe_schedule.ForwardPass))
        and callable(seam.get(pipe_schedule.BackwardPass))
        and callable(getattr(engine, "train_batch", None)),
    )
    listener.set_pipeline(int(engine.stage_id), int(engine.num_stages), "1f1b", framework="deepspeed")
    table = dict(engine._INSTRUCTION_MAP)
    table[pipe_schedule.ForwardPass] = wrap_instruction(
        listener, InstructionKind.FORWARD, table[pipe_schedule.ForwardPass], _counted
    )
    table[pipe_schedule.BackwardPass] = wrap_instruction(
        listener, InstructionKind.BACKWARD, table[pipe_schedule.BackwardPass], _counted
    )
    undo = [
        patch_attribute(engine, "_INSTRUCTION_MAP", table),
        patch_attribute(engine, "train_batch", wrap_iteration(listener, engine.train_batch)),
    ]
    return Attachment(f"DeepSpeed PipelineEngine stage {engine.stage_id}", undo)
