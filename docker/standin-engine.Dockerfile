# docker/standin-engine.Dockerfile: a stand-in for a serving engine in docker/compose.serving.yaml,
# where no GPU is: tests/agent/engine.py, with vLLM's profiler endpoints (POST /start_profile,
# /stop_profile) and its file naming, flushing a recorded torch.profiler trace (a real one from
# tests/triage/torch/) slowly as a big model would. Replace it with your engine (the compose
# file shows vLLM's image); nothing else changes.
FROM debian:bookworm-slim
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-minimal python3 \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --gid 10001 engine \
 && useradd --uid 10001 --gid engine --no-create-home --shell /usr/sbin/nologin engine \
 && mkdir -p /traces && chown engine:engine /traces
COPY tests/agent/engine.py /opt/standin/engine.py
COPY tests/triage/torch/gloo_rank0.json.gz /opt/standin/trace.json.gz
# numeric, as the images a pod with runAsNonRoot runs (docker/Dockerfile)
USER 10001:10001
EXPOSE 8000
CMD ["python3", "-B", "/opt/standin/engine.py", "--mode", "vllm", "--port", "8000", "--bind", "0.0.0.0", "--dir", "/traces", "--trace", "/opt/standin/trace.json.gz"]
