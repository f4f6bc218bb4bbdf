#!/bin/sh
# run.sh SERVER [suite args]: the integration suite (tests/integration/) against PostgreSQL.
#
# Starts a throwaway cluster (cluster.sh: initdb + pg_ctl on a Unix socket in a temporary
# folder), runs the suite with FIRSTPASS_TEST_PG set (each test server gets a database of
# its own there), then tests/pg/test_*.py (the replicas, backup and restore), and stops the
# cluster. With arguments only the integration suite runs, with them (run.py's pattern). Without the PostgreSQL server binaries it says so and exits 0: a
# machine without postgresql-15 skips these tests, it does not fail them.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
server=$1
shift
if ! "$here/cluster.sh" available; then
    echo "test-pg: SKIPPED (PostgreSQL is not installed here)"
    exit 0
fi
dir=$(mktemp -d /tmp/fp-pg-XXXXXX)
trap '"$here/cluster.sh" stop "$dir"' EXIT INT TERM
conninfo=$("$here/cluster.sh" start "$dir")
echo "test-pg: PostgreSQL cluster at $conninfo"
export FIRSTPASS_TEST_PG="$conninfo"
export FIRSTPASS_DB_WAIT_S=5
rc=0
"$here/../integration/run.sh" "$server" "$@" || rc=1
if [ $# -eq 0 ]; then
    export FIRSTPASS_SERVER_BIN="$(cd "$(dirname "$server")" && pwd)/$(basename "$server")"
    for t in "$here"/test_*.py; do
        echo "== test-pg: $(basename "$t")"
        /usr/bin/python3 "$t" || rc=1
    done
    # serving agents and captures (tests/agent/): their rules are the database's (one capture
    # of a target in flight, the hourly bound, the claim of a poll), so on PostgreSQL too
    echo "== test-pg: tests/agent"
    "$here/../agent/run.sh" "$server" "$(dirname "$server")/firstpass-upload" || rc=1
fi
# A server on PostgreSQL writes no file beside its working directory: the full-disk
# reserve ("<db>-reserve", SQLite's) once made "host=... dbname=...-reserve" here.
stray=$(find . -maxdepth 1 \( -name 'host=*' -o -name 'postgres*:*' -o -name '*-reserve' \) -newer "$dir" 2>/dev/null | head -3)
if [ -n "$stray" ]; then
    echo "test-pg: files made in $(pwd) by a PostgreSQL server: $stray"
    rc=1
fi
[ $rc = 0 ] && echo "test-pg: passed" || echo "test-pg: FAILED"
exit $rc
