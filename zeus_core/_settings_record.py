"""The per-GPU record of original settings and their owners, shared by every process of one user.

A :class:`~zeus_core.settings.SettingsGuard` that is about to change a setting of a real GPU
*claims* it here: under a lock file keyed by the GPU's UUID, in a run directory only this user can
write (see :func:`run_dir`), it finds the record ``gpu-<uuid>.json`` and

- if no live process holds the setting, reads the current value, writes it down as the
  *original* with this process as its holder, and logs it (so a human can put it back after a
  ``kill -9``; the record file says so too);
- if the record names holders that all died without restoring (a SIGKILL, the OOM killer), takes
  the recorded original as the true one, warns, and becomes the holder;
- if another live process holds it, refuses (:class:`GPUBusyError`) unless sharing was asked for
  (``share=True`` or ``ZEUS_SUITE_SHARE_GPUS=1``); a sharer takes the recorded original.

On *release* (the guard's restore), the original is written back only if no other live process
still holds the setting: the last one out restores, as the daemon's leases do
(docs/daemon.md, "Leases"). The same process may claim a setting several times (nested guards,
two optimizers): each guard then restores the value it found, in reverse order.

docs/gpu-settings.md ("One GPU, several processes") is the user's description.

Example:
    >>> record_path(Path("/run/zeus-suite"), "GPU-5f0b/../x")
    PosixPath('/run/zeus-suite/gpu-GPU-5f0b_.._x.json')
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import stat
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from zeus_core import console
from zeus_core._files import write_atomic
from zeus_core.exceptions import ZeusPermissionError

__all__ = [
    "RUN_DIR_ENV",
    "SHARE_ENV",
    "GPUBusyError",
    "run_dir",
    "share_from_env",
    "record_path",
    "claim",
    "release",
    "process_alive",
]

logger = logging.getLogger(__name__)

RUN_DIR_ENV = "ZEUS_SUITE_RUN_DIR"
"""Environment variable naming the run directory (default: ``$XDG_RUNTIME_DIR/zeus-suite``, ...)."""

SHARE_ENV = "ZEUS_SUITE_SHARE_GPUS"
"""Environment variable: ``1`` lets this process change settings another live process holds."""

_LOCK_WAIT_S = 10.0
_MAX_RECORD_BYTES = 1 << 20
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")


class GPUBusyError(ZeusPermissionError):
    """Another live process holds a setting of this GPU, and sharing was not asked for.

    Example:
        >>> from zeus_core.settings import GPUBusyError
        >>> issubclass(GPUBusyError, PermissionError)
        True
    """


def share_from_env() -> bool:
    """Whether ``ZEUS_SUITE_SHARE_GPUS`` asks to share GPUs (``1``, ``true``, ``yes``)."""
    return os.environ.get(SHARE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _default_run_dir() -> Path:
    if os.environ.get(RUN_DIR_ENV):
        return Path(os.environ[RUN_DIR_ENV])
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "zeus-suite"
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/run/zeus-suite")
    uid = os.geteuid() if hasattr(os, "geteuid") else 0
    return Path(os.environ.get("TMPDIR", "/tmp")) / f"zeus-suite-{uid}"


def run_dir() -> Path | None:
    """The run directory, created with mode 0700; ``None`` (and a warning) when it is not safe.

    Refused: a symlink, something else than a directory, a directory owned by another user, or one
    that others can write (group or world writable): anyone who can write there could fake a record.
    """
    path = _default_run_dir()
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(path)
    except OSError as exc:
        return _unsafe(path, f"cannot be created ({exc.strerror or exc})")
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        return _unsafe(path, "is not a directory (a symlink or a file)")
    if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        return _unsafe(path, f"is owned by uid {info.st_uid}, not by this user (uid {os.geteuid()})")
    if info.st_mode & 0o022:
        return _unsafe(path, f"is writable by others (mode {stat.S_IMODE(info.st_mode):o})")
    return path


def _unsafe(path: Path, why: str) -> Path | None:
    console.warn_once(
        f"settings-run-dir-{path}",
        f"The run directory {path} {why}: GPU settings are not recorded there, so other processes "
        f"cannot see which original settings this one holds. Point {RUN_DIR_ENV} at a directory only "
        "you can write (mode 0700), or fix this one.",
    )
    return None


def record_path(directory: Path, uuid: str) -> Path:
    """The record file of the GPU ``uuid`` in ``directory``."""
    return directory / f"gpu-{_SAFE_NAME.sub('_', uuid)[:120]}.json"


# -- processes ------------------------------------------------------------------------------------
def _starttime(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2 :].split()
    return None if fields[0] in (b"Z", b"X") else int(fields[19])


def process_alive(pid: int, starttime: int | None) -> bool:
    """Whether process ``pid`` runs and is the one that started at ``starttime`` (Linux: /proc)."""
    if os.path.isdir("/proc/self"):
        now = _starttime(pid)
        return now is not None and (starttime is None or now == starttime)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            text = f.read(400).replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        text = ""
    return text[:120] or f"pid {pid}"


def _me() -> dict[str, Any]:
    pid = os.getpid()
    return {"pid": pid, "starttime": _starttime(pid), "command": _command(pid)}


def _is_me(holder: dict[str, Any]) -> bool:
    return holder.get("pid") == os.getpid() and holder.get("starttime") == _starttime(os.getpid())


def _who(holder: dict[str, Any]) -> str:
    since = time.strftime("%H:%M:%S", time.localtime(float(holder.get("since", 0))))
    return f"pid {holder.get('pid')} ({holder.get('command', '?')}) since {since}"


# -- the record file --------------------------------------------------------------------------------
@contextmanager
def _locked(path: Path) -> Iterator[bool]:
    """Hold the GPU's lock file; yields whether it could be taken within a few seconds."""
    import fcntl

    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path.with_suffix(".lock"), flags, 0o600)
    except OSError as exc:
        logger.warning("Cannot open the lock file of %s: %s", path, exc)
        yield False
        return
    try:
        deadline = time.monotonic() + _LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() > deadline:
                    logger.warning("Could not lock %s (%s); going on without the record.", path, exc)
                    yield False
                    return
                time.sleep(0.01)
        yield True
    finally:
        os.close(fd)


def _load(path: Path) -> dict[str, Any]:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        console.warn(f"The GPU settings record {path} cannot be read ({exc.strerror or exc}); replacing it.")
        return {}
    with os.fdopen(fd, "rb") as f:
        data = f.read(_MAX_RECORD_BYTES + 1)
    try:
        record = json.loads(data) if len(data) <= _MAX_RECORD_BYTES else None
    except ValueError:
        record = None
    if not isinstance(record, dict) or not isinstance(record.get("settings"), dict):
        console.warn(f"The GPU settings record {path} is not one Zeus Suite wrote; replacing it.")
        return {}
    return record


def _save(path: Path, record: dict[str, Any]) -> None:
    settings = {k: v for k, v in record.get("settings", {}).items() if v.get("holders")}
    if not settings:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        return
    record["settings"] = settings
    write_atomic(path, json.dumps(record, indent=1) + "\n", mode=0o600, fsync=False)


def _live_holders(entry: dict[str, Any]) -> list[dict[str, Any]]:
    holders = [h for h in entry.get("holders", []) if isinstance(h, dict) and isinstance(h.get("pid"), int)]
    return [h for h in holders if process_alive(h["pid"], h.get("starttime"))]


# -- claim and release --------------------------------------------------------------------------
def claim(
    uuid: str,
    describe: str,
    setting: str,
    read: Callable[[], Any],
    *,
    share: bool,
    show: Callable[[Any], str],
    restore_hint: Callable[[Any], str],
) -> Any:
    """Claim ``setting`` of the GPU ``uuid`` for this process; returns the value to restore.

    Args:
        uuid: The GPU's UUID (the record's key).
        describe: The GPU for messages (``"GPU 0 (NVIDIA A40)"``).
        setting: The setting's name (``"power_limit"``).
        read: Reads the current value (called under the lock, so no other process changes the
            record meanwhile); its result must be JSON-safe.
        share: Join a setting another live process holds instead of refusing.
        show: A value for messages (``"280 W"``).
        restore_hint: The command that puts a value back by hand (``nvidia-smi -i 0 -pl 280``).

    Returns:
        The value to write back at release: what this process found (first holder, or a nested
        claim of the same process), or the recorded original (a sharer; a holder that died).

    Raises:
        GPUBusyError: Another live process holds the setting and ``share`` is false.
    """
    directory = run_dir()
    if directory is None:
        return read()
    path = record_path(directory, uuid)
    with _locked(path) as locked:
        if not locked:
            return read()
        record = _load(path)
        entry = record.get("settings", {}).get(setting)
        current = read()
        if not isinstance(entry, dict) or "original" not in entry:
            entry = {"original": current, "since": time.time(), "holders": []}
        live = _live_holders(entry)
        mine = next((h for h in live if _is_me(h)), None)
        others = [h for h in live if h is not mine]
        original = entry["original"]
        if others and not share:
            holders = "; ".join(_who(h) for h in others)
            raise GPUBusyError(
                f"{describe}: its {setting.replace('_', ' ')} is held by {holders} "
                f"at {show(current)}; it returns to {show(original)} when that process ends. Wait for it, "
                f"use another GPU, or share the GPU on purpose (SettingsGuard(share=True) or {SHARE_ENV}=1: "
                "the last process to end restores the original)."
            )
        if mine is not None:
            value = current  # nested in this process: each guard restores what it found
            mine["count"] = int(mine.get("count", 1)) + 1
        else:
            value = current if not others and not entry["holders"] else original
            _announce(describe, setting, entry, others, current, show, restore_hint, path)
            live.append({**_me(), "since": time.time(), "count": 1})
        entry["holders"] = live
        entry["restore_with"] = restore_hint(original)
        record.update(version=1, gpu_uuid=uuid, gpu=describe)
        record.setdefault("settings", {})[setting] = entry
        record["note"] = (
            "Original GPU settings before Zeus Suite changed them; if every holder ended without "
            "restoring (kill -9), run each restore_with command, then delete this file."
        )
        _save(path, record)
        return value


def _announce(
    describe: str,
    setting: str,
    entry: dict[str, Any],
    others: list[dict[str, Any]],
    current: Any,
    show: Callable[[Any], str],
    restore_hint: Callable[[Any], str],
    path: Path,
) -> None:
    name = setting.replace("_", " ")
    original = entry["original"]
    if others:
        console.warn(
            f"{describe}: sharing its {name} with {'; '.join(_who(h) for h in others)} (asked for): "
            f"the original {show(original)} comes back when the last of you ends (now {show(current)})."
        )
    elif entry["holders"]:  # every holder died without restoring
        dead = "; ".join(_who(h) for h in entry["holders"])
        console.warn(
            f"{describe}: {dead} ended without restoring its {name}; the original was {show(original)} "
            f"(now {show(current)}). It will be put back when this process ends."
        )
    else:
        console.info(
            f"{describe}: {name} before Zeus Suite changes it: {show(original)}. It is put back when "
            f"this process ends; after a kill -9, put it back with `{restore_hint(original)}` "
            f"(recorded in {path})."
        )


def release(uuid: str, setting: str, write_back: Callable[[], None]) -> str | None:
    """Give up this process's claim on ``setting``; calls ``write_back`` unless another process holds it.

    Args:
        uuid: The GPU's UUID.
        setting: The setting's name.
        write_back: Writes this guard's recorded value back (run under the lock).

    Returns:
        ``None`` when ``write_back`` ran; else who still holds the setting (nothing was written).

    Raises:
        Exception: Whatever ``write_back`` raised (the claim is released all the same).
    """
    directory = run_dir()
    if directory is None:
        write_back()
        return None
    path = record_path(directory, uuid)
    with _locked(path) as locked:
        if not locked:
            write_back()
            return None
        record = _load(path)
        entry = record.get("settings", {}).get(setting)
        if not isinstance(entry, dict):
            write_back()
            return None
        live = _live_holders(entry)
        mine = next((h for h in live if _is_me(h)), None)
        others = [h for h in live if h is not mine]
        try:
            if not others:
                write_back()
        finally:
            if mine is not None:
                mine["count"] = int(mine.get("count", 1)) - 1
                if mine["count"] <= 0:
                    live.remove(mine)
            entry["holders"] = live
            _save(path, record)
        return "; ".join(_who(h) for h in others) if others else None
