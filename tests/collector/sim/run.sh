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
STUBS=()
cleanup() {
    local p
    for p in "${STUBS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT
[ -n "${SIM_KEEP:-}" ] && trap - EXIT
FAILED=0

# stub MODE DIR: starts httpstub.py, sets STUB_URL.
stub() {
    mkdir -p "$2"
    python3 "$HERE/httpstub.py" "$1" "$2" >"$2.port" 2>/dev/null &
    STUBS+=($!)
    for _ in $(seq 1 100); do [ -s "$2.port" ] && break; sleep 0.05; done
    STUB_URL=http://127.0.0.1:$(head -1 "$2.port")
}

# check NAME CHECK: check.py on what the run left; the harness line is appended to out.
check() {
    local d=$TMP/$1 rc
    python3 "$HERE/check.py" "$2" "$d/spool" "$d/out" "$d/err" >"$d/check" 2>&1
    rc=$?
    sed 's/^/  /' "$d/check"
    if [ $rc -ne 0 ]; then
        FAILED=$((FAILED + 1))
        echo "  -- stderr:"; sed 's/^/  | /' "$d/err" | tail -20
    fi
}

# run NAME CHECK [ENV=VAL...] -- COMMAND...: runs COMMAND (the app, maybe through firstpass-run)
# with a fresh spool under a timeout, then check.py CHECK on what it left.
run() {
    local name=$1 chk=$2 d rc t0 ms
    shift 2
    d=$TMP/$name
    mkdir -p "$d"
    local envs=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    t0=$(date +%s%N)
    env LD_LIBRARY_PATH="$SIM" CUDA_INJECTION64_PATH="$LIB" FIRSTPASS_SPOOL="$d/spool" \
        FIRSTPASS_NAME="sim-$name" "${envs[@]}" timeout 60 "$@" >"$d/out" 2>"$d/err"
    rc=$?
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    echo "harness: exit $rc ms $ms" >>"$d/out"
    echo "== $name (exit $rc, $ms ms)"
    check "$name" "$chk"
}

# run_signal NAME CHECK SIG AFTER_MS [ENV=VAL...] -- COMMAND...: starts COMMAND, waits for its
# first "sim: " line, sends SIG AFTER_MS later, and waits for it to end.
run_signal() {
    local name=$1 chk=$2 sig=$3 after=$4 d rc t0 ms pid
    shift 4
    d=$TMP/$name
    mkdir -p "$d"
    local envs=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    env LD_LIBRARY_PATH="$SIM" CUDA_INJECTION64_PATH="$LIB" FIRSTPASS_SPOOL="$d/spool" \
        FIRSTPASS_NAME="sim-$name" "${envs[@]}" timeout 60 "$@" >"$d/out" 2>"$d/err" &
    pid=$!
    for _ in $(seq 1 200); do grep -q '^sim: ' "$d/out" && break; sleep 0.05; done
    sleep "$(printf '%d.%03d' $((after / 1000)) $((after % 1000)))"
    t0=$(date +%s%N)
    # timeout(1) runs the program as its child: signal the program itself
    kill -s "$sig" "$(pgrep -P "$pid" | head -1)" 2>/dev/null
    { wait "$pid"; } 2>/dev/null
    rc=$?
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    echo "harness: exit $rc ms $ms" >>"$d/out"
    echo "== $name ($sig after ${after} ms: exit $rc, $ms ms after the signal)"
    check "$name" "$chk"
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
want kineto && run kineto-subscribed kineto-subscribed FIRSTPASS_DRAIN_S=1 FIRSTPASS_SUBSCRIBE=1 \
    NVTX_INJECTION64_PATH="$SIM/libcupti.so.13" -- "$APP" kineto
want fork && run fork fork -- "$APP" fork
want refused && run refused refused FAKE_CUPTI_REFUSE=CONCURRENT_KERNEL -- "$APP" small

# Exit paths. A server that answers: the session arrives and nothing stays in the spool.
if want upload; then
    stub 201 "$TMP/stub201"
    STUB_DIR=$TMP/stub201 run upload upload FIRSTPASS_SERVER="$STUB_URL" -- "$RUNNER" "$APP" basic
fi
# A server that never answers: the exit is held for FIRSTPASS_EXIT_BUDGET_S, not 60 s, and
# the session is in the spool; killed during that upload, the session is in the spool too.
if want blackhole; then
    stub blackhole "$TMP/hole"
    run budget budget FIRSTPASS_SERVER="$STUB_URL" FIRSTPASS_EXIT_BUDGET_S=2 -- "$RUNNER" "$APP" basic
    run_signal killed killed KILL 1500 FIRSTPASS_SERVER="$STUB_URL" -- "$RUNNER" "$APP" basic
fi
# SIGTERM: the handler has the thread spool the session, then the default action ends the
# process (143); with the application's own handler installed before cuInit, it runs after.
want sigterm && run_signal sigterm sigterm TERM 100 -- "$APP" sigterm
want sigterm && run_signal sigterm-chain sigterm-chain TERM 100 -- "$APP" sigterm-chain
# A worker forked before CUDA, ending in _exit: the part flushed every second survives.
want forkexit && run forkexit forkexit FIRSTPASS_FLUSH_S=1 -- "$APP" forkexit

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
