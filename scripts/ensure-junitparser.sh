#!/usr/bin/env bash
# Installs Debian's python3-junitparser, the JUnit XML reader the tests read the contract
# suite's reports with (tests/contract-junit.test.ts, scripts/check-contract-package.sh),
# when it is not there yet, for Debian's own Python (/usr/bin/python3, whatever else is on
# PATH). Safe to run any number of times.
set -euo pipefail

if /usr/bin/python3 -c 'import junitparser' 2>/dev/null; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends python3-junitparser >/dev/null
/usr/bin/python3 -c 'import junitparser; print("junitparser", junitparser.version)'
