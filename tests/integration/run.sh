#!/bin/sh
# run.sh SERVER: the integration suite against a real server binary (each test file starts
# its own server on a free loopback port with a temporary database).
# Needs Debian's python3 with python3-torch (scripts/install-deps.sh test installs it).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
export FIRSTPASS_SERVER_BIN="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
py=/usr/bin/python3
[ -x "$py" ] || py=python3
if ! "$py" -c 'import torch' 2>/dev/null; then
    echo "integration: $py cannot import torch (apt-get install python3-torch)" >&2
    exit 1
fi
shift
exec "$py" "$here/run.py" "$@"
