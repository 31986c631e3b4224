#!/usr/bin/env bash
# Sourced by the container CI tools (scripts/container/): installs podman and what it needs
# from Debian's packages when missing, and points podman at a containers.conf of this
# machine's kind. None of this is in the image's recipe (Containerfile, compose.yaml):
# it is what this machine needs to run them.
# - runc, not podman's default crun: crun fails here ("cgroups in hybrid mode not supported").
# - Per-container limits within the host's: nofile at most its hard limit, nproc <= 32768.
# - --format docker on builds: the OCI format drops HEALTHCHECK.
# - The CNI dnsname plugin, for the compose stack's names.

missing=()
for tool in podman runc buildah debootstrap podman-compose; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
# The compose stack's containers find each other by name (app1 reaches db): on podman's CNI
# networks that takes the dnsname plugin, which Debian's podman only recommends. Without it
# the instances never reach PostgreSQL (ENOTFOUND) and never turn healthy.
[ -x /usr/lib/cni/dnsname ] || missing+=(dnsname)
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends podman runc buildah debootstrap podman-compose uidmap slirp4netns fuse-overlayfs \
    golang-github-containernetworking-plugin-dnsname >/dev/null
fi

nofile=$(ulimit -Hn)
if [ "$nofile" = unlimited ] || [ "$nofile" -gt 65536 ]; then nofile=65536; fi
CONTAINERS_CONF="${TMPDIR:-/tmp}/petstore-containers-$(id -u).conf"
cat >"$CONTAINERS_CONF" <<CONF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=32768:32768"]

[engine]
runtime = "runc"
CONF
export CONTAINERS_CONF
export BUILDAH_FORMAT=docker
