#!/usr/bin/env bash
# regress.sh SERVER: HTTP-level reproducers of input-validation bugs found while fuzzing.
#
# One case per bug, each a single upload and the reads that expose it. A case passes when
# the server either rejects the input with a 4xx or stores it and serves it back intact;
# it fails when a 201 leads to a session the API cannot show.
#   invalid_utf8_name    ?name=%FF%FE: stored, then GET /sessions/{id} is an empty 200 and
#                        the list omits it (json_string() returns NULL on invalid UTF-8 in
#                        server/store/query.c col_str, and json_pack then fails).
#   invalid_utf8_label   ?label=k:%FF: stored, then the label is silently missing from the
#                        session's "labels" (labels_of in server/store/query.c) and the report.
#   empty_label_key      firstpass.labels {"":"x"}: stored with an empty key, which
#                        ?label=:x rejects with 400 and session.h says cannot exist.
# Environment: FP_TRACES, KEEP_TMP=1.
set -euo pipefail
SERVER=${1:?usage: regress.sh SERVER}
export SERVER # read by fp_start (lib.sh)
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
fp_setup regress curl python3
TRACE=$(fp_traces)/hta/trace_compare/base/base.json.gz
[ -f "$TRACE" ] || { fail "$TRACE not found"; fp_finish; exit 1; }
if ! fp_start; then fail "the server did not start"; fp_finish; exit 1; fi

# post QUERY [FILE]: prints "status id"
post() {
    local body code
    code=$(curl -s -o "$TMP/post.json" -w '%{http_code}' --max-time 30 -X POST --data-binary @"${2:-$TRACE}" \
        "$URL/api/v1/sessions$1") || code=000
    body=$(sed -n 's/.*"id":\([0-9]*\).*/\1/p' "$TMP/post.json")
    echo "$code ${body:--}"
}
# shown ID: 0 when GET /sessions/ID is a JSON object with that id and the list has it.
shown() {
    curl -s --max-time 30 "$URL/api/v1/sessions/$1" > "$TMP/one.json" || return 1
    curl -s --max-time 30 "$URL/api/v1/sessions?limit=1000" > "$TMP/list.json" || return 1
    python3 - "$1" "$TMP/one.json" "$TMP/list.json" <<'EOF'
import json, sys
want = int(sys.argv[1])
one = json.load(open(sys.argv[2]))
lst = json.load(open(sys.argv[3]))
sys.exit(0 if one.get("id") == want and any(s["id"] == want for s in lst["sessions"]) else 1)
EOF
}
# label_is ID KEY VALUE: 0 when the session's labels hold KEY=VALUE (as UTF-8 text).
label_is() {
    curl -s --max-time 30 "$URL/api/v1/sessions/$1" > "$TMP/one.json" || return 1
    python3 - "$TMP/one.json" "$2" "$3" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if d.get("labels", {}).get(sys.argv[2]) == sys.argv[3] else 1)
EOF
}

read -r code id <<< "$(post '?name=%FF%FE')"
case $code in
4??) pass "invalid_utf8_name: rejected with $code" ;;
201) if shown "$id" 2>/dev/null; then pass "invalid_utf8_name: stored as $id and shown"
     else fail "invalid_utf8_name: 201 id $id, but GET /api/v1/sessions/$id is not that session ($(head -c 80 "$TMP/one.json")) or the list omits it"; fi ;;
*) fail "invalid_utf8_name: status $code" ;;
esac

read -r code id <<< "$(post '?label=k:%FF')"
case $code in
4??) pass "invalid_utf8_label: rejected with $code" ;;
201) if label_is "$id" k $'\xef\xbf\xbd' 2>/dev/null || label_is "$id" k $'\xff' 2>/dev/null; then
         pass "invalid_utf8_label: stored as $id with its label"
     else fail "invalid_utf8_label: 201 id $id, but its labels are $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("labels"))' "$TMP/one.json" 2>/dev/null || echo '?') (label k lost)"; fi ;;
*) fail "invalid_utf8_label: status $code" ;;
esac

printf '{"firstpass":{"format":"firstpass-session","labels":{"":"x"}},"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1,"dur":2}]}' > "$TMP/empty_key.json"
read -r code id <<< "$(post '' "$TMP/empty_key.json")"
case $code in
4??) pass "empty_label_key: rejected with $code" ;;
*) fail "empty_label_key: status $code (id $id): a label with an empty key was accepted; ?label=:x gets 400" ;;
esac
fp_finish
