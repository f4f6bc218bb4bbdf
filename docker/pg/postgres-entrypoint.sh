#!/bin/sh
# postgres-entrypoint.sh: creates the cluster on first start (role and database
# $POSTGRES_USER / $POSTGRES_DB, password $POSTGRES_PASSWORD, scram-sha-256 from the
# compose network), then runs PostgreSQL in the foreground.
set -eu
bin=/usr/lib/postgresql/15/bin
data=/var/lib/postgresql/data
: "${POSTGRES_USER:=firstpass}" "${POSTGRES_DB:=firstpass}" "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
if [ ! -s "$data/PG_VERSION" ]; then
    pw=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pw"
    "$bin/initdb" -D "$data" -U "$POSTGRES_USER" --pwfile="$pw" -A scram-sha-256 -E UTF8 --locale=C.UTF-8 >/dev/null
    rm -f "$pw"
    echo "host all all 0.0.0.0/0 scram-sha-256" >>"$data/pg_hba.conf"
    "$bin/pg_ctl" -D "$data" -o "-c listen_addresses=''" -w start >/dev/null
    PGPASSWORD=$POSTGRES_PASSWORD "$bin/psql" -X -q -h /run/postgresql -U "$POSTGRES_USER" -d postgres \
        -c "CREATE DATABASE \"$POSTGRES_DB\" OWNER \"$POSTGRES_USER\""
    "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null
fi
exec "$bin/postgres" -D "$data" -c listen_addresses='*' -c max_connections=200
