# docker/pg/nginx.Dockerfile: nginx from Debian bookworm, the load balancer in front of the
# replicas of docker/compose.pg.yaml (any HTTP load balancer does: the replicas share nothing
# but the database, so no stickiness is needed).
FROM debian:bookworm-slim
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nginx-light curl \
 && rm -rf /var/lib/apt/lists/* \
 && ln -sf /dev/stdout /var/log/nginx/access.log && ln -sf /dev/stderr /var/log/nginx/error.log
COPY docker/pg/nginx.conf /etc/nginx/nginx.conf
EXPOSE 8080
HEALTHCHECK --interval=5s --timeout=5s --retries=10 CMD ["curl", "-fsS", "-o", "/dev/null", "http://127.0.0.1:8080/healthz"]
CMD ["nginx", "-g", "daemon off;"]
