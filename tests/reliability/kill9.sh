#!/usr/bin/env bash
# kill9.sh SERVER: crash safety of uploads. SIGKILLs firstpass-server while several real
# traces upload at once, for KILL9_ROUNDS rounds (default 6) on one database, and after each
# kill checks the database as the next start would find it:
#   * PRAGMA integrity_check is "ok" and PRAGMA foreign_key_check is empty (no orphan rows);
#   * every upload answered 201 (in any round) is there under the id it was given, with its
#     rows: operators > 0, one analysis row, event chunks holding all its events;
#   * no session exists that was not answered 201, with one honest exception: the kill can
#     land after COMMIT but before the 201 reaches the client. Such a session is allowed
#     only if its upload was still in flight at the moment of the kill and got no final
#     answer (curl status 000, or 100 when only "100 Continue" arrived); it must be complete like any other, and the script reports how
#     often it happened ("ack lost"). Uploads are told apart by ?name=r<round>u<n>.
# Finally the server restarts on the database, lists exactly the sessions in it, serves
# their operators, and exits 0 on SIGTERM.
#
# Environment: KILL9_ROUNDS (>= 5 for the issue; default 6), KILL9_UPLOADS (concurrent
# uploads per round, default 6), KILL9_SEED (for $RANDOM: kill delays and rate limits),
# FP_TRACES (traces folder), KEEP_TMP=1 (keep the temp folder with the DB and logs).
set -euo pipefail
SERVER=${1:?usage: kill9.sh SERVER}
export SERVER # read by fp_start (lib.sh)
ROUNDS=${KILL9_ROUNDS:-6}
UPLOADS=${KILL9_UPLOADS:-6}
RANDOM=${KILL9_SEED:-$$}
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
fp_setup kill9 curl sqlite3 python3
# The server's temporary files (scratch databases, nsys spools: server/lib/tmpfile.h) go here,
# so the restart check below can see what the kills left and what the sweep removed.
mkdir -p "$TMP/tmpdir"
export TMPDIR=$TMP/tmpdir
[ -x "$SERVER" ] || { fail "$SERVER is not an executable"; fp_finish; exit 1; }
TRACES=$(fp_traces)
# From 1.6 KB to 1.1 MB compressed (33 to 75,718 events): small ones commit in
# milliseconds, big ones take ~1 s, so kills land in every phase of an upload.
FILES=()
for f in hta/nccl_parser_config/nccl_data.json.gz \
    kineto_tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz \
    hta/trace_filter/sampled_rank-0.json.gz hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz \
    hta/trace_filter/sampled_rank-1.json.gz hta/trace_compare/base/base.json.gz \
    hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz kineto_tb_plugin/test/gpu_metrics_input.json; do
    [ -f "$TRACES/$f" ] && FILES+=("$TRACES/$f")
done
if [ "${#FILES[@]}" -lt 3 ]; then fail "fewer than 3 traces under $TRACES"; fp_finish; exit 1; fi
mkdir -p "$TMP/up"

declare -A ANSWERED   # tag -> id, for every 201
declare -A EVENTS     # tag -> "events" of the 201 reply
declare -A INFLIGHT   # tag -> 1 when the upload had not finished at its round's kill
declare -A CODE       # tag -> HTTP status curl saw (000: no answer)
LOST_ACKS=0
TOTAL_UPLOADS=0
TOTAL_INFLIGHT=0

# upload TAG FILE RATE: one POST; writes TAG.code, TAG.body, then TAG.done.
upload() {
    local out=$TMP/up/$1 limit=()
    if [ "$3" != 0 ]; then limit=(--limit-rate "$3"); fi
    curl -s -o "$out.body" -w '%{http_code}' --max-time 60 "${limit[@]}" -X POST \
        --data-binary @"$2" "$URL/api/v1/sessions?name=$1" > "$out.code" 2>/dev/null || true
    touch "$out.done"
}

# rows_of: "id|name|event_count|operators|analysis|chunk_events" per session. Chunks of track
# -1 hold the events synth.c adds (process/thread names, launch flows), which event_count
# does not count, so only the uploaded events' tracks (>= 0) are summed.
rows_of() {
    sqlite3 -batch "$DB" "SELECT s.id, s.name, s.event_count,
        (SELECT count(*) FROM operators o WHERE o.session_id = s.id),
        (SELECT count(*) FROM analysis a WHERE a.session_id = s.id),
        (SELECT coalesce(sum(n), 0) FROM event_chunks c WHERE c.session_id = s.id AND c.track >= 0)
        FROM sessions s ORDER BY s.id"
}

check_db() { # ROUND
    local r=$1 ic fk rows id name ev ops an ch tag bad=0 n=0 lost=0
    ic=$(sqlite3 -batch "$DB" 'PRAGMA integrity_check' 2>&1 || true)
    if [ "$ic" = ok ]; then pass "round $r: integrity_check ok"; else fail "round $r: integrity_check: $ic"; fi
    fk=$(sqlite3 -batch "$DB" 'PRAGMA foreign_key_check' 2>&1 || true)
    if [ -z "$fk" ]; then pass "round $r: foreign_key_check empty (no orphan rows)"
    else fail "round $r: foreign_key_check: $(echo "$fk" | head -3)"; fi
    rows=$(rows_of) || { fail "round $r: cannot read sessions"; return; }
    declare -A seen=()
    while IFS='|' read -r id name ev ops an ch; do
        [ -n "$id" ] || continue
        n=$((n + 1))
        if [ -n "${seen[$name]:-}" ]; then fail "round $r: upload $name stored twice (ids ${seen[$name]} and $id)"; bad=1; fi
        seen[$name]=$id
        if [ "$ops" -le 0 ] || [ "$an" -ne 1 ] || [ "$ch" -ne "$ev" ]; then
            fail "round $r: session $id ($name) is incomplete: operators=$ops analysis=$an chunk events=$ch of $ev"
            bad=1
        fi
        if [ -n "${ANSWERED[$name]:-}" ]; then
            if [ "${ANSWERED[$name]}" != "$id" ]; then fail "round $r: $name was answered id ${ANSWERED[$name]} but is stored as $id"; bad=1; fi
            if [ "${EVENTS[$name]}" != "$ev" ]; then fail "round $r: $name: 201 said ${EVENTS[$name]} events, stored $ev"; bad=1; fi
        elif [ -n "${INFLIGHT[$name]:-}" ] && [ "${CODE[$name]:-}" = 000 ]; then
            lost=$((lost + 1)) # committed, then killed before the 201 went out
        else
            fail "round $r: session $id ($name) exists but was never answered 201 (status ${CODE[$name]:-none}, not in flight at a kill)"
            bad=1
        fi
    done <<< "$rows"
    for tag in "${!ANSWERED[@]}"; do
        if [ -z "${seen[$tag]:-}" ]; then fail "round $r: $tag was answered 201 id ${ANSWERED[$tag]} but is not in the database"; bad=1; fi
    done
    LOST_ACKS=$lost
    if [ "$bad" -eq 0 ]; then
        pass "round $r: $n sessions, every 201 present and complete, none unanswered except $lost ack(s) lost in flight"
    fi
}

for r in $(seq 1 "$ROUNDS"); do
    if ! fp_start --max-uploads 64 --max-connections 128; then
        fail "round $r: the server did not start on the database (log: $(tail -3 "$TMP/server.log"))"
        break
    fi
    pass "round $r: server up on $URL (pid $SPID)"
    tags=()
    for i in $(seq 1 "$UPLOADS"); do
        tag=r${r}u$i
        f=${FILES[$(((r + i) % ${#FILES[@]}))]}
        # half the uploads crawl (the kill lands while the body is still arriving)
        rate=0
        if [ $((RANDOM % 2)) -eq 0 ]; then rate=$((200 + RANDOM % 800))k; fi
        upload "$tag" "$f" "$rate" &
        tags+=("$tag")
    done
    TOTAL_UPLOADS=$((TOTAL_UPLOADS + UPLOADS))
    # 0.05 to 0.99 s, from bash's $RANDOM (awk's first rand() after srand(small seed) barely
    # varies with the seed, which made every kill land at ~0.47 s)
    delay=$(printf '0.%02d' $((5 + RANDOM % 95)))
    sleep "$delay"
    inflight=0
    for tag in "${tags[@]}"; do
        if [ ! -e "$TMP/up/$tag.done" ]; then INFLIGHT[$tag]=1; inflight=$((inflight + 1)); fi
    done
    fp_kill9
    wait # the uploads (curl ends on the reset connection; --max-time bounds it)
    TOTAL_INFLIGHT=$((TOTAL_INFLIGHT + inflight))
    ok201=0 other=""
    for tag in "${tags[@]}"; do
        CODE[$tag]=$(cat "$TMP/up/$tag.code" 2>/dev/null || echo 000)
        case ${CODE[$tag]} in
        201)
            ANSWERED[$tag]=$(sed -n 's/.*"id":\([0-9]*\).*/\1/p' "$TMP/up/$tag.body")
            EVENTS[$tag]=$(sed -n 's/.*"events":\([0-9]*\).*/\1/p' "$TMP/up/$tag.body")
            ok201=$((ok201 + 1)) ;;
        000 | 1??) CODE[$tag]=000 ;; # no final answer (curl saw at most "100 Continue")
        *) other="$other $tag:${CODE[$tag]}" ;;
        esac
    done
    note "round $r: killed after ${delay}s with $inflight of $UPLOADS uploads in flight; $ok201 answered 201"
    if [ -n "$other" ]; then fail "round $r: unexpected statuses:$other"; fi
    check_db "$r"
done

# After the last kill: a clean start lists exactly what is stored, then SIGTERM exits 0.
left=$(find "$TMPDIR" -name 'firstpass-*' | wc -l)
if fp_start; then
    now=$(find "$TMPDIR" -name 'firstpass-*' | wc -l)
    if [ "$now" -eq 0 ]; then pass "restart: no temporary files left ($left from the last kill, removed at start)"
    else fail "restart: $now temporary files left in \$TMPDIR after the start (from the last kill: $left)"; fi
    stored=$(sqlite3 -batch "$DB" 'SELECT id FROM sessions ORDER BY id' | tr '\n' ' ')
    listed=$(fp_list_ids | sort -n | tr '\n' ' ') || listed="(list failed)"
    if [ "$stored" = "$listed" ]; then pass "restart: the API lists the $(wc -w <<< "$stored") stored sessions"
    else fail "restart: stored [$stored] but listed [$listed]"; fi
    badops=0
    for tag in "${!ANSWERED[@]}"; do
        code=$(curl -s -o "$TMP/ops.json" -w '%{http_code}' --max-time 30 "$URL/api/v1/sessions/${ANSWERED[$tag]}/operators")
        if [ "$code" != 200 ] || ! grep -q '"operators":\[{' "$TMP/ops.json"; then
            fail "restart: GET /sessions/${ANSWERED[$tag]}/operators ($tag): $code"
            badops=1
        fi
    done
    if [ "$badops" -eq 0 ]; then pass "restart: operators served for all ${#ANSWERED[@]} answered sessions"; fi
    fp_term
    rc=$TERM_RC
    if [ "$rc" -eq 0 ]; then pass "restart: SIGTERM, exit 0"
    else fail "restart: SIGTERM, exit $rc (124: still running, SIGKILLed; see sigterm.sh)"; fi
else
    fail "restart: the server did not start after the last kill"
fi
echo "kill9: $ROUNDS rounds, $TOTAL_UPLOADS uploads, ${#ANSWERED[@]} answered 201, $TOTAL_INFLIGHT in flight at a kill," \
    "$LOST_ACKS committed without their 201 reaching the client (ack lost)"
fp_finish
