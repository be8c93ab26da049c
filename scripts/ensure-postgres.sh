#!/usr/bin/env bash
# The store's test suite runs against a real PostgreSQL server that the tests start themselves
# (tests/pg_server.py: initdb into a temporary folder, postgres on a socket in it). They need the server's
# programs: install Debian's package when they are missing and we can; otherwise say why those tests skip.
set -u
for dir in ${SEQJUDGE_PG_BIN:-} /usr/lib/postgresql/*/bin; do
  if [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ]; then
    exit 0
  fi
done
if command -v initdb >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's postgresql for the store's PostgreSQL tests (once)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null && exit 0
  echo "warning: could not install postgresql; the store's PostgreSQL tests will be skipped with their reason" >&2
  exit 0
fi
echo "note: no PostgreSQL server programs (initdb, postgres) found and cannot install them (not root or no" \
  "apt-get); the store's PostgreSQL tests will be skipped with their reason. Install PostgreSQL or set" \
  "SEQJUDGE_PG_BIN to the folder holding initdb and postgres." >&2
