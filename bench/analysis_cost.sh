#!/usr/bin/env bash
# bench/analysis_cost.sh SERVER [BASE_REV]: the instructions one upload costs, this server against
# the server built from BASE_REV (default: the commit before issue 48's passes, 914c026), side by
# side in one run, counted by valgrind's callgrind (issue 48 item 8: "the new passes must not slow
# ingest measurably"). Why instructions and not seconds: this 2-core VM is shared, and wall or CPU
# seconds moved by 10-30% between identical runs; an instruction count is the same on every run.
#
# For each shape of bench/gen_trace.c at BENCH_COST_MB (default 20) MB: the whole server's
# instructions over the upload (parse + analysis + storage: the program total less an idle
# server's start and stop, measured once per binary) and analyze_run's inclusive instructions
# (the analysis on the request's thread; its jobs on other threads, gpu_facts and steps, count
# in the total only), then new / base for each.
#
# Environment: BENCH_SHAPES="llm flat" (which shapes), BENCH_COST_MB=20, BENCH_OUT as bench/run.sh.
# Needs valgrind (callgrind_annotate), git, make, curl. Takes ~1 min per shape and binary at
# 20 MB, plus building BASE_REV once (cached in BENCH_OUT by its commit id).
set -euo pipefail

[ $# -ge 1 ] || { echo "usage: bench/analysis_cost.sh SERVER [BASE_REV]" >&2; exit 2; }
. "$(dirname "$0")/lib.sh"

bench_init "$1" cost
NEW_BIN=$SERVER
SHAPES=${BENCH_SHAPES:-llm flat}
MB=${BENCH_COST_MB:-20}
BASE_REV=${2:-914c026}
for t in valgrind callgrind_annotate git make curl; do need "$t" || { log "missing tool: $t (apt-get install valgrind)"; exit 2; }; done

# the base server, built once per commit in a worktree of its own
BASE_ID=$(git -C "$ROOT" rev-parse --short=12 "$BASE_REV^{commit}")
BASE_DIR=$OUT/base-$BASE_ID
if [ ! -x "$BASE_DIR/build/firstpass-server" ]; then
  log "building $BASE_ID into $BASE_DIR"
  rm -rf "$BASE_DIR"
  git -C "$ROOT" worktree add -f --detach "$BASE_DIR" "$BASE_ID" >/dev/null
  env -u MAKEFLAGS -u MFLAGS make -s -C "$BASE_DIR" server >/dev/null
fi
BASE_BIN=$BASE_DIR/build/firstpass-server

# cost BIN TRACE: prints "TOTAL ANALYZE" for one upload of TRACE (TRACE "-": no upload)
cost() {
  local bin=$1 trace=$2 d port pid cg
  d=$(mktemp -d "$TMPD/cg.XXXXXX")
  port=$(free_port)
  cg=$d/callgrind.out
  valgrind --tool=callgrind --callgrind-out-file="$cg" "$bin" --bind 127.0.0.1 --port "$port" --db "$d/db" --quiet \
    >"$d/log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do curl -fs -o /dev/null "http://127.0.0.1:$port/healthz" && break; sleep 0.2; done
  if [ "$trace" != - ]; then
    local code
    code=$(curl -sS -o "$d/post.json" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$trace" \
             "http://127.0.0.1:$port/api/v1/sessions")
    [ "$code" = 201 ] || { log "upload failed: HTTP $code $(cat "$d/post.json")"; kill "$pid"; exit 1; }
  fi
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  callgrind_annotate --inclusive=yes "$cg" 2>/dev/null | awk '
    /PROGRAM TOTALS/ { gsub(",", "", $1); total = $1 }
    /analyze\.c:analyze_run / && !an { gsub(",", "", $1); an = $1 }
    END { printf "%s %s\n", total, an ? an : 0 }'
  rm -rf "$d"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }'; }
mi() { awk -v a="$1" 'BEGIN { printf "%.1f", a / 1e6 }'; }

read -r IDLE_BASE _ < <(cost "$BASE_BIN" -)
read -r IDLE_NEW _ < <(cost "$NEW_BIN" -)
RES=$OUT/analysis_cost.md
{
  echo "base $BASE_ID ($("$BASE_BIN" --version 2>&1 | head -1)); new $("$NEW_BIN" --version 2>&1 | head -1);"
  echo "$(date -u +%Y-%m-%dT%H:%MZ); instructions (callgrind) of one upload at $MB MB, a server's start and stop subtracted."
  echo
  echo "| shape | events | base upload M | new upload M | **new / base** | base analyze_run M | new analyze_run M | **new / base** |"
  echo "|---|---|---|---|---|---|---|---|"
} >"$RES"
for shape in $SHAPES; do
  F=$OUT/shape-$shape-${MB}MB.json
  if [ ! -s "$F" ] || [ "$GEN" -nt "$F" ]; then "$GEN" --shape "$shape" -s "${MB}M" -o "$F.tmp" 2>/dev/null && mv "$F.tmp" "$F"; fi
  events=$(grep -o '"ph"' "$F" | wc -l)
  read -r tb ab < <(cost "$BASE_BIN" "$F")
  read -r tn an < <(cost "$NEW_BIN" "$F")
  ub=$((tb - IDLE_BASE)); un=$((tn - IDLE_NEW))
  line="| $shape | $events | $(mi $ub) | $(mi $un) | **$(ratio $un $ub)** | $(mi $ab) | $(mi $an) | **$(ratio $an $ab)** |"
  echo "$line" >>"$RES"
  log "$line"
done
cat "$RES"
