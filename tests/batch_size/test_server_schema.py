"""Schema creation, versions and migrations; database URLs; the ``bso-server`` command's checks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import text

from tests.batch_size.server_harness import db_url, free_port  # noqa: F401
from zeus_core.cli import main as cli_main
from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.batch_size import db as dbmod
from zeus_core.optimizer.batch_size.api_models import JobSpecModel
from zeus_core.optimizer.batch_size.db import Database, normalize_url
from zeus_core.optimizer.batch_size.server_cli import is_loopback
from zeus_core.optimizer.batch_size.spec import JobSpec


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
    with pytest.raises(ZeusConfigError, match=r"schema version 2 is newer than this server's \(1\); upgrade"):
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

    monkeypatch.setattr(dbmod, "SCHEMA_VERSION", 3)
    monkeypatch.setattr(dbmod, "MIGRATIONS", {1: step(1), 2: step(2)})
    _run(_execute(db_url, "CREATE TABLE bso_migration_marker (v INTEGER)"))
    assert _run(_init_and_version(db_url)) == 3
    assert calls == [1, 2]
    assert _run(_init_and_version(db_url)) == 3 and calls == [1, 2]  # already migrated: nothing runs
    _run(_execute(db_url, "UPDATE bso_schema_version SET version = 1"))
    monkeypatch.setattr(dbmod, "MIGRATIONS", {1: step(1)})
    with pytest.raises(ZeusConfigError, match="no migration registered from schema version 2 to 3"):
        _run(_init_and_version(db_url))


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
