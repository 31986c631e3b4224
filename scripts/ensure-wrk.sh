#!/usr/bin/env bash
# Installs Debian's wrk, the load generator of `npm run bench` (scripts/bench/wrk.ts), when
# it is not there yet. Safe to run any number of times.
set -euo pipefail

if command -v wrk >/dev/null 2>&1; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends wrk
command -v wrk
