#!/usr/bin/env bash
# The HTML report's browser test drives a system Chromium (pip cannot provide one, and downloading a browser
# build is not an option here). Install Debian's package when we can; otherwise say why the test will skip.
set -u
if command -v chromium >/dev/null 2>&1 || [ -n "${SEQJUDGE_CHROMIUM:-}" ]; then
  exit 0
fi
exec bash "$(dirname "$0")/apt-install.sh" chromium "the browser test" \
  "Install Chromium or set SEQJUDGE_CHROMIUM to run it."
