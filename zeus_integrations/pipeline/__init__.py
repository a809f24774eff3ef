"""Per-instruction hooks that feed pipeline-parallel training to Perseus.

Each hook attaches by registration, never by subclassing a schedule, and undoes itself:

* :func:`zeus_integrations.pipeline.torch_pipelining.attach` - ``torch.distributed.pipelining``
  (``Schedule1F1B``, ``ScheduleGPipe``): wraps the stage's ``forward_one_chunk`` /
  ``backward_one_chunk`` and the schedule's ``step``, on those instances only.
* :func:`zeus_integrations.pipeline.deepspeed.attach` - DeepSpeed ``PipelineEngine``: an
  instance-level ``_INSTRUCTION_MAP`` with wrapped ``ForwardPass`` / ``BackwardPass``, and the
  engine's ``train_batch``.
* :func:`zeus_integrations.pipeline.megatron.attach` - Megatron-core: the module-level
  ``forward_step`` / ``backward_step`` and the 1F1B or interleaved (virtual pipeline) schedule in
  ``megatron.core.pipeline_parallel.schedules``.

Every ``attach`` returns an :class:`Attachment` (also a context manager) whose :meth:`~Attachment.detach`
puts the originals back. The listener is usually a
:class:`~zeus_core.optimizer.pipeline_frequency.runtime.PerseusRuntime`; any
:class:`~zeus_core.optimizer.pipeline_frequency.runtime.InstructionListener` works.

Example:
    >>> from zeus_core.optimizer.pipeline_frequency.runtime import PerseusRuntime
    >>> from zeus_integrations.pipeline import torch_pipelining   # doctest: +SKIP
    >>> runtime = PerseusRuntime(save_dir="perseus")              # doctest: +SKIP
    >>> with runtime, torch_pipelining.attach(runtime, stage, schedule):  # doctest: +SKIP
    ...     for batch, target in loader:
    ...         schedule.step(batch, target=target)
    ...         optimizer.step(); optimizer.zero_grad()
"""

from __future__ import annotations

import functools
import importlib
import logging
from types import ModuleType
from typing import Any, Callable

from zeus_core import console
from zeus_core.exceptions import ZeusNotSupportedError
from zeus_core.optimizer.pipeline_frequency._schedule import InstructionKind
from zeus_core.optimizer.pipeline_frequency.runtime import InstructionListener

__all__ = [
    "Attachment",
    "InstructionListener",
    "SUPPORTED_VERSIONS",
    "check_seam",
    "require",
    "patch_attribute",
    "wrap_iteration",
    "wrap_instruction",
]

logger = logging.getLogger(__name__)

_MISSING = object()


def require(module: str, what: str) -> ModuleType:
    """Import ``module`` or raise ModuleNotFoundError naming the extra that installs it.

    Raises:
        ModuleNotFoundError: ``module`` is not installed.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            f"{what} needs {module.split('.')[0]}. Install it with: pip install 'zeus-suite[pipeline]'",
            name=exc.name,
        ) from exc


#: Framework -> (distribution name, supported version range as declared in the ``pipeline`` extra).
#: A test keeps this equal to pyproject.toml; CI runs the hooks at both ends (``.ci/versions``: the
#: low ends that install there as CPU builds).
SUPPORTED_VERSIONS: dict[str, tuple[str, str]] = {
    "torch": ("torch", ">=2.4,<2.14"),
    "deepspeed": ("deepspeed", ">=0.15,<0.20"),
    "megatron": ("megatron-core", ">=0.9,<0.17"),
}


def check_seam(framework: str, seam: str, present: bool) -> None:
    """Check, at attach time, a framework extension point the hook relies on.

    A missing seam fails with a message naming the supported versions; an installed version
    outside the supported range only warns (once), because the seam is still there.

    Args:
        framework: ``"torch"``, ``"deepspeed"`` or ``"megatron"``.
        seam: The extension point, in words (e.g. ``"PipelineEngine._INSTRUCTION_MAP"``).
        present: Whether the seam was found, with the expected shape.

    Raises:
        ZeusNotSupportedError: The seam is missing (another version of the framework).
    """
    from importlib import metadata

    from packaging.specifiers import SpecifierSet

    dist, spec = SUPPORTED_VERSIONS[framework]
    try:
        version = metadata.version(dist)
    except metadata.PackageNotFoundError:
        version = "unknown"
    if not present:
        raise ZeusNotSupportedError(
            f"zeus_integrations.pipeline ({framework}): {dist} {version} lacks {seam}, which the Perseus "
            f"hook needs. Supported: {dist}{spec}; install one with pip install '{dist}{spec}' (or "
            "'zeus-suite[pipeline]')."
        )
    if version != "unknown" and version not in SpecifierSet(spec, prereleases=True):
        console.warn_once(
            f"pipeline-version-{dist}",
            f"Perseus hook: {dist} {version} is outside the tested range {spec}; {seam} is present, so it "
            "attaches, but check the instruction sequence it reports (PerseusRuntime.iterations).",
        )


class Attachment:
    """An attached hook; :meth:`detach` (or leaving the ``with`` block) restores the originals.

    Args:
        description: What was attached, for logs.
        undo: Functions that restore one patched attribute each (run in reverse order).
    """

    def __init__(self, description: str, undo: list[Callable[[], None]]) -> None:
        self.description = description
        self._undo = list(undo)

    @property
    def attached(self) -> bool:
        """Whether the hook is still in place."""
        return bool(self._undo)

    def detach(self) -> None:
        """Put back every original method or function (idempotent)."""
        while self._undo:
            self._undo.pop()()
        logger.debug("Detached %s.", self.description)

    def __enter__(self) -> "Attachment":
        return self

    def __exit__(self, *exc: object) -> None:
        self.detach()

    def __repr__(self) -> str:
        return f"Attachment({self.description!r}, attached={self.attached})"


def patch_attribute(owner: Any, name: str, value: Any) -> Callable[[], None]:
    """Set ``owner.name = value`` (an instance or a module); returns the function that undoes it.

    The undo puts back what was there before (for an instance: removes the instance attribute so
    the class's method shows again). If someone replaced ``value`` in the meantime, their
    replacement is left alone and a warning says so.
    """
    is_module = isinstance(owner, ModuleType)
    before = getattr(owner, name) if is_module else vars(owner).get(name, _MISSING)
    setattr(owner, name, value)

    def undo() -> None:
        current = getattr(owner, name) if is_module else vars(owner).get(name, _MISSING)
        if current is not value:
            logger.warning(
                "%s.%s was replaced after Zeus attached; leaving it as is.", type(owner).__name__, name
            )
            return
        if before is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, before)

    return undo


def wrap_iteration(listener: InstructionListener, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` bracketed by ``begin_iteration`` / ``end_iteration`` (``failed=True`` when it raises)."""

    @functools.wraps(fn)
    def iteration(*args: Any, **kwargs: Any) -> Any:
        listener.begin_iteration()
        try:
            result = fn(*args, **kwargs)
        except BaseException:
            listener.end_iteration(failed=True)
            raise
        listener.end_iteration()
        return result

    return iteration


def wrap_instruction(
    listener: InstructionListener,
    kind: InstructionKind | Callable[[tuple, dict], InstructionKind],
    fn: Callable[..., Any],
    microbatch: Callable[[tuple, dict], int | None],
    virtual_stage: int | None = None,
) -> Callable[..., Any]:
    """``fn`` bracketed by ``begin_instruction`` / ``end_instruction`` of ``kind``.

    Args:
        listener: Receives the events.
        kind: The instruction kind, or a function of ``(args, kwargs)`` that tells it (e.g. a
            full or an input-only backward).
        fn: The framework's function or method.
        microbatch: Extracts the microbatch index from ``(args, kwargs)``; ``None`` lets the
            listener count.
        virtual_stage: The model chunk's virtual stage (interleaved schedules); ``None``: the stage.
    """
    kind_of = kind if callable(kind) and not isinstance(kind, InstructionKind) else (lambda a, k: kind)

    @functools.wraps(fn)
    def instruction(*args: Any, **kwargs: Any) -> Any:
        this, mb = kind_of(args, kwargs), microbatch(args, kwargs)
        listener.begin_instruction(this, mb, virtual_stage)
        try:
            result = fn(*args, **kwargs)
        except BaseException:
            listener.end_instruction(this, mb, failed=True)
            raise
        listener.end_instruction(this, mb)
        return result

    return instruction
