#!/usr/bin/env bash
# docker/pg/check.sh: builds the images and brings docker/compose.pg.yaml up with podman, then
# checks that an upload through the load balancer is readable, identically, through every
# replica, that a delete through one is gone through another, and that /healthz names
# PostgreSQL. For .ci/run; run from anywhere, as root.
#
# Follows ../shared/design/containers.md (podman on a host without a registry): a private
# containers.conf (runc; ulimits root can grant) and storage under a work dir, a local
# debian:bookworm-slim made with mmdebstrap from the host's own apt sources and imported,
# --format docker (BUILDAH_FORMAT), no pulls. Everything it made is removed at the end.
# Skips (exit 0, one line) without root, podman, podman-compose, mmdebstrap or runc.
#   FP_PG_CHECK_KEEP=1   leave the stack up and the work dir in place (prints where)
#   FP_PG_CHECK_PORT     the load balancer's loopback port (default 18080)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PORT=${FP_PG_CHECK_PORT:-18080}
PROJECT=fppgci
log() { printf 'pg-compose: %s\n' "$*" >&2; }
for t in podman podman-compose mmdebstrap runc curl python3; do
    command -v "$t" >/dev/null || { echo "pg-compose: SKIPPED ($t is not installed: apt-get install podman podman-compose mmdebstrap runc aardvark-dns)"; exit 0; }
done
# Service names (postgres, firstpass-a) resolve inside a podman network only through
# aardvark-dns: without it the replicas retry "could not translate host name postgres" and the
# stack never comes up (seen on the first run here, 2026-12-04).
[ -x /usr/lib/podman/aardvark-dns ] || { echo "pg-compose: SKIPPED (aardvark-dns is not installed: apt-get install aardvark-dns)"; exit 0; }
[ "$(id -u)" = 0 ] || { echo "pg-compose: SKIPPED (needs root for podman and mmdebstrap)"; exit 0; }

WORK=$(mktemp -d /var/tmp/fp-pgcompose-XXXXXX)
cat >"$WORK/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=32768:32768"]
[engine]
runtime = "runc"
tmp_dir = "$WORK/tmp"
[network]
network_config_dir = "$WORK/net"
EOF
cat >"$WORK/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$WORK/storage"
runroot = "$WORK/run"
EOF
mkdir -p "$WORK/tmp" "$WORK/net"
export CONTAINERS_CONF=$WORK/containers.conf CONTAINERS_STORAGE_CONF=$WORK/storage.conf BUILDAH_FORMAT=docker
compose() { (cd "$ROOT" && FIRSTPASS_HOST_PORT=127.0.0.1:$PORT podman-compose -p "$PROJECT" -f docker/compose.pg.yaml "$@"); }
cleanup() {
    if [ "${FP_PG_CHECK_KEEP:-0}" = 1 ]; then log "left up; work dir $WORK (CONTAINERS_CONF, CONTAINERS_STORAGE_CONF)"; return; fi
    compose down -v >/dev/null 2>&1 || true
    podman network rm -f "${PROJECT}_default" >/dev/null 2>&1 || true
    podman rmi -a -f >/dev/null 2>&1 || true
    podman system reset -f >/dev/null 2>&1 || true
    umount -R "$WORK/storage/overlay" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

# ---- the base image, from this machine's apt sources ----
t0=$(date +%s)
src=/etc/apt/sources.list.d/debian.sources
[ -f "$src" ] || src=/etc/apt/sources.list
aptopt=()
apt-config dump | grep -q 'Check-Valid-Until "false"' && aptopt=(--aptopt='Acquire::Check-Valid-Until "false"')
log "mmdebstrap bookworm (minbase, merged-usr) from $src"
mmdebstrap --quiet --variant=minbase --mode=root --skip=output/dev \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    "${aptopt[@]}" \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
    bookworm "$WORK/rootfs.tar" "$src" >"$WORK/mmdebstrap.log" 2>&1 || { cat "$WORK/mmdebstrap.log" >&2; exit 1; }
podman import -q --change 'CMD ["bash"]' "$WORK/rootfs.tar" debian:bookworm-slim >/dev/null
rm -f "$WORK/rootfs.tar"
log "base image in $(( $(date +%s) - t0 )) s"

# ---- build and up ----
t0=$(date +%s)
compose build >"$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log" >&2; exit 1; }
log "images built in $(( $(date +%s) - t0 )) s"
compose up -d >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log" >&2; exit 1; }
B=http://127.0.0.1:$PORT
for _ in $(seq 180); do curl -fsS -o /dev/null "$B/healthz" 2>/dev/null && break; sleep 1; done
curl -fsS "$B/healthz" >/dev/null || { podman ps -a >&2; podman logs "${PROJECT}_firstpass-a_1" >&2 || true; exit 1; }

fail=0
ok() { echo "PASS $*"; }
ko() { echo "FAIL $*"; fail=1; }
health=$(curl -fsS "$B/healthz")
case "$health" in *'"backend":"postgresql"'*'"reachable":true'*) ok "healthz through nginx names postgresql: $health" ;; *) ko "healthz: $health" ;; esac

TRACE=$ROOT/../shared/data/traces/hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz
[ -f "$TRACE" ] || TRACE=$(find "$ROOT/tests" -name '*.json' -size +2k | head -1)
up=$(curl -sS -w '\n%{http_code}' --data-binary @"$TRACE" "$B/api/v1/sessions?name=through-nginx&label=ci:pg")
code=${up##*$'\n'}
id=$(printf '%s' "${up%$'\n'*}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])' 2>/dev/null || echo "")
[ "$code" = 201 ] && [ -n "$id" ] && ok "upload through nginx: 201, session $id" || ko "upload through nginx: $code ${up%$'\n'*}"
ref=""
for r in a b c; do
    p=$(( 18081 + $(printf '%d' "'$r") - 97 ))
    body=$(curl -fsS "http://127.0.0.1:$p/api/v1/sessions/$id" || echo "")
    ops=$(curl -fsS "http://127.0.0.1:$p/api/v1/sessions/$id/operators" || echo "")
    [ -n "$body" ] && [ -n "$ops" ] || { ko "replica $r: session $id not readable"; continue; }
    if [ -z "$ref" ]; then ref="$body$ops"; ok "replica $r reads session $id"
    elif [ "$ref" = "$body$ops" ]; then ok "replica $r reads session $id, the same bytes"
    else ko "replica $r answers differently"; fi
done
code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "http://127.0.0.1:18083/api/v1/sessions/$id")
[ "$code" = 204 ] && ok "delete through replica c" || ko "delete through replica c: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:18081/api/v1/sessions/$id")
[ "$code" = 404 ] && ok "gone through replica a at once" || ko "replica a still answers $code"
# the database survives the replicas: down/up keeps a new upload
id2=$(curl -fsS --data-binary @"$TRACE" "$B/api/v1/sessions?name=kept" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
compose down >/dev/null 2>&1
compose up -d >/dev/null 2>&1
for _ in $(seq 120); do curl -fsS -o /dev/null "$B/healthz" 2>/dev/null && break; sleep 1; done
code=$(curl -s -o /dev/null -w '%{http_code}' "$B/api/v1/sessions/$id2")
[ "$code" = 200 ] && ok "session $id2 still there after down/up (volume pg-data)" || ko "after down/up: $code"
[ $fail = 0 ] && echo "pg-compose: passed" || { echo "pg-compose: FAILED"; podman ps -a >&2; }
exit $fail
