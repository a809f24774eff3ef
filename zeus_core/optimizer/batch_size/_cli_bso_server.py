"""``zeus-suite bso-server``: run the batch-size optimizer service with uvicorn.

Examples::

    zeus-suite bso-server                                   # SQLite file ./zeus_bso.sqlite3, 127.0.0.1:8000
    openssl rand -hex 16 > ~/.zeus-bso-token && chmod 600 ~/.zeus-bso-token
    zeus-suite bso-server --token-file ~/.zeus-bso-token --database postgresql://bso:pw@db/bso --host 0.0.0.0

Without a token the service binds to loopback only: a non-loopback ``--host`` is refused unless a
token is given (``--token-file``, env ``ZEUS_BSO_TOKEN_FILE`` or ``ZEUS_BSO_TOKEN``), or
``--allow-insecure`` says you mean it. An empty or whitespace-only token counts as none, and a
token needs at least 16 characters. ``--token`` still works but puts the token in the process
list (``ps``), so it warns. The server also limits connections, body sizes and read times, and
answers only to the Host names it expects (docs/optimizers/batch-size-security.md).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zeus_core.exceptions import ZeusConfigError

if TYPE_CHECKING:
    from zeus_core.optimizer.batch_size._db import Database

__all__ = ["add_arguments", "run", "is_loopback"]

logger = logging.getLogger(__name__)

_DEFAULT_DATABASE = "zeus_bso.sqlite3"
_DEFAULT_MAX_CONNECTIONS = 100
_KEEP_ALIVE_S = 5


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine (``localhost``, 127.0.0.0/8, ``::1``).

    Example:
        >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("0.0.0.0")
        (True, True, False)
    """
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``bso-server`` options to ``parser``."""
    parser.add_argument(
        "--database",
        default=None,
        metavar="URL_OR_PATH",
        help="SQLite file path or database URL (postgresql://user:pw@host/db); "
        f"default: env ZEUS_BSO_DATABASE_URL, else ./{_DEFAULT_DATABASE}",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to bind (default 8000)")
    parser.add_argument(
        "--token-file",
        default=None,
        metavar="FILE",
        help="file holding the shared secret that clients send as 'Authorization: Bearer <token>' "
        "(default: env ZEUS_BSO_TOKEN_FILE, else env ZEUS_BSO_TOKEN)",
    )
    parser.add_argument(
        "--token",
        default=None,
        help="the shared secret itself (discouraged: visible to every user in `ps`; use --token-file)",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=None,
        metavar="NAME",
        help="a host name clients may use to reach the server (repeatable; '*': any). Default: any with a "
        "token; without one only localhost, 127.0.0.1 and ::1 (against DNS rebinding)",
    )
    parser.add_argument(
        "--max-connections",
        type=_positive_int,
        default=_DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help=f"connections served at once; more are answered 503 (default {_DEFAULT_MAX_CONNECTIONS})",
    )
    parser.add_argument(
        "--body-timeout",
        type=_positive_seconds,
        default=None,
        metavar="SECONDS",
        help="a request body must arrive within this time, else 408 (default 30)",
    )
    parser.add_argument(
        "--max-trials-per-job",
        type=_positive_int,
        default=None,
        metavar="N",
        help="most trials of one job; more are refused with 409 (default 10000)",
    )
    parser.add_argument(
        "--allow-insecure",
        action="store_true",
        help="allow a non-loopback --host without a token (anyone who reaches the port can write)",
    )
    parser.add_argument(
        "--trial-timeout",
        type=_positive_seconds,
        default=None,
        metavar="SECONDS",
        help="a running trial with no contact at all for this long expires (default 21600 = 6 h)",
    )
    parser.add_argument(
        "--heartbeat-timeout",
        type=_positive_seconds,
        default=None,
        metavar="SECONDS",
        help="a running trial whose client sends heartbeats (the suite's client does) expires after "
        "this long without a report or heartbeat; what it reported is kept (default 180)",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=_positive_int,
        default=None,
        metavar="BYTES",
        help="larger request bodies are refused with 413 before they are read (default 1048576 = 1 MiB)",
    )
    parser.add_argument("--echo-sql", action="store_true", help="log every SQL statement")


def _positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds > 0 (NaN, inf and 0 are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value <= 10 * 365 * 86400:  # NaN fails too
        raise argparse.ArgumentTypeError(f"{text!r} must be a number of seconds > 0 (at most 10 years)")
    return value


def _positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 1")
    return value


def read_token_file(path: str) -> str:
    """The token in ``path`` (surrounding whitespace removed); warns when others can read the file.

    Raises:
        ZeusConfigError: The file cannot be read.
    """
    file = Path(path).expanduser()
    try:
        text = file.read_text(encoding="utf-8")
        mode = file.stat().st_mode
    except (OSError, UnicodeDecodeError) as err:
        raise ZeusConfigError(
            f"zeus-suite bso-server: cannot read the token file {str(file)!r}: {err}."
        ) from err
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        logger.warning(
            "The token file %s can be read by other users (mode %o); chmod 600 it.", file, mode & 0o777
        )
    return text.strip()


def _given_token(args: argparse.Namespace) -> str | None:
    """The token from --token-file, --token (with a warning), ZEUS_BSO_TOKEN_FILE or ZEUS_BSO_TOKEN."""
    if args.token_file is not None:
        return read_token_file(args.token_file)
    if args.token is not None:
        logger.warning(
            "--token puts the token in the process list, where every user of this machine can read it "
            "(`ps`); "
            "use --token-file FILE or the ZEUS_BSO_TOKEN environment variable instead."
        )
        return str(args.token)
    if os.environ.get("ZEUS_BSO_TOKEN_FILE"):
        return read_token_file(os.environ["ZEUS_BSO_TOKEN_FILE"])
    return os.environ.get("ZEUS_BSO_TOKEN")


def run(args: argparse.Namespace) -> int:
    """Check the options and the database, then serve until interrupted; returns the exit code."""
    from zeus_core.optimizer.batch_size._auth import TOKEN_HINT, normalize_token

    try:
        given = _given_token(args)
        token = normalize_token(given, where="zeus-suite bso-server")
    except ZeusConfigError as err:
        print(err, file=sys.stderr)
        return 2
    if not is_loopback(args.host) and token is None and not args.allow_insecure:
        empty = " (the token given is empty)" if given is not None else ""
        print(
            f"zeus-suite bso-server: refusing to listen on {args.host!r} without a token{empty}: anyone who "
            f"can reach the port could read and change every job. Set a token ({TOKEN_HINT}), "
            "bind --host 127.0.0.1, or add --allow-insecure if the network is trusted.",
            file=sys.stderr,
        )
        return 2
    if not 0 < args.port < 65536:
        print(f"zeus-suite bso-server: --port {args.port} must be within 1..65535.", file=sys.stderr)
        return 2
    try:
        import uvicorn
        from sqlalchemy.exc import SQLAlchemyError

        from zeus_core.optimizer.batch_size._db import Database
        from zeus_core.optimizer.batch_size._gate import DEFAULT_MAX_BODY_BYTES
        from zeus_core.optimizer.batch_size._server import create_app
        from zeus_core.optimizer.batch_size._service import (
            DEFAULT_HEARTBEAT_TIMEOUT_S,
            DEFAULT_TRIAL_TIMEOUT_S,
        )
    except ModuleNotFoundError as err:
        print(f"zeus-suite bso-server: {err}; pip install 'zeus-suite[server]'", file=sys.stderr)
        return 2
    database = args.database or os.environ.get("ZEUS_BSO_DATABASE_URL") or _DEFAULT_DATABASE
    options = {
        "trial_timeout_s": _or_default(args.trial_timeout, DEFAULT_TRIAL_TIMEOUT_S),
        "heartbeat_timeout_s": _or_default(
            getattr(args, "heartbeat_timeout", None), DEFAULT_HEARTBEAT_TIMEOUT_S
        ),
        "max_body_bytes": _or_default(getattr(args, "max_body_bytes", None), DEFAULT_MAX_BODY_BYTES),
        "allowed_hosts": getattr(args, "allowed_host", None),
    }
    for name, option in (("body_timeout_s", "body_timeout"), ("max_trials_per_job", "max_trials_per_job")):
        if getattr(args, option, None) is not None:
            options[name] = getattr(args, option)
    try:
        checker = Database(database)
        asyncio.run(_check_database(checker))
        db = Database(database, echo_sql=args.echo_sql)  # a fresh engine for uvicorn's event loop
        app = create_app(db, token=token, **options)
    except ZeusConfigError as err:
        print(f"zeus-suite bso-server: {err}", file=sys.stderr)
        return 2
    except (OSError, SQLAlchemyError) as err:  # unreachable server, bad password, unwritable directory
        detail = getattr(err, "orig", None) or err
        print(
            f"zeus-suite bso-server: cannot open the database {checker.display_url}: "
            f"{type(detail).__name__}: {detail}",
            file=sys.stderr,
        )
        return 2
    if not is_loopback(args.host) and token is None:
        logger.warning("Serving on %s without a token (--allow-insecure): every route is open.", args.host)
    logger.info(
        "Serving the batch-size optimizer on http://%s:%d (database %s)", args.host, args.port, db.display_url
    )
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level="debug" if getattr(args, "verbose", False) else "info",
        limit_concurrency=getattr(args, "max_connections", _DEFAULT_MAX_CONNECTIONS),  # more: 503
        timeout_keep_alive=_KEEP_ALIVE_S,  # an idle connection is closed after 5 s
        server_header=False,
    )
    return 0


def _or_default(value: Any, default: Any) -> Any:
    return default if value is None else value


async def _check_database(db: Database) -> None:
    """Create or migrate the schema before serving, so a bad database fails with a clear message."""
    try:
        await db.init_schema()
    finally:
        await db.dispose()
