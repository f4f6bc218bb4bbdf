#!/bin/sh
# postgres-entrypoint.sh: creates the cluster on first start (role and database
# $POSTGRES_USER / $POSTGRES_DB, password $POSTGRES_PASSWORD or the file $POSTGRES_PASSWORD_FILE
# names, as the official postgres image), then runs PostgreSQL in the foreground.
# Authentication as the official image's: scram-sha-256 over TCP (the compose network), trust
# on the container's own Unix socket, so that `compose exec postgres pg_dump -U firstpass ...`
# works without a password (docker/README.md, "Backups"; before, it failed with
# "fe_sendauth: no password supplied").
set -eu
bin=/usr/lib/postgresql/15/bin
data=/var/lib/postgresql/data
if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then POSTGRES_PASSWORD=$(cat "$POSTGRES_PASSWORD_FILE"); fi
: "${POSTGRES_USER:=firstpass}" "${POSTGRES_DB:=firstpass}" "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD or POSTGRES_PASSWORD_FILE}"
if [ ! -s "$data/PG_VERSION" ]; then
    pw=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pw"
    "$bin/initdb" -D "$data" -U "$POSTGRES_USER" --pwfile="$pw" --auth-host=scram-sha-256 --auth-local=trust -E UTF8 --locale=C.UTF-8 >/dev/null
    rm -f "$pw"
    echo "host all all 0.0.0.0/0 scram-sha-256" >>"$data/pg_hba.conf"
    "$bin/pg_ctl" -D "$data" -o "-c listen_addresses=''" -w start >/dev/null
    PGPASSWORD=$POSTGRES_PASSWORD "$bin/psql" -X -q -h /run/postgresql -U "$POSTGRES_USER" -d postgres \
        -c "CREATE DATABASE \"$POSTGRES_DB\" OWNER \"$POSTGRES_USER\""
    "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null
fi
exec "$bin/postgres" -D "$data" -c listen_addresses='*' -c max_connections=200
