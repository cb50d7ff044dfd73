#!/bin/sh
# As the official image's entrypoint: as root, own the data folder and start again as
# postgres; on first start initdb (the password through a file, never argv), password
# authentication from other hosts, and the database POSTGRES_DB; then run the command.
set -eu
user=${POSTGRES_USER:-postgres}
database=${POSTGRES_DB:-$user}
if [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA" /var/run/postgresql
    chown -R postgres:postgres "$PGDATA" /var/run/postgresql
    chmod 700 "$PGDATA"
    exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    password=$(mktemp)
    printf '%s\n' "${POSTGRES_PASSWORD:?}" >"$password"
    initdb -D "$PGDATA" -U "$user" --pwfile="$password" --auth-local=trust \
        --auth-host=scram-sha-256 >/dev/null
    rm -f "$password"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    if [ "$database" != postgres ]; then
        createdb -U "$user" "$database"
    fi
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
if [ "$1" = postgres ]; then
    shift
    exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
fi
exec "$@"
