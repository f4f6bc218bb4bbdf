#!/usr/bin/env bash
# selftest.sh -- the GPU check's own machinery, run without a GPU: smoke.sh --prebuilt and
# smoke.sh --check on a stand-in bundle whose bin/smoke is the simulation's "smoke-shape"
# (tests/collector/sim: the same kernels, ranges, copies and syncs as smoke.cu, through the real
# collector and the fake libcuda/libcupti). Then the check must fail when a part is missing.
#
#   tests/gpu/selftest.sh        BUILD (default build); make test-collector runs it
#
# What this cannot prove is listed in docs/collector.md ("The GPU check"): everything about
# the real driver, CUPTI, NVTX handshake, Kineto and the timings.
set -u
BUILD=${BUILD:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
B0=$(cd "$BUILD" && pwd)
SIM=$B0/collector/sim
for f in "$B0/libfirstpass-cupti.so" "$B0/firstpass-run" "$SIM/sim_app" "$SIM/libcupti.so.13"; do
    [ -e "$f" ] || { echo "FAIL: $f missing (make collector collector-tests)"; exit 1; }
done
TMP=$(mktemp -d /tmp/fp-gpu-self-XXXXXX)
trap '[ -n "${SELFTEST_KEEP:-}" ] || rm -rf "$TMP"' EXIT
FAILS=0

# The stand-in bundle: the same layout smoke.sh --bundle makes.
B=$TMP/bundle
mkdir -p "$B/bin" "$B/lib" "$B/cupti"
cp "$B0/firstpass-run" "$B/bin/"
cp "$B0/libfirstpass-cupti.so" "$B/lib/"
cp "$HERE/smoke.sh" "$HERE/check.py" "$HERE/torch_smoke.py" "$B/"
printf '#!/bin/sh\nexec "%s" smoke-shape "$@"\n' "$SIM/sim_app" >"$B/bin/smoke"
chmod +x "$B/bin/smoke"
printf 'stand-in bundle (tests/gpu/selftest.sh)\nneeds nothing\n' >"$B/MANIFEST"

# The fake libcupti comes first for the collector (RUNPATH) and for firstpass-run's lookup;
# PATH has no torch-enabled python3 with CUDA here, so the torch part must say SKIP.
OUT=$TMP/out
t0=$(date +%s)
LD_LIBRARY_PATH=$SIM "$B/smoke.sh" --prebuilt "$B" "$OUT" >"$TMP/prebuilt.log" 2>&1
echo "== smoke.sh --prebuilt (stand-in bundle): $(( $(date +%s) - t0 )) s"
sed 's/^/  | /' "$TMP/prebuilt.log" | grep -E '^  \| (part|total [0-9]+ s|torch)'
if [ -s "$OUT/gpu-smoke.tar.gz" ]; then echo "PASS: one archive came back"
else echo "FAIL: no $OUT/gpu-smoke.tar.gz"; FAILS=$((FAILS + 1)); fi

# The check, from the archive alone, with the sessions sent to a server when one is built.
mkdir -p "$TMP/back"
cp "$OUT/gpu-smoke.tar.gz" "$TMP/back/"
SERVER_ARGS=()
[ -x "$B0/firstpass-server" ] && SERVER_ARGS=(--server auto)
echo "== smoke.sh --check ${SERVER_ARGS[*]}"
(cd "$HERE/../.." && BUILD=$BUILD "$HERE/smoke.sh" --check "$TMP/back" "${SERVER_ARGS[@]}") >"$TMP/check.log" 2>&1
rc=$?
sed 's/^/  /' "$TMP/check.log" | grep -v '^  INFO'
if [ $rc -eq 0 ] && grep -q '^SKIP: torch' "$TMP/check.log"; then
    echo "PASS: the check passes on the simulated run (torch skipped)"
else
    echo "FAIL: the check on the simulated run: exit $rc"; FAILS=$((FAILS + 1))
fi

# It must be able to fail: the smoke part's session removed.
rm -f "$OUT"/smoke/spool/*.json.gz "$OUT/gpu-smoke.tar.gz"
"$HERE/smoke.sh" --check "$OUT" >"$TMP/check2.log" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q '^FAIL: smoke: one session (0)' "$TMP/check2.log"; then
    echo "PASS: the check fails when the smoke session is missing"
else
    echo "FAIL: a missing smoke session was not caught (exit $rc)"; FAILS=$((FAILS + 1))
fi
[ $FAILS -eq 0 ] && { echo "gpu selftest: all checks passed"; exit 0; }
echo "gpu selftest: $FAILS check(s) FAILED"; exit 1
