#!/bin/sh
# run.sh SERVER UPLOAD: the Python package's tests (python/, docs/python.md) against a real
# server binary and the real firstpass-upload. Each test file starts its own servers on free
# loopback ports (tests/integration/fpserver.py). Needs Debian's python3 with python3-torch and
# python3-venv; pandas is used when installed, never required.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
[ $# -ge 2 ] || { echo "usage: $0 SERVER UPLOAD [PATTERN]" >&2; exit 2; }
export FIRSTPASS_SERVER_BIN="$(abs "$1")" FIRSTPASS_UPLOAD_BIN="$(abs "$2")"
shift 2
py=/usr/bin/python3
[ -x "$py" ] || py=python3
if ! "$py" -c 'import torch' 2>/dev/null; then
    echo "test-python: $py cannot import torch (apt-get install python3-torch)" >&2
    exit 1
fi
# A FIRSTPASS_* setting of the caller's must not send test traces anywhere.
unset FIRSTPASS_SERVER FIRSTPASS_TOKEN FIRSTPASS_SPOOL FIRSTPASS_LABELS FIRSTPASS_NAME FIRSTPASS_QUIET
exec "$py" -B "$here/run.py" "$@"
