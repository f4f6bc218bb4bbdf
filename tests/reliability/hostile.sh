#!/usr/bin/env bash
# hostile.sh SERVER: small hostile uploads and clients must cost the server little (issue 22).
#
# Each resource case starts a fresh server (so /proc/PID/status VmHWM is that case's peak),
# sends one generated input (tests/reliability/hostile_gen.py: nothing is read from disk),
# and asserts the reply and, under stated bounds, the server's peak RSS (VmHWM), CPU
# seconds (utime+stime) and stored bytes (database + WAL). The bounds are an order of
# magnitude under what the same inputs cost before the fixes (numbers in each case's
# comment, measured on the 2-core CI VM), and far over what the fixed server needs.
# Cases: see the `case_*` functions; HOSTILE_ONLY=NAME runs one.
# Environment: HOSTILE_ONLY, KEEP_TMP=1.
set -euo pipefail
SERVER=${1:?usage: hostile.sh SERVER}
export SERVER # read by fp_start (lib.sh)
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
fp_setup hostile curl python3
GEN="python3 $HERE/hostile_gen.py"
TICKS=$(getconf CLK_TCK)

# fresh [flags...]: a new server on an empty database.
fresh() {
    fp_kill9
    rm -f "$DB" "$DB-wal" "$DB-shm"
    fp_start "$@" || { fail "the server did not start (flags: $*)"; return 1; }
}
hwm_mb() { awk '/VmHWM/{printf "%d", $2 / 1024}' "/proc/$SPID/status"; }
cpu_s() { awk -v t="$TICKS" '{printf "%.2f", ($14 + $15) / t}' "/proc/$SPID/stat"; }
stored_mb() { du -cb "$DB" "$DB-wal" 2>/dev/null | awk 'END{printf "%.1f", $1 / 1048576}'; }
# post FILE [QUERY]: the status; the body in $TMP/reply.json
post() {
    curl -s -o "$TMP/reply.json" -w '%{http_code}' --max-time 300 -H 'Content-Type: application/json' \
        --data-binary @"$1" "$URL/api/v1/sessions${2:-}" || echo 000
}
# within NAME VALUE MAX UNIT: passes when VALUE <= MAX
within() {
    if awk -v v="$2" -v m="$3" 'BEGIN{exit !(v <= m)}'; then pass "$1: $2 $4 <= $3"; else fail "$1: $2 $4 > $3"; fi
}
# expect NAME CODE WANT [TEXT]: the status is WANT and the error message holds TEXT
expect() {
    if [ "$2" != "$3" ]; then fail "$1: status $2, want $3 ($(head -c 300 "$TMP/reply.json"))"; return; fi
    if [ -n "${4:-}" ] && ! grep -q -- "$4" "$TMP/reply.json"; then fail "$1: the reply does not say '$4': $(head -c 300 "$TMP/reply.json")"; return; fi
    pass "$1: $2 $(head -c 160 "$TMP/reply.json")"
}
# resource NAME KIND N WANT TEXT MAX_RSS_MB MAX_CPU_S MAX_STORED_MB [flags...]
resource() {
    local name=$1 kind=$2 n=$3 want=$4 text=$5 rss=$6 cpu=$7 disk=$8 code
    shift 8
    $GEN "$kind" "$n" "$TMP/$name.gz"
    fresh "$@" || return 0
    code=$(post "$TMP/$name.gz")
    expect "$name ($(stat -c %s "$TMP/$name.gz") bytes gzip)" "$code" "$want" "$text"
    within "$name peak RSS" "$(hwm_mb)" "$rss" MB
    within "$name CPU" "$(cpu_s)" "$cpu" s
    within "$name stored" "$(stored_mb)" "$disk" MB
}

# 1. distinct threads / processes: ~3.5 KB each until the commit. Before: 100k tids (536 KB
#    gzip) 201 with 384 MB peak and 27 s of CPU; 50k: ~200 MB, ~12 s.
case_tracks() {
    resource tids50k tids 50000 413 max-tracks 64 3 1
    resource pids50k pids 50000 413 max-tracks 64 3 1
    resource tids_flag tids 2000 413 max-tracks 64 3 1 --max-tracks 1000
}
# gen_trace CASE OUT ARGS...: bench/gen_trace.c's output for ARGS into OUT (the generator
# built once a run); 1, with a failure named after CASE, when it cannot be built or run.
gen_trace() {
    local name=$1 out=$2
    shift 2
    [ -x "$TMP/gen_trace" ] || cc -O2 -o "$TMP/gen_trace" "$HERE/../../bench/gen_trace.c" ||
        { fail "$name: cannot build bench/gen_trace.c"; return 1; }
    "$TMP/gen_trace" "$@" -o "$out" >/dev/null 2>&1 || { fail "$name: gen_trace $* failed"; return 1; }
}
# gen_threads CASE OUT ARGS...: the same, in the threads shape.
gen_threads() {
    local name=$1 out=$2
    shift 2
    gen_trace "$name" "$out" --shape threads "$@"
}
# 1. not hostile, but many threads: bench/gen_trace.c's threads shape (384 threads, 40 MB).
#    Each track's chunk builder kept its last chunk laid out end to end, and every builder
#    its buffers through the analysis: 72 MB peak before (26 MB of it those buffers,
#    massif), 52.5 MB after. The bound sits between.
case_threads() {
    gen_threads threads "$TMP/threads.json" -s 40M || return 0
    fresh || return 0
    local code
    code=$(post "$TMP/threads.json")
    expect "threads: 384 threads ($(stat -c %s "$TMP/threads.json") bytes)" "$code" 201
    within "threads peak RSS" "$(hwm_mb)" 62 MB
}
# 1. the threads shape near --max-tracks: 9,000 threads, 100 MB, two uploads at once (the
#    default --max-uploads is 4). The loader's budget counted the JSON bytes of the tracks'
#    chunk builders, not their columns and doubled capacity, and each thread's arena kept
#    what it freed: 119-124 MB peak before, 71-88 MB after here and 95 MB in one CI run
#    (load.c's track_mem, main.c's two arenas; how the two uploads' peaks meet varies).
#    Each alone: 95 MB before, ~78 after. The bound sits between.
case_threads_cap() {
    gen_threads threads_cap "$TMP/threads9k.json" --threads 9000 -s 100M || return 0
    fresh || return 0
    local c1 c2
    curl -s -o "$TMP/reply1.json" -w '%{http_code}' --max-time 300 -H 'Content-Type: application/json' \
        --data-binary @"$TMP/threads9k.json" "$URL/api/v1/sessions" >"$TMP/code1" &
    c2=$(post "$TMP/threads9k.json")
    wait $!
    c1=$(cat "$TMP/code1")
    expect "threads_cap: two uploads of 9,000 threads at once, both" "$c1 $c2" "201 201"
    within "threads_cap peak RSS" "$(hwm_mb)" 110 MB
    rm -f "$TMP/threads9k.json"
}
# 1. not hostile, but past a limit: 2.5M disjoint top-level operators in one step (7 MB
#    gzip, 200 MB of JSON). The step breakdown held each as a 16-byte host range (40 MB,
#    80 MB of capacity once doubled): 111 MB peak before, 54 MB with the ranges past
#    1,048,576 as sorted runs in a file (steps.c, hspill.c). The bound sits between.
case_toplevel() {
    resource toplevel toplevel 2500000 201 "" 80 30 40
}
# 1. the same through an Nsight Systems export (nsys.c): 100k kernels, each on a stream of
#    its own (a 4 MB SQLite file). Without the cap (--max-tracks 0): 201 after 65 s of
#    wall time, 444 MB peak.
case_nsys_streams() {
    $GEN nsysstreams 100000 "$TMP/streams.sqlite"
    fresh || return 0
    local code
    code=$(post "$TMP/streams.sqlite")
    expect "nsys_streams: 100k streams ($(stat -c %s "$TMP/streams.sqlite") bytes)" "$code" 413 max-tracks
    within "nsys_streams peak RSS" "$(hwm_mb)" 64 MB
    within "nsys_streams CPU" "$(cpu_s)" 3 s
    within "nsys_streams stored" "$(stored_mb)" 1 MB
}
# 2. a 32 MiB top-level key (32 KB gzip). Before: 201, the key stored and served back,
#    ~100 MB peak, quadratic CPU (100 MiB: 37 s, 573 MB).
case_longkey() { resource longkey32m longkey 32 413 "top-level key" 32 1 1; }
# 6. a 64 MiB top-level string. Before: 413 only once buffered whole: ~140 MB, ~8 s.
case_longstr() { resource longstr64m longstr 64 413 "over 16 MiB" 64 3 1; }
# 4. one million small top-level keys (2.3 MB gzip). Before: 201, ~300 MB peak, stored.
case_manykeys() { resource manykeys1m manykeys 1000000 413 "top-level keys" 32 1 1; }
# A gzip bomb of valid events (2M copies of one event: 170 MB in ~0.4 MB) against
# --max-inflated 16M: refused once 16 MiB are inflated.
case_bomb() { resource bomb repeat 2000000 413 "decompressed" 64 3 1 --max-inflated 16M; }

SLOW="python3 $HERE/hostile_slow.py"
# healthz [SRC]: the status of GET /healthz (from source address SRC), 2 s at most
healthz() { curl -s -o /dev/null -w '%{http_code}' --max-time 2 ${1:+--interface "$1"} "$URL/healthz" || true; }
# kept NAME FILE MAX: every connection in FILE (hostile_slow.py's output) was closed within MAX s
kept() {
    local worst
    worst=$(awk '{print $1}' "$2" | sort -g | tail -1)
    if grep -q '^open' "$2"; then fail "$1: a slow connection was still open at the end ($(tr '\n' ' ' < "$2"))"
    else within "$1: the slowest connection closed after" "$worst" "$3" s; fi
}

# 3. one header byte every 0.5 s on every connection. Before: kept for ever (--timeout
#    resets on each byte), /healthz refused while they last.
case_slowhead() {
    fresh --header-timeout 2 --max-connections 8 --max-connections-per-ip 8 || return 0
    $SLOW head "$PORT" 8 10 > "$TMP/slow.txt" 2>/dev/null &
    local pid=$!
    sleep 3.5
    local code i
    # 3.5-12 s: they were closed at ~2.5 s. A refusal right after is libmicrohttpd still
    # counting the closed connections against --max-connections until its polling thread
    # cleans them up: measured up to ~3 s on a loaded 2-core machine (every commit back to
    # issue 22's), so tries are spaced, not fired back to back as before.
    for i in $(seq 1 16); do
        code=$(healthz)
        [ "$code" = 200 ] && break
        sleep 0.5
    done
    wait "$pid"
    kept "slowhead (8 connections, --header-timeout 2)" "$TMP/slow.txt" 3.5
    [ "$code" = 200 ] && pass "slowhead: /healthz answers 200 once they are closed" || fail "slowhead: /healthz gave $code after they were closed"
}
# 3. bodies trickled at 2 bytes/s hold the only upload slot. Before: held for ever, every
#    other upload 503.
case_slowbody() {
    fresh --max-uploads 1 --min-body-rate 1K || return 0
    $GEN repeat 10 "$TMP/small.gz"
    $SLOW body "$PORT" 1 16 > "$TMP/slow.txt" 2> "$TMP/slow.err" &
    local pid=$! code i
    for i in $(seq 1 50); do grep -q ready "$TMP/slow.err" 2>/dev/null && break; sleep 0.2; done
    sleep 0.5 # its head is in: the slot is taken
    code=$(post "$TMP/small.gz")
    expect "slowbody: an upload while a trickler holds the slot" "$code" 503 too_many_uploads
    wait "$pid"
    kept "slowbody (a body at 2 bytes/s, --min-body-rate 1K)" "$TMP/slow.txt" 12.5
    code=$(post "$TMP/small.gz")
    expect "slowbody: an upload once they are closed" "$code" 201
}
# 3. one client fills its share of the connections with slow heads; another client's read
#    is answered at once. Before: one client could hold every connection.
case_perip() {
    fresh --max-connections 16 --max-connections-per-ip 4 --header-timeout 30 || return 0
    $SLOW head "$PORT" 12 3 > "$TMP/slow.txt" 2>/dev/null &
    local pid=$! code
    sleep 1
    code=$(healthz 127.0.0.2)
    wait "$pid"
    [ "$code" = 200 ] && pass "perip: /healthz from 127.0.0.2 answers 200 while 127.0.0.1 trickles on 12 connections"         || fail "perip: /healthz from 127.0.0.2 gave $code"
    local refused
    refused=$(grep -c refused "$TMP/slow.txt" || true)
    [ "$(grep -c '^open' "$TMP/slow.txt" || true)" -le 4 ] && pass "perip: at most 4 of the 12 slow connections were kept (refused: $refused)"         || fail "perip: more than 4 slow connections from one address were kept: $(tr '\n' ' ' < "$TMP/slow.txt")"
}

# timed NAME WANT MAX_S CURL_ARGS...: one request; its status must be WANT and it must take
# at most MAX_S seconds (the body in $TMP/reply.json)
timed() {
    local name=$1 want=$2 max=$3 out code secs
    shift 3
    out=$(curl -s -o "$TMP/reply.json" -w '%{http_code} %{time_total}' --max-time 120 "$@" || echo "000 120")
    code=${out% *}
    secs=${out#* }
    expect "$name" "$code" "$want"
    within "$name took" "$secs" "$max" s
}
wal_mb() { stat -c %s "$DB-wal" 2>/dev/null | awk '{printf "%.1f", $1 / 1048576}' || echo 0; }
# 1 (issue 43). A download read at 300 KB/s while uploads, a report edit and DELETEs run,
#    and one never read. Before: the download held one read transaction for its whole life;
#    the WAL truncation after a large upload and after each DELETE waited up to 30 s for it
#    holding the write lock (on main here: an upload of 31.7 s, the DELETE of the session
#    being downloaded 12 s, and that download sent whole; the idle reader kept until
#    --timeout). After: 1.3-1.5 s an upload, each DELETE under 0.3 s, the idle reader cut
#    after 20-30 s, the deleted session's download cut short (no closing chunk), never a
#    shorter trace that parses.
case_slowread() {
    gen_trace slowread "$TMP/big.json" -s 60M || return 0       # a 48 MB download
    gen_trace slowread "$TMP/mid.json" --shape names -s 40M || return 0 # ~10 MB of WAL an upload
    fresh || return 0 # --min-download-rate 8K, the default
    local code i
    code=$(post "$TMP/big.json")
    expect "slowread: the session to download" "$code" 201
    READ_RATE=300000 READ_RCVBUF=0 $SLOW read "$PORT" 1 25 > "$TMP/fast.txt" 2>/dev/null &
    local fast=$!
    READ_RATE=0 $SLOW read "$PORT" 1 35 > "$TMP/idle.txt" 2>/dev/null &
    local idle=$!
    sleep 1
    for i in 2 3 4; do
        timed "slowread: upload $i of 40 MB while /trace is read at 300 KB/s" 201 10 \
            -H 'Content-Type: application/json' --data-binary @"$TMP/mid.json" "$URL/api/v1/sessions"
    done
    ok_trace
    timed "slowread: a small upload meanwhile" 201 5 --data-binary @"$TMP/ok.json" "$URL/api/v1/sessions"
    timed "slowread: PUT report meanwhile" 200 5 -X PUT --data-binary '{"lines":{"workload":"w"}}' "$URL/api/v1/sessions/5/report"
    timed "slowread: DELETE meanwhile" 204 5 -X DELETE "$URL/api/v1/sessions/5"
    sleep 1 # the truncation runs once the reply is out
    within "slowread: the -wal with the download under way" "$(wal_mb)" 16 MB
    # a download of session 2 (32 MB) under way when session 2 is deleted
    READ_RATE=2000000 READ_RCVBUF=0 READ_PATH=/api/v1/sessions/2/trace $SLOW read "$PORT" 1 30 > "$TMP/cut.txt" 2>/dev/null &
    local cut=$!
    sleep 2
    timed "slowread: DELETE of a session being downloaded" 204 5 -X DELETE "$URL/api/v1/sessions/2"
    wait "$cut"
    if grep -q '^open' "$TMP/cut.txt" || ! grep -q ' 200 ' "$TMP/cut.txt"; then fail "slowread: the download of the deleted session: $(cat "$TMP/cut.txt")"
    elif grep -q 'complete=1' "$TMP/cut.txt"; then fail "slowread: the download of the deleted session ended like a whole one: $(cat "$TMP/cut.txt")"
    else pass "slowread: the download of the deleted session was cut short: $(cat "$TMP/cut.txt")"; fi
    code=$(healthz)
    expect "slowread: /healthz after it" "$code" 200
    wait "$idle"
    if grep -q '^open' "$TMP/idle.txt"; then fail "slowread: a download never read was kept 35 s: $(cat "$TMP/idle.txt")"
    else within "slowread: a download never read (--min-download-rate 8K) was cut after" "$(cut -d' ' -f1 "$TMP/idle.txt")" 33 s; fi
    wait "$fast"
    if grep -q '^open' "$TMP/fast.txt"; then pass "slowread: the 300 KB/s download was kept: $(cat "$TMP/fast.txt")"
    else fail "slowread: the 300 KB/s download was cut: $(cat "$TMP/fast.txt")"; fi
    rm -f "$TMP/big.json" "$TMP/mid.json"
}

# 1 (issue 43). A reader the server does not control (an sqlite3 shell, a file-level
#    backup) holds a read transaction on the database for 40 s. Before: the WAL truncation
#    after each DELETE (and after an upload leaving over 16 MiB of WAL) waited the busy
#    timeout for it holding the write lock: a DELETE answered after 30.5 s. After: a
#    checkpoint waits at most 1 s (STORE_CHECKPOINT_WAIT_MS) and leaves the rest for later
#    (a DELETE: 1.0 s); once the reader is gone, the next DELETE empties the WAL.
case_longreader() {
    gen_trace longreader "$TMP/mid.json" --shape names -s 40M || return 0 # ~10 MB of WAL an upload
    fresh || return 0
    ok_trace
    local code reader
    code=$(post "$TMP/mid.json")
    expect "longreader: a first upload of 40 MB" "$code" 201
    python3 - "$DB" > "$TMP/reader.txt" <<'PY2' &
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN")
print(c.execute("SELECT count(*) FROM sessions").fetchone()[0], flush=True)  # the snapshot is taken
time.sleep(40)
PY2
    reader=$!
    sleep 1
    timed "longreader: an upload of 40 MB (the WAL passes 16 MiB) while a reader holds a snapshot" 201 10 \
        -H 'Content-Type: application/json' --data-binary @"$TMP/mid.json" "$URL/api/v1/sessions"
    timed "longreader: a small upload right after it" 201 5 --data-binary @"$TMP/ok.json" "$URL/api/v1/sessions"
    timed "longreader: DELETE while the reader holds its snapshot" 204 5 -X DELETE "$URL/api/v1/sessions/3"
    timed "longreader: another DELETE" 204 5 -X DELETE "$URL/api/v1/sessions/2"
    kill "$reader" 2>/dev/null || true
    wait "$reader" 2>/dev/null || true
    [ -s "$TMP/reader.txt" ] || fail "longreader: the reader never took its snapshot"
    timed "longreader: DELETE once the reader is gone" 204 5 -X DELETE "$URL/api/v1/sessions/1"
    within "longreader: the -wal once the reader is gone" "$(wal_mb)" 1 MB
    rm -f "$TMP/mid.json"
}

# 7. CSV injection: names and operators that a spreadsheet runs as formulas. Before: written
#    verbatim (=HYPERLINK(...) as a cell of its own).
case_csv() {
    fresh || return 0
    python3 - "$TMP/csv.json" <<'PY'
import json, sys
names = ['=HYPERLINK("http://x","y")', '+1+1', '-2+3', '@SUM(A1)', '\tcmd', 'aten::mm']
ev = [{"ph": "X", "cat": "cpu_op", "name": n, "pid": 1, "tid": 1, "ts": i * 10, "dur": 5} for i, n in enumerate(names)]
json.dump({"traceEvents": ev}, open(sys.argv[1], "w"))
PY
    local code
    code=$(post "$TMP/csv.json" '?name=%3D1%2B1&label=model:%40evil')
    expect "csv: upload" "$code" 201
    curl -s "$URL/api/v1/sessions?format=csv" > "$TMP/s.csv"
    curl -s "$URL/api/v1/sessions/1/operators?format=csv" > "$TMP/o.csv"
    if python3 - "$TMP/s.csv" "$TMP/o.csv" <<'PY'
import csv, sys
bad, seen = [], 0
for f in sys.argv[1:]:
    for row in csv.reader(open(f, newline="")):
        for c in row:
            if c[:1] == "'":
                seen += 1
            elif c[:1] in ("=", "+", "@", "\t", "\r") or (c[:1] == "-" and not c.replace(".", "", 1).lstrip("-").isdigit()):
                bad.append(c)
print("escaped cells: %d, formula cells: %r" % (seen, bad))
sys.exit(1 if bad or seen < 6 else 0)
PY
    then pass "csv: every cell a spreadsheet would run is escaped with a leading '"
    else fail "csv: formula cells in ?format=csv ($(head -c 300 "$TMP/o.csv"))"; fi
}

# 8. invalid UTF-8 that YAJL lets through (overlong, encoded surrogate, over U+10FFFF), in
#    an operator's and in a kernel's name. Before: the operator 201 and missing from
#    /operators while the totals count it; the kernel 500 "out of memory during analysis".
case_utf8() {
    fresh || return 0
    local kind bytes code
    for kind in cpu_op kernel; do
        for bytes in 'c0af' 'eda080' 'f4908080'; do
            python3 - "$TMP/u.json" "$kind" "$bytes" <<'PY'
import sys
out, cat, bad = sys.argv[1], sys.argv[2], bytes.fromhex(sys.argv[3])
ok = b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1,"dur":5}'
ev = b'{"ph":"X","cat":"' + cat.encode() + b'","name":"op' + bad + b'","pid":1,"tid":1,"ts":10,"dur":5' + \
     (b',"args":{"correlation":1,"device":0,"stream":7}' if cat == "kernel" else b'') + b'}'
open(out, "wb").write(b'{"traceEvents":[' + ok + b',' + ev + b']}')
PY
            code=$(post "$TMP/u.json")
            expect "utf8: $kind name with bytes $bytes" "$code" 400 "event 2 (byte"
        done
    done
}
# 13. a boolean ts or dur. Before: 201 and the event silently left out of the analysis.
case_boolts() {
    fresh || return 0
    local f code
    for f in '"ts":true,"dur":5' '"ts":1,"dur":false' '"ts":1,"dur":5,"name":true'; do
        printf '{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,%s}]}' "$f" > "$TMP/b.json"
        code=$(post "$TMP/b.json")
        expect "boolts: $f" "$code" 400 "must be a"
    done
}

# 9. disk: 100 distinct names of 1 MiB (107 KB gzip). Before: 201, 318 MB stored (db +
#    WAL), 147 MB peak, 4 s of CPU.
case_names() { resource names100 longnames 100 413 max-name-bytes-per-event 64 2 1; }
# 9. each distinct text is stored once per session (strings), the operator, kernel and phase
#    rows name it by id. Before: 30 names of 1 MiB (no name budget) stored 90 MB, each name
#    in strings and in operators twice (both groupings); one 1 MiB "Input Dims" and one 1 MiB
#    "grid" shared by 100 operators and 100 kernels (2 MiB of distinct text: within the
#    default budget, 220 KB gzip) stored 438 MB (db + WAL), a copy per row. After: 30, 3.4 MB.
case_names_once() {
    local code
    $GEN longnames 30 "$TMP/once.gz"
    fresh --max-name-bytes-per-event 0 || return 0
    code=$(post "$TMP/once.gz")
    expect "names_once: 30 names of 1 MiB" "$code" 201
    sleep 1 # the WAL is truncated once the reply is out
    within "names_once: 30 names of 1 MiB stored" "$(stored_mb)" 40 MB
    $GEN sharedtext 100 "$TMP/shared.gz"
    fresh || return 0
    code=$(post "$TMP/shared.gz")
    expect "names_once: 1 MiB of shapes and of grid shared by 100 operators and 100 kernels" "$code" 201
    sleep 1
    within "names_once: shared shapes and grid stored" "$(stored_mb)" 8 MB
}
# Issue 43, 5: distinct strings and operator rows cost memory that does not shrink with the
#     events (string table ~70 bytes each, the analysis' operator rows ~300). Before
#     --max-distinct: 1M distinct "Input Dims" (5.6 MB gzip) 201 with 293 MB peak, 3M
#     974 MB (31 MB when the shapes repeat); 1M names ran past 25 min (suspects.c); 1,000
#     names x 1,000 shapes (2,000 strings) made 1M rows. Each is now a 413 naming the flag,
#     refused while the events stream; an upload at the cap (250k shapes) is still read.
case_distinct() {
    resource shapes1m shapes 1000000 413 max-distinct 80 3 1
    resource names1m names 1000000 413 max-distinct 80 3 1
    resource pairs1m pairs 1000000 413 max-distinct 80 3 1
    resource names_flag names 2000 413 max-distinct 64 3 1 --max-distinct 1000
    resource shapes250k shapes 250000 201 "" 150 10 80
}
# 9. the WAL after a big upload. Before: the -wal stayed 95 MB after a 95 MB session.
case_wal() {
    $GEN longnames 30 "$TMP/wal.gz"
    fresh --max-name-bytes-per-event 0 || return 0
    local code wal
    code=$(post "$TMP/wal.gz")
    expect "wal: a 95 MB session" "$code" 201
    sleep 1 # the truncation runs once the reply is out
    wal=$(stat -c %s "$DB-wal" 2>/dev/null || echo 0)
    within "wal: the -wal after it" "$(awk -v b="$wal" 'BEGIN{printf "%.1f", b / 1048576}')" 16 MB
}

# get PATH: the status of GET PATH; the body in $TMP/get.out
get() { curl -s -o "$TMP/get.out" -w '%{http_code}' --max-time 30 "$@" || echo 000; }
# one small valid trace in $TMP/ok.json
ok_trace() {
    printf '{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1,"dur":5},{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":10,"dur":3}]}' > "$TMP/ok.json"
}

# 10. /timeline windows far outside the trace. Before: 200 after an out-of-range double to
#     int conversion (undefined behaviour; the ASan+UBSan build aborted).
case_timeline_range() {
    fresh || return 0
    ok_trace
    local code q
    code=$(post "$TMP/ok.json")
    expect "timeline_range: upload" "$code" 201
    for q in 'start_us=1e300' 'end_us=-1e300' 'start_us=-1e300&end_us=1e300'; do
        code=$(get "$URL/api/v1/sessions/1/timeline?$q")
        if [ "$code" = 400 ]; then pass "timeline_range: $q is 400"; else fail "timeline_range: $q gave $code: $(head -c 200 "$TMP/get.out")"; fi
    done
    code=$(get "$URL/api/v1/sessions/1/timeline?start_us=1e15&end_us=2e15")
    [ "$code" = 200 ] && pass "timeline_range: a window past the trace (1e15..2e15) is 200" || fail "timeline_range: 1e15..2e15 gave $code"
}
# 11. durations that sum to infinity. Before: 201, then /operators listed nothing.
case_infsum() {
    fresh || return 0
    printf '{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1,"dur":1.7e308},{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":2,"ts":1,"dur":1.7e308}]}' > "$TMP/inf.json"
    local code
    code=$(post "$TMP/inf.json")
    expect "infsum: two durs of 1.7e308" "$code" 400 "dur"
    printf '{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":1e308,"args":{"device":0,"stream":7}},{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":2,"dur":1e308,"args":{"device":0,"stream":7}}]}' > "$TMP/inf.json"
    code=$(post "$TMP/inf.json")
    expect "infsum: two kernel durs of 1e308" "$code" 400 "dur"
}
# 12. HEAD of the streamed download. Before: the headers, then "0\r\n\r\n" (a chunked body).
case_head_trace() {
    fresh || return 0
    ok_trace
    post "$TMP/ok.json" > /dev/null
    python3 - "$PORT" > "$TMP/head.txt" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"HEAD /api/v1/sessions/1/trace HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
s.settimeout(5)
d = b""
while True:
    x = s.recv(65536)
    if not x:
        break
    d += x
head, _, body = d.partition(b"\r\n\r\n")
print(len(body), head.split(b"\r\n")[0].decode())
PY
    if [ "$(cut -d' ' -f1 "$TMP/head.txt")" = 0 ] && grep -q ' 200 ' "$TMP/head.txt"; then pass "head_trace: HEAD /trace is 200 with no body"
    else fail "head_trace: HEAD /trace sent a body: $(cat "$TMP/head.txt") (bytes after the headers, status line)"; fi
}

# raw REQUEST_FILE: sends the bytes to the server, prints the status line it answered within
# 5 s ("closed" when it closed without a reply, "timeout" when it never answered)
raw() {
    python3 - "$PORT" "$1" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(open(sys.argv[2], "rb").read())
s.settimeout(5)
d = b""
try:
    while True:
        x = s.recv(65536)
        if not x:
            break
        d += x
except socket.timeout:
    print("timeout" if not d else d.split(b"\r\n")[0].decode() + " (kept open)")
    sys.exit(0)
print(d.split(b"\r\n")[0].decode() if d else "closed")
PY
}
# 15. ambiguous framing and huge queries. Before: two Content-Lengths or CL + chunked were
#     201, "Transfer-Encoding: gzip, chunked" hung, 4,000 query parameters closed the
#     connection with no reply.
case_framing() {
    fresh || return 0
    local body='{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":1}]}' got
    local n=${#body}
    printf 'POST /api/v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nContent-Length: 5\r\n\r\n%s' "$n" "$body" > "$TMP/r1"
    printf 'POST /api/v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n' "$n" "$body" > "$TMP/r2"
    printf 'POST /api/v1/sessions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n' "$n" "$body" > "$TMP/r3"
    python3 -c 'import sys; sys.stdout.write("GET /api/v1/sessions?" + "&".join("a%d=1" % i for i in range(4000)) + " HTTP/1.1\r\nHost: x\r\n\r\n")' > "$TMP/r4"
    local i what=("two different Content-Lengths" "Content-Length and chunked" "Transfer-Encoding: gzip, chunked" "4000 query parameters")
    for i in 1 2 3 4; do
        got=$(raw "$TMP/r$i")
        case $got in
        *" 400 "*) pass "framing: ${what[$((i - 1))]}: $got" ;;
        *) fail "framing: ${what[$((i - 1))]}: $got, want 400" ;;
        esac
    done
    got=$(curl -s -o /dev/null -w '%{http_code}' "$URL/api/v1/sessions?limit=1")
    [ "$got" = 200 ] && pass "framing: the server still answers" || fail "framing: then GET gave $got"
}

# Not in issue 22's list: a form (curl -F; server/http/form.c over MHD's post processor)
#     whose file part is 64 MiB of near-boundaries ("\r\n--fpX": the delimiter but its
#     last byte), each of which makes the parser look again. Scanned once as it arrives:
#     400 invalid_json from the importer (the part is not JSON), 0.09 s of CPU, 10 MB peak.
case_form() {
    $GEN form 64 "$TMP/form.bin"
    fresh || return 0
    local code
    code=$(curl -s -o "$TMP/reply.json" -w '%{http_code}' --max-time 60 -H 'Content-Type: multipart/form-data; boundary=fpXX' \
        --data-binary @"$TMP/form.bin" "$URL/api/v1/sessions" || echo 000)
    expect "form: 64 MiB of near-boundaries" "$code" 400 invalid_json
    within "form peak RSS" "$(hwm_mb)" 32 MB
    within "form CPU" "$(cpu_s)" 2 s
    within "form stored" "$(stored_mb)" 1 MB
    rm -f "$TMP/form.bin"
}

# Issue 43, 7: a form whose preamble (the bytes before its first boundary) is 16 MiB of
#     dashes. MHD's post processor skips a preamble one '-' at a time, moving its 64 KiB
#     buffer after each: 201 after 9 s of CPU before (~0.55 s a MiB). form.c holds at most
#     FORM_PREAMBLE_MAX (1 KiB) of it: 400 naming the preamble. A form with a short
#     preamble (RFC 2046 allows one) is still read.
case_form_preamble() {
    $GEN preamble $((16 << 20)) "$TMP/pre.bin"
    fresh || return 0
    local code
    code=$(curl -s -o "$TMP/reply.json" -w '%{http_code}' --max-time 60 -H 'Content-Type: multipart/form-data; boundary=fpXX' \
        --data-binary @"$TMP/pre.bin" "$URL/api/v1/sessions" || echo 000)
    expect "form_preamble: 16 MiB of dashes before the first boundary" "$code" 400 preamble
    within "form_preamble CPU" "$(cpu_s)" 1 s
    within "form_preamble stored" "$(stored_mb)" 1 MB
    $GEN preamble 1000 "$TMP/pre.bin"
    code=$(curl -s -o "$TMP/reply.json" -w '%{http_code}' --max-time 60 -H 'Content-Type: multipart/form-data; boundary="fpXX"' \
        --data-binary @"$TMP/pre.bin" "$URL/api/v1/sessions" || echo 000)
    expect "form_preamble: a 1000-byte preamble" "$code" 201
    rm -f "$TMP/pre.bin"
}

# 17. labels: 64 at most, 512 bytes each, in the query and in the trace's firstpass object.
#     Before: the object took any number of labels of any length (65 labels, and one of
#     100 KB, were 201).
case_labels() {
    fresh || return 0
    ok_trace
    local q code
    q=$(python3 -c 'print("&".join("label=k%d:v" % i for i in range(65)))')
    code=$(post "$TMP/ok.json" "?$q")
    expect "labels: 65 label= parameters" "$code" 400 "at most 64"
    code=$(post "$TMP/ok.json" "?label=k:$(head -c 600 /dev/zero | tr '\0' v)")
    expect "labels: a 602-byte label=" "$code" 400 "longer than 512"
    python3 - "$TMP/fl.json" 65 10 <<'PY'
import json, sys
n, size = int(sys.argv[2]), int(sys.argv[3])
labels = {"k%d" % i: "v" * size for i in range(n)}
ev = [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]
json.dump({"firstpass": {"format": "firstpass-session", "version": 1, "labels": labels}, "traceEvents": ev}, open(sys.argv[1], "w"))
PY
    code=$(post "$TMP/fl.json")
    expect "labels: 65 labels in firstpass.labels" "$code" 400 "at most 64"
    python3 - "$TMP/fl.json" 1 100000 <<'PY'
import json, sys
n, size = int(sys.argv[2]), int(sys.argv[3])
labels = {"k%d" % i: "v" * size for i in range(n)}
ev = [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]
json.dump({"firstpass": {"format": "firstpass-session", "version": 1, "labels": labels}, "traceEvents": ev}, open(sys.argv[1], "w"))
PY
    code=$(post "$TMP/fl.json")
    expect "labels: a 100 KB label in firstpass.labels" "$code" 400 "longer than 512"
}

# 16. the dashboard's pages may not be framed and load only their own files. Before: no
#     Content-Security-Policy, no X-Frame-Options.
case_csp() {
    fp_kill9
    rm -f "$DB" "$DB-wal" "$DB-shm"
    local root
    root=$(cd "$HERE/../.." && pwd)
    mkdir -p "$TMP/static" && cp "$root/static/index.html" "$TMP/static/"
    ln -sfn "$TMP/static" "$TMP/no-static" # fp_start serves $TMP/no-static
    fp_start || { fail "csp: the server did not start"; return 0; }
    curl -s -D "$TMP/h.txt" -o /dev/null "$URL/"
    grep -qi "^content-security-policy:.*frame-ancestors 'none'" "$TMP/h.txt" && grep -qi "^content-security-policy:.*script-src 'self'" "$TMP/h.txt" \
        && pass "csp: / has a Content-Security-Policy with script-src 'self' and frame-ancestors 'none'" \
        || fail "csp: / has no such Content-Security-Policy: $(grep -i '^content-security' "$TMP/h.txt" || echo none)"
    grep -qi '^x-frame-options: DENY' "$TMP/h.txt" && pass "csp: / has X-Frame-Options: DENY" || fail "csp: / has no X-Frame-Options: DENY"
    rm -f "$TMP/no-static"
}

# 14. a full disk: the database on a 16 MiB tmpfs (a mount namespace of the server's own,
#     `unshare -m`: root or user namespaces needed, else the case is skipped). Uploads until
#     one fails: it must be 507, then DELETE must free space (204) and an upload fit again.
#     Before: the failing upload was 500 database_error and every DELETE 500 too.
case_diskfull() {
    if ! unshare -m true 2>/dev/null; then note "diskfull: skipped (unshare -m is not allowed here)"; return 0; fi
    fp_kill9
    mkdir -p "$TMP/full"
    cat > "$TMP/fullsrv.sh" <<EOF2
#!/bin/sh
exec unshare -m sh -c 'mount -t tmpfs -o size=16m tmpfs "\$0" && exec "\$@"' "$TMP/full" "$SERVER" "\$@"
EOF2
    chmod +x "$TMP/fullsrv.sh"
    local real=$SERVER db=$DB code i
    SERVER=$TMP/fullsrv.sh DB=$TMP/full/fp.db fp_start || { SERVER=$real; DB=$db; fail "diskfull: the server did not start"; return 0; }
    SERVER=$real
    DB=$db
    for i in $(seq 1 60); do
        $GEN distinct 2000 "$TMP/d.json"
        code=$(post "$TMP/d.json")
        [ "$code" = 201 ] || break
    done
    expect "diskfull: upload $i on a full disk" "$code" 507 insufficient_storage
    for i in 1 2 3; do
        code=$(curl -s -o "$TMP/reply.json" -w '%{http_code}' -X DELETE "$URL/api/v1/sessions/$i")
        expect "diskfull: DELETE session $i" "$code" 204
    done
    code=$(post "$TMP/d.json")
    expect "diskfull: an upload after the deletes" "$code" 201
    fp_kill9
}

# 4 (issue 43). A full disk with sessions larger than the 8 MiB reserve: the database on a
#    40 MiB tmpfs (a mount namespace of the server's own, as case_diskfull), uploads of
#    ~10 MB stored each until one fails, then a file takes every byte left. Before: an
#    upload whose WAL frames fitted but whose pages could not grow the database file was
#    committed (201), after which no checkpoint could finish; and Debian's SQLite zeroes
#    every page a delete frees (SECURE_DELETE), so a DELETE wrote the whole session into
#    the WAL again, more than the reserve. Every DELETE and upload then answered 507, even
#    once the file was gone. After: the failing upload is 507 before it commits, each
#    DELETE is 204 on the full disk, and once the file is removed (no restart) uploads are
#    201 again, into the freed pages, and the reserve is taken back.
case_diskfull_big() {
    if ! unshare -m true 2>/dev/null || ! command -v nsenter >/dev/null; then note "diskfull_big: skipped (unshare -m or nsenter is not available)"; return 0; fi
    gen_trace diskfull_big "$TMP/mid.json" --shape names -s 40M || return 0
    fp_kill9
    mkdir -p "$TMP/fullbig"
    cat > "$TMP/fullbig.sh" <<EOF2
#!/bin/sh
exec unshare -m sh -c 'mount -t tmpfs -o size=40m tmpfs "\$0" && exec "\$@"' "$TMP/fullbig" "$SERVER" "\$@"
EOF2
    chmod +x "$TMP/fullbig.sh"
    local real=$SERVER db=$DB code i n=0 ids="" left
    SERVER=$TMP/fullbig.sh DB=$TMP/fullbig/fp.db fp_start || { SERVER=$real; DB=$db; fail "diskfull_big: the server did not start"; return 0; }
    SERVER=$real
    DB=$db
    # in the server's mount namespace: the tmpfs is only there
    ins() { nsenter -t "$SPID" -m "$@"; }
    for i in $(seq 1 8); do
        code=$(post "$TMP/mid.json")
        [ "$code" = 201 ] || break
        n=$i
        ids="$ids $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$TMP/reply.json")"
    done
    expect "diskfull_big: upload $i (~10 MB stored each) on a full 40 MiB disk" "$code" 507 insufficient_storage
    [ "$n" -ge 2 ] && pass "diskfull_big: $n uploads fitted first" || fail "diskfull_big: only $n uploads fitted"
    ins sh -c 'cat /dev/zero > "$0/filler"' "$TMP/fullbig" 2>/dev/null || true
    left=$(ins df -k --output=avail "$TMP/fullbig" | tail -1)
    note "diskfull_big: $left KiB left once the filler is written"
    for i in $ids; do
        code=$(curl -s -o "$TMP/reply.json" -w '%{http_code}' -X DELETE "$URL/api/v1/sessions/$i")
        expect "diskfull_big: DELETE session $i on the full disk" "$code" 204
    done
    ok_trace
    code=$(post "$TMP/ok.json")
    expect "diskfull_big: a small upload after the deletes" "$code" 201
    ins rm -f "$TMP/fullbig/filler"
    code=$(post "$TMP/mid.json")
    expect "diskfull_big: a 10 MB upload once the filler is gone (no restart)" "$code" 201
    code=$(post "$TMP/mid.json")
    expect "diskfull_big: and another" "$code" 201
    if ins test -s "$TMP/fullbig/fp.db-reserve"; then pass "diskfull_big: the reserve is taken back"; else fail "diskfull_big: no reserve once there is room"; fi
    # nothing acknowledged is lost, and the file is sound
    code=$(ins python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(c.execute("PRAGMA integrity_check").fetchone()[0], c.execute("SELECT count(*) FROM sessions").fetchone()[0])' "$TMP/fullbig/fp.db" 2>&1)
    [ "$code" = "ok 3" ] && pass "diskfull_big: integrity_check ok, the 3 sessions acknowledged since are stored" || fail "diskfull_big: integrity_check, sessions: $code (want ok 3)"
    fp_kill9
    rm -f "$TMP/mid.json"
}

# 5. /timeline of a session with many threads (5,000 threads of 2 events; a 40 KB gzip).
#    Before: 16 s of CPU for one /timeline (a scan of every chunk per track), 5,000 tracks
#    in the reply, and the work went on after the client hung up.
case_timeline() {
    $GEN tracks 5000 "$TMP/tl.gz"
    fresh || return 0
    local code c0 c1 c2
    code=$(post "$TMP/tl.gz")
    expect "timeline: upload of 5000 threads" "$code" 201
    c0=$(cpu_s)
    code=$(get "$URL/api/v1/sessions/1/timeline")
    c1=$(cpu_s)
    [ "$code" = 200 ] && pass "timeline: 200" || fail "timeline: $code"
    within "timeline: CPU of one /timeline" "$(awk -v a="$c0" -v b="$c1" 'BEGIN{printf "%.2f", b - a}')" 1.5 s
    if python3 - "$TMP/get.out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d["tracks"]
other = [x for x in t if x.get("other")]
total = sum(x["count"] for x in t)
print("  .. tracks in the reply: %d, merged: %d, counts: %d, cpu_events: %d" % (len(t), other[0]["other"] if other else 0, total, d["cpu_events"]))
sys.exit(0 if len(t) <= 201 and other and total == d["cpu_events"] == 10000 else 1)
PY
    then pass "timeline: at most 200 tracks drawn, the rest merged, every event counted"
    else fail "timeline: the reply does not bound its tracks or lost events"; fi
    # a client that hangs up after 0.2 s: its /timeline must not go on using the CPU
    curl -s -o /dev/null --max-time 0.2 "$URL/api/v1/sessions/1/timeline?buckets=997" || true
    sleep 0.8
    c1=$(cpu_s)
    sleep 2
    c2=$(cpu_s)
    within "timeline: CPU 1-3 s after the client hung up" "$(awk -v a="$c1" -v b="$c2" 'BEGIN{printf "%.2f", b - a}')" 0.5 s
}

# 3 (issue 43). The suspect list's per-op statistics, linear in distinct op names: 100k
#    names of one call each, each labelling a host-wait gap (1.5 MB gzip), and 100k on a
#    CPU-only trace. Before: 17.5 s and 26.3 s of CPU (a scan of every op per idle label,
#    and a sum over every contribution per contribution); after: 2.3 s and 0.8 s (1M names
#    with GPU: 27 s, linear). The bound sits between.
case_opnames() {
    resource opnames100k opnames 100000 201 "" 200 8 60
    resource cpunames100k cpunames 100000 201 "" 200 4 30
}

# 1 (issue 50). 1M steps of one name (ProfilerStep#1 a million times: --max-distinct never
#    counts them; 2.7 MB gzip). Each step was held by every surface, ~2 KB: before, 201 after
#    25.8 s of CPU, 2,018 MB peak, 197 MB stored; /steps 205 MB in 28 s of CPU, uncached;
#    /report 7.5 s, /suspects 11.8 s, /compare 14.5 s, /regressions?baseline= 12.3 s each call;
#    4.8 GB peak. After (--max-steps 10,000: the earliest 10,000 split, the rest counted):
#    6.0 s, 53 MB, 5 MB; /steps 2 MB in 0.26 s (then cached), the others 0.01 s (2026-12-07,
#    the 2-core VM at load 10). The bounds sit between.
case_steps() {
    resource steps1m steps 1000000 201 "" 150 30 20
    local c0 c1 st
    st=$(curl -s -o "$TMP/steps.json" -w '%{http_code} %{size_download}' "$URL/api/v1/sessions/1/steps")
    curl -s -o /dev/null -X PUT -H 'Content-Type: application/json' -d '{"session_id":1}' "$URL/api/v1/baselines/steps"
    c0=$(cpu_s)
    for p in report suspects "regressions?baseline=steps" "regressions?baseline=steps&gate=operators"; do
        curl -s -o /dev/null "$URL/api/v1/sessions/1/$p"
    done
    curl -s -o /dev/null "$URL/api/v1/compare?base=1&head=1"
    c1=$(cpu_s)
    if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["total"] == 10000 and d["steps_over_cap"] == 990000 else 1)' "$TMP/steps.json"
    then pass "steps: /steps holds the earliest 10,000 steps, 990,000 counted past --max-steps ($st bytes)"
    else fail "steps: /steps is not bounded: $st $(head -c 200 "$TMP/steps.json")"; fi
    within "steps: /steps bytes" "${st#* }" 4000000 B
    within "steps: CPU of /report, /suspects, two /regressions?baseline= and /compare" "$(awk -v a="$c0" -v b="$c1" 'BEGIN{printf "%.2f", b - a}')" 2 s
}

CASES="steps opnames slowread longreader diskfull diskfull_big csp labels framing form form_preamble tracks threads threads_cap toplevel nsys_streams longkey longstr manykeys bomb distinct slowhead slowbody perip csv utf8 boolts names names_once wal timeline_range infsum head_trace timeline"
for c in ${HOSTILE_ONLY:-$CASES}; do
    t0=$(date +%s)
    "case_$c"
    note "case $c: $(($(date +%s) - t0)) s"
done
fp_finish
