#!/bin/sh
# run.sh SERVER [suite args]: the integration suite (tests/integration/) against PostgreSQL.
#
# Starts a throwaway cluster (cluster.sh: initdb + pg_ctl on a Unix socket in a temporary
# folder), runs the suite with FIRSTPASS_TEST_PG set (each test server gets a database of
# its own there), then the multi-replica test (tests/pg/test_replicas.py) when present, and
# stops the cluster. Without the PostgreSQL server binaries it says so and exits 0: a
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
"$here/../integration/run.sh" "$server" "$@"
if [ -f "$here/test_replicas.py" ] && [ $# -eq 0 ]; then
    FIRSTPASS_SERVER_BIN="$(cd "$(dirname "$server")" && pwd)/$(basename "$server")" /usr/bin/python3 "$here/test_replicas.py"
fi
