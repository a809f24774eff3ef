"""The lease journal: open leases and their holders in SQLite, on disk before the daemon replies.

Every transaction is committed with ``synchronous=FULL`` in WAL mode, so it is fsync'd when
:meth:`Journal.transaction` returns, and the reply that follows it can be trusted: a daemon killed
a moment later finds the lease at its next start and restores what the dead clients left behind.
Only lease openings, closings and holder changes are written; a holder changing its own value
again writes nothing (the value to restore does not change).

An exclusive ``flock`` on ``<journal>.lock`` keeps a second daemon off the same journal.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from zeus_core.exceptions import ZeusConfigError

__all__ = ["Journal", "LeaseRow", "HolderRow", "DEFAULT_JOURNAL_PATH"]

DEFAULT_JOURNAL_PATH = Path("/var/lib/zeus-suite/daemon-journal.sqlite")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS leases (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    gpu INTEGER NOT NULL,
    knob TEXT NOT NULL,
    original TEXT NOT NULL,            -- JSON: the value to restore (null: reset)
    original_known INTEGER NOT NULL,   -- 0: the device could not report it; restored by a reset
    opened_at REAL NOT NULL,
    closed_at REAL,                    -- NULL while open
    closed_how TEXT
);
CREATE INDEX IF NOT EXISTS leases_open ON leases (closed_at);
CREATE TABLE IF NOT EXISTS holders (
    lease_id INTEGER NOT NULL REFERENCES leases(id),
    key TEXT NOT NULL,
    kind TEXT NOT NULL,                -- 'process' or 'session'
    pid INTEGER,
    starttime INTEGER,                 -- the process's start time (clock ticks since boot)
    uid INTEGER,
    who TEXT NOT NULL,
    since REAL NOT NULL,
    PRIMARY KEY (lease_id, key)
);
"""


@dataclass
class HolderRow:
    """A holder as journaled: its key, kind, process identity (pid + start time) and description."""

    key: str
    kind: str
    pid: int | None
    starttime: int | None
    uid: int | None
    who: str
    since: float


@dataclass
class LeaseRow:
    """An open lease as journaled, with its holders."""

    id: int
    gpu: int
    knob: str
    original: Any
    original_known: bool
    opened_at: float
    holders: list[HolderRow] = field(default_factory=list)


def _value(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


class Journal:
    """The SQLite journal at ``path`` (created with its folder if missing).

    Raises:
        ZeusConfigError: Another daemon holds the journal, or it cannot be opened.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock_file = open(f"{self.path}.lock", "a")
        except OSError as e:
            raise ZeusConfigError(f"journal {self.path}: cannot create it ({e}). Fix --journal.") from e
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.close()
            raise ZeusConfigError(
                f"journal {self.path} is in use by another zeus-suite daemon. Stop it first, or give this "
                "one its own --journal."
            ) from None
        os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))  # the WAL files take the db's mode
        os.chmod(self.path, 0o600)
        self._db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        self._depth = 0

    def close(self) -> None:
        """Close the database and release the lock."""
        self._db.close()
        fcntl.flock(self._lock_file, fcntl.LOCK_UN)
        self._lock_file.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One durable transaction (nested calls join the outer one); fsync'd when the outermost ends."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self._depth = 1
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        else:
            self._db.execute("COMMIT")
        finally:
            self._depth = 0

    # -- writes ---------------------------------------------------------------------------------
    def open_lease(self, gpu: int, knob: str, original: Any, original_known: bool) -> int:
        """Record a new open lease; returns its id."""
        with self.transaction():
            cur = self._db.execute(
                "INSERT INTO leases (gpu, knob, original, original_known, opened_at) VALUES (?, ?, ?, ?, ?)",
                (gpu, knob, json.dumps(_value(original)), int(original_known), time.time()),
            )
        assert cur.lastrowid is not None
        return cur.lastrowid

    def add_holder(self, lease_id: int, holder: HolderRow) -> None:
        """Record that ``holder`` holds lease ``lease_id``."""
        with self.transaction():
            self._db.execute(
                "INSERT OR REPLACE INTO holders VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    lease_id,
                    holder.key,
                    holder.kind,
                    holder.pid,
                    holder.starttime,
                    holder.uid,
                    holder.who,
                    holder.since,
                ),
            )

    def remove_holder(self, lease_id: int, key: str) -> None:
        """Record that holder ``key`` no longer holds lease ``lease_id``."""
        with self.transaction():
            self._db.execute("DELETE FROM holders WHERE lease_id = ? AND key = ?", (lease_id, key))

    def close_lease(self, lease_id: int, how: str) -> None:
        """Record that lease ``lease_id`` is over (``how``: restored, released, ...)."""
        with self.transaction():
            self._db.execute("DELETE FROM holders WHERE lease_id = ?", (lease_id,))
            self._db.execute(
                "UPDATE leases SET closed_at = ?, closed_how = ? WHERE id = ?", (time.time(), how, lease_id)
            )

    # -- reads ----------------------------------------------------------------------------------
    def open_leases(self) -> list[LeaseRow]:
        """Every open lease with its holders, oldest first."""
        leases = {
            row[0]: LeaseRow(row[0], row[1], row[2], json.loads(row[3]), bool(row[4]), row[5])
            for row in self._db.execute(
                "SELECT id, gpu, knob, original, original_known, opened_at FROM leases "
                "WHERE closed_at IS NULL ORDER BY id"
            )
        }
        for row in self._db.execute(
            "SELECT lease_id, key, kind, pid, starttime, uid, who, since FROM holders ORDER BY since"
        ):
            if row[0] in leases:
                leases[row[0]].holders.append(HolderRow(*row[1:]))
        return list(leases.values())

    def count_open(self) -> int:
        """How many leases are open."""
        return int(self._db.execute("SELECT COUNT(*) FROM leases WHERE closed_at IS NULL").fetchone()[0])
