#!/bin/sh
# install-deps.sh: installs the Debian packages that firstpass needs to build, test and run.
#
# Idempotent: it asks dpkg which packages are missing and does nothing when none are.
# Only root can install; anyone else gets the list and the command to run.
# Usage: scripts/install-deps.sh [build|test|containers|all]   (default: build)
#   build: compilers' libraries for the server, collector and unit tests
#   test:  build + what the test suite drives (python3-torch oracle, pip and venv for the
#          Python package's install test, chromium, node, ...)
#   containers: podman and what docker/ci.sh needs to build and run the images of docker/
#          without a registry (a local base image made with mmdebstrap; runc, since crun
#          refuses this host's hybrid cgroups; netavark + aardvark-dns for compose's service
#          names; iptables, which netavark runs to set up a bridge network and its published
#          ports: without it every `podman run --network` fails with "netavark: No such file
#          or directory", exit 127, as on a fresh machine on 2026-12-05; catatonit, the pause
#          process of the pods `podman kube play` makes ("finding pause binary" without it);
#          python3-yaml, which tests/kubernetes/ reads the manifests with);
#          ../shared/design/containers.md
#   all:   test + containers
set -eu

BUILD_PKGS="build-essential pkg-config libmicrohttpd-dev libjansson-dev libsqlite3-dev zlib1g-dev libzstd-dev libyajl-dev nettle-dev libpq-dev libcmocka-dev libcurl4-openssl-dev sqlite3 curl"
TEST_PKGS="python3 python3-torch python3-numpy python3-pip python3-venv python3-yaml clang libclang-rt-14-dev valgrind chromium nodejs npm wrk postgresql-15"
CONTAINER_PKGS="podman podman-compose runc netavark aardvark-dns iptables catatonit mmdebstrap curl python3 python3-yaml"

what=${1:-build}
case "$what" in
  build) pkgs=$BUILD_PKGS ;;
  test) pkgs="$BUILD_PKGS $TEST_PKGS" ;;
  containers) pkgs=$CONTAINER_PKGS ;;
  all) pkgs="$BUILD_PKGS $TEST_PKGS $CONTAINER_PKGS" ;;
  *) echo "usage: $0 [build|test|containers|all]" >&2; exit 2 ;;
esac

missing=""
for p in $pkgs; do
  # dpkg-query prints "install ok installed" only for a fully installed package.
  st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  case "$st" in
    *"ok installed") ;;
    *) missing="$missing $p" ;;
  esac
done
# node/npm may come from elsewhere (nvm, a tarball): a working binary counts as installed.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  missing=$(echo "$missing" | tr ' ' '\n' | grep -v -x -e nodejs -e npm | tr '\n' ' ')
fi
missing=$(echo "$missing" | xargs)
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
  echo "install-deps: missing Debian packages: $missing" >&2
  echo "install-deps: run as root: apt-get update && apt-get install -y $missing" >&2
  exit 1
fi
echo "install-deps: installing $missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing
