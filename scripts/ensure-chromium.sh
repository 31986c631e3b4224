#!/usr/bin/env bash
# Installs Debian's chromium for `npm run test:browser` when it is not there yet.
# Playwright's own browser download needs a CDN that CI cannot reach; Debian's
# package comes from a registry it can. Safe to run any number of times.
set -euo pipefail

CHROMIUM=/usr/bin/chromium

if [ -x "$CHROMIUM" ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y chromium

"$CHROMIUM" --version
