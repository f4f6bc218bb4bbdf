#!/bin/sh
# run.sh SERVER UPLOAD [PATTERN]: the serving agent's tests (firstpass-upload --watch and
# --target, docs/serving.md) against a real server, the real firstpass-upload and a stand-in
# engine (engine.py: vLLM's and SGLang's profiler endpoints, real torch.profiler traces
# recorded on the CPU). Needs Debian's python3 with python3-torch; no GPU.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
[ $# -ge 2 ] || { echo "usage: $0 SERVER UPLOAD [PATTERN]" >&2; exit 2; }
export FIRSTPASS_SERVER_BIN="$(abs "$1")" FIRSTPASS_UPLOAD_BIN="$(abs "$2")"
shift 2
py=/usr/bin/python3
[ -x "$py" ] || py=python3
if ! "$py" -c 'import torch' 2>/dev/null; then
    echo "test-agent: $py cannot import torch (apt-get install python3-torch)" >&2
    exit 1
fi
# A FIRSTPASS_* setting of the caller's must not send test traces anywhere.
unset FIRSTPASS_SERVER FIRSTPASS_TOKEN FIRSTPASS_SPOOL FIRSTPASS_STATE FIRSTPASS_QUIET
exec "$py" -B "$here/run.py" "$@"
