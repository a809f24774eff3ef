"""What the user must see, shown on rank zero without any logging set-up.

Decisions (a power limit chosen), per-epoch energy summaries and warnings such as "no GPU found"
go through :func:`info` and :func:`warn`. Like Lightning's ``rank_zero_info``, they reach the
console (stderr) by default, from global rank zero only, through the ``zeus_suite`` logger, which
carries its own handler so nothing needs configuring. Turn them off with
``zeus_core.console.set_enabled(False)`` or the environment variable ``ZEUS_SUITE_QUIET=1``; route
them elsewhere by configuring the ``zeus_suite`` logger like any other.
"""

from __future__ import annotations

import logging
import os
import sys

__all__ = ["LOGGER_NAME", "info", "warn", "info_once", "warn_once", "set_enabled", "enabled", "is_rank_zero"]

LOGGER_NAME = "zeus_suite"
"""The logger the messages go through: configure it like any other to route them elsewhere.

Example:
    >>> import logging
    >>> from zeus_core.console import LOGGER_NAME
    >>> logging.getLogger(LOGGER_NAME).name
    'zeus_suite'
"""
_QUIET_ENV = "ZEUS_SUITE_QUIET"

_enabled: bool | None = None  # None: follow the environment variable
_seen: set[str] = set()


def _logger() -> logging.Logger:
    logger = logging.getLogger(LOGGER_NAME)
    if not getattr(logger, "_zeus_console_ready", False):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[zeus-suite] %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False  # shown once, not again by a root handler the user adds
        logger._zeus_console_ready = True  # type: ignore[attr-defined]
    return logger


def set_enabled(value: bool) -> None:
    """Show (``True``) or hide (``False``) Zeus Suite's console messages in this process.

    Example:
        >>> from zeus_core import console
        >>> console.set_enabled(False)
        >>> console.enabled()
        False
    """
    global _enabled
    _enabled = bool(value)


def enabled() -> bool:
    """Whether console messages are shown (``set_enabled`` wins over ``ZEUS_SUITE_QUIET``).

    Example:
        >>> from zeus_core import console
        >>> console.set_enabled(True)
        >>> console.enabled()
        True
    """
    if _enabled is not None:
        return _enabled
    return os.environ.get(_QUIET_ENV, "").strip().lower() not in {"1", "true", "yes", "on"}


def is_rank_zero() -> bool:
    """Whether this process is global rank zero, also before a process group is initialised.

    Uses ``torch.distributed`` when it is up, else the launchers' ``RANK`` variable (torchrun,
    Accelerate, Lightning's ``ddp``), else ``LOCAL_RANK`` on node ``NODE_RANK`` / ``GROUP_RANK``.

    Example:
        >>> from zeus_core import console
        >>> console.is_rank_zero()  # a single process is rank zero
        True
    """
    from zeus_core import _distributed as distributed

    if distributed.is_initialized():
        return distributed.rank() == 0
    for name in ("RANK", "SLURM_PROCID"):
        value = os.environ.get(name)
        if value is not None and value.strip().isdigit():
            return int(value) == 0
    local = os.environ.get("LOCAL_RANK", "0")
    node = os.environ.get("NODE_RANK", os.environ.get("GROUP_RANK", "0"))
    return local.strip() in {"", "0"} and node.strip() in {"", "0"}


def info(message: str) -> None:
    """Show ``message`` on rank zero (unless turned off), on stderr as ``[zeus-suite] <message>``.

    Example:
        >>> from zeus_core import console
        >>> console.info("Power limit set to 250 W for the rest of training.")
    """
    if enabled() and is_rank_zero():
        _logger().info(message)


def warn(message: str) -> None:
    """Show ``message`` as a warning on rank zero (unless turned off).

    Example:
        >>> from zeus_core import console
        >>> console.warn("No GPU found: GPU energy is not measured.")
    """
    if enabled() and is_rank_zero():
        _logger().warning(message)


def info_once(key: str, message: str) -> None:
    """:func:`info`, at most once per process for each ``key``.

    Example:
        >>> from zeus_core import console
        >>> for epoch in range(3):
        ...     console.info_once("simulated", "Measuring a simulated GPU.")  # shown once
    """
    if key not in _seen:
        _seen.add(key)
        info(message)


def warn_once(key: str, message: str) -> None:
    """:func:`warn`, at most once per process for each ``key``.

    Example:
        >>> from zeus_core import console
        >>> console.warn_once("no-gpu", "No GPU found.")
        >>> console.warn_once("no-gpu", "No GPU found.")  # not shown again
    """
    if key not in _seen:
        _seen.add(key)
        warn(message)
