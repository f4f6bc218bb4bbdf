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
RUNNER=$(cd "$BUILD" && pwd)/firstpass-run
for f in "$LIB" "$APP" "$RUNNER" "$SIM/libcupti.so.13" "$SIM/libcuda.so.1"; do
    [ -e "$f" ] || { echo "FAIL: $f missing"; exit 1; }
done
TMP=$(mktemp -d /tmp/fp-sim-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
FAILED=0

# run NAME CHECK [ENV=VAL...] -- COMMAND...: runs COMMAND (the app, maybe through firstpass-run)
# with a fresh spool under a timeout, then check.py CHECK on what it left.
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
        FIRSTPASS_NAME="sim-$name" "${envs[@]}" timeout 60 "$@" >"$d/out" 2>"$d/err"
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

want basic && run basic basic -- "$RUNNER" "$APP" basic
# without the launcher: no NVTX capture, said in the log and the session; environment untouched
want basic && run nvtx-unset nvtx-unset -- "$APP" basic
want threads && run threads8 threads -- "$APP" threads 8 50
want threads && run threads threads -- "$APP" threads 40 100
want threads && run threads-locked threads-locked FAKE_CUPTI_PER_THREAD_LOCKED=1 FIRSTPASS_DRAIN_S=0 -- "$APP" threads 40 100
# 40,000 launches fill one 8 MiB buffer, which CUPTI's worker delivers while the exit flush runs
want abba && run abba abba FAKE_CUPTI_ABBA=1 -- "$APP" many 40000
want kineto && run kineto kineto FIRSTPASS_DRAIN_S=1 NVTX_INJECTION64_PATH="$SIM/libcupti.so.13" -- "$APP" kineto
want fork && run fork fork -- "$APP" fork
want refused && run refused refused FAKE_CUPTI_REFUSE=CONCURRENT_KERNEL -- "$APP" small

# firstpass-run: the variables a program sees (the collector resolves to the fake libcupti here)
if want launcher; then
    echo "== launcher"
    got=$(env -u CUDA_INJECTION64_PATH -u NVTX_INJECTION64_PATH LD_LIBRARY_PATH="$SIM" \
          "$RUNNER" --lib "$LIB" -- env | grep INJECTION64_PATH | sort | tr '\n' ' ')
    want_env="CUDA_INJECTION64_PATH=$LIB NVTX_INJECTION64_PATH=$SIM/libcupti.so.13 "
    if [ "$got" = "$want_env" ]; then echo "  PASS: firstpass-run sets both paths ($got)"
    else echo "  FAIL: firstpass-run environment: got '$got', want '$want_env'"; FAILED=$((FAILED + 1)); fi
    got=$(FIRSTPASS_NVTX=0 LD_LIBRARY_PATH="$SIM" "$RUNNER" --lib "$LIB" -- env | grep -c NVTX_INJECTION64_PATH)
    if [ "$got" = 0 ]; then echo "  PASS: FIRSTPASS_NVTX=0: NVTX_INJECTION64_PATH left unset"
    else echo "  FAIL: FIRSTPASS_NVTX=0 still set NVTX_INJECTION64_PATH"; FAILED=$((FAILED + 1)); fi
    "$RUNNER" --lib /nonexistent true 2>/dev/null; rc=$?
    if [ $rc = 1 ]; then echo "  PASS: a missing collector: exit 1"
    else echo "  FAIL: a missing collector: exit $rc, want 1"; FAILED=$((FAILED + 1)); fi
fi

if [ $FAILED -ne 0 ]; then echo "sim: $FAILED scenario(s) FAILED"; exit 1; fi
echo "sim: all scenarios passed"
