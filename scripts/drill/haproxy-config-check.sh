#!/usr/bin/env bash
# The HAProxy configuration docs/deployment.md gives ("Connections behind a proxy"), checked
# by the real haproxy (Debian's package, installed when missing): `haproxy -c`.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/ensure-haproxy.sh
config=$(mktemp --suffix=.cfg)
trap 'rm -f "$config"' EXIT
awk '/^```haproxy$/ { on = 1; next } on && /^```$/ { exit } on' docs/deployment.md > "$config"
test -s "$config" || { echo "no haproxy block in docs/deployment.md" >&2; exit 1; }
haproxy -c -f "$config"
