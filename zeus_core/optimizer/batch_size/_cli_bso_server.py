"""``zeus-suite bso-server``: run the batch-size optimizer service with uvicorn.

Examples::

    zeus-suite bso-server                                   # SQLite file ./zeus_bso.sqlite3, 127.0.0.1:8000
    export ZEUS_BSO_TOKEN=$(openssl rand -hex 16)
    zeus-suite bso-server --database postgresql://bso:pw@db/bso --host 0.0.0.0

Without a token the service binds to loopback only: a non-loopback ``--host`` is refused unless
``--token`` (or env ``ZEUS_BSO_TOKEN``) is given, or ``--allow-insecure`` says you mean it. An
empty or whitespace-only token counts as none (``--token "$UNSET"`` is refused off loopback), and
a token needs at least 16 characters.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from zeus_core.exceptions import ZeusConfigError

if TYPE_CHECKING:
    from zeus_core.optimizer.batch_size._db import Database

__all__ = ["add_arguments", "run", "is_loopback"]

logger = logging.getLogger(__name__)

_DEFAULT_DATABASE = "zeus_bso.sqlite3"


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
        "--token",
        default=None,
        help="shared secret that clients send as 'Authorization: Bearer <token>' "
        "(default: env ZEUS_BSO_TOKEN)",
    )
    parser.add_argument(
        "--allow-insecure",
        action="store_true",
        help="allow a non-loopback --host without a token (anyone who reaches the port can write)",
    )
    parser.add_argument(
        "--trial-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="a running trial with no contact at all for this long expires (default 21600 = 6 h)",
    )
    parser.add_argument(
        "--heartbeat-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="a running trial whose client sends heartbeats (the suite's client does) expires after "
        "this long without a report or heartbeat; what it reported is kept (default 180)",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=None,
        metavar="BYTES",
        help="larger request bodies are refused with 413 before they are read (default 1048576 = 1 MiB)",
    )
    parser.add_argument("--echo-sql", action="store_true", help="log every SQL statement")


def run(args: argparse.Namespace) -> int:
    """Check the options and the database, then serve until interrupted; returns the exit code."""
    from zeus_core.optimizer.batch_size._auth import TOKEN_HINT, normalize_token

    given = args.token if args.token is not None else os.environ.get("ZEUS_BSO_TOKEN")
    try:
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

        from zeus_core.optimizer.batch_size._body_limit import DEFAULT_MAX_BODY_BYTES
        from zeus_core.optimizer.batch_size._db import Database
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
    }
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
        app, host=args.host, port=args.port, log_level="debug" if getattr(args, "verbose", False) else "info"
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
