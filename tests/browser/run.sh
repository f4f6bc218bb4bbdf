#!/bin/sh
# run.sh SERVER_BINARY: the browser tests of the dashboard (static/) against the real server.
#
# Installs what is missing (as root: Debian's chromium; playwright-core from package-lock.json,
# never a downloaded browser), starts SERVER on a free loopback port with a temporary database,
# waits for /healthz, runs `node --test tests/browser/*.test.mjs`, stops the server and exits
# with the tests' status. Screenshots land in tests/browser/out/.
# Env: FP_TRACES (default <repo>/../shared/data/traces), CHROMIUM (default /usr/bin/chromium),
# FP_BROWSER_TESTS (test files, default tests/browser/*.test.mjs).
set -eu

if [ $# -ne 1 ]; then echo "usage: $0 SERVER_BINARY" >&2; exit 2; fi
server=$1
case "$server" in /*) ;; *) server="$(pwd)/$server" ;; esac
[ -x "$server" ] || { echo "run.sh: $server is not an executable" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo"

: "${CHROMIUM:=/usr/bin/chromium}"
export CHROMIUM
if [ ! -x "$CHROMIUM" ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "run.sh: installing chromium"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q chromium
  else
    echo "run.sh: $CHROMIUM missing; as root: apt-get update && apt-get install -y chromium" >&2
    exit 1
  fi
fi
command -v node >/dev/null 2>&1 || { echo "run.sh: node is missing (apt-get install -y nodejs npm)" >&2; exit 1; }

if [ ! -f "$here/node_modules/playwright-core/package.json" ]; then
  echo "run.sh: installing playwright-core (npm ci)"
  # No browser download: the tests drive Debian's chromium.
  (cd "$here" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi

: "${FP_TRACES:=$(git rev-parse --show-toplevel 2>/dev/null || echo "$repo")/../shared/data/traces}"
[ -d "$FP_TRACES" ] || { echo "run.sh: traces not found at $FP_TRACES (set FP_TRACES)" >&2; exit 1; }
FP_TRACES=$(cd "$FP_TRACES" && pwd)
export FP_TRACES

tmp=$(mktemp -d)
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# A free port: ask the kernel for one, then start the server on it (retry if someone took it).
started=""
for try in 1 2 3 4 5; do
  port=$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
  "$server" --bind 127.0.0.1 --port "$port" --db "$tmp/db.sqlite" --static static >"$tmp/server.log" 2>&1 &
  pid=$!
  i=0
  while [ $i -lt 100 ]; do
    if node -e 'fetch(process.argv[1]).then(r=>r.json()).then(j=>process.exit(j.status==="ok"?0:1),()=>process.exit(1))' \
         "http://127.0.0.1:$port/healthz" 2>/dev/null; then started=1; break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1; i=$((i + 1))
  done
  [ -n "$started" ] && break
  kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=""
done
if [ -z "$started" ]; then
  echo "run.sh: the server did not answer /healthz; its log:" >&2
  cat "$tmp/server.log" >&2
  exit 1
fi
export FP_BASE_URL="http://127.0.0.1:$port"
export FP_SERVER_BIN="$server" # for tests that need a server of their own (an empty one, one with tokens)
export FP_DB="$tmp/db.sqlite" # reanalyse.test.mjs marks sessions as analysed by an older version
echo "run.sh: server $server on $FP_BASE_URL, traces $FP_TRACES"

rm -rf "$here/out"; mkdir -p "$here/out"
status=0
# FP_BROWSER_TESTS: the test files to run (default all; make test-browser-perf runs perf.test.mjs)
# shellcheck disable=SC2086
node --test --test-concurrency=4 ${FP_BROWSER_TESTS:-tests/browser/*.test.mjs} || status=$?
if [ $status -ne 0 ]; then
  echo "run.sh: browser tests failed; last lines of the server log:" >&2
  tail -n 40 "$tmp/server.log" >&2
fi
cp "$tmp/server.log" "$here/out/server.log" 2>/dev/null || true
exit $status
