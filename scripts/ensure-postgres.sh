#!/usr/bin/env bash
# The store's test suite runs against a real PostgreSQL server that the tests start themselves
# (tests/pg_server.py: initdb into a temporary folder, postgres on a loopback port). They need the server's
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
exec bash "$(dirname "$0")/apt-install.sh" postgresql "the store's PostgreSQL tests" \
  "Install PostgreSQL or set SEQJUDGE_PG_BIN to the folder holding initdb and postgres."
