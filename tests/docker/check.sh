#!/usr/bin/env bash
# tests/docker/check.sh: checks docker/Dockerfile and docker/compose.yaml WITHOUT a Docker engine.
#
# What it can and cannot say: it proves that the apt packages exist in Debian bookworm, that the
# build stage runs the installer CI runs and `make install`, that what COPY names is in the
# repo, that the runtime stage installs every library the server binary links, that the
# installed layout answers the HEALTHCHECK when started with the image's CMD and ENV, and
# that the Dockerfile passes a lint. It does not build the image or run a container.
#
# Usage: tests/docker/check.sh          (from anywhere; exit 1 when a check fails)
#   DOCKER_CHECK_INSTALL=0  skip the `make install` + start-up smoke check (it compiles, ~30 s)
#   DOCKER_CHECK_LINT=grep  skip dockerfilelint (npm) and use only the grep lint
#   DOCKER_CHECK_BUILD=DIR  the build dir to read the server from and to install from (relative
#                           to the repo root or absolute; `make test-docker` passes $(BUILD)), so
#                           nothing is compiled again; default: build/ to read, a temp dir to build
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILDDIR=${DOCKER_CHECK_BUILD:-}
case "$BUILDDIR" in "" | /*) ;; *) BUILDDIR=$ROOT/$BUILDDIR ;; esac
DF=$ROOT/docker/Dockerfile
COMPOSE=$ROOT/docker/compose.yaml
pass=0
fail=0
ok() { echo "PASS $*"; pass=$((pass + 1)); }
ko() { echo "FAIL $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else ko "$what"; fi; }
TMP=$(mktemp -d)
SPID=""
cleanup() { [ -n "$SPID" ] && kill "$SPID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT

[ -f "$DF" ] || { ko "docker/Dockerfile exists"; echo "0 passed, 1 failed"; exit 1; }
[ -f "$COMPOSE" ] || ko "docker/compose.yaml exists"

# The Dockerfile with continuation lines joined and comments dropped: one instruction per line.
JOINED=$TMP/Dockerfile.joined
sed -e 's/^[[:space:]]*#.*$//' "$DF" | awk '{ if (sub(/\\[[:space:]]*$/, "")) { buf = buf $0 " " } else { print buf $0; buf = "" } }' |
  sed -e '/^[[:space:]]*$/d' >"$JOINED"
# stage bodies: runtime = everything after the last FROM
RUNTIME=$TMP/runtime
awk 'toupper($1) == "FROM" { n++ } { print n "\t" $0 }' "$JOINED" >"$TMP/staged"
last=$(awk -F'\t' 'END { print $1 }' "$TMP/staged")
awk -F'\t' -v n="$last" '$1 == n { sub(/^[^\t]*\t/, ""); print }' "$TMP/staged" >"$RUNTIME"

# ---- 1. apt packages exist in Debian bookworm ----
# Those the Dockerfile names in `apt-get install`, plus those the installer it runs installs.
df_pkgs=$(grep -oE 'apt-get install[^&;|]*' "$JOINED" | sed -e 's/apt-get install//' | tr ' ' '\n' | grep -vE '^(-.*|)$' | sort -u)
inst_pkgs=$(sed -n 's/^BUILD_PKGS="\(.*\)"/\1/p' "$ROOT/scripts/install-deps.sh" | tr ' ' '\n' | sed '/^$/d')
codename=$(. /etc/os-release 2>/dev/null; echo "${VERSION_CODENAME:-}")
if [ "$codename" != bookworm ]; then
  ko "apt packages: this host is '${codename:-unknown}', not Debian bookworm; cannot check bookworm's archive"
elif ! command -v apt-cache >/dev/null; then
  ko "apt packages: apt-cache missing"
else
  # An empty package cache (as in a fresh container) knows no package: update it if we may.
  if ! apt-cache show --no-all-versions libc6 >/dev/null 2>&1 || [ -z "$(ls /var/lib/apt/lists/ 2>/dev/null | grep -v -e lock -e partial)" ]; then
    if [ "$(id -u)" = 0 ]; then apt-get update -q >/dev/null 2>&1 || true; fi
  fi
  [ -n "$df_pkgs" ] && ok "Dockerfile installs packages with apt-get: $(echo $df_pkgs)" || ko "no apt-get install found in the Dockerfile"
  for p in $df_pkgs $inst_pkgs; do
    check "apt package exists in bookworm: $p" sh -c "apt-cache show --no-all-versions '$p' 2>/dev/null | grep -q '^Package: $p\$'"
  done
fi

# ---- 2. the build stage: the CI installer, make server, make install ----
check "FROM debian:bookworm-slim in every stage" sh -c "! grep -iE '^FROM ' '$JOINED' | grep -vqiE '^FROM debian:bookworm-slim( AS [A-Za-z0-9_-]+)?[[:space:]]*\$'"
check "multi-stage: 2+ FROM, runtime copies from the build stage" sh -c "[ \$(grep -ciE '^FROM ' '$JOINED') -ge 2 ] && grep -qE '^COPY --from=build ' '$RUNTIME'"
check "build stage runs scripts/install-deps.sh build (the installer CI and the README use)" grep -qE '^RUN .*scripts/install-deps\.sh build' "$JOINED"
check "build stage runs make server" grep -qE '^RUN .*make ([A-Za-z_]+=[^ ]* )*server' "$JOINED"
check "build stage runs make install PREFIX=/usr/local DESTDIR=/out" grep -qE '^RUN .*make install PREFIX=/usr/local DESTDIR=/out' "$JOINED"
check "the Makefile has an install target" grep -qE '^install:' "$ROOT/Makefile"
check "scripts/install-deps.sh is tracked and executable in git" sh -c "cd '$ROOT' && git ls-files -s scripts/install-deps.sh | grep -q '^100755 '"

# ---- 3. what COPY names exists in the repo (and is tracked, so a clean checkout has it) ----
while read -r line; do
  set -- $line
  shift
  args=()
  for a in "$@"; do case "$a" in --*) ;; *) args+=("$a") ;; esac; done
  n=${#args[@]}
  for ((i = 0; i < n - 1; i++)); do
    src=${args[$i]}
    if [ "$src" = . ] || [ "$src" = ./ ]; then
      ok "COPY $src: the repository root (context), docker/Dockerfile.dockerignore trims it"
      continue
    fi
    check "COPY source exists in the repo: $src" sh -c "[ -e '$ROOT/$src' ] && cd '$ROOT' && [ -n \"\$(git ls-files -- '$src' | head -1)\" ]"
  done
done < <(grep -E '^COPY ' "$JOINED" | grep -v -- '--from=')
check "docker/Dockerfile.dockerignore keeps build/ and .git out of the context" sh -c "grep -qx 'build/' '$ROOT/docker/Dockerfile.dockerignore' && grep -qx '.git' '$ROOT/docker/Dockerfile.dockerignore'"

# ---- 4. runtime stage: the libraries the server links ----
SERVER=${BUILDDIR:-$ROOT/build}/firstpass-server
rt_pkgs=$(grep -oE 'apt-get install[^&;|]*' "$RUNTIME" | sed -e 's/apt-get install//' | tr ' ' '\n' | grep -vE '^(-.*|)$')
# needed_in_runtime FILE: one check per NEEDED library of FILE: its Debian package is installed
# by the runtime stage (or is libc6, in the base image).
needed_in_runtime() {
  local f=$1 lib path pkg
  for lib in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64|x86_64|AArch64|aarch64/ { print $NF; exit }')
    pkg=$(dpkg -S "$(readlink -f "${path:-/nonexistent}")" 2>/dev/null | head -1 | cut -d: -f1)
    [ -z "$pkg" ] && pkg=$(dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1)
    case "$pkg" in
      libc6) ok "runtime has $lib ($pkg, in the base image) for $(basename "$f")" ;;
      "") ko "runtime library $lib of $(basename "$f"): no Debian package owns it on this host" ;;
      *) check "runtime stage installs $pkg (for $lib of $(basename "$f"))" sh -c "echo '$rt_pkgs' | grep -qx '$pkg'" ;;
    esac
  done
}
if [ -x "$SERVER" ] && command -v readelf >/dev/null && command -v dpkg >/dev/null; then
  needed_in_runtime "$SERVER"
else
  ko "runtime libraries: build/firstpass-server missing (run make server) or readelf/dpkg missing"
fi

# ---- 5. lint ----
# (a) the grep lint, always: the rules we hold the Dockerfile to.
check "lint: no ':latest' tag and no untagged FROM" sh -c "! grep -iE '^FROM ' '$JOINED' | grep -qiE '(:latest\b|^FROM [^: ]+( AS .*)?\$)'"
check "lint: no ADD of a URL (use curl + checksum in a RUN)" sh -c "! grep -qiE '^ADD .*https?://' '$JOINED'"
check "lint: runtime stage runs as USER 10001:10001, numeric (a pod with runAsNonRoot cannot check a name)" sh -c "grep -iE '^USER ' '$RUNTIME' | tail -1 | grep -qE '^USER 10001:10001\$'"
check "lint: user firstpass is created in the runtime stage" grep -qE 'useradd .*firstpass' "$RUNTIME"
check "lint: HEALTHCHECK with curl on /healthz" grep -qE '^HEALTHCHECK .*CMD .*curl .*/healthz' "$RUNTIME"
check "lint: EXPOSE 8080" grep -qE '^EXPOSE 8080$' "$RUNTIME"
check "lint: no VOLUME (each container that mounts none would leave an anonymous volume behind)" sh -c "! grep -qiE '^VOLUME ' '$RUNTIME'"
check "lint: /data and /backups owned by 10001 and group 0 with the owner's rights (an arbitrary uid in group 0 writes them)" \
  sh -c "grep -qE 'chown 10001:0 /data /backups' '$RUNTIME' && grep -qE 'chmod 0770 /data /backups' '$RUNTIME'"
check "lint: the build passes REVISION to make (FP_REVISION) and the runtime labels org.opencontainers.image.revision" \
  sh -c "grep -qE '^RUN .*make FP_REVISION=\"\\\$REVISION\" server' '$JOINED' && grep -qE '^LABEL .*org\.opencontainers\.image\.revision=\"\\\$REVISION\"' '$RUNTIME'"
check "lint: apt-get install --no-install-recommends and lists removed in the same RUN" \
  sh -c "! grep -E 'apt-get install' '$RUNTIME' | grep -qvE -- '--no-install-recommends.*rm -rf /var/lib/apt/lists'"
check "lint: apt-get update and install in one RUN" sh -c "! grep -E '^RUN .*apt-get update' '$JOINED' | grep -qv 'apt-get install'"
check "lint: CMD [\"firstpass-server\"]: no flag, so every FIRSTPASS_* variable (FIRSTPASS_DB=postgresql://...) takes effect" \
  grep -qE '^CMD \["firstpass-server"\]$' "$RUNTIME"
check "lint: ENV FIRSTPASS_DB=/data/firstpass.db, FIRSTPASS_BIND=0.0.0.0, FIRSTPASS_BACKUP_DIR=/backups" \
  sh -c "grep -qE '^ENV .*FIRSTPASS_DB=/data/firstpass\.db( |\$)' '$RUNTIME' && grep -qE '^ENV .*FIRSTPASS_BIND=0\.0\.0\.0( |\$)' '$RUNTIME' && grep -qE '^ENV .*FIRSTPASS_BACKUP_DIR=/backups( |\$)' '$RUNTIME'"
check "docker/README.md: every documented \`docker run\` of a server or agent has --stop-timeout (SIGTERM lets uploads finish; Docker's default is 10 s)" \
  sh -c "! grep -E '^ *docker run ' '$ROOT/docker/README.md' | grep -v -- '--stop-timeout' | grep -q ." 
check "agent.Dockerfile: USER 10001:10001 and no VOLUME" \
  sh -c "grep -E '^USER ' '$ROOT/docker/agent.Dockerfile' | tail -1 | grep -qx 'USER 10001:10001' && ! grep -qE '^VOLUME ' '$ROOT/docker/agent.Dockerfile'"
for v in $(grep -E '^ENV ' "$RUNTIME" | grep -oE 'FIRSTPASS_[A-Z_]+=' | tr -d = | sort -u); do
  check "Dockerfile ENV $v is one the server reads (--help)" sh -c "[ -x '$SERVER' ] && '$SERVER' --help | grep -q '\[$v'"
done
check "lint: no secrets in ENV/ARG (TOKEN, PASSWORD, SECRET)" sh -c "! grep -qiE '^(ENV|ARG) .*(TOKEN|PASSWORD|SECRET)' '$JOINED'"
# (b) dockerfilelint from npm, when npx can fetch it (a pinned version; it runs in a temp dir).
if [ "${DOCKER_CHECK_LINT:-}" != grep ] && command -v npx >/dev/null; then
  if (cd "$TMP" && timeout 180 npx --yes dockerfilelint@1.8.0 --version >/dev/null 2>&1); then
    if (cd "$TMP" && npx --yes dockerfilelint@1.8.0 "$DF" >"$TMP/lint.txt" 2>&1); then
      ok "dockerfilelint@1.8.0: no issues"
    else
      ko "dockerfilelint@1.8.0:"; sed 's/^/    /' "$TMP/lint.txt"
    fi
  else
    echo "SKIP dockerfilelint: npx could not fetch it (offline?); the grep lint above stands alone"
  fi
else
  echo "SKIP dockerfilelint (DOCKER_CHECK_LINT=grep or no npx); the grep lint above stands alone"
fi

# ---- 6. compose.yaml ----
if [ -f "$COMPOSE" ]; then
  if python3 -c 'import yaml' 2>/dev/null; then
    check "compose.yaml parses; server has restart unless-stopped, a named volume on /data, env config, build docker/Dockerfile" \
      python3 - "$COMPOSE" "$ROOT" <<'EOF'
import os, sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
s = d["services"]["firstpass"]
assert s["restart"] == "unless-stopped"
vols = [v.split(":") for v in s["volumes"]]
assert any(v[1] == "/data" and v[0] in (d.get("volumes") or {}) for v in vols), vols
assert all(k.startswith("FIRSTPASS_") for k in s["environment"]) and s["environment"]
b = s["build"]
assert os.path.isfile(os.path.join(os.path.dirname(sys.argv[1]), b["context"], b["dockerfile"]))
EOF
  else
    check "compose.yaml (grep, no PyYAML): restart unless-stopped, volume on /data" \
      sh -c "grep -q 'restart: unless-stopped' '$COMPOSE' && grep -qE -- '- [a-z-]+:/data' '$COMPOSE'"
  fi
  check "compose.yaml has the commented collector example (CUDA_INJECTION64_PATH, NVTX_INJECTION64_PATH, FIRSTPASS_SERVER, nvidia/cuda)" \
    sh -c "grep -q '^ *# *CUDA_INJECTION64_PATH:' '$COMPOSE' && grep -q '^ *# *NVTX_INJECTION64_PATH:' '$COMPOSE' && grep -q '^ *# *FIRSTPASS_SERVER:' '$COMPOSE' && grep -q '# *image: nvidia/cuda:' '$COMPOSE'"
  # keys of the server's environment: mapping (not the commented collector, not ${...} interpolation)
  for v in $(grep -E '^ {6}FIRSTPASS_[A-Z_]+:' "$COMPOSE" | sed -E 's/^ +(FIRSTPASS_[A-Z_]+):.*/\1/' | sort -u); do
    case "$v" in FIRSTPASS_SERVER|FIRSTPASS_NAME|FIRSTPASS_LABELS|FIRSTPASS_SPOOL|FIRSTPASS_TOKEN) continue ;; esac  # collector-side
    check "compose env $v is one the server reads (--help)" sh -c "[ -x '$SERVER' ] && '$SERVER' --help | grep -q '\[$v'"
  done
fi

# ---- 6b. compose.serving.yaml and the agent's image (issue 44; docker/ci.sh runs them) ----
SERVING=$ROOT/docker/compose.serving.yaml
if [ -f "$SERVING" ] && python3 -c 'import yaml' 2>/dev/null; then
  check "compose.serving.yaml parses; the agent shares the engine's trace volume at the directory it watches; each build file exists" \
    python3 - "$SERVING" <<'EOF'
import os, sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
s = d["services"]
eng = {v.split(":")[0]: v.split(":")[1] for v in s["engine"]["volumes"]}
ag = {v.split(":")[0]: v.split(":")[1] for v in s["agent"]["volumes"]}
cmd = s["agent"]["command"]
watched = cmd[cmd.index("--watch") + 1]
assert any(ag.get(k) == watched for k in eng), (eng, ag, watched)
assert "--target" in cmd and s["agent"]["environment"]["FIRSTPASS_SERVER"].startswith("http://firstpass:")
assert "ports" not in s["agent"], "the agent long-polls: it publishes no port"
for name in s:
    b = s[name]["build"]
    assert os.path.isfile(os.path.join(os.path.dirname(sys.argv[1]), b["context"], b["dockerfile"])), name
EOF
  for v in $(grep -E '^ {6}FIRSTPASS_[A-Z_]+:' "$SERVING" | sed -E 's/^ +(FIRSTPASS_[A-Z_]+):.*/\1/' | sort -u); do
    case "$v" in FIRSTPASS_SERVER|FIRSTPASS_TOKEN) continue ;; esac  # the agent's
    check "compose.serving env $v is one the server reads (--help)" sh -c "[ -x '$SERVER' ] && '$SERVER' --help | grep -q '\[$v'"
  done
fi
PGC=$ROOT/docker/compose.pg.yaml
if [ -f "$PGC" ] && python3 -c 'import yaml' 2>/dev/null; then
  check "compose.pg.yaml: the replicas run the image's CMD, FIRSTPASS_DB without a password, PGPASSWORD, FIRSTPASS_MAX_CONNECTIONS_PER_IP as --max-connections (every client is nginx)" \
    python3 - "$PGC" <<'EOF'
import sys, yaml
from urllib.parse import urlparse
d = yaml.safe_load(open(sys.argv[1]))
for n in ("firstpass-a", "firstpass-b", "firstpass-c"):
    s = d["services"][n]
    e = s["environment"]
    assert "command" not in s and "entrypoint" not in s, n
    assert urlparse(e["FIRSTPASS_DB"]).scheme == "postgresql" and urlparse(e["FIRSTPASS_DB"]).password is None and e.get("PGPASSWORD"), n
    assert int(e["FIRSTPASS_MAX_CONNECTIONS_PER_IP"]) >= int(e.get("FIRSTPASS_MAX_CONNECTIONS", 256)), n
EOF
fi
UPLOAD=${BUILDDIR:-$ROOT/build}/firstpass-upload
if [ -x "$UPLOAD" ] && command -v readelf >/dev/null; then
  # the agent image's runtime stage installs a package for each library firstpass-upload links
  for lib in $(readelf -d "$UPLOAD" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
    case "$lib" in libc.so*|libm.so*|libpthread.so*|libdl.so*|ld-linux*) continue ;; esac
    pkg=$(dpkg -S "*/$lib" 2>/dev/null | head -1 | cut -d: -f1)
    check "agent.Dockerfile installs $pkg (firstpass-upload links $lib)" sh -c "[ -n '$pkg' ] && grep -q ' $pkg' '$ROOT/docker/agent.Dockerfile'"
  done
fi

# ---- 7. the installed layout starts with the image's CMD flags and ENV, and answers HEALTHCHECK ----
if [ "${DOCKER_CHECK_INSTALL:-1}" != 0 ]; then
  IBUILD=${BUILDDIR:-$TMP/build}
  if make -C "$ROOT" --no-print-directory BUILD="$IBUILD" server >"$TMP/make.log" 2>&1 &&
     make -C "$ROOT" --no-print-directory BUILD="$IBUILD" install PREFIX=/usr/local DESTDIR="$TMP/out" >>"$TMP/make.log" 2>&1; then
    ok "make server && make install PREFIX=/usr/local DESTDIR=/out (BUILD=${BUILDDIR:-a temp dir})"
    # What the image keeps of the install tree (the build stage's `rm -f /out/...` dropped) must run there.
    for f in "$TMP"/out/usr/local/bin/* "$TMP"/out/usr/local/lib/*; do
      [ -f "$f" ] || continue
      rel=${f#"$TMP"}
      if grep -qE "^RUN .*rm -f ([^&;]* )?$rel( |\$)" "$JOINED"; then ok "installed $rel is removed by the build stage"; continue; fi
      needed_in_runtime "$f"
    done
    check "installed: /out/usr/local/bin/firstpass-server" test -x "$TMP/out/usr/local/bin/firstpass-server"
    check "installed: /out/usr/local/share/firstpass/static/index.html" test -f "$TMP/out/usr/local/share/firstpass/static/index.html"
    # CMD as the image runs it, with /data and /usr/local re-rooted, as a non-root user when we are root.
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    mkdir -p "$TMP/data" "$TMP/backups"
    runas=()
    if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
      chown 65534:65534 "$TMP/data" "$TMP/backups"; chmod 755 "$TMP"
      runas=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    fi
    # the image's ENV (re-rooted) and its CMD, which passes no flag: the environment alone
    env FIRSTPASS_PORT="$port" FIRSTPASS_BIND=127.0.0.1 FIRSTPASS_DB="$TMP/data/firstpass.db" \
      FIRSTPASS_STATIC="$TMP/out/usr/local/share/firstpass/static" FIRSTPASS_BACKUP_DIR="$TMP/backups" \
      "${runas[@]}" "$TMP/out/usr/local/bin/firstpass-server" >"$TMP/server.log" 2>&1 &
    SPID=$!
    up=0
    for _ in $(seq 50); do curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null && { up=1; break; }; sleep 0.1; done
    check "server from the install tree answers the HEALTHCHECK (FIRSTPASS_PORT=$port from ENV${runas:+, non-root})" test "$up" = 1
    check "dashboard served from /usr/local/share/firstpass/static" sh -c "curl -fsS 'http://127.0.0.1:$port/' | grep -qi '<html'"
    check "SQLite file created under the data volume" test -f "$TMP/data/firstpass.db"
    check "GET /metrics answers in Prometheus text format 0.0.4" \
      sh -c "curl -fsS -D '$TMP/mh' -o '$TMP/metrics' 'http://127.0.0.1:$port/metrics' && grep -qi '^content-type: text/plain; version=0.0.4' '$TMP/mh' && grep -q '^firstpass_sessions_stored 0' '$TMP/metrics'"
    check "POST /api/v1/admin/backup writes into FIRSTPASS_BACKUP_DIR (the /backups volume)" \
      sh -c "curl -fsS -X POST 'http://127.0.0.1:$port/api/v1/admin/backup' | grep -q '\"path\":\"$TMP/backups/firstpass-' && ls '$TMP'/backups/firstpass-*.db >/dev/null"
    kill "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; SPID=""
  else
    ko "make server && make install into a temp DESTDIR:"; tail -20 "$TMP/make.log" | sed 's/^/    /'
  fi
else
  echo "SKIP install-layout smoke check (DOCKER_CHECK_INSTALL=0)"
fi

# ---- 8. deploy/kubernetes, statically (tests/kubernetes/check.py; docker/ci.sh plays the pods) ----
if python3 -c 'import yaml' 2>/dev/null; then
  if python3 "$ROOT/tests/kubernetes/check.py" --server "$SERVER" >"$TMP/kube.txt" 2>&1; then
    ok "deploy/kubernetes: $(tail -1 "$TMP/kube.txt") (tests/kubernetes/check.py)"
  else
    ko "deploy/kubernetes (tests/kubernetes/check.py):"; grep -v '^PASS' "$TMP/kube.txt" | sed 's/^/    /'
  fi
else
  ko "deploy/kubernetes: python3-yaml is missing (scripts/install-deps.sh test)"
fi

echo "NOTE the image itself was not built and no container was run (no Docker engine here)"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
