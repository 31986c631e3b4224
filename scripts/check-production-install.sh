#!/usr/bin/env bash
# docs/deployment.md's production recipe, as CI runs it: package.json, package-lock.json
# and a copied build in an empty folder, `npm ci --omit=dev`, then the service started from
# it serves. express-openapi-validator's folder is removed from that install first: the
# bundle carries the patched copy (scripts/build.mjs), so the unpatched one there is never
# what runs. Needs the project's Node on PATH (npm scripts and .ci/run put it there).
set -euo pipefail
cd "$(dirname "$0")/.."

node scripts/build.mjs
grep -q 'routeMatcherCache' dist/server/service.js || {
  echo "dist/server/service.js does not carry the patched express-openapi-validator (patches/)" >&2
  exit 1
}

dir=$(mktemp -d "${TMPDIR:-/tmp}/petstore-production-XXXXXX")
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT

cp package.json package-lock.json "$dir/"
cp -R dist "$dir/dist"
(cd "$dir" && npm ci --omit=dev --no-audit --no-fund)
rm -rf "$dir/node_modules/express-openapi-validator"
for dev in patch-package esbuild typescript jest tsx; do
  if [ -e "$dir/node_modules/$dev" ]; then
    echo "npm ci --omit=dev installed the devDependency $dev" >&2
    exit 1
  fi
done
echo "production install: $(du -sm "$dir/node_modules" | cut -f1) MB in node_modules"

port=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
(cd "$dir" && exec env PORT="$port" HOST=127.0.0.1 DATABASE_PATH="$dir/data/petstore.db" LOG_LEVEL=warn \
  node_modules/.bin/node dist/server/main.js) &
pid=$!
base="http://127.0.0.1:$port"
for _ in $(seq 1 100); do
  if curl -fsS "$base/readyz" >/dev/null 2>&1; then break; fi
  kill -0 "$pid" 2>/dev/null || { echo "the production install's service exited before it was ready" >&2; exit 1; }
  sleep 0.2
done
curl -fsS "$base/readyz" >/dev/null

email="production-$$@example.com"
password="correct horse battery staple"
status() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
[ "$(status -X POST "$base/accounts" -H 'Content-Type: application/json' -d "{\"email\":\"$email\",\"password\":\"$password\"}")" = 201 ]
key=$(curl -fsS -X POST "$base/api-keys" -u "$email:$password" | node -pe "JSON.parse(require('fs').readFileSync(0)).key")
# The demo catalogue of a new database, through the validator the bundle carries.
[ "$(status "$base/pets" -H "Authorization: Bearer $key")" = 200 ]
[ "$(status "$base/pets?limit=1000" -H "Authorization: Bearer $key")" = 400 ]

kill -TERM "$pid"
wait "$pid"
pid=""
echo "production install: npm ci --omit=dev plus a copied dist/ serves (sign-up, key, GET /pets 200, a bad limit 400), and stops on SIGTERM with 0"
