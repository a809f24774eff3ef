"""Database of the batch-size optimizer service: tables, engine, schema version and migrations.

The database is the service's only state: jobs, their trials (in the order they completed) and
every per-epoch report. The bandit is rebuilt from it on each request, so a restarted server
continues exactly where it stopped.

Backends (SQLAlchemy 2, asyncio):

* SQLite through ``aiosqlite``: a file path or ``sqlite:///path``. Every transaction starts with
  ``BEGIN IMMEDIATE`` (writers are serialised, also across processes sharing the file), the
  journal is in WAL mode, and one server process additionally serialises its own transactions
  with an ``asyncio.Lock`` so requests queue instead of spinning on SQLite's busy handler.
* PostgreSQL through ``asyncpg``: ``postgresql://user:pass@host/db``. Requests that change a job
  lock its row with ``SELECT ... FOR UPDATE``.

Schema versions: the table ``bso_schema_version`` holds one row with the version. On start,
:func:`init_schema` creates the tables of a fresh database, runs the migrations registered in
:data:`MIGRATIONS` on an older one, and refuses a newer one.

Example:
    >>> normalize_url("/tmp/bso.sqlite3")
    'sqlite+aiosqlite:////tmp/bso.sqlite3'
    >>> normalize_url("postgresql://u:p@127.0.0.1/bso")
    'postgresql+asyncpg://u:p@127.0.0.1/bso'
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from pathlib import Path
from typing import Any, AsyncIterator, Callable

try:
    from sqlalchemy import (
        Boolean,
        Double,
        ForeignKey,
        Integer,
        String,
        Text,
        UniqueConstraint,
        event,
        false,
        insert,
        inspect,
        select,
        update,
    )
    from sqlalchemy.engine import Connection, make_url
    from sqlalchemy.exc import ArgumentError
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
    from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
except ModuleNotFoundError as _err:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        f"the batch-size optimizer's service needs SQLAlchemy ({_err}); pip install 'zeus-suite[server]'"
    ) from _err

from zeus_core.exceptions import ZeusConfigError

__all__ = [
    "SCHEMA_VERSION",
    "MIGRATIONS",
    "Base",
    "SchemaVersionRow",
    "JobRow",
    "TrialRow",
    "EpochRow",
    "normalize_url",
    "redact_url",
    "Database",
    "init_schema",
]

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 3
"""Version of the schema that this code writes (2: ``bso_trials.heartbeat``; 3: ``bso_epochs.reports``)."""


def _v1_to_v2(conn: Connection) -> None:
    """Version 2 records whether a trial's client sends heartbeats (older trials: it does not)."""
    conn.exec_driver_sql("ALTER TABLE bso_trials ADD COLUMN heartbeat BOOLEAN NOT NULL DEFAULT FALSE")


def _v2_to_v3(conn: Connection) -> None:
    """Version 3 counts the reports taken for an epoch (several ranks of a Zeus job each report)."""
    if inspect(conn).has_table("bso_epochs"):  # else create_all makes it with the column
        conn.exec_driver_sql("ALTER TABLE bso_epochs ADD COLUMN reports INTEGER NOT NULL DEFAULT 1")


MIGRATIONS: dict[int, Callable[[Connection], None]] = {1: _v1_to_v2, 2: _v2_to_v3}
"""``from_version -> function`` that upgrades a database from that version to the next one.

Each function receives a synchronous SQLAlchemy ``Connection`` inside the migration
transaction (use ``connection.exec_driver_sql`` or Alembic operations). Register a new one
together with bumping :data:`SCHEMA_VERSION`::

    def _v1_to_v2(conn):
        conn.exec_driver_sql("ALTER TABLE bso_trials ADD COLUMN note TEXT")
    MIGRATIONS[1] = _v1_to_v2
"""

_STRING_ID = 255  # longest job id, characters


class Base(DeclarativeBase):
    """Declarative base of the service's tables."""


class SchemaVersionRow(Base):
    """The one row recording the schema version of this database."""

    __tablename__ = "bso_schema_version"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer)


class JobRow(Base):
    """A registered job: its spec (as JSON) and its counters.

    Attributes:
        job_id: The spec's ``job_id``.
        spec_json: ``JobSpec.to_dict()`` as JSON.
        created_at: Registration time, s since the epoch.
        next_trial_number: Number the next trial gets (trial numbers start at 1).
        next_completion: Completion order the next ended trial gets (starts at 0).
    """

    __tablename__ = "bso_jobs"

    job_id: Mapped[str] = mapped_column(String(_STRING_ID), primary_key=True)
    spec_json: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Double)
    next_trial_number: Mapped[int] = mapped_column(Integer, default=1)
    next_completion: Mapped[int] = mapped_column(Integer, default=0)

    trials: Mapped[list[TrialRow]] = relationship(
        back_populates="job", cascade="all, delete-orphan", passive_deletes=True
    )


class TrialRow(Base):
    """One recurrence of a job, run with one batch size.

    ``status`` is ``running``, ``converged``, ``failed`` (ended without reaching the target:
    reported so, stopped early, or out of epochs) or ``expired`` (no contact for the trial
    timeout, no heartbeat for the heartbeat timeout, or abandoned by its client). Only
    ``converged`` and ``failed`` trials feed the bandit, in ``completion_order``. An expired trial
    keeps everything it reported (its epoch reports, time, energy and cost).

    Attributes:
        time_s: Time of the trial, s (cumulative at its last report).
        energy_j: Energy of the trial, J (cumulative at its last report).
        cost: Zeus cost of the trial, J.
        created_at / last_seen_at / ended_at: s since the epoch (``last_seen_at``: last report
            or heartbeat).
        heartbeat: Whether the client said it sends heartbeats (the heartbeat timeout applies).
    """

    __tablename__ = "bso_trials"
    __table_args__ = (
        UniqueConstraint("job_id", "trial_number", name="uq_bso_trials_number"),
        UniqueConstraint("job_id", "request_id", name="uq_bso_trials_request"),
        UniqueConstraint("job_id", "completion_order", name="uq_bso_trials_completion"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(
        String(_STRING_ID), ForeignKey("bso_jobs.job_id", ondelete="CASCADE"), index=True
    )
    trial_number: Mapped[int] = mapped_column(Integer)
    request_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    batch_size: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    end_reason: Mapped[str | None] = mapped_column(String(32), nullable=True)
    created_at: Mapped[float] = mapped_column(Double)
    last_seen_at: Mapped[float] = mapped_column(Double)
    ended_at: Mapped[float | None] = mapped_column(Double, nullable=True)
    completion_order: Mapped[int | None] = mapped_column(Integer, nullable=True)
    epochs: Mapped[int] = mapped_column(Integer, default=0)
    time_s: Mapped[float | None] = mapped_column(Double, nullable=True)
    energy_j: Mapped[float | None] = mapped_column(Double, nullable=True)
    metric: Mapped[float | None] = mapped_column(Double, nullable=True)
    cost: Mapped[float | None] = mapped_column(Double, nullable=True)
    converged: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    heartbeat: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())

    job: Mapped[JobRow] = relationship(back_populates="trials")
    epoch_reports: Mapped[list[EpochRow]] = relationship(
        back_populates="trial", cascade="all, delete-orphan", passive_deletes=True, order_by="EpochRow.epoch"
    )


class EpochRow(Base):
    """One per-epoch progress report of a trial and the decision the server returned.

    Attributes:
        epoch: Epochs completed (1 after the first epoch).
        time_s / energy_j: Cumulative time (s) and energy (J) of the trial so far.
        cost: Zeus cost so far, J.
        stop / reason: The decision returned to the client.
        reports: Different reports of this epoch taken (ranks that each report; see ``JobSpec.reporters``).
    """

    __tablename__ = "bso_epochs"
    __table_args__ = (UniqueConstraint("trial_id", "epoch", name="uq_bso_epochs_epoch"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    trial_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("bso_trials.id", ondelete="CASCADE"), index=True
    )
    epoch: Mapped[int] = mapped_column(Integer)
    time_s: Mapped[float] = mapped_column(Double)
    energy_j: Mapped[float] = mapped_column(Double)
    metric: Mapped[float | None] = mapped_column(Double, nullable=True)
    cost: Mapped[float] = mapped_column(Double)
    stop: Mapped[bool] = mapped_column(Boolean)
    reason: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[float] = mapped_column(Double)
    reports: Mapped[int] = mapped_column(Integer, default=1, server_default="1")

    trial: Mapped[TrialRow] = relationship(back_populates="epoch_reports")


_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^:@/]*):(?P<secret>[^@/]*)@")


def redact_url(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@`` in it replaced by ``***``.

    Example:
        >>> redact_url("mysql://bso:hunter2@db/bso")
        'mysql://bso:***@db/bso'
    """
    return _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)


def normalize_url(url_or_path: str | Path) -> str:
    """Turn a file path or a database URL into a SQLAlchemy async URL.

    Args:
        url_or_path: A SQLite file path, ``sqlite:///path``, or ``postgresql://...`` (also
            ``postgres://``); explicit async drivers (``sqlite+aiosqlite``, ``postgresql+asyncpg``)
            pass through.

    Returns:
        The URL with its async driver.

    Raises:
        ZeusConfigError: An unsupported database or driver, or an in-memory SQLite database
            (each connection would see its own empty database).
    """
    text = str(url_or_path).strip()
    if not text:
        raise ZeusConfigError("bso database: empty database URL; pass a file path or postgresql://...")
    if "://" not in text:
        return "sqlite+aiosqlite:///" + str(Path(text).expanduser().resolve())
    shown = redact_url(text)  # messages never carry the password
    try:
        url = make_url(text)
    except ArgumentError:
        raise ZeusConfigError(f"bso database: cannot parse database URL {shown!r}.") from None
    backend, _, driver = url.drivername.partition("+")
    if backend == "postgres":
        backend = "postgresql"
    if backend == "sqlite":
        if driver not in ("", "aiosqlite"):
            raise ZeusConfigError(f"bso database: SQLite driver {driver!r} is not async; use sqlite:///path.")
        if not url.database or url.database == ":memory:":
            raise ZeusConfigError(
                "bso database: an in-memory SQLite database loses every trial on restart; pass a file path."
            )
        url = url.set(drivername="sqlite+aiosqlite")
    elif backend == "postgresql":
        if driver not in ("", "asyncpg"):
            raise ZeusConfigError(
                f"bso database: PostgreSQL driver {driver!r} is not supported; "
                "use postgresql://... (asyncpg)."
            )
        url = url.set(drivername="postgresql+asyncpg")
    else:
        raise ZeusConfigError(
            f"bso database: unsupported database {backend!r} in {shown!r}; use a SQLite file path or postgresql://..."
        )
    return url.render_as_string(hide_password=False)


_READ_ONLY = "zeus_read_only"


def _configure_sqlite(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN itself (below)
        cursor = dbapi_connection.cursor()
        for pragma in ("journal_mode=WAL", "busy_timeout=30000", "foreign_keys=ON", "synchronous=NORMAL"):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # Writers take the write lock at once (no upgrade deadlocks); a read-only check such as
        # /health's reads the last commit beside a running writer (WAL) instead of waiting for it.
        read_only = conn.get_execution_options().get(_READ_ONLY, False)
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


class Database:
    """The service's engine and session factory.

    Args:
        url_or_path: See :func:`normalize_url`.
        echo_sql: Log every SQL statement.

    Example:
        >>> import asyncio, tempfile, os
        >>> async def demo():
        ...     db = Database(os.path.join(tempfile.mkdtemp(), "bso.sqlite3"))
        ...     await db.init_schema()
        ...     version = await db.schema_version()
        ...     await db.dispose()
        ...     return version
        >>> asyncio.run(demo()) == SCHEMA_VERSION
        True
    """

    def __init__(self, url_or_path: str | Path, *, echo_sql: bool = False) -> None:
        self.url = normalize_url(url_or_path)
        self.is_sqlite = self.url.startswith("sqlite")
        kwargs: dict[str, Any] = {"echo": echo_sql, "pool_pre_ping": not self.is_sqlite}
        if not self.is_sqlite:
            kwargs.update(pool_size=10, max_overflow=20)
        self.engine: AsyncEngine = create_async_engine(self.url, **kwargs)
        if self.is_sqlite:
            _configure_sqlite(self.engine)
        self._sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        self._sqlite_lock = asyncio.Lock() if self.is_sqlite else None

    @property
    def display_url(self) -> str:
        """The URL with its password hidden, for logs."""
        return make_url(self.url).render_as_string(hide_password=True)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        """A session inside one transaction: committed on success, rolled back on error."""
        lock = self._sqlite_lock or contextlib.nullcontext()
        async with lock:
            async with self._sessions() as session:
                async with session.begin():
                    yield session

    async def init_schema(self) -> None:
        """Create, migrate or check the schema; see :func:`init_schema`."""
        async with self.engine.begin() as conn:
            await conn.run_sync(init_schema)

    async def schema_version(self) -> int | None:
        """The version recorded in the database, or ``None`` when it has no schema table."""
        async with self.engine.connect() as conn:
            conn = await conn.execution_options(**{_READ_ONLY: True})
            return await conn.run_sync(_read_version)

    async def dispose(self) -> None:
        """Close every pooled connection."""
        await self.engine.dispose()


def _read_version(conn: Connection) -> int | None:
    if not inspect(conn).has_table(SchemaVersionRow.__tablename__):
        return None
    row = conn.execute(select(SchemaVersionRow.version).where(SchemaVersionRow.id == 1)).first()
    return None if row is None else int(row[0])


def init_schema(conn: Connection) -> None:
    """Create the schema of a fresh database, migrate an older one, refuse a newer one.

    Args:
        conn: A synchronous connection inside a transaction (``AsyncConnection.run_sync``).

    Raises:
        ZeusConfigError: The database was written by a newer Zeus Suite, it holds the service's
            tables without a version row, or a migration step is missing.
    """
    version = _read_version(conn)
    if version is None:
        existing = set(inspect(conn).get_table_names()) & set(Base.metadata.tables)
        if existing:
            raise ZeusConfigError(
                f"bso database: tables {sorted(existing)} exist but "
                f"{SchemaVersionRow.__tablename__} does not; "
                "this database was not created by zeus-suite bso-server. Use an empty database."
            )
        Base.metadata.create_all(conn)
        conn.execute(insert(SchemaVersionRow).values(id=1, version=SCHEMA_VERSION))
        logger.info("Created the batch-size optimizer schema, version %d", SCHEMA_VERSION)
        return
    if version > SCHEMA_VERSION:
        raise ZeusConfigError(
            f"bso database: schema version {version} is newer than this server's ({SCHEMA_VERSION}); "
            "upgrade zeus-suite, or point --database at another database."
        )
    while version < SCHEMA_VERSION:
        step = MIGRATIONS.get(version)
        if step is None:
            raise ZeusConfigError(
                f"bso database: no migration registered from schema version {version} to {version + 1}."
            )
        logger.info("Migrating the batch-size optimizer schema from version %d to %d", version, version + 1)
        step(conn)
        version += 1
        conn.execute(update(SchemaVersionRow).where(SchemaVersionRow.id == 1).values(version=version))
    Base.metadata.create_all(conn)  # tables added by a later version that a migration did not create
