#!/usr/bin/env bash
# cache.sh SERVER: read throughput of the reply cache (server/http/rcache.h), side by side.
#
# Generates (or reuses) bench/out/trace-100MB.json with gen_trace, starts SERVER twice on
# copies of one database holding that session, once with --cache-bytes 0 (the baseline:
# every request renders from SQLite) and once with the default cache, and runs
#   wrk -c $BENCH_WRK_CONNECTIONS -t $BENCH_WRK_THREADS -d $BENCH_WRK_DURATION --latency
# on /operators, /report, /phases and /kernels of the session against each. Prints one
# table row per endpoint: req/s and p99 of both, and the ratio cached / uncached.
# Env: BENCH_OUT (bench/out), BENCH_SIZE (100M), BENCH_WRK_* as in run.sh.
set -euo pipefail
SERVER=$(cd "$(dirname "${1:?usage: cache.sh SERVER}")" && pwd)/$(basename "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${BENCH_OUT:-$HERE/out}
SIZE=${BENCH_SIZE:-100M}
DUR=${BENCH_WRK_DURATION:-10s}
CONN=${BENCH_WRK_CONNECTIONS:-32}
THR=${BENCH_WRK_THREADS:-2}
command -v wrk >/dev/null || { echo "cache.sh: wrk is needed (apt-get install -y wrk)" >&2; exit 1; }
mkdir -p "$OUT"
[ -x "$OUT/gen_trace" ] || cc -O2 -o "$OUT/gen_trace" "$HERE/gen_trace.c"
TRACE=$OUT/trace-${SIZE}B.json
[ -s "$TRACE" ] || "$OUT/gen_trace" -s "$SIZE" -o "$TRACE"
TMP=$(mktemp -d /tmp/fp-bench-cache-XXXXXX)
PID=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; rm -rf "$TMP"' EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
start() { # start DB CACHE_BYTES -> sets PID, URL
    local p; p=$(port)
    "$SERVER" --port "$p" --db "$1" --quiet --cache-bytes "$2" >"$TMP/server.log" 2>&1 &
    PID=$!
    URL=http://127.0.0.1:$p
    for _ in $(seq 1 100); do curl -fs "$URL/healthz" >/dev/null && return 0; sleep 0.1; done
    echo "cache.sh: server did not start" >&2; cat "$TMP/server.log" >&2; exit 1
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; PID=; }

start "$TMP/a.db" 0
ID=$(curl -fsS --data-binary @"$TRACE" "$URL/api/v1/sessions" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
stop
cp "$TMP/a.db" "$TMP/b.db"

declare -A RPS P99
for mode in off on; do
    if [ $mode = off ]; then start "$TMP/a.db" 0; else start "$TMP/b.db" 64M; fi
    for ep in operators report phases kernels; do
        wrk -c "$CONN" -t "$THR" -d "$DUR" --latency "$URL/api/v1/sessions/$ID/$ep" >"$TMP/wrk.txt"
        grep -q "Non-2xx" "$TMP/wrk.txt" && { echo "cache.sh: non-2xx replies on $ep ($mode)" >&2; cat "$TMP/wrk.txt" >&2; exit 1; }
        RPS[$mode.$ep]=$(awk '/Requests\/sec/ {print $2}' "$TMP/wrk.txt")
        P99[$mode.$ep]=$(awk '$1 == "99%" {print $2}' "$TMP/wrk.txt")
    done
    stop
done
echo "trace $(basename "$TRACE"), session $ID; wrk -c $CONN -t $THR -d $DUR; $(nproc) cores"
echo "| endpoint | uncached req/s | uncached p99 | cached req/s | cached p99 | **cached / uncached** |"
echo "|---|---|---|---|---|---|"
for ep in operators report phases kernels; do
    r=$(python3 -c "print('%.1fx' % (${RPS[on.$ep]} / ${RPS[off.$ep]}))")
    echo "| /$ep | ${RPS[off.$ep]} | ${P99[off.$ep]} | ${RPS[on.$ep]} | ${P99[on.$ep]} | **$r** |"
done
