# shellcheck shell=bash
# lib.sh: helpers shared by the reliability scripts (sourced, not run).
#
# Owns the PASS/FAIL counters, the loopback port choice, starting/stopping one
# firstpass-server and reading the session list. The caller sets SERVER, TMP and DB before
# fp_start, and installs a trap that calls fp_cleanup. Everything listens on 127.0.0.1.

PASSED=0
FAILED=0
SPID=   # pid of the server this script started, empty when none
PORT=
URL=

pass() { echo "PASS: $*"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }
note() { echo "  .. $*"; }
fp_finish() {
    echo "$PASSED passed, $FAILED failed"
    [ "$FAILED" -eq 0 ]
}

# The repository root, and the traces folder CI places beside the clone.
fp_traces() {
    local root
    root=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
    echo "${FP_TRACES:-$root/../shared/data/traces}"
}

# A free TCP port on 127.0.0.1 (the kernel picks it; a race with another process is
# possible, so fp_start retries).
fp_free_port() {
    if command -v python3 >/dev/null; then
        python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
    else
        local p
        for _ in $(seq 1 50); do
            p=$((20000 + RANDOM % 40000))
            if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
        done
        return 1
    fi
}

# fp_start [server flags...]: starts $SERVER on a free loopback port with $DB, waits for
# /healthz (at most 10 s per try, 3 tries). Returns 1 if it never answers.
fp_start() {
    for _ in 1 2 3; do
        PORT=$(fp_free_port)
        URL=http://127.0.0.1:$PORT
        "$SERVER" --bind 127.0.0.1 --port "$PORT" --db "$DB" --static "$TMP/no-static" --quiet "$@" \
            >> "$TMP/server.log" 2>&1 &
        SPID=$!
        for _ in $(seq 1 100); do
            if curl -fsS -o /dev/null --max-time 2 "$URL/healthz" 2>/dev/null; then return 0; fi
            kill -0 "$SPID" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$SPID" 2>/dev/null || true
        wait "$SPID" 2>/dev/null || true
        SPID=
    done
    return 1
}

# fp_kill9: SIGKILL the server and reap it.
fp_kill9() {
    [ -n "$SPID" ] || return 0
    kill -9 "$SPID" 2>/dev/null || true
    wait "$SPID" 2>/dev/null || true
    SPID=
}

# fp_term [SECONDS]: SIGTERM the server and wait for it, at most SECONDS (default 90: the
# server drains uploads for up to 60 s). Sets TERM_RC to its exit status, or to 124 when it
# was still running: then it is SIGKILLed (a hang must not hang the test) after writing
# where its threads sleep to $TMP/hung-threads.txt. Call it directly, not in $(...): only
# this shell can wait for the server.
# shellcheck disable=SC2034 # read by the scripts that source this file
TERM_RC=''
fp_term() {
    local limit=${1:-90} task
    TERM_RC=0
    [ -n "$SPID" ] || return 0
    kill -TERM "$SPID" 2>/dev/null || true
    for _ in $(seq 1 $((limit * 10))); do
        kill -0 "$SPID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$SPID" 2>/dev/null; then
        for task in /proc/"$SPID"/task/*; do
            printf '%s:%s ' "$(cat "$task/comm" 2>/dev/null)" "$(cat "$task/wchan" 2>/dev/null)"
        done > "$TMP/hung-threads.txt"
        fp_kill9
        TERM_RC=124
        return 0
    fi
    # shellcheck disable=SC2034
    wait "$SPID" || TERM_RC=$?
    SPID=
}

# fp_setup NAME TOOL...: what every script here starts with: $TMP (mktemp -d
# /tmp/fp-NAME-XXXXXX), $DB in it, fp_cleanup on EXIT (exit 130 on INT/TERM), and each TOOL
# on the PATH (else a failure and exit 1).
fp_setup() {
    local name=$1 tool
    shift
    TMP=$(mktemp -d "/tmp/fp-$name-XXXXXX")
    DB=$TMP/fp.db
    trap fp_cleanup EXIT
    trap 'exit 130' INT TERM
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { fail "$tool is needed (apt-get install -y $tool)"; fp_finish; exit 1; }
    done
}

# fp_cleanup: for the caller's EXIT trap. Kills the server and the background jobs this
# shell started (by pid), then removes $TMP unless KEEP_TMP=1.
fp_cleanup() {
    local p
    if [ -n "$SPID" ]; then
        kill -9 "$SPID" 2>/dev/null || true
        wait "$SPID" 2>/dev/null || true
    fi
    for p in $(jobs -p); do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ "${KEEP_TMP:-0}" = 1 ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
}

# fp_list_ids: every session id the API lists, one a line, following the "next" cursor
# (bounded: 1000 pages of 1000). Exits non-zero if a page is not a valid reply.
fp_list_ids() {
    local next="" body
    for _ in $(seq 1 1000); do
        body=$(curl -fsS --max-time 30 "$URL/api/v1/sessions?limit=1000${next:+&next=$next}") || return 1
        printf '%s' "$body" | python3 -c 'import json,sys
d=json.load(sys.stdin)
for s in d["sessions"]: print(s["id"])' || return 1
        next=$(printf '%s' "$body" | python3 -c 'import json,sys; n=json.load(sys.stdin)["next"]; print(n if n else "")')
        [ -n "$next" ] || return 0
    done
    return 1
}
