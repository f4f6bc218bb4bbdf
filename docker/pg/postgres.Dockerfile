# docker/pg/postgres.Dockerfile: PostgreSQL 15 from Debian bookworm for docker/compose.pg.yaml.
# Built locally from debian:bookworm-slim (the same base as the server's image), so that the
# compose file needs no other registry image; any PostgreSQL 15+ (the official postgres:15
# image, a managed service) serves as well: only FIRSTPASS_DB changes.
FROM debian:bookworm-slim
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /var/lib/postgresql/data /run/postgresql \
 && chown postgres:postgres /var/lib/postgresql/data /run/postgresql
COPY docker/pg/postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint.sh
USER postgres
VOLUME ["/var/lib/postgresql/data"]
EXPOSE 5432
HEALTHCHECK --interval=5s --timeout=5s --retries=10 CMD ["/usr/lib/postgresql/15/bin/pg_isready", "-h", "127.0.0.1"]
STOPSIGNAL SIGINT
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint.sh"]
