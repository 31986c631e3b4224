#!/usr/bin/env bash
# The contract suite as another team's CI runs it: `npm pack` of contract/, installed alone
# into an empty folder, run against a freshly started service in its DEFAULT configuration
# (no setting changed: the limits are the shipped ones), writing a JUnit file, which
# junitparser (Debian's python3-junitparser) must read with the counts of the JSON report.
# Afterwards the runner's address must not be locked out of password logins nor out of
# requests, and the run must have taken at most 60 s (no --limits: it waits out no window,
# and the requests it sends fit in one window of the address limit). Needs the project's
# Node on PATH and a build (npm scripts and .ci/run put them there).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

bash scripts/ensure-junitparser.sh
node scripts/build.mjs

dir=$(mktemp -d "${TMPDIR:-/tmp}/petstore-contract-ci-XXXXXX")
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT

(cd contract && npm pack --silent --pack-destination "$dir" >/dev/null)
mkdir "$dir/job"
(cd "$dir/job" && npm install --silent --no-audit --no-fund "$dir"/petstore-contract-*.tgz)
echo "contract suite installed alone: $(du -sm "$dir/job/node_modules" | cut -f1) MB, $(ls "$dir/job/node_modules" | wc -l) packages"

# The service in its default configuration, but for where it listens and its database file.
port=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
base="http://127.0.0.1:$port"
PORT="$port" HOST=127.0.0.1 DATABASE_PATH="$dir/petstore.db" LOG_LEVEL=warn node dist/server/main.js 2>"$dir/service.log" &
pid=$!
for _ in $(seq 1 150); do
  if curl -fsS "$base/readyz" >/dev/null 2>&1; then break; fi
  kill -0 "$pid" 2>/dev/null || { cat "$dir/service.log" >&2; exit 1; }
  sleep 0.2
done

# An admin, the only way the project allows (account:create), and its key.
admin_email="contract-admin@example.com"
admin_password="$(node -e "console.log(require('crypto').randomBytes(18).toString('base64url'))")"
# Password and key on stdin and in the environment, never in a process list (printf is a builtin).
printf '%s\n' "$admin_password" |
  DATABASE_PATH="$dir/petstore.db" LOG_LEVEL=error npx tsx scripts/account-create.ts --email="$admin_email" --admin >/dev/null
basic() { printf 'user = "%s:%s"\n' "$admin_email" "$admin_password"; }
PETSTORE_ADMIN_KEY=$(basic | curl -fsS -K - -X POST "$base/api-keys" | node -pe "JSON.parse(require('fs').readFileSync(0)).key")
export PETSTORE_ADMIN_KEY

started=$(date +%s)
status=0
(cd "$dir/job" && node_modules/.bin/petstore-contract --base-url "$base" --junit "$dir/reports/contract.xml") >"$dir/run.txt" 2>&1 || status=$?
cat "$dir/run.txt"
if grep -qF "$PETSTORE_ADMIN_KEY" "$dir/run.txt" "$dir/reports/contract.xml" "$dir/reports/contract.json"; then
  echo "the admin key is in the suite's output or reports" >&2
  exit 1
fi
took=$(($(date +%s) - started))
if [ "$status" -ne 0 ]; then
  echo "the packed contract suite failed against the default configuration (exit $status)" >&2
  exit 1
fi
echo "the packed contract suite passed against the default configuration in ${took} s"
# A run takes seconds (contract/README.md has the figures); one that waited out the address
# limit's minute, because it sent more than the limit allows, takes more than 60 s.
[ "$took" -le 60 ] || { echo "it took ${took} s, more than 60 s" >&2; exit 1; }

# A real JUnit reader reads what the JSON report says.
/usr/bin/python3 scripts/junit-summary.py "$dir/reports/contract.xml" >"$dir/read.json"
node -e "
  const read = require('$dir/read.json');
  const json = require('$dir/reports/contract.json');
  const cases = read.suites.flatMap((s) => s.cases);
  const failed = cases.filter((c) => c.result === 'failure' || c.result === 'error').length;
  if (read.tests !== cases.length || cases.length !== json.exchanges.length + json.coverage.length || failed !== json.failed || failed !== 0) {
    console.error('junitparser read', read.tests, 'cases,', failed, 'failed; the JSON report says', json.exchanges.length, '+', json.coverage.length, 'and', json.failed);
    process.exit(1);
  }
  console.log('junitparser read', read.tests, 'test cases in', read.suites.length, 'suites:', failed, 'failed,', read.skipped, 'skipped (unreachable pairs)');
"

# Nothing left behind for the runner's address: a password login works, and requests are served.
login=$(basic | curl -s -o /dev/null -w '%{http_code}' -K - -X POST "$base/api-keys")
[ "$login" = 201 ] || { echo "a password login from the runner's address answered $login after the run" >&2; exit 1; }
limit=$(curl -s -D - -o /dev/null "$base/api-keys" -H @- <<<"Authorization: Bearer $PETSTORE_ADMIN_KEY" | tr -d '\r' | grep -i '^ratelimit:' || true)
remaining=$(echo "$limit" | sed -n 's/.*"address"; r=\([0-9]*\).*/\1/p')
[ -n "$remaining" ] && [ "$remaining" -gt 0 ] || { echo "the runner's address has no requests left after the run: $limit" >&2; exit 1; }
echo "after the run the runner's address logs in with a password (201) and has $remaining requests left this minute"
