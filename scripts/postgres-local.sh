#!/usr/bin/env bash
# Starts this machine's PostgreSQL cluster (installing it from Debian when missing and allowed) and
# creates the wsops role and databases used by `npm test` and the benchmarks. Safe to run again.
set -euo pipefail
ROLE=${PGROLE:-wsops}
PASS=${PGPASS:-wsops}
if ! command -v pg_ctlcluster >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "postgres-local: installing PostgreSQL from Debian" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  else
    echo "postgres-local: PostgreSQL is not installed and cannot be installed here" >&2
    exit 1
  fi
fi
if [ "$(id -u)" != 0 ]; then
  echo "postgres-local: needs root to start the cluster" >&2
  exit 1
fi
VERSION=$(ls /etc/postgresql 2>/dev/null | sort -n | tail -1)
if [ -z "$VERSION" ]; then
  echo "postgres-local: no PostgreSQL cluster configured" >&2
  exit 1
fi
pg_ctlcluster --skip-systemctl-redirect "$VERSION" main start 2>/dev/null || true
for _ in $(seq 1 30); do
  su postgres -c "psql -qtAc 'SELECT 1'" >/dev/null 2>&1 && break
  sleep 0.5
done
psql_su() { su postgres -c "psql -qtAc \"$1\""; }
[ "$(psql_su "SELECT 1 FROM pg_roles WHERE rolname = '$ROLE'")" = 1 ] || psql_su "CREATE ROLE $ROLE LOGIN SUPERUSER PASSWORD '$PASS'" >/dev/null
for db in wsops wsops_test wsops_bench wsops_contract; do
  [ "$(psql_su "SELECT 1 FROM pg_database WHERE datname = '$db'")" = 1 ] || psql_su "CREATE DATABASE $db OWNER $ROLE" >/dev/null
done
echo "postgres-local: postgres://$ROLE:$PASS@127.0.0.1:5432/wsops_test is ready" >&2
