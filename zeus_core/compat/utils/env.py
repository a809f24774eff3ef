"""Zeus's ``zeus.utils.env``: :func:`get_env`, an environment variable read as a given type.

Example:
    >>> import os
    >>> from zeus_core.compat.utils.env import get_env
    >>> os.environ["ZEUS_DOCS_EPOCHS"] = "3"
    >>> get_env("ZEUS_DOCS_EPOCHS", int), get_env("ZEUS_DOCS_UNSET", float, default=0.5)
    (3, 0.5)
"""

from __future__ import annotations

import os
from typing import TypeVar

__all__ = ["get_env"]

T = TypeVar("T")


def get_env(name: str, valtype: type[T], default: T | None = None) -> T:
    """The environment variable ``name`` converted with ``valtype``; ``default`` when it is unset.

    Booleans must be written ``true`` or ``false`` (any case).

    Args:
        name: The variable.
        valtype: The type to convert to (``int``, ``float``, ``str``, ``bool``, ...).
        default: What an unset variable gives; ``None``: an unset variable is an error.

    Raises:
        ValueError: The variable is unset without a default, or its value does not convert.

    Example:
        >>> import os
        >>> from zeus_core.compat.utils.env import get_env
        >>> os.environ["ZEUS_DOCS_FLAG"] = "True"
        >>> get_env("ZEUS_DOCS_FLAG", bool)
        True
    """
    raw = os.environ.get(name)
    if raw is None:
        if default is not None:
            return default
        raise ValueError(f"Missing environment variable '{name}'; set it, or pass default=.")
    if valtype is bool:
        if raw.lower() not in ("true", "false"):
            raise ValueError(f"Environment variable {name}={raw!r}: write 'true' or 'false'.")
        return raw.lower() == "true"  # type: ignore[return-value]
    return valtype(raw)  # type: ignore[call-arg]
