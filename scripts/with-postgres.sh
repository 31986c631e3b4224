#!/usr/bin/env bash
# Runs a command with a throwaway PostgreSQL: Debian's `postgresql` package (installed with
# apt when missing, as ensure-chromium.sh does for Chromium), a data directory in a temp
# dir owned by an unprivileged user (the server refuses to run as root), a free port on
# 127.0.0.1, and everything removed afterwards. No containers.
#
#   bash scripts/with-postgres.sh npm test
#
# The command gets PG_URL (postgres://petstore@127.0.0.1:PORT/postgres, trust auth); it
# creates the databases it needs (tests/helpers.ts makes one per test file).
set -euo pipefail

PG_BIN=""
for dir in /usr/lib/postgresql/*/bin; do
  if [ -x "$dir/initdb" ]; then PG_BIN="$dir"; fi
done
if [ -z "$PG_BIN" ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update
  $SUDO apt-get install -y postgresql
  for dir in /usr/lib/postgresql/*/bin; do
    if [ -x "$dir/initdb" ]; then PG_BIN="$dir"; fi
  done
fi

# As root, the server runs as `nobody`; otherwise as the current user.
AS=()
if [ "$(id -u)" -eq 0 ]; then AS=(runuser -u nobody --); fi

DIR=$(mktemp -d /tmp/petstore-pg.XXXXXX)
chmod 755 "$DIR"
mkdir "$DIR/data"
if [ "$(id -u)" -eq 0 ]; then chown nobody "$DIR/data"; fi

PORT=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')

cleanup() {
  "${AS[@]}" "$PG_BIN/pg_ctl" -D "$DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT

"${AS[@]}" "$PG_BIN/initdb" -D "$DIR/data" -U petstore --auth=trust --no-sync -E UTF8 >"$DIR/initdb.log"
# fsync off: a throwaway server for tests, thrown away with its data.
"${AS[@]}" "$PG_BIN/pg_ctl" -D "$DIR/data" -l "$DIR/data/server.log" -w \
  -o "-p $PORT -k $DIR/data -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
  start >/dev/null

export PG_URL="postgres://petstore@127.0.0.1:$PORT/postgres"
echo "with-postgres: PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') on $PG_URL" >&2
"$@"
