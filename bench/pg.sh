#!/usr/bin/env bash
# bench/pg.sh SERVER: the same server on SQLite and on PostgreSQL, side by side in one run
# (docs/scale.md quotes the table). `make bench-pg` runs it on build/firstpass-server.
#
# For each backend, a fresh server (one process, as a replica is) and:
#   ingest     the 1,000,000-event trace (bench/gen_trace.c, 315 MB): curl's time to the 201
#   reads      wrk on /operators, /report, /phases and /timeline of that session, with the
#              reply cache on (the default: on PostgreSQL each hit still reads the shared
#              write generation) and off (--cache-bytes 0: every read runs its SQL)
#   download   GET /trace of the 1M-event session (the event chunks, streamed)
#   list       BENCH_PG_SESSIONS (10,000) uploads of a 100-event trace, 4 at a time, then wrk
#              on GET /api/v1/sessions (50 rows a page) cached and uncached
# PostgreSQL is a throwaway cluster (tests/pg/cluster.sh: Unix socket, fsync off, as SQLite's
# synchronous=NORMAL does not sync each commit either) on the same machine.
#
# Environment: BENCH_PG_SESSIONS=10000, BENCH_PG_EVENTS=1000000, BENCH_WRK_DURATION=5s,
# BENCH_WRK_CONNECTIONS=16, BENCH_OUT=bench/out. Writes bench/out/pg-results.md.
set -euo pipefail

SERVER=${1:?usage: bench/pg.sh SERVER}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
case "$SERVER" in /*) ;; *) SERVER=$PWD/$SERVER ;; esac
OUT=${BENCH_OUT:-$ROOT/bench/out}
NSESS=${BENCH_PG_SESSIONS:-10000}
NEV=${BENCH_PG_EVENTS:-1000000}
WRK_D=${BENCH_WRK_DURATION:-5s}
WRK_C=${BENCH_WRK_CONNECTIONS:-16}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
log() { printf 'bench-pg: %s\n' "$*" >&2; }
"$ROOT/tests/pg/cluster.sh" available || { log "PostgreSQL is not installed: nothing to compare"; exit 0; }
command -v wrk >/dev/null || { log "wrk is missing (apt-get install wrk)"; exit 2; }

GEN=$OUT/gen_trace
[ -x "$GEN" ] && [ "$GEN" -nt "$ROOT/bench/gen_trace.c" ] || cc -O2 -std=c11 -Wall -Wextra -o "$GEN" "$ROOT/bench/gen_trace.c"
BIG=$OUT/trace-${NEV}ev.json
[ -s "$BIG" ] || { log "generating $BIG"; "$GEN" -n "$NEV" -o "$BIG.tmp" 2>/dev/null && mv "$BIG.tmp" "$BIG"; }
SMALL=$OUT/trace-100ev.json
[ -s "$SMALL" ] || "$GEN" -n 100 -o "$SMALL" 2>/dev/null

TMPD=$(mktemp -d /tmp/fp-benchpg-XXXXXX)
chmod 755 "$TMPD"
cp "$SERVER" "$TMPD/firstpass-server"
SERVER=$TMPD/firstpass-server
SPID=""
cleanup() {
  [ -n "$SPID" ] && kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null
  "$ROOT/tests/pg/cluster.sh" stop "$TMPD/pg" || true
  rm -rf "$TMPD"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
CONN=$("$ROOT/tests/pg/cluster.sh" start "$TMPD/pg")
PSQL=/usr/lib/postgresql/15/bin/psql
RES=$OUT/pg-results.tsv
: >"$RES"
put() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$RES"; }

new_db() { # new_db BACKEND: a fresh database's --db
  if [ "$1" = sqlite ]; then echo "$TMPD/db-$RANDOM.sqlite"; else
    local n=fpbench_$RANDOM
    "$PSQL" -X -q "$CONN" -c "CREATE DATABASE $n"
    echo "${CONN/dbname=postgres/dbname=$n}"
  fi
}
start() { # start BACKEND DB [flags]: a server on DB
  local b=$1 db=$2; shift 2
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$SERVER" --port "$PORT" --db "$db" --static "$ROOT/static" --quiet --max-uploads 4 "$@" 2>"$TMPD/server-$b.log" &
  SPID=$!
  for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/healthz" && return 0; sleep 0.1; done
  log "server did not start"; cat "$TMPD/server-$b.log" >&2; exit 1
}
stop() { kill "$SPID"; wait "$SPID" 2>/dev/null || true; SPID=""; }
url() { echo "http://127.0.0.1:$PORT$1"; }

wrk_rps() { # wrk_rps BACKEND KEY PATH
  local o rps p99
  o=$(wrk -c "$WRK_C" -t 2 -d "$WRK_D" --latency "$(url "$3")" 2>&1)
  rps=$(printf '%s\n' "$o" | awk '/^Requests\/sec:/ {print $2}')
  p99=$(printf '%s\n' "$o" | awk '$1 == "99%" {print $2}')
  put "$1" "$2 req/s" "${rps:-0}"
  put "$1" "$2 p99" "${p99:-?}"
  printf '%s\n' "$o" | grep -q "Non-2xx" && put "$1" "$2 non-2xx" "$(printf '%s\n' "$o" | awk '/Non-2xx/ {print $NF}')"
  log "  $1 $2: ${rps:-?} req/s p99 ${p99:-?}"
}

for B in sqlite postgresql; do
  log "== $B"
  DB=$(new_db "$B")
  start "$B" "$DB"
  t=$(curl -s -o "$TMPD/up.json" -w '%{time_total}' --data-binary @"$BIG" "$(url /api/v1/sessions)")
  id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$TMPD/up.json")
  put "$B" "ingest ${NEV} events (s)" "$t"
  log "  ingest: $t s"
  t=$(curl -s -o /dev/null -w '%{time_total}' "$(url /api/v1/sessions/$id/trace)")
  put "$B" "download ${NEV} events (s)" "$t"
  # one transfer each, separated by `next` (without it curl would send every body to every URL)
  for i in $(seq "$NSESS"); do
    printf 'url = "http://127.0.0.1:%s/api/v1/sessions?label=n:%s"\ndata-binary = "@%s"\noutput = "/dev/null"\nwrite-out = "%%{http_code}\\n"\n' "$PORT" "$i" "$SMALL"
    [ "$i" -lt "$NSESS" ] && echo next
  done >"$TMPD/curl.cfg"
  t0=$(date +%s.%N)
  curl -s --parallel --parallel-max 4 -K "$TMPD/curl.cfg" >"$TMPD/codes" || true
  t1=$(date +%s.%N)
  put "$B" "uploads answered 201" "$(grep -c '^201$' "$TMPD/codes" || true)"
  put "$B" "${NSESS} uploads of 100 events, 4 at a time (uploads/s)" "$(python3 -c "print(round($NSESS / ($t1 - $t0), 1))")"
  n=$(curl -s "$(url /metrics)" | awk '/^firstpass_sessions_stored / {print $2}')
  log "  sessions stored: ${n:-?}"
  put "$B" "sessions stored" "${n:-?}"
  for cache in on off; do
    if [ $cache = off ]; then stop; start "$B" "$DB" --cache-bytes 0; fi
    for ep in operators report phases "timeline?buckets=500"; do wrk_rps "$B" "cache $cache: 1M session /${ep%%\?*}" "/api/v1/sessions/$id/$ep"; done
    wrk_rps "$B" "cache $cache: sessions list (50 of ${NSESS})" "/api/v1/sessions"
    wrk_rps "$B" "cache $cache: sessions list by label" "/api/v1/sessions?label=n:77"
  done
  stop
done

python3 - "$RES" "$OUT/pg-results.md" <<'EOF'
import sys
rows, order = {}, []
for line in open(sys.argv[1]):
    b, k, v = line.rstrip("\n").split("\t")
    if k not in order:
        order.append(k)
    rows.setdefault(k, {})[b] = v
def num(v):
    try:
        if v.endswith("ms"): return float(v[:-2])
        if v.endswith("us"): return float(v[:-2]) / 1000
        if v.endswith("s"): return float(v[:-1]) * 1000
        return float(v)
    except (ValueError, AttributeError):
        return None
out = ["| measurement | SQLite | PostgreSQL | PostgreSQL / SQLite |", "|---|---:|---:|---:|"]
for k in order:
    a, b = rows[k].get("sqlite", "-"), rows[k].get("postgresql", "-")
    x, y = num(a), num(b)
    out.append("| %s | %s | %s | %s |" % (k, a, b, "%.2f" % (y / x) if x and y else "-"))
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print("\n".join(out))
EOF
