"""Files the library reads and writes: errors that name the file and the field, and safe writes.

* :func:`file_error` builds the one error shape for a bad file: ``file X, field Y: problem; fix``.
* :func:`checked_number` refuses what Python would coerce silently (``True`` as 1, ``1.9`` as 1 MHz,
  NaN, infinities, absurd magnitudes) with such an error.
* :func:`read_text` reads a file of bounded size, so a huge or endless file (``/dev/zero``) fails
  with a message instead of exhausting memory.
* :func:`write_atomic` writes a file safely in a shared directory: a temporary file created with
  ``O_EXCL | O_NOFOLLOW`` beside it, flushed, then renamed over the target. A symlink planted at the
  target or at a guessed temporary name is never followed (the rename replaces the link itself),
  and a reader never sees half a file.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "plan.json"
    >>> write_atomic(path, '{"clock": 1410}')
    >>> read_text(path)
    '{"clock": 1410}'
    >>> try:
    ...     checked_number(1.9, path, "clock", integer=True, unit="MHz")
    ... except ValueError as e:
    ...     print(str(e).split(": ", 1)[1])
    field 'clock': 1.9 is not a whole number of MHz; write an integer.
"""

from __future__ import annotations

import math
import os
import secrets
from pathlib import Path
from typing import Any

from zeus_core.exceptions import ZeusConfigError, ZeusProfileError

__all__ = ["file_error", "checked_number", "read_text", "write_atomic", "DEFAULT_MAX_READ_BYTES"]

DEFAULT_MAX_READ_BYTES = 64 * 1024 * 1024
"""Largest file :func:`read_text` reads by default, bytes (64 MiB: far above any plan or profile)."""


def file_error(
    path: str | Path,
    field: str | None,
    problem: str,
    fix: str = "",
    *,
    error: type[ZeusConfigError] = ZeusProfileError,
) -> ZeusConfigError:
    """The error for a bad file: ``<path>: field '<field>': <problem>; <fix>`` (``field`` may be None).

    Args:
        path: The file (or a description such as ``"plan"`` for text not read from a file).
        field: The offending field, column or key (``None``: the file as a whole).
        problem: What is wrong, naming the bad value.
        fix: What to do about it.
        error: The class to build (a :class:`~zeus_core.exceptions.ZeusConfigError`).

    Returns:
        The error, to raise.

    Example:
        >>> print(file_error("p.json", "num_stages", "-1 is negative", "write a count >= 1"))
        p.json: field 'num_stages': -1 is negative; write a count >= 1.
    """
    where = f"{path}: field {field!r}: " if field else f"{path}: "
    text = problem.rstrip(".") + (f"; {fix.rstrip('.')}." if fix else ".")
    return error(where + text)


def checked_number(
    value: Any,
    path: str | Path,
    field: str,
    *,
    integer: bool = False,
    minimum: float | None = None,
    maximum: float | None = None,
    unit: str = "",
    error: type[ZeusConfigError] = ZeusProfileError,
) -> Any:
    """``value`` as a finite number within bounds, or a :func:`file_error` naming the field.

    Booleans and strings are not numbers. With ``integer``, a float is accepted only when it is a
    whole number (``1410.0``), and is returned as an ``int``: ``1.9`` is an error, not 1.

    Args:
        value: What the file holds.
        path: The file, for the message.
        field: The field, for the message.
        integer: Require a whole number (returned as ``int``).
        minimum: Smallest allowed value (inclusive), or ``None``.
        maximum: Largest allowed value (inclusive), or ``None``.
        unit: Unit for the message (``"MHz"``, ``"s"``, ...).
        error: The error class.

    Returns:
        The number (``int`` with ``integer``, else ``float``).

    Raises:
        ZeusConfigError: (``error``) not a number, not finite, not whole, or out of bounds.

    Example:
        >>> checked_number(1410.0, "plan.json", "clock", integer=True)
        1410
    """
    units = f" {unit}" if unit else ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        kind = "a number" if not integer else "an integer"
        raise file_error(path, field, f"{_show(value)} is not {kind}{units}", "write a number", error=error)
    if isinstance(value, float) and not math.isfinite(value):
        raise file_error(path, field, f"{value} is not a finite number", "write a finite number", error=error)
    if integer and isinstance(value, float):
        if not value.is_integer():
            raise file_error(
                path,
                field,
                f"{value!r} is not a whole number{' of ' + unit if unit else ''}",
                "write an integer",
                error=error,
            )
        value = int(value)
    for bound, ok, word in (
        (minimum, lambda b: value >= b, "at least"),
        (maximum, lambda b: value <= b, "at most"),
    ):
        if bound is not None and not ok(bound):
            raise file_error(
                path,
                field,
                f"{_show(value)}{units} is out of range",
                f"it must be {word} {bound:g}{units}",
                error=error,
            )
    return int(value) if integer else float(value)


def _show(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 80 else f"{shown[:80]}... ({len(shown)} characters)"


def read_text(path: str | Path, *, max_bytes: int = DEFAULT_MAX_READ_BYTES, what: str = "file") -> str:
    """The UTF-8 text of ``path``, refusing files above ``max_bytes``.

    Args:
        path: The file.
        max_bytes: Most bytes read; a larger file is refused before it is read whole.
        what: What the file is, for messages (``"plan"``, ``"profile"``).

    Returns:
        The text.

    Raises:
        ZeusProfileError: The file cannot be read, is too large, or is not UTF-8 (the message
            names the file).

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.txt"
        >>> _ = p.write_text("hello")
        >>> read_text(p)
        'hello'
    """
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise file_error(
            path, None, f"cannot read this {what}: {exc.strerror or exc}", "pass a readable file"
        ) from exc
    if len(data) > max_bytes:
        raise file_error(
            path,
            None,
            f"this {what} is larger than {max_bytes} bytes",
            f"a {what} is far smaller; check the path",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise file_error(
            path, None, f"this {what} is not UTF-8 text ({exc})", "pass the file Zeus Suite wrote"
        ) from exc


def write_atomic(path: str | Path, data: str | bytes, *, mode: int = 0o644, fsync: bool = True) -> None:
    """Write ``data`` to ``path`` safely in a shared directory (see the module docstring).

    Args:
        path: The target; its parent directory must exist.
        data: Text (written as UTF-8) or bytes.
        mode: Permissions of the new file (before the umask).
        fsync: Flush the file to disk before the rename (a crash leaves the old or the new file).

    Raises:
        OSError: The directory is not writable, or the disk is full (the target is unchanged).

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> (d / "out.json").symlink_to(d / "elsewhere")  # planted by someone else
        >>> write_atomic(d / "out.json", "{}")
        >>> (d / "out.json").is_symlink(), (d / "elsewhere").exists()
        (False, False)
    """
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, flags, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
