#!/usr/bin/env bash
# Starts a local Postgres (installing it with apt when missing) and prints a URL for
# `rpcmeter serve --db URL` and for RPCMETER_TEST_PG_URL. Idempotent: run it as often as
# you like. Needs root (apt, pg_ctlcluster); listens on 127.0.0.1 only.
set -euo pipefail

role=rpcmeter
db=rpcmeter
password=rpcmeter

if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
fi

# The newest installed major version, and its first cluster (created when absent).
version=$(ls /usr/lib/postgresql | sort -n | tail -1)
cluster=$(pg_lsclusters -h | awk -v v="$version" '$1 == v { print $2; exit }')
if [ -z "$cluster" ]; then
    cluster=main
    pg_createcluster "$version" "$cluster" >&2
fi
pg_ctlcluster "$version" "$cluster" start >/dev/null 2>&1 || true  # "already running" is fine
port=$(pg_lsclusters -h | awk -v v="$version" -v c="$cluster" '$1 == v && $2 == c { print $3 }')

for _ in $(seq 50); do
    pg_isready -q -h 127.0.0.1 -p "$port" && break
    sleep 0.2
done
pg_isready -q -h 127.0.0.1 -p "$port" || { echo "postgres $version/$cluster did not start" >&2; exit 1; }

as_postgres() { su postgres -c "psql -q -p $port -v ON_ERROR_STOP=1 $*" >&2; }
if [ -z "$(su postgres -c "psql -p $port -tAc \"SELECT 1 FROM pg_roles WHERE rolname = '$role'\"")" ]; then
    as_postgres "-c \"CREATE ROLE $role LOGIN PASSWORD '$password'\""
fi
if [ -z "$(su postgres -c "psql -p $port -tAc \"SELECT 1 FROM pg_database WHERE datname = '$db'\"")" ]; then
    as_postgres "-c \"CREATE DATABASE $db OWNER $role\""
fi

echo "postgres://$role:$password@127.0.0.1:$port/$db"
