#!/usr/bin/env bash
# Fails when `npm install` would change package-lock.json: the lock must be what the
# project's npm on the project's Node writes for package.json, or `npm ci` on a clean clone
# installs something else, or fails. Run on copies of the two files, so nothing here changes.
# Needs the project's Node on PATH (npm scripts and .ci/run put it there).
set -euo pipefail
cd "$(dirname "$0")/.."

dir=$(mktemp -d "${TMPDIR:-/tmp}/petstore-lock-XXXXXX")
trap 'rm -rf "$dir"' EXIT
cp package.json package-lock.json "$dir/"
(cd "$dir" && npm install --package-lock-only --ignore-scripts --no-audit --no-fund >/dev/null)
if ! diff -u package-lock.json "$dir/package-lock.json" >"$dir/lock.diff"; then
  echo "package-lock.json is not what \`npm install\` writes for package.json (node $(node --version), npm $(npm --version)):" >&2
  head -n 60 "$dir/lock.diff" >&2
  echo "Run \`npm install\` with the project's Node (PATH=\$PWD/node_modules/.bin:\$PATH) and commit package-lock.json." >&2
  exit 1
fi
echo "package-lock.json is what \`npm install\` writes for package.json (node $(node --version), npm $(npm --version))"
