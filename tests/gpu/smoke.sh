#!/usr/bin/env bash
# smoke.sh -- the collector on a real GPU, in one call (docs/collector.md, "The GPU check").
#
#   make gpu-bundle                        here: build/gpu-bundle/ (runs --bundle)
#   tests/gpu/smoke.sh --prebuilt BUNDLE OUT
#                                          on the GPU machine: nothing built or installed
#                                          there, no server; every part under a timeout,
#                                          about 3 minutes; sessions spool into OUT, with logs,
#                                          packed as OUT/gpu-smoke.tar.gz + OUT/summary.txt
#   tests/gpu/smoke.sh --check OUT [--server URL]
#                                          here: decode and check what came back (PASS/FAIL
#                                          lines, exit 1 on FAIL); with --server, also send the
#                                          sessions to that server and read /operators, /phases
#   tests/gpu/smoke.sh --compile-only DIR  nvcc only (make test-collector; no GPU needed)
#   tests/gpu/smoke.sh                     all three on a GPU machine that can build
#
# Env: CUDA_HOME (default /usr/local/cuda), BUILD (default build), NVCC.
set -u
CUDA_HOME=${CUDA_HOME:-${CUDA_PATH:-/usr/local/cuda}}
BUILD=${BUILD:-build}
NVCC=${NVCC:-$CUDA_HOME/bin/nvcc}
HERE=$(cd "$(dirname "$0")" && pwd)

# sm_90 (H100/H200) code plus PTX; static cudart (nvcc's default), so the GPU machine needs
# only the driver. NVTX3 is header-only since CUDA 13: -ldl is all it needs.
compile() { # OUT
    mkdir -p "$(dirname "$1")"
    timeout 300 "$NVCC" -O2 -gencode 'arch=compute_90,code=[sm_90,compute_90]' \
        -I"$CUDA_HOME/include" -o "$1" "$HERE/smoke.cu" -ldl
}

# ---- here: the bundle -------------------------------------------------------------------
# DIR/lib/libfirstpass-cupti.so is made by `make gpu-bundle` (the collector relinked with
# RPATH $ORIGIN:$ORIGIN/../cupti, so its whole dependency closure loads from the bundle
# without LD_LIBRARY_PATH); this copies the rest beside it.
bundle() {
    local d=$1 lib=$1/lib/libfirstpass-cupti.so cupti f
    [ -f "$lib" ] || { echo "FAIL: $lib missing (run make gpu-bundle)"; return 1; }
    [ -x "$BUILD/firstpass-run" ] || { echo "FAIL: $BUILD/firstpass-run missing"; return 1; }
    mkdir -p "$d/bin" "$d/cupti"
    cp "$BUILD/firstpass-run" "$d/bin/"
    cupti=$(ldd "$BUILD/libfirstpass-cupti.so" | awk '$1 ~ /^libcupti/ && $3 ~ /^\// {print $3}')
    [ -n "$cupti" ] || { echo "FAIL: cannot resolve libcupti of $BUILD/libfirstpass-cupti.so"; return 1; }
    cp -L "$cupti" "$d/cupti/"
    # The collector's runtime libraries (libcurl, jansson, zlib and their closure), not glibc.
    for f in $(ldd "$BUILD/libfirstpass-cupti.so" | awk '$3 ~ /^\// {print $3}'); do
        case $(basename "$f") in
        libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libutil.so.*|libresolv.so.*|\
        ld-linux*|libgcc_s.so.*|libcupti.so.*) ;;
        *) cp -L "$f" "$d/lib/" ;;
        esac
    done
    compile "$d/bin/smoke" || { echo "FAIL: nvcc"; return 1; }
    cp "$HERE/smoke.sh" "$HERE/check.py" "$HERE/torch_smoke.py" "$d/"
    # Everything resolves inside the bundle or to glibc, with no LD_LIBRARY_PATH.
    if env -u LD_LIBRARY_PATH ldd "$d/lib/libfirstpass-cupti.so" | grep -q 'not found'; then
        echo "FAIL: unresolved libraries in the bundle:"
        env -u LD_LIBRARY_PATH ldd "$d/lib/libfirstpass-cupti.so" | grep 'not found'
        return 1
    fi
    {
        echo "built $(date -u +%FT%TZ) from $(git -C "$HERE" rev-parse --short HEAD 2>/dev/null || echo '?')"
        echo "needs glibc >= $(objdump -T "$d"/lib/*.so* "$d"/bin/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)"
        (cd "$d" && find . -type f ! -name MANIFEST | sort | xargs sha256sum)
    } >"$d/MANIFEST"
    echo "PASS: bundle $d ($(du -sh "$d" | cut -f1), $(head -2 "$d/MANIFEST" | tail -1))"
}

# ---- the GPU machine ---------------------------------------------------------------------
# part NAME TIMEOUT [ENV=VAL...] -- COMMAND...: runs COMMAND with its own spool and logs.
part() {
    local name=$1 t=$2 d rc t0
    shift 2
    d=$OUT/$name
    mkdir -p "$d/spool" && chmod 700 "$d/spool"  # the collector spools only into its user's 0700 dirs
    local envs=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    t0=$(date +%s%N)
    env -u FIRSTPASS_SERVER -u FIRSTPASS_QUIET FIRSTPASS_SPOOL="$d/spool" \
        FIRSTPASS_NAME="gpu-$name" FIRSTPASS_LABELS="suite:gpu-smoke,part:$name" "${envs[@]}" \
        timeout "$t" "$@" >"$d/out" 2>"$d/err"
    rc=$?
    echo "$rc $t0 $(date +%s%N)" >"$d/rc"
    echo "part $name: exit $rc, $(( ($(date +%s%N) - t0) / 1000000 )) ms" | tee -a "$OUT/summary.txt"
    sed 's/^/  | /' "$d/err" | grep -v '^  | *$' | head -12 | tee -a "$OUT/summary.txt"
}

prebuilt() {
    local B t0
    local -a R
    B=$(cd "$1" && pwd) || { echo "FAIL: no bundle at $1"; exit 1; }
    OUT=$2
    mkdir -p "$OUT"
    OUT=$(cd "$OUT" && pwd)
    R=("$B/bin/firstpass-run" --lib "$B/lib/libfirstpass-cupti.so" --)
    t0=$(date +%s)
    {
        echo "gpu-smoke on $(hostname) at $(date -u +%FT%TZ)"
        head -2 "$B/MANIFEST"
        nvidia-smi -L 2>&1 | head -4
        nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>&1 | head -2
    } | tee "$OUT/summary.txt"
    date +%s%N >"$OUT/clock"
    part smoke 60 -- "${R[@]}" "$B/bin/smoke"
    part flush 60 FIRSTPASS_FLUSH_S=1 -- "${R[@]}" "$B/bin/smoke" --sleep 3
    part forkexit 60 FIRSTPASS_FLUSH_S=1 -- "${R[@]}" "$B/bin/smoke" --fork-exit
    part driver 60 FIRSTPASS_DRIVER_API=1 -- "${R[@]}" "$B/bin/smoke"
    part bench-off 90 -- "$B/bin/smoke" --bench 200000 1000 200
    part bench-on 90 FIRSTPASS_EVENTS=0 -- "${R[@]}" "$B/bin/smoke" --bench 200000 1000 200
    # PyTorch loads its own libcupti at import (libkineto): NVTX must name that one, and the
    # collector binds to it too (same SONAME, already loaded).
    local tc
    tc=$(timeout 90 python3 -c 'import torch
p = [l.split()[-1] for l in open("/proc/self/maps") if "libcupti" in l]
print(p[0] if p else "-")' 2>/dev/null | tail -1)
    echo "torch's libcupti: ${tc:-none (no torch?)}" | tee -a "$OUT/summary.txt"
    if [ -n "$tc" ] && [ "$tc" != "-" ]; then
        part torch 150 CUDA_INJECTION64_PATH="$B/lib/libfirstpass-cupti.so" \
            NVTX_INJECTION64_PATH="$tc" -- python3 "$B/torch_smoke.py" "$OUT/torch"
    else
        part torch 150 -- "${R[@]}" python3 "$B/torch_smoke.py" "$OUT/torch"
    fi
    echo "total $(( $(date +%s) - t0 )) s" | tee -a "$OUT/summary.txt"
    # One file back, written outside OUT (tar reading a folder it writes into fails).
    local tgz
    tgz=$(mktemp /tmp/fp-gpu-smoke-XXXXXX.tar.gz)
    if tar -C "$OUT" -czf "$tgz" . && mv "$tgz" "$OUT/gpu-smoke.tar.gz"; then :
    else echo "FAIL: could not pack $OUT" | tee -a "$OUT/summary.txt"; rm -f "$tgz"; fi
    ls -la "$OUT" | tee -a "$OUT/summary.txt"
}

case "${1:-}" in
--compile-only)
    OUTF=${2:-$BUILD/gpu-smoke}/smoke
    if compile "$OUTF"; then echo "PASS: nvcc compiled tests/gpu/smoke.cu -> $OUTF"; exit 0; fi
    echo "FAIL: nvcc could not compile tests/gpu/smoke.cu"; exit 1 ;;
--bundle)
    bundle "${2:?--bundle DIR}"; exit $? ;;
--prebuilt)
    prebuilt "${2:?--prebuilt BUNDLE OUT}" "${3:?--prebuilt BUNDLE OUT}"; exit 0 ;;
--check)
    shift
    exec python3 "$HERE/check.py" "$@" ;;
"")
    command -v nvidia-smi >/dev/null || echo "note: nvidia-smi not found; trying anyway"
    make --no-print-directory gpu-bundle >/dev/null || { echo "FAIL: make gpu-bundle"; exit 1; }
    OUTD=$(mktemp -d /tmp/fp-gpu-XXXXXX)
    prebuilt "$BUILD/gpu-bundle" "$OUTD"
    exec python3 "$HERE/check.py" "$OUTD" ;;
*)
    sed -n '2,17p' "$0"; exit 2 ;;
esac
