#!/usr/bin/env bash
# Start (or reuse) a private PostgreSQL server for the history-store contract tests,
# then print two lines for the caller to eval:
#
#   export TESTFLEET_TEST_PG_URL=...     owner role: may create schemas and tables (DDL)
#   export TESTFLEET_TEST_PG_URL_RW=...  restricted role: may only read and write rows
#
# Usage:  eval "$(bash .ci/postgres.sh)"
#
# Idempotent: a second run finds the running server (and the roles, database and
# passwords it created) and prints the same lines. Installs the `postgresql` Debian
# package when no server binaries are present. The server runs as the `postgres`
# user (initdb refuses root), listens on 127.0.0.1 only, on a free port, with its data,
# socket and log under $TESTFLEET_PG_DIR (default /tmp/testfleet-pg).
# Stop it with:  bash .ci/postgres.sh --stop
set -euo pipefail

STATE_DIR="${TESTFLEET_PG_DIR:-/tmp/testfleet-pg}"
DATA="$STATE_DIR/data"
DB="testfleet_test"
OWNER="testfleet"
RW="testfleet_rw"

log() { echo "postgres.sh: $*" >&2; }

find_bin() {
  local d
  d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  [ -n "$d" ] && [ -x "$d/initdb" ] && echo "$d"
  return 0
}

BIN="$(find_bin)"
if [ -z "$BIN" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    log "PostgreSQL server binaries are missing and installing them needs root"
    exit 1
  fi
  log "installing the postgresql package"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends postgresql >&2
  BIN="$(find_bin)"
  [ -n "$BIN" ] || { log "postgresql installed but no initdb found under /usr/lib/postgresql"; exit 1; }
fi

if [ "$(id -u)" -eq 0 ]; then
  if ! id postgres >/dev/null 2>&1; then
    useradd --system --home-dir /var/lib/postgresql --shell /bin/sh postgres
  fi
  as_pg() {
    if command -v runuser >/dev/null 2>&1; then
      runuser -u postgres -- "$@"
    else
      su postgres -s /bin/sh -c "$(printf '%q ' "$@")"
    fi
  }
else
  as_pg() { "$@"; }
fi

if [ "${1:-}" = "--stop" ]; then
  if [ -s "$DATA/PG_VERSION" ]; then
    as_pg "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >&2 || true
  fi
  exit 0
fi

mkdir -p "$STATE_DIR"
chmod 700 "$STATE_DIR"
[ "$(id -u)" -eq 0 ] && chown postgres: "$STATE_DIR"

if [ ! -s "$DATA/PG_VERSION" ]; then
  log "initdb in $DATA"
  as_pg "$BIN/initdb" -D "$DATA" -U postgres -E UTF8 --locale=C \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
fi

if ! as_pg "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
  PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  log "starting the server on 127.0.0.1:$PORT"
  # Durability settings are off: this server only ever holds throwaway test data.
  as_pg "$BIN/pg_ctl" -D "$DATA" -l "$STATE_DIR/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $PORT -k $STATE_DIR -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
    start >/dev/null
fi
# The running server's port is line 4 of postmaster.pid (whatever port it was started on).
PORT="$(sed -n 4p "$DATA/postmaster.pid")"

PASSFILE="$STATE_DIR/passwords"
if [ ! -s "$PASSFILE" ]; then
  umask 077
  printf '%s %s\n' \
    "$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')" \
    "$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$PASSFILE"
fi
read -r OWNER_PW RW_PW <"$PASSFILE"

psql_su() { as_pg "$BIN/psql" -h "$STATE_DIR" -p "$PORT" -U postgres -v ON_ERROR_STOP=1 -qAt "$@"; }

psql_su -d postgres >/dev/null <<SQL
DO \$\$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$OWNER') THEN
    CREATE ROLE $OWNER LOGIN;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$RW') THEN
    CREATE ROLE $RW LOGIN;
  END IF;
END
\$\$;
ALTER ROLE $OWNER LOGIN CREATEDB NOSUPERUSER PASSWORD '$OWNER_PW';
ALTER ROLE $RW LOGIN NOCREATEDB NOCREATEROLE NOSUPERUSER PASSWORD '$RW_PW';
SQL

if [ "$(psql_su -d postgres -c "SELECT 1 FROM pg_database WHERE datname = '$DB'")" != "1" ]; then
  psql_su -d postgres -c "CREATE DATABASE $DB OWNER $OWNER" >/dev/null
fi
# The restricted role may connect and use what it is granted, but never create:
# no CREATE on the database (schemas) nor on the public schema (tables).
psql_su -d "$DB" >/dev/null <<SQL
REVOKE CREATE ON DATABASE $DB FROM PUBLIC;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
GRANT CONNECT ON DATABASE $DB TO $RW;
GRANT USAGE ON SCHEMA public TO $RW;
SQL

echo "export TESTFLEET_TEST_PG_URL='postgresql://$OWNER:$OWNER_PW@127.0.0.1:$PORT/$DB'"
echo "export TESTFLEET_TEST_PG_URL_RW='postgresql://$RW:$RW_PW@127.0.0.1:$PORT/$DB'"
