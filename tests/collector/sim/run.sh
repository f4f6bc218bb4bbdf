#!/usr/bin/env bash
# run.sh -- the collector's injection path end to end on a CPU: the unmodified
# libfirstpass-cupti.so, loaded by a fake libcuda.so.1 at cuInit, recording through a fake
# libcupti.so.13 (README.md in this folder). Each scenario runs sim_app with its own spool and
# check.py checks what it left, exactly.
#
#   tests/collector/sim/run.sh [SCENARIO...]     default: all; BUILD (default build)
#
# Exit 0 when every scenario passed; prints "sim: N scenario(s) FAILED" otherwise.
set -u
unset FIRSTPASS_QUIET FIRSTPASS_TOKEN FIRSTPASS_NAME FIRSTPASS_LABELS FIRSTPASS_SERVER \
      FIRSTPASS_SPOOL FIRSTPASS_FLUSH_S FIRSTPASS_ENABLE FIRSTPASS_NVTX FIRSTPASS_MAX_BUFFERS \
      NVTX_INJECTION64_PATH CUDA_INJECTION64_PATH
BUILD=${BUILD:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
SIM=$(cd "$BUILD/collector/sim" 2>/dev/null && pwd) || { echo "FAIL: $BUILD/collector/sim missing (make collector-sim)"; exit 1; }
LIB=$(cd "$BUILD" && pwd)/libfirstpass-cupti.so
APP=$SIM/sim_app
for f in "$LIB" "$APP" "$SIM/libcupti.so.13" "$SIM/libcuda.so.1"; do
    [ -e "$f" ] || { echo "FAIL: $f missing"; exit 1; }
done
TMP=$(mktemp -d /tmp/fp-sim-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
FAILED=0

# run NAME CHECK [ENV=VAL...] -- ARGS...: runs the app in a fresh spool under a timeout, then
# check.py CHECK on it.
run() {
    local name=$1 chk=$2 d rc
    shift 2
    d=$TMP/$name
    mkdir -p "$d"
    local envs=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    local t0=$(date +%s%N)
    env LD_LIBRARY_PATH="$SIM" CUDA_INJECTION64_PATH="$LIB" FIRSTPASS_SPOOL="$d/spool" \
        FIRSTPASS_NAME="sim-$name" "${envs[@]}" timeout 60 "$APP" "$@" >"$d/out" 2>"$d/err"
    rc=$?
    echo "== $name (exit $rc, $(( ($(date +%s%N) - t0) / 1000000 )) ms)"
    python3 "$HERE/check.py" "$chk" "$d/spool" "$d/out" "$d/err" >"$d/check" 2>&1
    rc=$?
    sed 's/^/  /' "$d/check"
    if [ $rc -ne 0 ]; then
        FAILED=$((FAILED + 1))
        echo "  -- stderr:"; sed 's/^/  | /' "$d/err" | tail -20
    fi
}

want() { [ -z "$SELECTED" ] || [[ " $SELECTED " == *" $1 "* ]]; }
SELECTED="$*"

want basic && run basic basic NVTX_INJECTION64_PATH="$SIM/libcupti.so.13" -- basic
want threads && run threads8 threads -- threads 8 50
want threads && run threads threads -- threads 40 100
want threads && run threads-locked threads-locked FAKE_CUPTI_PER_THREAD_LOCKED=1 FIRSTPASS_DRAIN_S=0 -- threads 40 100
# 40,000 launches fill one 8 MiB buffer, which CUPTI's worker delivers while the exit flush runs
want abba && run abba abba FAKE_CUPTI_ABBA=1 -- many 40000
want kineto && run kineto kineto FIRSTPASS_DRAIN_S=1 NVTX_INJECTION64_PATH="$SIM/libcupti.so.13" -- kineto
want fork && run fork fork -- fork
want refused && run refused refused FAKE_CUPTI_REFUSE=CONCURRENT_KERNEL -- small

if [ $FAILED -ne 0 ]; then echo "sim: $FAILED scenario(s) FAILED"; exit 1; fi
echo "sim: all scenarios passed"
