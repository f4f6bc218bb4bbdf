# bench/lib.sh: what bench/run.sh and bench/shapes.sh share, sourced by both (not run).
#
# bench_init SERVER TAG sets ROOT, OUT, PY, GEN (bench/gen_trace.c, built when older than its
# source), TMPD (a temp folder under OUT, removed on exit with the server still running)
# and SERVER (a private copy of the binary in TMPD: a rebuild during the run cannot mix two
# binaries in one table). Then:
#   start_server DB LOG [flags]  a fresh server on a free port (PORT, SPID),
#                                FIRSTPASS_TRACE_ANALYSIS=1, until it answers /healthz
#   stop_server
#   cpu_s                        CPU seconds (user + system) the server has used so far
#   hwm_kb / hwm_mb / rss_kb     its peak RSS (VmHWM) and RSS, from /proc
#   reset_hwm                    peak RSS back to the current RSS, so a phase's peak is its own
# The caller sets `set -euo pipefail` and STATIC (default ROOT/static) before bench_init.

log() { printf 'bench: %s\n' "$*" >&2; }
need() { command -v "$1" >/dev/null 2>&1; }

bench_init() {
  SERVER=$1
  local tag=$2
  ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  case "$SERVER" in /*) ;; *) SERVER=$PWD/$SERVER ;; esac
  [ -x "$SERVER" ] || { echo "bench: $SERVER is not an executable" >&2; exit 2; }
  OUT=${BENCH_OUT:-$ROOT/bench/out}
  PY=${BENCH_PYTHON:-python3}
  STATIC=${STATIC:-$ROOT/static}
  mkdir -p "$OUT"
  OUT=$(cd "$OUT" && pwd)
  GEN=$OUT/gen_trace
  if [ ! -x "$GEN" ] || [ "$ROOT/bench/gen_trace.c" -nt "$GEN" ]; then
    cc -O2 -std=c11 -Wall -Wextra -o "$GEN" "$ROOT/bench/gen_trace.c"
  fi
  SPID=""
  PORT=""
  TMPD=$(mktemp -d "$OUT/$tag.XXXXXX")
  cp "$SERVER" "$TMPD/firstpass-server"
  SERVER=$TMPD/firstpass-server
  TICK=$(getconf CLK_TCK)
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
}

bench_cleanup() {
  [ -n "$SPID" ] && kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null
  rm -rf "$TMPD"
}

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start_server() {
  local db=$1 lg=$2
  shift 2
  PORT=$(free_port)
  FIRSTPASS_TRACE_ANALYSIS=1 "$SERVER" --bind 127.0.0.1 --port "$PORT" --db "$db" --static "$STATIC" --quiet "$@" 2>"$lg" &
  SPID=$!
  for _ in $(seq 100); do
    curl -sf -o /dev/null "http://127.0.0.1:$PORT/healthz" && return 0
    kill -0 "$SPID" 2>/dev/null || { log "server exited at start:"; cat "$lg" >&2; exit 1; }
    sleep 0.1
  done
  log "server did not answer /healthz"
  exit 1
}
stop_server() { kill "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null || true; SPID=""; }
cpu_s() { awk -v t="$TICK" '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / t }' "/proc/$SPID/stat"; }
hwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$SPID/status"; }
hwm_mb() { awk '/^VmHWM:/ {printf "%.1f", $2/1024}' "/proc/$SPID/status"; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$SPID/status"; }
# Linux >= 4.0
reset_hwm() { echo 5 >"/proc/$SPID/clear_refs" 2>/dev/null || true; }
