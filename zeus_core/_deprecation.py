"""Deprecation aliases: old import paths that warn and re-export from the new place.

Kept only for import paths a README example used; each alias module calls :func:`moved` once.

Example:
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     moved("zeus_core.old", "from zeus_core import New")
    >>> str(caught[0].message)
    'zeus_core.old is deprecated; use `from zeus_core import New` instead.'
"""

from __future__ import annotations

import warnings

__all__ = ["moved"]


def moved(old_module: str, new_import: str) -> None:
    """Warn (``DeprecationWarning``) that ``old_module`` is deprecated in favour of ``new_import``."""
    warnings.warn(
        f"{old_module} is deprecated; use `{new_import}` instead.", DeprecationWarning, stacklevel=3
    )
