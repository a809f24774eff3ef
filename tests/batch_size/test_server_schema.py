"""Schema creation, versions and migrations; database URLs; the ``bso-server`` command's checks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import text

from tests.batch_size.server_harness import db_url, free_port  # noqa: F401
from zeus_core._cli import main as cli_main
from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.batch_size import _db as dbmod
from zeus_core.optimizer.batch_size._api_models import JobSpecModel
from zeus_core.optimizer.batch_size._cli_bso_server import is_loopback
from zeus_core.optimizer.batch_size._db import Database, normalize_url
from zeus_core.optimizer.batch_size._spec import JobSpec


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _execute(url: str, sql: str) -> None:
    db = Database(url)
    async with db.engine.begin() as conn:
        await conn.execute(text(sql))
    await db.dispose()


async def _init_and_version(url: str) -> int | None:
    db = Database(url)
    try:
        await db.init_schema()
        return await db.schema_version()
    finally:
        await db.dispose()


def test_fresh_database_gets_the_current_version_and_restarts_keep_it(db_url: str) -> None:
    assert _run(_init_and_version(db_url)) == dbmod.SCHEMA_VERSION
    assert _run(_init_and_version(db_url)) == dbmod.SCHEMA_VERSION  # a restart changes nothing


def test_newer_schema_is_refused_with_a_clear_message(db_url: str) -> None:
    _run(_init_and_version(db_url))
    _run(_execute(db_url, f"UPDATE bso_schema_version SET version = {dbmod.SCHEMA_VERSION + 1}"))
    v = dbmod.SCHEMA_VERSION
    with pytest.raises(
        ZeusConfigError, match=rf"schema version {v + 1} is newer than this server's \({v}\); upgrade"
    ):
        _run(_init_and_version(db_url))
    # The command reports it and exits with 2 instead of serving.
    assert cli_main(["bso-server", "--database", db_url, "--port", "1"]) == 2


def test_older_schema_runs_the_registered_migrations_in_order(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _run(_init_and_version(db_url))
    calls: list[int] = []

    def step(version: int) -> Any:
        def _migrate(conn: Any) -> None:
            calls.append(version)
            conn.exec_driver_sql(f"INSERT INTO bso_migration_marker (v) VALUES ({version})")

        return _migrate

    v = dbmod.SCHEMA_VERSION
    monkeypatch.setattr(dbmod, "SCHEMA_VERSION", v + 2)
    monkeypatch.setattr(dbmod, "MIGRATIONS", {v: step(v), v + 1: step(v + 1)})
    _run(_execute(db_url, "CREATE TABLE bso_migration_marker (v INTEGER)"))
    assert _run(_init_and_version(db_url)) == v + 2
    assert calls == [v, v + 1]
    assert _run(_init_and_version(db_url)) == v + 2 and calls == [v, v + 1]  # migrated: nothing runs
    _run(_execute(db_url, f"UPDATE bso_schema_version SET version = {v}"))
    monkeypatch.setattr(dbmod, "MIGRATIONS", {v: step(v)})
    with pytest.raises(
        ZeusConfigError, match=f"no migration registered from schema version {v + 1} to {v + 2}"
    ):
        _run(_init_and_version(db_url))


_V1_TRIALS = """CREATE TABLE bso_trials (
    id INTEGER PRIMARY KEY, job_id VARCHAR(255) REFERENCES bso_jobs(job_id) ON DELETE CASCADE,
    trial_number INTEGER, request_id VARCHAR(64), batch_size INTEGER, status VARCHAR(16),
    end_reason VARCHAR(32), created_at DOUBLE PRECISION, last_seen_at DOUBLE PRECISION,
    ended_at DOUBLE PRECISION, completion_order INTEGER, epochs INTEGER, time_s DOUBLE PRECISION,
    energy_j DOUBLE PRECISION, metric DOUBLE PRECISION, cost DOUBLE PRECISION, converged BOOLEAN)"""


def test_a_version_1_database_gains_the_heartbeat_column_and_keeps_its_trials(db_url: str) -> None:
    """A database written by the previous release (schema 1) is migrated in place on start."""
    for sql in (
        "CREATE TABLE bso_schema_version (id INTEGER PRIMARY KEY, version INTEGER)",
        "INSERT INTO bso_schema_version VALUES (1, 1)",
        "CREATE TABLE bso_jobs (job_id VARCHAR(255) PRIMARY KEY, spec_json TEXT, "
        "created_at DOUBLE PRECISION, next_trial_number INTEGER, next_completion INTEGER)",
        _V1_TRIALS,
        "INSERT INTO bso_jobs VALUES ('j', '{}', 1.0, 2, 0)",
        "INSERT INTO bso_trials (id, job_id, trial_number, batch_size, status, created_at, last_seen_at, "
        "epochs) VALUES (1, 'j', 1, 64, 'running', 1.0, 1.0, 3)",
    ):
        _run(_execute(db_url, sql))
    assert _run(_init_and_version(db_url)) == dbmod.SCHEMA_VERSION == 3

    async def _trial() -> Any:
        db = Database(db_url)
        async with db.engine.connect() as conn:
            row = (await conn.execute(text("SELECT batch_size, epochs, heartbeat FROM bso_trials"))).one()
        await db.dispose()
        return tuple(row)

    assert _run(_trial()) == (64, 3, False)


def test_foreign_tables_without_a_version_are_refused(db_url: str) -> None:
    _run(_execute(db_url, "CREATE TABLE bso_jobs (job_id VARCHAR(10) PRIMARY KEY)"))
    with pytest.raises(ZeusConfigError, match="not created by zeus-suite bso-server"):
        _run(_init_and_version(db_url))


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgresql://u:p@h:5432/d", "postgresql+asyncpg://u:p@h:5432/d"),
        ("postgres://u:p@h/d", "postgresql+asyncpg://u:p@h/d"),
        ("postgresql+asyncpg://u@h/d", "postgresql+asyncpg://u@h/d"),
        ("sqlite:////tmp/x.db", "sqlite+aiosqlite:////tmp/x.db"),
        ("/tmp/x.db", "sqlite+aiosqlite:////tmp/x.db"),
    ],
)
def test_normalize_url(given: str, expected: str) -> None:
    assert normalize_url(given) == expected


@pytest.mark.parametrize(
    ("given", "match"),
    [
        ("sqlite://", "in-memory"),
        ("sqlite:///:memory:", "in-memory"),
        ("mysql://u@h/d", "unsupported database 'mysql'"),
        ("postgresql+psycopg2://u@h/d", "driver 'psycopg2' is not supported"),
        ("", "empty database URL"),
    ],
)
def test_normalize_url_rejects(given: str, match: str) -> None:
    with pytest.raises(ZeusConfigError, match=match):
        normalize_url(given)


def test_job_spec_body_mirrors_the_dataclass() -> None:
    import dataclasses

    fields = JobSpecModel.model_fields
    assert list(fields) == [f.name for f in dataclasses.fields(JobSpec)]
    required = {name for name, f in fields.items() if f.is_required()}
    assert required == {"job_id", "batch_sizes", "default_batch_size", "target_metric"}
    assert fields["eta_knob"].default == JobSpec.__dataclass_fields__["eta_knob"].default


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.5", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("10.1.2.3", False),
        ("example.org", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_non_loopback_host_without_token_is_refused(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ZEUS_BSO_TOKEN", raising=False)
    assert cli_main(["bso-server", "--database", str(tmp_path / "x.db"), "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert "refusing to listen on '0.0.0.0' without a token" in err and "--allow-insecure" in err
    assert not (tmp_path / "x.db").exists()  # refused before touching the database


def test_bad_database_url_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["bso-server", "--database", "mysql://u@h/d"]) == 2
    assert "unsupported database 'mysql'" in capsys.readouterr().err


def test_unreachable_postgres_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"postgresql://user:hunter2@127.0.0.1:{free_port()}/d"
    assert cli_main(["bso-server", "--database", url]) == 2
    err = capsys.readouterr().err
    assert (
        "cannot open the database postgresql+asyncpg://user:***@127.0.0.1" in err
        and "ConnectionRefusedError" in err
    )
    assert "hunter2" not in err
