#!/usr/bin/env bash
# Installs Debian's prometheus package (prometheus and promtool) for
# `npm run test:prometheus` when it is not there yet. Safe to run any number of times.
set -euo pipefail

if [ -x /usr/bin/prometheus ] && [ -x /usr/bin/promtool ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
# Only the binaries: the package's service is not started in a container without systemd.
$SUDO apt-get install -y --no-install-recommends prometheus

/usr/bin/prometheus --version
