#!/usr/bin/env bash
# Start a throw-away PostgreSQL server for the batch-size optimizer tests and print its URL.
#
#   export ZEUS_TEST_POSTGRES_URL="$(bash .ci/postgres.sh)"
#   bash .ci/postgres.sh stop        # shut it down again
#
# - Installs PostgreSQL from Debian's packages (apt-get) when no server binaries are found.
# - Runs its own cluster in $ZEUS_PG_DIR (default /tmp/zeus-ci-postgres) on 127.0.0.1 only,
#   port $ZEUS_PG_PORT (default 54329), so it never touches a system cluster on 5432.
# - Creates role "zeus" (password "zeus") and database "zeus_test" if missing.
# - Idempotent: a second run reuses the running server and prints the same URL.
# Only the URL goes to stdout; progress messages go to stderr.
set -euo pipefail

PGDIR="${ZEUS_PG_DIR:-/tmp/zeus-ci-postgres}"
PGPORT="${ZEUS_PG_PORT:-54329}"
PGUSER_NAME="zeus"
PGPASS="zeus"
PGDB="zeus_test"

log() { echo "postgres.sh: $*" >&2; }

find_bindir() {
    local d
    d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
    if [[ -n "$d" && -x "$d/initdb" ]]; then echo "$d"; return 0; fi
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        dirname "$(command -v initdb)"; return 0
    fi
    return 1
}

if ! BINDIR="$(find_bindir)"; then
    log "PostgreSQL not found; installing it from Debian's packages"
    if [[ "$(id -u)" -ne 0 ]]; then
        SUDO="sudo"
        command -v sudo >/dev/null 2>&1 || { log "need root (or sudo) to apt-get install postgresql"; exit 1; }
    else
        SUDO=""
    fi
    $SUDO apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends postgresql >&2
    BINDIR="$(find_bindir)" || { log "postgresql installed but initdb not found"; exit 1; }
fi

# PostgreSQL refuses to run as root: run the server as the 'postgres' system user in that case.
if [[ "$(id -u)" -eq 0 ]]; then
    if ! id postgres >/dev/null 2>&1; then
        useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
    fi
    as_pg() { runuser -u postgres -- "$@"; }
    PG_OWNER="postgres"
else
    as_pg() { "$@"; }
    PG_OWNER="$(id -un)"
fi

if [[ "${1:-}" == "stop" ]]; then  # bash .ci/postgres.sh stop: shut this cluster down
    as_pg "$BINDIR/pg_ctl" -D "$PGDIR/data" -m fast stop >/dev/null 2>&1 || true
    exit 0
fi

mkdir -p "$PGDIR"
chown "$PG_OWNER" "$PGDIR"
chmod 700 "$PGDIR"
DATA="$PGDIR/data"

if [[ ! -f "$DATA/PG_VERSION" ]]; then
    log "initialising a cluster in $DATA"
    as_pg "$BINDIR/initdb" -D "$DATA" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
        --encoding=UTF8 --locale=C >/dev/null
fi

if ! as_pg "$BINDIR/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
    log "starting the server on 127.0.0.1:$PGPORT"
    as_pg "$BINDIR/pg_ctl" -D "$DATA" -l "$PGDIR/server.log" -w -t 60 start \
        -o "-c listen_addresses=127.0.0.1 -p $PGPORT -c unix_socket_directories=$PGDIR -c max_connections=200 -c fsync=off" \
        >/dev/null
fi

psql_admin() { as_pg "$BINDIR/psql" -h "$PGDIR" -p "$PGPORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -qtA "$@"; }

if [[ "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = '$PGUSER_NAME'")" != "1" ]]; then
    log "creating role $PGUSER_NAME"
    psql_admin -c "CREATE ROLE $PGUSER_NAME LOGIN PASSWORD '$PGPASS'" >/dev/null
fi
if [[ "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = '$PGDB'")" != "1" ]]; then
    log "creating database $PGDB"
    psql_admin -c "CREATE DATABASE $PGDB OWNER $PGUSER_NAME" >/dev/null
fi

echo "postgresql://$PGUSER_NAME:$PGPASS@127.0.0.1:$PGPORT/$PGDB"
