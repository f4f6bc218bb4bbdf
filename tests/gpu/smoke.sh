#!/usr/bin/env bash
# smoke.sh -- collector smoke test on a machine with a GPU and a driver (< 5 minutes).
#
#   tests/gpu/smoke.sh                    build collector + server + smoke.cu, run it injected,
#                                         check the session; PASS/FAIL lines, exit 1 on FAIL
#   tests/gpu/smoke.sh --compile-only DIR only compile smoke.cu with nvcc into DIR (no GPU
#                                         needed; used by make test-collector)
# Env: CUDA_HOME (default /usr/local/cuda), BUILD (default build), NVCC_ARCH (default: nvcc's).
set -u
CUDA_HOME=${CUDA_HOME:-${CUDA_PATH:-/usr/local/cuda}}
BUILD=${BUILD:-build}
NVCC=${NVCC:-$CUDA_HOME/bin/nvcc}
HERE=$(cd "$(dirname "$0")" && pwd)
ARCH=${NVCC_ARCH:+-arch=$NVCC_ARCH}

compile() { # OUT
    mkdir -p "$(dirname "$1")"
    # NVTX3 is header-only since CUDA 13 (no libnvToolsExt): -ldl is all it needs.
    timeout 180 "$NVCC" -O2 $ARCH -I"$CUDA_HOME/include" -o "$1" "$HERE/smoke.cu" -ldl
}

if [ "${1:-}" = "--compile-only" ]; then
    OUT=${2:-$BUILD/gpu-smoke}/smoke
    if compile "$OUT"; then echo "PASS: nvcc compiled tests/gpu/smoke.cu -> $OUT"; exit 0; fi
    echo "FAIL: nvcc could not compile tests/gpu/smoke.cu"; exit 1
fi

FAILS=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }

command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "note: nvidia-smi not found; trying anyway"
timeout 240 make --no-print-directory server collector >/dev/null || { echo "FAIL: make server collector"; exit 1; }
LIB=$(cd "$BUILD" && pwd)/libfirstpass-cupti.so
[ -f "$LIB" ] || { echo "FAIL: $LIB not built (CUPTI not found under $CUDA_HOME?)"; exit 1; }
CUPTI=$(ldd "$LIB" | awk '/libcupti/ {print $3}')
[ -n "$CUPTI" ] || { echo "FAIL: cannot resolve libcupti for $LIB"; exit 1; }
TMP=$(mktemp -d /tmp/fp-smoke-XXXXXX)
SPID=
trap '[ -n "$SPID" ] && kill $SPID 2>/dev/null; rm -rf "$TMP"' EXIT
compile "$TMP/smoke" && pass "nvcc smoke.cu" || { echo "FAIL: nvcc"; exit 1; }

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
"$BUILD/firstpass-server" --port "$PORT" --db "$TMP/db.sqlite" --static static >"$TMP/server.log" 2>&1 &
SPID=$!
for _ in $(seq 1 100); do curl -fsS "$URL/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
curl -fsS "$URL/healthz" >/dev/null || { echo "FAIL: server not up"; cat "$TMP/server.log"; exit 1; }

# NVTX_INJECTION64_PATH must name the same libcupti the collector uses (design note 3).
CUDA_INJECTION64_PATH=$LIB NVTX_INJECTION64_PATH=$CUPTI FIRSTPASS_SERVER=$URL \
    FIRSTPASS_NAME=gpu-smoke FIRSTPASS_LABELS=suite:smoke FIRSTPASS_SPOOL=$TMP/spool \
    timeout 120 "$TMP/smoke" >"$TMP/run.out" 2>"$TMP/run.err"
rc=$?
sed 's/^/  | /' "$TMP/run.err"
[ $rc -eq 0 ] && pass "smoke program ran under the collector" || fail "smoke program exit $rc"
ID=$(sed -n 's/.*uploaded session \([0-9][0-9]*\) .*/\1/p' "$TMP/run.err")
[ -n "$ID" ] && pass "collector uploaded session $ID" || { fail "no 'uploaded session' line"; exit 1; }

curl -sS "$URL/api/v1/sessions/$ID/operators?limit=1000" >"$TMP/ops.json"
curl -sS "$URL/api/v1/sessions/$ID/phases" >"$TMP/phases.json"
curl -sS "$URL/api/v1/sessions/$ID" >"$TMP/summary.json"
python3 - "$TMP/ops.json" "$TMP/phases.json" "$TMP/summary.json" <<'PY' || FAILS=$((FAILS + 1))
import json, sys
bad = 0
def check(ok, msg):
    global bad
    print(("PASS: " if ok else "FAIL: ") + msg); bad += 0 if ok else 1
ops = json.load(open(sys.argv[1])).get("operators", [])
kern = {o["name"]: o for o in ops if o.get("kind") == "kernel"}
pre = [o for n, o in kern.items() if "matmul_prefill" in n]
dec = [o for n, o in kern.items() if "decode_step_kernel" in n]
check(len(pre) == 1 and pre[0]["calls"] == 1, "kernel matmul_prefill x1 (%s)" % [o.get("name") for o in pre])
check(len(dec) == 1 and dec[0]["calls"] == 50, "kernel decode_step_kernel x50 (%s)" % [(o.get("name"), o.get("calls")) for o in dec])
check(all(o.get("cuda_time_total_us", 0) > 0 for o in pre + dec), "kernel times > 0")
check(any(o.get("name") == "cudaLaunchKernel" and o.get("calls", 0) >= 51 for o in ops), "cudaLaunchKernel >= 51 calls")
check(any(o.get("kind") == "gpu_memcpy" for o in ops), "a gpu_memcpy row exists")
ph = {p["name"]: p for p in json.load(open(sys.argv[2])).get("phases", [])}
check(ph.get("prefill", {}).get("count") == 1, "phase prefill x1 (%s)" % ph.get("prefill"))
check(ph.get("decode_step", {}).get("count") == 50, "phase decode_step x50 (%s)" % ph.get("decode_step"))
s = json.load(open(sys.argv[3]))
print("  summary: hardware=%r duration_us=%r events=%r" % (s.get("hardware"), s.get("duration_us"), s.get("event_count")))
sys.exit(1 if bad else 0)
PY
[ $FAILS -eq 0 ] && { echo "smoke: all checks passed"; exit 0; }
echo "smoke: $FAILS check(s) FAILED"; exit 1
