#!/usr/bin/env bash
# run.sh [SECONDS]: builds the libFuzzer targets, replays the regression inputs, then fuzzes
# each target for SECONDS (default 60). Exit status non-zero on any finding.
#
#   fuzz_ingest        server/ingest.c: bytes (plain/gzip, split 1-3 ways) -> ingest_event
#   fuzz_session_meta  api/session.c: fp_session_meta_from_json, fp_labels_parse
#   fuzz_chunk         server/chunk.c: event chunks built, compressed and read back exactly;
#                      arbitrary bytes read as chunks of either version
#
# Builds with clang 14 and -fsanitize=fuzzer,address,undefined into build/fuzz/ (if linking
# fails: apt-get install -y libclang-rt-14-dev). Seeds are made at run time from the real
# traces by seeds.sh into a temporary folder, plus tests/fuzz/seeds/. Findings (crash-*,
# leak-*, timeout-*, oom-* files) are kept in build/fuzz/artifacts/<target>/; replay one
# with `build/fuzz/fuzz_ingest FILE`. A reproducer that should stay fixed belongs in
# tests/fuzz/regress/<target>/ (replayed first; each must run clean).
#
# Environment: FUZZ_CC (default clang-14), FP_TRACES (traces folder), FUZZ_TARGETS (default
# "fuzz_ingest fuzz_session_meta fuzz_chunk"), FUZZ_OUT (default build/fuzz: binaries, logs, artifacts;
# `make test-fuzz` points it into $(BUILD)). A target stops at its first finding, as libFuzzer does.
set -euo pipefail
SECS=${1:-60}
case $SECS in '' | *[!0-9]*) echo "usage: run.sh [SECONDS]" >&2; exit 2 ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel)
CC=${FUZZ_CC:-clang-14}
OUT=${FUZZ_OUT:-$ROOT/build/fuzz}
case $OUT in /*) ;; *) OUT=$PWD/$OUT ;; esac
TARGETS=${FUZZ_TARGETS:-fuzz_ingest fuzz_session_meta fuzz_chunk}
WORK=$(mktemp -d /tmp/fp-fuzz-XXXXXX)
trap 'rm -rf "$WORK"' EXIT

PASSED=0
FAILED=0
pass() { echo "PASS: $*"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }
finish() { echo "$PASSED passed, $FAILED failed"; [ "$FAILED" -eq 0 ]; exit $?; }

command -v "$CC" >/dev/null || { fail "$CC not found (apt-get install -y clang-14)"; finish; }
PKG_CFLAGS=$(pkg-config --cflags yajl jansson zlib libzstd)
PKG_LIBS=$(pkg-config --libs yajl jansson zlib libzstd)
# -O1 as libFuzzer's docs advise; -fno-sanitize-recover makes every UBSan report a crash.
CFLAGS="-std=c11 -D_DEFAULT_SOURCE -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
        -Wall -Wextra -I$ROOT/server -I$ROOT/api $PKG_CFLAGS"
declare -A SRCS=(
    [fuzz_ingest]="$HERE/fuzz_ingest.c $ROOT/server/ingest.c"
    [fuzz_session_meta]="$HERE/fuzz_session_meta.c $ROOT/api/session.c"
    [fuzz_chunk]="$HERE/fuzz_chunk.c $ROOT/server/chunk.c"
)
declare -A MAXLEN=([fuzz_ingest]=65536 [fuzz_session_meta]=8192 [fuzz_chunk]=8192)
declare -A DICT=([fuzz_ingest]=$HERE/ingest.dict [fuzz_session_meta]=$HERE/session.dict [fuzz_chunk]=$HERE/chunk.dict)
declare -A SEEDS=([fuzz_ingest]=ingest [fuzz_session_meta]=session [fuzz_chunk]=chunk)

mkdir -p "$OUT"
for t in $TARGETS; do
    # shellcheck disable=SC2086 # CFLAGS and the source lists are word lists
    if $CC $CFLAGS -o "$OUT/$t" ${SRCS[$t]} $PKG_LIBS 2> "$WORK/$t.build.log"; then
        pass "build $t"
    else
        cat "$WORK/$t.build.log"
        fail "build $t (if -fsanitize=fuzzer does not link: apt-get install -y libclang-rt-14-dev)"
    fi
done
[ "$FAILED" -eq 0 ] || finish

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Regression inputs: each reproduces a bug found before; the target must run it clean.
for t in $TARGETS; do
    dir=$HERE/regress/${SEEDS[$t]}
    for f in "$dir"/*; do
        [ -f "$f" ] || continue
        if timeout 60 "$OUT/$t" "$f" > "$WORK/regress.log" 2>&1; then
            pass "regress $t ${f#"$HERE"/}"
        else
            grep -m3 -E 'ERROR|runtime error|invariant broken' "$WORK/regress.log" | sed 's/^/    /' || true
            fail "regress $t ${f#"$HERE"/} (replay: $OUT/$t $f)"
        fi
    done
done

"$HERE/seeds.sh" "$WORK/seeds"

for t in $TARGETS; do
    art=$OUT/artifacts/$t
    mkdir -p "$art" "$WORK/corpus-$t"
    before=$(find "$art" -type f | wc -l)
    log=$WORK/$t.log
    set +e
    # The first folder receives new inputs (temporary); the seeds folder is read only.
    "$OUT/$t" -max_total_time="$SECS" -max_len="${MAXLEN[$t]}" -timeout=10 -rss_limit_mb=2048 \
        -dict="${DICT[$t]}" -artifact_prefix="$art/" -print_final_stats=1 \
        "$WORK/corpus-$t" "$WORK/seeds/${SEEDS[$t]}" > "$log" 2>&1
    rc=$?
    set -e
    cp "$log" "$OUT/$t.log"
    after=$(find "$art" -type f | wc -l)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*' "$log" | tail -1 || true)
    summary="${execs:-?} execs, ${rate:-?} exec/s, ${cov:-no coverage line}"
    if [ "$rc" -eq 0 ] && [ "$after" -eq "$before" ]; then
        pass "$t ${SECS}s: $summary"
    else
        grep -E 'ERROR: |runtime error|invariant broken|SUMMARY' "$log" | sort | uniq -c | sort -rn | head -8 | sed 's/^/    /' || true
        fail "$t ${SECS}s: exit $rc, $((after - before)) new finding(s) in $art ($summary; log $OUT/$t.log)"
    fi
done
finish
