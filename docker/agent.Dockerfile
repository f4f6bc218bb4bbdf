# docker/agent.Dockerfile: firstpass-upload as a sidecar beside a serving engine (issue 44).
#
#   docker build -f docker/agent.Dockerfile -t firstpass-agent:0.1.0 .      # from the repository root
#   docker run -d --stop-timeout 30 -v traces:/traces -v agent-state:/var/lib/firstpass \
#     -e FIRSTPASS_SERVER=http://firstpass:8080 firstpass-agent:0.1.0 \
#     firstpass-upload --watch /traces --target vllm=http://engine:8000,name=replica-0
#
# It shares the engine's trace directory as a volume (vLLM's VLLM_TORCH_PROFILER_DIR, SGLang's
# SGLANG_TORCH_PROFILER_DIR) and reaches the engine's HTTP port; it needs no port of its own
# (the server is long-polled). docs/serving.md; docker/compose.serving.yaml runs one.
# The build stage begins as docker/Dockerfile's, so that the toolchain layer is shared.

# ---- build ----
FROM debian:bookworm-slim AS build
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN scripts/install-deps.sh build && rm -rf /var/lib/apt/lists/*
COPY . .
# `make clean` first: with the legacy builder the host's build/ could be in the context.
RUN make clean && make build/firstpass-upload && build/firstpass-upload --help >/dev/null

# ---- runtime ----
FROM debian:bookworm-slim AS runtime
ARG DEBIAN_FRONTEND=noninteractive
# What build/firstpass-upload links (ldd: libcurl.so.4, libjansson.so.4, libz.so.1), and the
# CA certificates for an https:// server.
RUN apt-get update -q \
 && apt-get install -y -q --no-install-recommends libcurl4 libjansson4 zlib1g ca-certificates \
 && rm -rf /var/lib/apt/lists/*
# The same uid as the server image's user. The files it watches must be readable by it, and
# writable (their directory) with --remove: run the engine as 10001 too, or give the agent
# the engine's uid (docker run --user, compose `user:`).
RUN groupadd --gid 10001 firstpass \
 && useradd --uid 10001 --gid firstpass --home-dir /var/lib/firstpass --no-create-home --shell /usr/sbin/nologin firstpass \
 && mkdir -p /var/lib/firstpass/spool /traces && chown -R firstpass:firstpass /var/lib/firstpass /traces \
 && chmod 0700 /var/lib/firstpass/spool
COPY --from=build /src/build/firstpass-upload /usr/local/bin/firstpass-upload
# What was sent (the state file: a restart sends nothing twice) and the spool (what waits for
# a server that is down) live in /var/lib/firstpass: mount a volume there that outlives the
# container (docker run -v, compose, a Kubernetes volume; no VOLUME line, which would leave an
# anonymous volume behind each container that mounts none). The spool must be the user's own,
# mode 0700, or a group directory of an fsGroup volume (docs/serving.md).
ENV FIRSTPASS_STATE=/var/lib/firstpass/watch.state \
    FIRSTPASS_SPOOL=/var/lib/firstpass/spool
# Numeric, so that a pod with runAsNonRoot can check it without runAsUser.
USER 10001:10001
# SIGTERM: an upload in flight stops; its file is settled at the next start (file_id).
STOPSIGNAL SIGTERM
CMD ["firstpass-upload", "--watch", "/traces"]
# OCI annotations, as docker/Dockerfile's (--build-arg REVISION=$(git rev-parse --short=12 HEAD)).
ARG REVISION=unknown
ARG CREATED=
ARG SOURCE=
LABEL org.opencontainers.image.title="firstpass-agent" \
      org.opencontainers.image.description="firstpass-upload --watch: sends an inference engine's profiler traces to firstpass, runs its captures" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.revision="$REVISION" \
      org.opencontainers.image.created="$CREATED" \
      org.opencontainers.image.source="$SOURCE" \
      org.opencontainers.image.base.name="debian:bookworm-slim"
