#!/usr/bin/env bash
# Installs Debian's C compiler, which builds the open-loop load generator of `npm run bench`
# (scripts/bench/open-loop.c), when there is none yet. Safe to run any number of times.
set -euo pipefail

if command -v cc >/dev/null 2>&1; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends gcc libc6-dev
command -v cc
