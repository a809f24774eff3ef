"""Command-line number types: finite, within physical bounds, refused with the flag's own message.

``type=float`` in argparse takes ``nan``, ``inf`` and ``1e308``; one of them given to ``zeus-suite
plan --deadline`` ended in a scipy traceback, and ``zeus-suite power --duration nan`` never ended.
:func:`number` builds an argparse ``type`` that refuses them, so argparse prints
``argument --deadline: 'nan' is not a finite number of s`` and exits with code 2.

Example:
    >>> seconds = number(0.0, 86400.0, unit="s", low_open=True)
    >>> seconds("1.5")
    1.5
    >>> try:
    ...     seconds("nan")
    ... except Exception as err:
    ...     print(err)
    'nan' is not a finite number of s
"""

from __future__ import annotations

import argparse
import math
from typing import Callable

__all__ = ["number"]


def number(
    low: float,
    high: float,
    *,
    unit: str = "",
    integer: bool = False,
    low_open: bool = False,
) -> Callable[[str], float]:
    """An argparse ``type``: a finite number within ``[low, high]`` (``(low, high]`` with ``low_open``).

    Args:
        low: Smallest value.
        high: Largest value (what is physically meaningful for the flag).
        unit: Unit named in messages (``"s"``, ``"W"``).
        integer: Require a whole number (returned as ``int``).
        low_open: Refuse ``low`` itself (``> 0`` rather than ``>= 0``).

    Returns:
        The converter; it raises :class:`argparse.ArgumentTypeError` naming the value and the range.
    """
    of = f" of {unit}" if unit else ""
    units = f" {unit}" if unit else ""
    bracket = "(" if low_open else "["

    def _convert(text: str) -> float:
        try:
            value: float = int(text) if integer else float(text)
        except ValueError:
            kind = "an integer" if integer else "a number"
            raise argparse.ArgumentTypeError(f"{text!r} is not {kind}{of}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number{of}")
        if value < low or value > high or (low_open and value == low):
            raise argparse.ArgumentTypeError(
                f"{text!r} is out of range: give a value within {bracket}{low:g}, {high:g}]{units}"
            )
        return value

    _convert.__name__ = "integer" if integer else "number"  # argparse names the type in messages
    return _convert
