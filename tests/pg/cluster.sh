#!/bin/sh
# cluster.sh start DIR | stop DIR | available: a throwaway PostgreSQL 15 cluster for the tests.
#
#   start DIR   initdb + pg_ctl start in DIR (created; must be empty or absent). The server
#               listens on a Unix socket in DIR only (no TCP port to collide with), trusts
#               local connections, and runs with fsync off: it is thrown away after the run.
#               Prints the libpq conninfo of its "postgres" database on stdout.
#   stop DIR    pg_ctl stop (fast) and removes DIR.
#   halt DIR    pg_ctl stop (fast), DIR kept; resume DIR starts it again (outage tests).
#   available   exits 0 when the PostgreSQL server binaries are installed, else 1 with why.
#
# As root (CI containers) the cluster runs as the "postgres" user (initdb refuses root).
# PGBIN overrides /usr/lib/postgresql/15/bin.
set -eu
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
cmd=${1:-}

as_pg() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$cmd" in
available)
    if [ ! -x "$PGBIN/initdb" ] || [ ! -x "$PGBIN/pg_ctl" ]; then
        echo "PostgreSQL server binaries not found in $PGBIN (apt-get install postgresql-15)" >&2
        exit 1
    fi
    if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
        echo "running as root and there is no postgres user to run the cluster as" >&2
        exit 1
    fi
    ;;
start)
    dir=$2
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    chmod 700 "$dir"
    as_pg "$PGBIN/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; exit 1; }
    # in postgresql.conf rather than on pg_ctl's command line, so that resume starts it alike
    printf "%s\n" "listen_addresses = ''" "unix_socket_directories = '$dir'" "port = 5432" "fsync = off" \
        "synchronous_commit = off" "full_page_writes = off" "max_connections = 300" "shared_buffers = 128MB" |
        as_pg tee -a "$dir/data/postgresql.conf" >/dev/null
    as_pg "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >"$dir/pg_ctl.log" 2>&1 ||
        { cat "$dir/pg_ctl.log" "$dir/server.log" >&2; exit 1; }
    echo "host=$dir port=5432 user=postgres dbname=postgres"
    ;;
halt)
    as_pg "$PGBIN/pg_ctl" -D "$2/data" -m fast -w stop >/dev/null
    ;;
resume)
    as_pg "$PGBIN/pg_ctl" -D "$2/data" -l "$2/server.log" -w -t 60 start >/dev/null
    ;;
stop)
    dir=$2
    [ -d "$dir/data" ] && as_pg "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
*)
    echo "usage: $0 start DIR | stop DIR | halt DIR | resume DIR | available" >&2
    exit 2
    ;;
esac
