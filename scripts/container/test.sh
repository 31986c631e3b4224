#!/usr/bin/env bash
# npm run test:container: podman set up for this machine (setup.sh), the official base
# images' stand-ins made where no registry is reachable (base-images.sh), then the image and
# the compose stack checked (test.ts). Needs the project's Node on PATH (npm scripts put it there).
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/container/setup.sh
bash scripts/container/base-images.sh
exec tsx scripts/container/test.ts
