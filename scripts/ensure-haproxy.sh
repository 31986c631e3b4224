#!/usr/bin/env bash
# Installs Debian's haproxy package for the HAProxy drills (scripts/drill/) when it is not
# there yet. Safe to run any number of times.
set -euo pipefail

if command -v haproxy >/dev/null; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# Only the binary is used: the package's service is not started in a container without systemd.
$SUDO apt-get install -y -qq --no-install-recommends haproxy >/dev/null

# sed reads all of it: with head, haproxy could write after head left and die of SIGPIPE,
# which pipefail makes this script's status.
haproxy -v | sed -n 1p
