#!/usr/bin/env bash
# bench/run.sh SERVER: ingest, storage, download and read benchmarks of firstpass-server against a
# json.load baseline (bench/README.md). `make bench` runs it on build/firstpass-server.
#
# Environment:
#   BENCH_SIZES="100 300 1000"  trace sizes in MB (10^6 bytes); traces are cached in bench/out/
#   BENCH_SESSIONS=10000        sessions stored for the GET /api/v1/sessions read test (0: skip it)
#   BENCH_WRK_DURATION=10s      wrk -d; BENCH_WRK_CONNECTIONS=32, BENCH_WRK_THREADS=2
#   BENCH_PYTHON=python3        the baseline's interpreter
#   BENCH_OUT=bench/out         where traces, logs, the 10k-session DB and results.md go
#   BENCH_STRICT=1              exit 1 when a target fails (default: report only, exit 0)
#   BENCH_SKIP_BASELINE=1       reuse the baseline numbers cached in bench/out (they do not
#                               depend on the server); default: measure them again
set -euo pipefail

[ $# -ge 1 ] || { echo "usage: bench/run.sh SERVER   (e.g. build/firstpass-server)" >&2; exit 2; }
. "$(dirname "$0")/lib.sh"
bench_init "$1" run
SIZES=${BENCH_SIZES:-100 300 1000}
NSESSIONS=${BENCH_SESSIONS:-10000}
WRK_D=${BENCH_WRK_DURATION:-10s}
WRK_C=${BENCH_WRK_CONNECTIONS:-32}
WRK_T=${BENCH_WRK_THREADS:-2}
RES=$OUT/results.tsv     # one "key<TAB>value" line per measurement, rendered at the end
: >"$RES"
put() { printf '%s\t%s\n' "$1" "$2" >>"$RES"; }

# ---- tools ----
if ! need wrk; then
  if [ "$(id -u)" = 0 ] && need apt-get; then
    log "installing wrk (Debian package)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q wrk >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q wrk >/dev/null; }
  else
    log "wrk is missing: run as root: apt-get install -y wrk"; exit 2
  fi
fi
for t in curl sqlite3 gzip cc "$PY" /usr/bin/time; do need "$t" || { log "missing tool: $t"; exit 2; }; done

# wrk_run KEY URL: requests/s, p99 (ms), errors
wrk_run() {
  local key=$1 url=$2 o
  o=$(wrk -c "$WRK_C" -t "$WRK_T" -d "$WRK_D" --latency "$url" 2>&1) || { log "wrk failed: $o"; return 1; }
  printf '%s\n' "$o" >"$OUT/wrk-$key.txt"
  local rps p99 non2xx sockerr
  rps=$(printf '%s\n' "$o" | awk '/^Requests\/sec:/ {print $2}')
  p99=$(printf '%s\n' "$o" | awk '$1 == "99%" {v=$2; u=v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
        if (u == "us") v /= 1000; else if (u == "s") v *= 1000; else if (u == "m") v *= 60000; printf "%.3f", v}')
  non2xx=$(printf '%s\n' "$o" | awk '/Non-2xx/ {print $NF}')
  sockerr=$(printf '%s\n' "$o" | awk '/Socket errors/ {gsub(/,/, ""); print $4+$6+$8+$10}')
  put "$key.rps" "${rps:-0}"
  put "$key.p99_ms" "${p99:-nan}"
  put "$key.errors" "$(( ${non2xx:-0} + ${sockerr:-0} ))"
  log "  wrk $key: ${rps:-?} req/s, p99 ${p99:-?} ms, errors $(( ${non2xx:-0} + ${sockerr:-0} ))"
}

# ---- machine ----
put machine.nproc "$(nproc)"
put machine.cpu "$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
put machine.mem_gb "$(awk '/^MemTotal:/ {printf "%.1f", $2/1048576}' /proc/meminfo)"
put machine.kernel "$(uname -r)"
put machine.loadavg_start "$(cut -d' ' -f1-3 /proc/loadavg)"
put machine.python "$("$PY" -c 'import sys; print(sys.version.split()[0])')"
put machine.server "$("$SERVER" --version 2>&1 | head -1), sha256 $(sha256sum "$SERVER" | cut -c1-12)"
put machine.date "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
put config.sizes "$SIZES"
put config.wrk "-c $WRK_C -t $WRK_T -d $WRK_D --latency"

BASELINE='import json, sys
F = sys.argv[1]
d=json.load(open(F)); s={}; [s.__setitem__(e.get("name"), s.get(e.get("name"),0)+e.get("dur",0)) for e in d["traceEvents"]]'

for S in $SIZES; do
  F=$OUT/trace-${S}MB.json
  if [ ! -s "$F" ]; then
    log "generating $F (${S} MB)"
    "$GEN" -s "${S}M" -o "$F.tmp" 2>"$F.gen.txt" && mv "$F.tmp" "$F"
  fi
  bytes=$(stat -c %s "$F")
  if [ ! -s "$F.gzbytes" ] || [ "$F" -nt "$F.gzbytes" ]; then
    log "gzip -6 size of $F"
    gzip -6 -c "$F" | wc -c >"$F.gzbytes"
  fi
  gzbytes=$(cat "$F.gzbytes")
  put "$S.trace_bytes" "$bytes"
  put "$S.gzip_bytes" "$gzbytes"

  # (a) baseline
  if [ "${BENCH_SKIP_BASELINE:-0}" = 1 ] && [ -s "$F.baseline" ]; then
    read -r bs brss bcpu <"$F.baseline"
  else
    log "$S MB: baseline json.load ($PY)"
    sync; /usr/bin/time -f "%e %M %U %S" -o "$TMPD/time" "$PY" -c "$BASELINE" "$F"
    read -r bs brss bu bsys <"$TMPD/time"
    bcpu=$("$PY" -c "print(round($bu + $bsys, 2))")
    echo "$bs $brss $bcpu" >"$F.baseline"
  fi
  put "$S.baseline_s" "$bs"
  put "$S.baseline_rss_kb" "$brss"
  put "$S.baseline_cpu_s" "${bcpu:-}"
  log "  baseline ${bs} s, ${brss} kB"

  # (b) ingest into a fresh server
  DB=$TMPD/db-$S.sqlite
  SLOG=$OUT/server-${S}MB.log
  extra=()
  if [ "$bytes" -gt 1073741824 ]; then extra=(--max-upload $((bytes + 1048576))); fi
  start_server "$DB" "$SLOG" "${extra[@]}"
  put "$S.server_start_rss_kb" "$(rss_kb)"
  c0=$(cpu_s)
  log "$S MB: POST /api/v1/sessions"
  r=$(curl -sS -o "$TMPD/post.json" -w '%{http_code} %{time_total}' -H 'Content-Type: application/json' \
        --data-binary @"$F" "http://127.0.0.1:$PORT/api/v1/sessions")
  code=${r% *}; is=${r#* }
  [ "$code" = 201 ] || { log "upload failed: HTTP $code $(cat "$TMPD/post.json")"; exit 1; }
  id=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$TMPD/post.json")
  events=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["events"])' "$TMPD/post.json")
  put "$S.events" "$events"
  put "$S.ingest_s" "$is"
  put "$S.ingest_cpu_s" "$("$PY" -c "print(round($(cpu_s) - $c0, 2))")"
  put "$S.ingest_hwm_kb" "$(hwm_kb)"
  log "  ingest ${is} s ($(cpu_s) s server CPU), $events events, server VmHWM $(hwm_kb) kB"
  # the per-step analysis times the server logged (FIRSTPASS_TRACE_ANALYSIS=1)
  # (the drain line also says how long each stream thread waited for the other: drain.parser_waited_ms=...)
  put "$S.analysis" "$(awk '/msg=analysis/ {split($3, a, "="); split($4, b, "="); printf "%s=%s ", a[2], b[2];
    for (i = 5; i <= NF; i++) printf "%s.%s ", a[2], $i}' "$SLOG")"

  # (c) storage
  ck=$(sqlite3 "$DB" 'PRAGMA wal_checkpoint(TRUNCATE);' 2>&1 || true)
  dbb=$(stat -c %s "$DB"); walb=0
  [ -f "$DB-wal" ] && walb=$(stat -c %s "$DB-wal")
  put "$S.db_bytes" "$dbb"
  put "$S.wal_bytes" "$walb"
  put "$S.checkpoint" "$ck"
  put "$S.dbstat" "$(sqlite3 "$DB" "SELECT name || '=' || sum(pgsize) FROM dbstat GROUP BY name ORDER BY sum(pgsize) DESC LIMIT 6;" 2>/dev/null | tr '\n' ' ' || true)"
  log "  storage: db $dbb + wal $walb bytes (checkpoint: $ck); gzip $gzbytes"

  # (d) download
  reset_hwm
  r=$(curl -sS -o /dev/null -w '%{http_code} %{time_total} %{size_download}' "http://127.0.0.1:$PORT/api/v1/sessions/$id/trace")
  set -- $r
  [ "$1" = 200 ] || { log "download failed: HTTP $1"; exit 1; }
  put "$S.download_s" "$2"
  put "$S.download_bytes" "$3"
  put "$S.download_hwm_kb" "$(hwm_kb)"
  log "  download $2 s, $3 bytes, server VmHWM $(hwm_kb) kB"

  # (e) reads on this session
  reset_hwm
  for ep in operators report phases; do
    wrk_run "$S.$ep" "http://127.0.0.1:$PORT/api/v1/sessions/$id/$ep"
  done
  put "$S.reads_hwm_kb" "$(hwm_kb)"
  stop_server
  rm -f "$DB" "$DB-wal" "$DB-shm"
done

# (e) GET /api/v1/sessions with NSESSIONS stored. The DB is built once per server binary and
# cached (bench/out/sessions-N.db): N uploads of one small trace, 4 at a time (--max-uploads).
if [ "$NSESSIONS" -gt 0 ]; then
  SMALL=$OUT/trace-small.json
  [ -s "$SMALL" ] || "$GEN" -n 100 -o "$SMALL" 2>/dev/null
  CACHE=$OUT/sessions-$NSESSIONS.db
  stamp="$(sha256sum "$SERVER" | cut -c1-16) $(sha256sum "$SMALL" | cut -c1-16)"
  if [ ! -s "$CACHE" ] || [ "$(cat "$CACHE.stamp" 2>/dev/null)" != "$stamp" ]; then
    rm -f "$CACHE" "$CACHE-wal" "$CACHE-shm" "$CACHE.stamp"
    start_server "$TMPD/sessions.db" "$OUT/server-sessions.log"
    log "storing $NSESSIONS sessions (one-off; cached in $CACHE)"
    t0=$(date +%s.%N)
    {
      for i in $(seq "$NSESSIONS"); do
        printf 'url = "http://127.0.0.1:%s/api/v1/sessions"\ndata-binary = "@%s"\n' "$PORT" "$SMALL"
        printf 'header = "Content-Type: application/json"\noutput = "/dev/null"\nwrite-out = "%%{http_code}\\n"\n'
        if [ "$i" -lt "$NSESSIONS" ]; then echo next; fi
      done
    } >"$TMPD/curl.cfg"
    curl -s --no-progress-meter --parallel --parallel-max 4 --retry 5 --retry-all-errors --retry-delay 1 -K "$TMPD/curl.cfg" >"$TMPD/codes" || true
    t1=$(date +%s.%N)
    ok=$(grep -c '^201$' "$TMPD/codes" || true)
    put sessions.store_s "$("$PY" -c "print(round($t1 - $t0, 1))")"
    put sessions.store_ok "$ok"
    log "  $ok of $NSESSIONS uploads answered 201"
    stop_server
    sqlite3 "$TMPD/sessions.db" 'PRAGMA wal_checkpoint(TRUNCATE);' >/dev/null
    mv "$TMPD/sessions.db" "$CACHE"
    rm -f "$TMPD/sessions.db-wal" "$TMPD/sessions.db-shm"
    echo "$stamp" >"$CACHE.stamp"
  fi
  n=$(sqlite3 "$CACHE" 'SELECT count(*) FROM sessions;')
  put sessions.count "$n"
  put sessions.db_bytes "$(stat -c %s "$CACHE")"
  # the server writes to its DB (WAL): run on a copy so that the cache stays as built
  cp "$CACHE" "$TMPD/sessions.db"
  start_server "$TMPD/sessions.db" "$OUT/server-sessions-read.log"
  reset_hwm
  wrk_run sessions "http://127.0.0.1:$PORT/api/v1/sessions"
  put sessions.hwm_kb "$(hwm_kb)"
  stop_server
fi
put machine.loadavg_end "$(cut -d' ' -f1-3 /proc/loadavg)"

"$PY" "$ROOT/bench/report.py" "$RES" "$OUT/results.md"
cat "$OUT/results.md"
if [ "${BENCH_STRICT:-0}" = 1 ] && grep -q '^| FAIL' "$OUT/results.md"; then exit 1; fi
exit 0
