#!/usr/bin/env bash
# bench/shapes.sh SERVER: ingest of every trace shape of bench/gen_trace.c against the parse-only
# floor (bench/floor/floor.cc, simdjson on-demand) and python's json.load (issue 24). `make bench`
# runs it first, then bench/run.sh. The YAJL floor (bench/floor/yajl_floor.c: the same work with
# the server's own parser) is printed beside it: the part of the gap that is the parser's.
#
# For each shape, side by side in one run: the floor's seconds and CPU seconds (best of
# BENCH_REPEAT), the YAJL floor's seconds (best of BENCH_REPEAT), the upload until its 201 (curl's time_total, best of BENCH_REPEAT, each into a
# fresh server right after one floor run; the median of those pairs' ratios too), the
# server's CPU seconds and peak RSS over those uploads, json.load's seconds (one run), and
# two uploads of the same trace at once against one alone, with that server's peak RSS.
#
# Environment:
#   BENCH_SHAPES="llm flat cpu threads names"   which shapes
#   BENCH_SHAPE_MB=100     trace size in MB (10^6 bytes); names is 1.5x that (100,000 kernels)
#   BENCH_BIG=1            also flat at 334 MB (the issue's 1.2M-event flat trace)
#   BENCH_REPEAT=3         runs of the floor and of the upload (the best is reported)
#   BENCH_SKIP_BASELINE=1  reuse json.load's cached seconds (bench/out/*.baseline)
#   BENCH_PYTHON, BENCH_OUT as for bench/run.sh
#   BENCH_STRICT=1         exit 1 when a target fails (x floor <= 2, x json.load >= 8, peak RSS
#                          < 100 MB alone and two at once, each of two at once >= 0.6x alone)
set -euo pipefail

[ $# -ge 1 ] || { echo "usage: bench/shapes.sh SERVER   (e.g. build/firstpass-server)" >&2; exit 2; }
. "$(dirname "$0")/lib.sh"
bench_init "$1" shapes
SHAPES=${BENCH_SHAPES:-llm flat cpu threads names}
MB=${BENCH_SHAPE_MB:-100}
REPEAT=${BENCH_REPEAT:-3}
for t in curl cc make "$PY" /usr/bin/time; do need "$t" || { log "missing tool: $t"; exit 2; }; done
FLOOR=$ROOT/bench/out/floor # make bench-floor
YFLOOR=$ROOT/bench/out/yajl_floor
make -s -C "$ROOT" bench-floor >/dev/null || { log "cannot build the floor (apt-get install libsimdjson-dev)"; exit 2; }

# a server on an empty database (the floor has no state)
fresh_server() {
  rm -f "$TMPD/db" "$TMPD/db-wal" "$TMPD/db-shm"
  start_server "$TMPD/db" "$TMPD/server.log"
}
# upload F [TAG]: prints curl's time_total; fails unless 201
upload() {
  local r tag=${2:-}
  r=$(curl -sS -o "$TMPD/post$tag.json" -w '%{http_code} %{time_total}' -H 'Content-Type: application/json' \
        --data-binary @"$1" "http://127.0.0.1:$PORT/api/v1/sessions")
  [ "${r% *}" = 201 ] || { log "upload failed: HTTP $r $(cat "$TMPD/post$tag.json")"; exit 1; }
  echo "${r#* }"
}
min() { tr ' ' '\n' | grep . | sort -g | head -1; }
BASELINE='import json, sys
d=json.load(open(sys.argv[1])); s={}; [s.__setitem__(e.get("name"), s.get(e.get("name"),0)+e.get("dur",0)) for e in d["traceEvents"]]'

RES=$OUT/shapes.md
{
  echo "Machine: $(nproc) cores, $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), $(uname -r);"
  echo "server $("$SERVER" --version 2>&1 | head -1), sha256 $(sha256sum "$SERVER" | cut -c1-12); $(date -u +%Y-%m-%dT%H:%MZ);"
  echo "load average at the start $(cut -d' ' -f1-3 /proc/loadavg); best of $REPEAT for the floor and the upload."
  echo
  echo "| shape | MB | events | floor s (CPU s) | YAJL floor s | firstpass s (server CPU s) | **x floor** (CPU) | x floor, paired | x YAJL floor | json.load s | **x json.load** | peak RSS MB alone / two at once | two at once s | **each vs alone** |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
} >"$RES"

LIST=$SHAPES
[ "${BENCH_BIG:-0}" = 1 ] && LIST="$LIST flat:334"
for item in $LIST; do
  shape=${item%%:*}
  size=$MB
  [ "$shape" = names ] && size=$((MB * 3 / 2))
  case "$item" in *:*) size=${item#*:} ;; esac
  F=$OUT/shape-$shape-${size}MB.json
  if [ ! -s "$F" ] || [ "$GEN" -nt "$F" ]; then
    log "generating $F"
    "$GEN" --shape "$shape" -s "${size}M" -o "$F.tmp" 2>/dev/null && mv "$F.tmp" "$F"
  fi
  # the floor, then firstpass (each upload into a fresh server: an empty database, as the
  # floor has no state), one pair per repetition: the pairs' ratios, side by side within
  # seconds, are steadier than best against best on a VM whose speed drifts (bench/README.md)
  fl=""; flcpu=""; fp=""; cpu=""; rss=0; pairs=""; yfl=""
  for _ in $(seq "$REPEAT"); do
    yfl="$yfl $("$YFLOOR" "$F" | cut -d' ' -f1)"
    /usr/bin/time -f "%U %S" -o "$TMPD/ftime" "$FLOOR" "$F" >"$TMPD/fout"
    f1=$(cut -d' ' -f1 "$TMPD/fout")
    fl="$fl $f1"
    flcpu="$flcpu $(awk '{printf "%.2f", $1 + $2}' "$TMPD/ftime")"
    fresh_server
    c0=$(cpu_s)
    t=$(upload "$F")
    fp="$fp $t"
    pairs="$pairs $("$PY" -c "print(round($t / $f1, 3))")"
    cpu="$cpu $("$PY" -c "print(round($(cpu_s) - $c0, 2))")"
    rss=$("$PY" -c "print(max($rss, $(hwm_mb)))")
    stop_server
  done
  fl=$(echo "$fl" | min)
  yfl=$(echo "$yfl" | min)
  flcpu=$(echo "$flcpu" | min)
  paired=$(echo "$pairs" | tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  rss1=$rss
  events=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["events"])' "$TMPD/post.json")
  best=$(echo "$fp" | min)
  cpu=$(echo "$cpu" | min)
  # two uploads at once into one server, each against the best alone
  fresh_server
  upload "$F" a >"$TMPD/ta" &
  p1=$!
  upload "$F" b >"$TMPD/tb" &
  p2=$!
  wait $p1 $p2
  two="$(cat "$TMPD/ta") $(cat "$TMPD/tb")"
  rss2=$(hwm_mb)
  stop_server
  # json.load
  if [ "${BENCH_SKIP_BASELINE:-0}" = 1 ] && [ -s "$F.baseline" ]; then
    js=$(cat "$F.baseline")
  else
    /usr/bin/time -f "%e" -o "$TMPD/time" "$PY" -c "$BASELINE" "$F"
    js=$(cat "$TMPD/time"); echo "$js" >"$F.baseline"
  fi
  line=$("$PY" - "$shape" "$size" "$events" "$fl" "$flcpu" "$best" "$js" "$cpu" "$rss1" "$rss2" "$paired" "$yfl" $two 2>>"$TMPD/fails" <<'EOF'
import sys
shape, size, events, fl, flcpu, fp, js, cpu, rss1, rss2, paired, yfl, a, b = sys.argv[1:]
fl, flcpu, fp, js, cpu, paired, yfl, a, b = map(float, (fl, flcpu, fp, js, cpu, paired, yfl, a, b))
print(f"| {shape} | {size} | {int(events):,} | {fl:.2f} ({flcpu:.2f}) | {yfl:.2f} | {fp:.2f} ({cpu:.2f}) | **{fp / fl:.2f}x** ({cpu / flcpu:.2f}x) | {paired:.2f}x | "
      f"{fp / yfl:.2f}x | {js:.2f} | **{js / fp:.2f}x** | {float(rss1):.1f} / {float(rss2):.1f} | {a:.2f} / {b:.2f} | **{fp / a:.2f} / {fp / b:.2f}** |")
# the targets (bench/README.md): a line each that fails, for BENCH_STRICT
for ok, what in ((fp / fl <= 2, "x floor > 2"), (js / fp >= 8, "x json.load < 8"),
                 (max(float(rss1), float(rss2)) < 100, "peak RSS >= 100 MB"), (min(fp / a, fp / b) >= 0.6, "two at once < 0.6x")):
    if not ok:
        print(f"FAIL {shape}: {what}", file=sys.stderr)
EOF
)
  echo "$line" >>"$RES"
  log "$line"
done
echo >>"$RES"
echo "load average at the end $(cut -d' ' -f1-3 /proc/loadavg). x floor: firstpass s / floor s (target <= 2), and in brackets the server's CPU s over the floor's (user + sys; load-independent, unlike the wall); x floor, paired: the median over the repetitions of one upload's s over the floor run just before it; x YAJL floor: firstpass s / the YAJL floor's s (no target: the part of x floor that is not the parser's); x json.load: json.load s / firstpass s (target >= 8); peak RSS: VmHWM over the uploads alone, then of the server that took two at once (target < 100 MB for both); each vs alone: best alone / each of two at once (target >= 0.6)." >>"$RES"
cat "$RES"
if [ -s "$TMPD/fails" ]; then
  cat "$TMPD/fails" >&2
  [ "${BENCH_STRICT:-0}" = 1 ] && exit 1
fi
exit 0
