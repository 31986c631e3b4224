#!/usr/bin/env bash
# Runs a command in a network namespace of its own (root only): a loopback nobody else on
# the machine sends on, where net.core.somaxconn lets listen() have the backlog the service
# asks for (its global connection cap) instead of the kernel's default cap of 4096. Left
# when the command ends; nothing of the machine's own network changes.
set -euo pipefail
command -v ip >/dev/null || { apt-get update -qq && apt-get install -y -qq iproute2 >/dev/null; }
exec unshare --net -- bash -c 'ip link set lo up && sysctl -q -w net.core.somaxconn=65535 && exec "$@"' own-network "$@"
