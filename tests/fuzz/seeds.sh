#!/usr/bin/env bash
# seeds.sh OUTDIR: builds the fuzz seed corpora from the real traces in shared/.
#
# Writes OUTDIR/ingest (for fuzz_ingest), OUTDIR/session (for fuzz_session_meta) and
# OUTDIR/chunk (fuzz_chunk: the committed seeds only); nothing
# in the repository. Traces come from $FP_TRACES, default <repo>/../shared/data/traces (CI
# clones the repo beside a copy of shared/). Seeds are small on purpose (libFuzzer runs
# fastest on inputs of a few KB): the first 4 KB decompressed of several traces, plain and
# re-gzipped; the smallest traces whole, plain and as shipped (.gz); the first 4 KB of an
# nsys SQLite export; and the top-level metadata of small traces with a firstpass object
# spliced in. Committed hand-written seeds (tests/fuzz/seeds/) are copied in as well.
set -euo pipefail
OUT=${1:?usage: seeds.sh OUTDIR}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel)
TRACES=${FP_TRACES:-$ROOT/../shared/data/traces}
mkdir -p "$OUT/ingest" "$OUT/session" "$OUT/chunk"
cp "$HERE"/seeds/ingest/* "$OUT/ingest/"
cp "$HERE"/seeds/session/* "$OUT/session/"
cp "$HERE"/seeds/chunk/* "$OUT/chunk/" # fuzz_chunk: 16 bytes of ts/dur, then one event's JSON
if [ ! -d "$TRACES" ]; then
    echo "seeds.sh: warning: $TRACES not found; only the committed seeds are used" >&2
    exit 0
fi

n=0
# Every .gz trace: its first 4 KB decompressed, plain and gzipped again (a truncated
# document in a valid gzip stream: the parser must report it, not crash).
while IFS= read -r -d '' f; do
    n=$((n + 1))
    base=$(printf 'slice%02d' "$n")
    # zcat exits 141 (SIGPIPE) once head has its bytes: expected, hence || true
    { zcat "$f" 2>/dev/null || true; } | head -c 4096 > "$OUT/ingest/$base.json"
    gzip -9 -n -c "$OUT/ingest/$base.json" > "$OUT/ingest/$base.json.gz"
    # whole traces up to 40 KB decompressed: plain, and the shipped .gz itself
    if [ "$(stat -c %s "$f")" -le 8192 ]; then
        size=$(zcat "$f" | wc -c)
        if [ "$size" -le 40960 ]; then
            zcat "$f" > "$OUT/ingest/whole$n.json"
            cp "$f" "$OUT/ingest/whole$n.json.gz"
        fi
    fi
done < <(find "$TRACES" -name '*.json.gz' -print0 | sort -z)
# plain (not gzipped) traces: a slice
while IFS= read -r -d '' f; do
    n=$((n + 1))
    head -c 4096 "$f" > "$OUT/ingest/plain$n.json"
done < <(find "$TRACES" -name '*.json' -print0 | sort -z)
# nsys exports: the SQLite magic path
while IFS= read -r -d '' f; do
    n=$((n + 1))
    head -c 4096 "$f" > "$OUT/ingest/nsys$n.sqlite"
done < <(find "$TRACES" -name '*.sqlite' -print0 | sort -z)

# Session metadata: top-level keys of the small traces (deviceProperties, distributedInfo,
# schemaVersion...) with the contract's firstpass object added.
if command -v jq >/dev/null; then
    m=0
    while IFS= read -r -d '' f; do
        [ "$(stat -c %s "$f")" -le 65536 ] || continue
        m=$((m + 1))
        zcat "$f" | jq -c --slurpfile fp "$HERE/seeds/session/contract.json" \
            'del(.traceEvents) + {firstpass: $fp[0]}' > "$OUT/session/meta$m.json" 2>/dev/null ||
            rm -f "$OUT/session/meta$m.json"
    done < <(find "$TRACES" -name '*.json.gz' -print0 | sort -z)
fi
echo "seeds.sh: $(ls "$OUT/ingest" | wc -l) ingest seeds ($(du -sk "$OUT/ingest" | cut -f1) KB)," \
    "$(ls "$OUT/session" | wc -l) session seeds in $OUT"
