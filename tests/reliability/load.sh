#!/usr/bin/env bash
# load.sh SERVER: concurrent uploads under read load, then a graceful stop mid-upload.
#
# Phase 1 (default flags, so --max-uploads is 4): 16 uploaders x LOAD_N uploads (default
# 10; the issue's figure is LOAD_N=50) of small and medium real traces, while readers
# hammer GET /api/v1/sessions/{id}/operators (wrk when installed, else curl loops) and a
# checker reads the newest sessions as they land. Checks: every upload ends 201; a 503
# "too_many_uploads" is retried by the uploader (with a short random back-off, at most
# 200 times) and only then is acceptable, and the retries are reported; any other 5xx
# fails. Every 201 id is listed by the API exactly once and stored once; nothing else is
# stored. Prints read latency p50/p99, reads/s and upload throughput.
# Phase 2: a fresh server (--max-uploads 16) gets 8 uploads, half of them rate-limited so
# that they are mid-body; SIGTERM while they run. Checks: every upload in flight at the
# signal still gets 201 and its session is in the database; the process exits 0.
#
# Environment: LOAD_N, LOAD_UPLOADERS (default 16), LOAD_SECONDS_MAX (phase-1 wall-clock
# bound, default 300), FP_TRACES, KEEP_TMP=1.
set -euo pipefail
SERVER=${1:?usage: load.sh SERVER}
export SERVER # read by fp_start (lib.sh)
N=${LOAD_N:-10}
UPLOADERS=${LOAD_UPLOADERS:-16}
MAXWAIT=${LOAD_SECONDS_MAX:-300}
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
fp_setup load curl sqlite3 python3
[ -x "$SERVER" ] || { fail "$SERVER is not an executable"; fp_finish; exit 1; }
TRACES=$(fp_traces)
FILES=()
for f in hta/trace_compare/base/base.json.gz hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz \
    hta/critical_path/cuda_event_sync/event_sync_trace.json.gz hta/triton_example/triton_example.json.gz \
    hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz \
    hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz \
    hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz hta/trace_filter/sampled_rank-0.json.gz \
    hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz kineto_tb_plugin/test/gpu_metrics_input.json; do
    [ -f "$TRACES/$f" ] && FILES+=("$TRACES/$f")
done
if [ "${#FILES[@]}" -lt 3 ]; then fail "fewer than 3 traces under $TRACES"; fp_finish; exit 1; fi
mkdir -p "$TMP/up"

now() { date +%s.%N; }

# uploader I: LOAD_N uploads in a row; one line per upload in up/I.log:
# "tag status retries id bytes".
uploader() {
    local i=$1 j tag f code tries id
    for j in $(seq 1 "$N"); do
        tag=l${i}n$j
        f=${FILES[$(((i * 7 + j) % ${#FILES[@]}))]}
        tries=0
        while :; do
            code=$(curl -s -o "$TMP/up/$tag.body" -w '%{http_code}' --max-time 120 -X POST \
                --data-binary @"$f" "$URL/api/v1/sessions?name=$tag" 2>/dev/null) || code=000
            if [ "$code" = 503 ] && grep -q '"too_many_uploads"' "$TMP/up/$tag.body" && [ "$tries" -lt 200 ]; then
                tries=$((tries + 1))
                sleep "0.0$((RANDOM % 9 + 1))"
                continue
            fi
            break
        done
        id=$(sed -n 's/.*"id":\([0-9]*\).*/\1/p' "$TMP/up/$tag.body" 2>/dev/null)
        echo "$tag $code $tries ${id:--} $(stat -c %s "$f")" >> "$TMP/up/$i.log"
    done
}

# checker: until up/stop exists, reads the newest sessions and their operators; one
# line per request "status" in checker.log.
checker() {
    local id code i
    for i in $(seq 1 100000); do
        [ -e "$TMP/up/stop" ] && return 0
        code=$(curl -s -o "$TMP/check.json" -w '%{http_code}' --max-time 30 "$URL/api/v1/sessions?limit=3") || code=000
        echo "$code list" >> "$TMP/checker.log"
        id=$(sed -n 's/^{"sessions":\[{"id":\([0-9]*\).*/\1/p' "$TMP/check.json" 2>/dev/null)
        if [ -n "$id" ]; then
            code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 "$URL/api/v1/sessions/$id/operators") || code=000
            echo "$code operators $id" >> "$TMP/checker.log"
        fi
    done
}

# curl_reader: the fallback when wrk is missing; "status seconds" per request.
curl_reader() {
    local i
    for i in $(seq 1 1000000); do
        [ -e "$TMP/up/stop" ] && return 0
        curl -s -o /dev/null -w '%{http_code} %{time_total}\n' --max-time 30 "$READ_URL" >> "$TMP/reads.$1" || true
    done
}

# ---- phase 1 ----
if ! fp_start; then fail "the server did not start: $(tail -3 "$TMP/server.log")"; fp_finish; exit 1; fi
pass "server up on $URL (pid $SPID, default --max-uploads)"
seed=$(curl -s -X POST --data-binary @"${FILES[4]}" "$URL/api/v1/sessions?name=seed" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
[ -n "$seed" ] || { fail "seed upload failed"; fp_finish; exit 1; }
READ_URL=$URL/api/v1/sessions/$seed/operators
READERS=()
if command -v wrk >/dev/null; then
    wrk -t2 -c8 -d"${MAXWAIT}s" --timeout 10s --latency "$READ_URL" > "$TMP/wrk.out" 2>&1 &
    READERS+=($!)
    note "readers: wrk -t2 -c8 on $READ_URL"
else
    for k in 1 2 3 4; do curl_reader "$k" & READERS+=($!); done
    note "readers: 4 curl loops on $READ_URL (wrk not installed)"
fi
checker &
CHECKER=$!
t0=$(now)
UPIDS=()
for i in $(seq 1 "$UPLOADERS"); do uploader "$i" & UPIDS+=($!); done
# Wait for the uploaders, bounded by MAXWAIT.
for _ in $(seq 1 $((MAXWAIT * 10))); do
    alive=0
    for p in "${UPIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" -eq 0 ] && break
    sleep 0.1
done
t1=$(now)
touch "$TMP/up/stop"
for p in "${UPIDS[@]}"; do
    if kill -0 "$p" 2>/dev/null; then fail "uploader pid $p still running after ${MAXWAIT}s"; kill "$p" 2>/dev/null || true; fi
    wait "$p" 2>/dev/null || true
done
for p in "${READERS[@]}"; do kill -INT "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
wait "$CHECKER" 2>/dev/null || true

cat "$TMP"/up/*.log > "$TMP/uploads.txt"
total=$(wc -l < "$TMP/uploads.txt")
n201=$(awk '$2 == 201' "$TMP/uploads.txt" | wc -l)
retries=$(awk '{ s += $3 } END { print s + 0 }' "$TMP/uploads.txt")
retried=$(awk '$3 > 0' "$TMP/uploads.txt" | wc -l)
bytes=$(awk '$2 == 201 { s += $5 } END { print s + 0 }' "$TMP/uploads.txt")
bad=$(awk '$2 != 201 { printf " %s:%s", $1, $2 }' "$TMP/uploads.txt")
wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
if [ "$total" -eq $((UPLOADERS * N)) ] && [ -z "$bad" ]; then
    pass "$UPLOADERS x $N uploads: all $n201 answered 201 in ${wall}s"
else
    fail "$UPLOADERS x $N uploads: $n201 of $((UPLOADERS * N)) answered 201; others:${bad:- (missing)}"
fi
note "503 too_many_uploads: $retries retries over $retried uploads (retried by the client, as the 503 asks)"
fivexx=$(awk '$2 ~ /^5/' "$TMP/uploads.txt" | wc -l)
if [ "$fivexx" -eq 0 ]; then pass "no 5xx left after retries"; else fail "$fivexx uploads ended in 5xx"; fi
awk -v n="$n201" -v w="$wall" -v b="$bytes" 'BEGIN { if (w > 0) printf "  .. upload throughput: %.1f uploads/s, %.2f MB/s (compressed as sent)\n", n / w, b / w / 1e6 }'

# Every 201 listed exactly once, stored once, nothing else stored.
listed=$(fp_list_ids | sort -n) || listed=""
if [ -z "$listed" ]; then fail "GET /api/v1/sessions failed"; fi
awk '$2 == 201 { print $4 }' "$TMP/uploads.txt" | sort -n > "$TMP/want.ids"
echo "$seed" >> "$TMP/want.ids"
sort -n -o "$TMP/want.ids" "$TMP/want.ids"
printf '%s\n' "$listed" > "$TMP/listed.ids"
dups=$(uniq -d "$TMP/listed.ids" | tr '\n' ' ')
if [ -n "$dups" ]; then fail "ids listed more than once: $dups"; fi
if cmp -s "$TMP/want.ids" "$TMP/listed.ids"; then
    pass "every 201 id is listed exactly once ($(wc -l < "$TMP/listed.ids") sessions, seed included)"
else
    fail "listed ids differ from the 201 ids: $(diff "$TMP/want.ids" "$TMP/listed.ids" | grep '^[<>]' | head -5 | tr '\n' ' ')"
fi
dupnames=$(sqlite3 -batch "$DB" "SELECT name || ' x' || count(*) FROM sessions GROUP BY name HAVING count(*) > 1" | tr '\n' ' ')
stored=$(sqlite3 -batch "$DB" "SELECT count(*) FROM sessions")
if [ -z "$dupnames" ] && [ "$stored" -eq $((n201 + 1)) ]; then pass "stored once each: $stored rows for $n201 uploads + seed"
else fail "database holds $stored sessions for $((n201 + 1)) answered; duplicates: ${dupnames:-none}"; fi

checks=$(wc -l < "$TMP/checker.log" 2>/dev/null || echo 0)
checkbad=$(awk '$1 != 200' "$TMP/checker.log" 2>/dev/null | wc -l)
if [ "$checks" -gt 0 ] && [ "$checkbad" -eq 0 ]; then pass "checker: $checks reads of the newest sessions, all 200"
else fail "checker: $checkbad of $checks reads not 200: $(awk '$1 != 200' "$TMP/checker.log" 2>/dev/null | head -3 | tr '\n' ' ')"; fi

if [ -s "$TMP/wrk.out" ]; then
    p50=$(awk '/Latency Distribution/ { d = 1 } d && $1 == "50%" { print $2 }' "$TMP/wrk.out")
    p99=$(awk '/Latency Distribution/ { d = 1 } d && $1 == "99%" { print $2 }' "$TMP/wrk.out")
    rps=$(awk '/^Requests\/sec:/ { print $2 }' "$TMP/wrk.out")
    reqs=$(awk '/requests in/ { print $1 }' "$TMP/wrk.out")
    non2xx=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$TMP/wrk.out")
    errs=$(grep 'Socket errors' "$TMP/wrk.out" || true)
    note "reads (wrk): $reqs requests, $rps req/s, p50 $p50, p99 $p99${errs:+, $errs}"
    if [ -n "$reqs" ] && [ -z "$non2xx" ] && [ -z "$errs" ]; then pass "reads: all $reqs answered 2xx"
    else fail "reads: ${non2xx:-0} non-2xx, ${errs:-no socket errors} (wrk output: $(tr '\n' ' ' < "$TMP/wrk.out" | head -c 300))"; fi
else
    cat "$TMP"/reads.* > "$TMP/reads.txt" 2>/dev/null || true
    reqs=$(wc -l < "$TMP/reads.txt")
    non200=$(awk '$1 != 200' "$TMP/reads.txt" | wc -l)
    read -r p50 p99 < <(awk '{ print $2 }' "$TMP/reads.txt" | sort -n |
        awk '{ v[NR] = $1 } END { if (NR) printf "%.1fms %.1fms\n", v[int((NR - 1) * 0.5) + 1] * 1e3, v[int((NR - 1) * 0.99) + 1] * 1e3; else print "- -" }')
    note "reads (curl): $reqs requests, $(awk -v n="$reqs" -v w="$wall" 'BEGIN { printf "%.0f", n / w }') req/s, p50 $p50, p99 $p99"
    if [ "$reqs" -gt 0 ] && [ "$non200" -eq 0 ]; then pass "reads: all $reqs answered 200"
    else fail "reads: $non200 of $reqs not 200"; fi
fi
fp_term
rc=$TERM_RC
if [ "$rc" -eq 0 ]; then pass "phase 1 server: SIGTERM when idle, exit 0"
else fail "phase 1 server: exit $rc on SIGTERM (124: still running, SIGKILLed; see sigterm.sh)"; fi

# ---- phase 2: SIGTERM during uploads ----
rm -f "$DB" "$DB-wal" "$DB-shm"
if ! fp_start --max-uploads 16; then fail "phase 2 server did not start"; fp_finish; exit 1; fi
big=(hta/nccl_parser_config/nccl_data.json.gz kineto_tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz
    hta/trace_filter/sampled_rank-1.json.gz hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz)
P2=()
for k in $(seq 1 8); do
    f=$TRACES/${big[$((k % ${#big[@]}))]}
    [ -f "$f" ] || f=${FILES[$((k % ${#FILES[@]}))]}
    limit=()
    if [ $((k % 2)) -eq 0 ]; then limit=(--limit-rate 400k); fi
    (curl -s -o "$TMP/up/term$k.body" -w '%{http_code}' --max-time 120 "${limit[@]}" -X POST \
        --data-binary @"$f" "$URL/api/v1/sessions?name=term$k" > "$TMP/up/term$k.code" 2>/dev/null || true
     touch "$TMP/up/term$k.done") &
    P2+=($!)
done
sleep 0.5
inflight=()
for k in $(seq 1 8); do [ -e "$TMP/up/term$k.done" ] || inflight+=("term$k"); done
ts=$(now)
fp_term # bounded: the server drains for at most 60 s
rc=$TERM_RC
te=$(now)
for p in "${P2[@]}"; do wait "$p" 2>/dev/null || true; done
note "SIGTERM with ${#inflight[@]} of 8 uploads in flight; the server took $(awk -v a="$ts" -v b="$te" 'BEGIN { printf "%.2f", b - a }')s to exit"
if [ "${#inflight[@]}" -eq 0 ]; then fail "no upload was in flight at SIGTERM (the test did not test anything)"; fi
if [ "$rc" -eq 0 ]; then pass "SIGTERM during uploads: exit 0"
else fail "SIGTERM during uploads: exit $rc (124: still running after 90 s, SIGKILLed; see sigterm.sh)"; fi
okterm=0
for tag in "${inflight[@]}"; do
    code=$(cat "$TMP/up/$tag.code" 2>/dev/null || echo 000)
    id=$(sed -n 's/.*"id":\([0-9]*\).*/\1/p' "$TMP/up/$tag.body" 2>/dev/null)
    row=$(sqlite3 -batch "$DB" "SELECT id FROM sessions WHERE name = '$tag'" 2>/dev/null || true)
    if [ "$code" = 201 ] && [ -n "$id" ] && [ "$row" = "$id" ]; then okterm=$((okterm + 1))
    else fail "in-flight upload $tag: status $code, id ${id:-none}, stored as ${row:-nothing}"; fi
done
if [ "${#inflight[@]}" -gt 0 ] && [ "$okterm" -eq "${#inflight[@]}" ]; then
    pass "all ${#inflight[@]} uploads in flight at SIGTERM finished with 201 and are stored"
fi
ic=$(sqlite3 -batch "$DB" 'PRAGMA integrity_check' 2>&1 || true)
if [ "$ic" = ok ]; then pass "after SIGTERM: integrity_check ok"; else fail "after SIGTERM: integrity_check: $ic"; fi
fp_finish
