"""Samples and tokens of the training batches the adapters see, and joules per sample and per token.

Adapters pass each training batch (Lightning's ``batch``, a forward pass's arguments under Hugging
Face and Accelerate) to :func:`count_batch` / :func:`count_call`. A batch that holds ``input_ids``
is a language-model batch: its tokens are the ``attention_mask``'s ones (all ``input_ids`` without a
mask). Anything else counts samples only: the first dimension of its first tensor. Nothing here
imports torch; tensors are read through ``shape``, ``numel()`` and ``sum()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Sequence

__all__ = ["count_batch", "count_call", "WorkCounter", "efficiency_metrics"]


def _rows(x: Any) -> int | None:
    shape = getattr(x, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) > 0 else 1
    return None


def _numel(x: Any) -> int:
    numel = getattr(x, "numel", None)
    if callable(numel):
        return int(numel())
    total = 1
    for n in getattr(x, "shape", ()):
        total *= int(n)
    return total


def _first_tensor(items: Any, depth: int = 0) -> Any:
    """The first object with a ``shape`` in a (nested) batch, depth-first; ``None`` if there is none."""
    if getattr(items, "shape", None) is not None:
        return items
    if depth > 3:
        return None
    values = (
        items.values() if isinstance(items, Mapping) else items if isinstance(items, (list, tuple)) else ()
    )
    for value in values:
        found = _first_tensor(value, depth + 1)
        if found is not None:
            return found
    return None


def count_batch(batch: Any) -> tuple[int, int | None]:
    """Samples and tokens in a training batch, as a data loader yields it.

    Args:
        batch: A tensor, a tuple/list of tensors (``(x, y)``), or a mapping (a Hugging Face
            ``BatchEncoding`` or dict) whose ``input_ids`` mark a language-model batch.

    Returns:
        ``(samples, tokens)``; ``tokens`` is ``None`` for batches without ``input_ids``.

    Example:
        >>> import torch  # doctest: +SKIP
        >>> count_batch({"input_ids": torch.ones(2, 8), "attention_mask": torch.ones(2, 8)})  # doctest: +SKIP
        (2, 16)
    """
    if isinstance(batch, Mapping) and "input_ids" in batch:
        ids = batch["input_ids"]
        mask = batch.get("attention_mask")
        tokens = int(mask.sum()) if mask is not None and hasattr(mask, "sum") else _numel(ids)
        return _rows(ids) or 0, tokens
    first = _first_tensor(batch)
    if first is not None:
        return _rows(first) or 0, None
    if isinstance(batch, (list, tuple)):
        return len(batch), None
    return 0, None


def count_call(args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[int, int | None]:
    """Samples and tokens of a model call ``model(*args, **kwargs)`` (a forward pre-hook's view).

    ``model(**batch)`` (Hugging Face) counts ``kwargs``; ``model(x)`` or ``model(batch)`` counts
    the first positional argument.
    """
    if "input_ids" in kwargs or not args:
        return count_batch(kwargs)
    return count_batch(args[0] if len(args) == 1 else tuple(args))


@dataclass
class WorkCounter:
    """Samples and tokens counted since the last :meth:`take` (one epoch), and in the whole run.

    Attributes:
        samples: Samples of the running epoch.
        tokens: Tokens of the running epoch.
        saw_tokens: Whether any batch of the run was a language-model batch.
    """

    samples: int = 0
    tokens: int = 0
    saw_tokens: bool = False

    def add(self, samples: int, tokens: int | None) -> None:
        """Count one batch."""
        self.samples += max(0, int(samples))
        if tokens is not None:
            self.tokens += max(0, int(tokens))
            self.saw_tokens = True

    def take(self) -> tuple[int, int]:
        """The running epoch's samples and tokens; starts the next epoch at zero."""
        out = (self.samples, self.tokens)
        self.samples = self.tokens = 0
        return out


def efficiency_metrics(energy_j: float, samples: float, tokens: float | None, scope: str) -> dict[str, float]:
    """``energy/j_per_sample`` and ``energy/j_per_token`` (``energy/train_j_per_...`` for the run), J.

    Args:
        energy_j: Energy of the epoch or run, J.
        samples: Samples in it (job-wide).
        tokens: Tokens in it, or ``None`` when no language-model batch was seen.
        scope: ``"epoch"`` or ``"train"``.
    """
    prefix = "energy/" if scope == "epoch" else "energy/train_"
    out: dict[str, float] = {}
    if samples > 0:
        out[f"{prefix}j_per_sample"] = energy_j / samples
    if tokens:
        out[f"{prefix}j_per_token"] = energy_j / tokens
    return out
