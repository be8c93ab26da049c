#!/usr/bin/env bash
# The HTML report's browser test drives a system Chromium (pip cannot provide one, and downloading a browser
# build is not an option here). Install Debian's package when we can; otherwise say why the test will skip.
set -u
if command -v chromium >/dev/null 2>&1 || [ -n "${SEQJUDGE_CHROMIUM:-}" ]; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's chromium for the browser test (once)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null && exit 0
  echo "warning: could not install chromium; the browser test will be skipped with its reason" >&2
  exit 0
fi
echo "note: no chromium found and cannot install it (not root or no apt-get); the browser test will be" \
  "skipped with its reason. Install Chromium or set SEQJUDGE_CHROMIUM to run it." >&2
