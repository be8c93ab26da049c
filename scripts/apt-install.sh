#!/usr/bin/env bash
# Install one Debian package for a test that needs a system program (ensure-chromium.sh,
# ensure-postgres.sh): `apt-install.sh PACKAGE "WHAT NEEDS IT" "HOW TO PROVIDE IT OTHERWISE"`. Never fails
# the build: where it cannot install, it says that the tests needing the package will skip with their reason.
set -u
package=$1 purpose=$2 otherwise=$3
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's $package for $purpose (once)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null && exit 0
  echo "warning: could not install $package; $purpose will be skipped with its reason" >&2
  exit 0
fi
echo "note: no $package found and cannot install it (not root or no apt-get); $purpose will be skipped" \
  "with its reason. $otherwise" >&2
