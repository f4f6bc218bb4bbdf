-- schema_pg.sql: the firstpass database on PostgreSQL, version 8 (fp_meta.version = 8).
--
-- The same tables, columns and invariants as schema.sql (SQLite), in PostgreSQL's types:
-- INTEGER -> BIGINT, REAL -> DOUBLE PRECISION, BLOB -> BYTEA. Text compares and sorts
-- byte-wise (COLLATE "C"), as in SQLite, so that every reply lists rows in the same order
-- on both backends whatever the cluster's locale. Embedded into the server at build time;
-- store.c runs it on an empty database (under an advisory lock, so that replicas starting
-- together run it once) and runs store.c's pg_migrations[] on older ones.
--
-- Invariants (as schema.sql's), and what PostgreSQL adds:
--  * A session and everything below it is written in ONE transaction (commit.c).
--  * Every child row carries session_id with ON DELETE CASCADE.
--  * A session id comes from the sessions_id_seq sequence: never reused, whichever
--    replica took it, even when its transaction rolled back (a gap, never a reuse).
--  * fp_generation holds the reply cache's write generations, shared by every replica:
--    each write transaction bumps it as its last statement (store.c, commit.c).

CREATE TABLE fp_meta (version INTEGER NOT NULL);
INSERT INTO fp_meta VALUES (0);

CREATE TABLE fp_generation (
  gen  BIGINT NOT NULL,                      -- store_generation: changes to stored sessions
  lgen BIGINT NOT NULL                       -- store_list_generation: the above and uploads
);
INSERT INTO fp_generation VALUES (1, 1);

CREATE TABLE sessions (
  id          BIGSERIAL PRIMARY KEY,
  name        TEXT COLLATE "C" NOT NULL,
  source      TEXT COLLATE "C" NOT NULL,
  created_at  BIGINT NOT NULL,
  start_us    DOUBLE PRECISION NOT NULL,
  end_us      DOUBLE PRECISION NOT NULL,
  event_count BIGINT NOT NULL,
  hardware    TEXT COLLATE "C" NOT NULL DEFAULT '',
  bytes_in    BIGINT NOT NULL DEFAULT 0,
  meta        TEXT NOT NULL DEFAULT '{}',
  summary     TEXT NOT NULL DEFAULT '{}',
  analysis_version BIGINT NOT NULL DEFAULT 0, -- version 7 (schema.sql: version 9)
  idempotency_key TEXT COLLATE "C"             -- version 8: as schema.sql's (version 10)
);
CREATE INDEX sessions_created ON sessions(created_at DESC, id DESC);
CREATE INDEX sessions_analysis ON sessions(analysis_version, id);
CREATE UNIQUE INDEX sessions_idempotency ON sessions(idempotency_key) WHERE idempotency_key IS NOT NULL;

CREATE TABLE upload_claims (                   -- version 8: as schema.sql's
  key        TEXT COLLATE "C" PRIMARY KEY,
  owner      TEXT COLLATE "C" NOT NULL,
  claimed_at BIGINT NOT NULL,
  seen_at    BIGINT NOT NULL
);

CREATE TABLE labels (
  session_id BIGINT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  key        TEXT COLLATE "C" NOT NULL,
  value      TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (session_id, key)
);
CREATE INDEX labels_kv ON labels(key, value, session_id);

CREATE TABLE strings (
  session_id BIGINT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  id         BIGINT NOT NULL,
  s          TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (session_id, id)
);

-- Texts by id in strings, read through views (schema.sql says why; version 2).
-- grouping 0 by name, 1 by name and shapes, 2 the GPU rows once (version 4; schema.sql).
CREATE TABLE operator_rows (
  session_id    BIGINT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  grouping      BIGINT NOT NULL,
  name_id       BIGINT NOT NULL,
  kind          TEXT COLLATE "C" NOT NULL,
  shapes_id     BIGINT,
  calls         BIGINT NOT NULL,
  cpu_total     DOUBLE PRECISION NOT NULL,
  self_cpu      DOUBLE PRECISION NOT NULL,
  cuda_total    DOUBLE PRECISION NOT NULL,
  self_cuda     DOUBLE PRECISION NOT NULL,
  cpu_mem       BIGINT NOT NULL,
  self_cpu_mem  BIGINT NOT NULL,
  cuda_mem      BIGINT NOT NULL,
  self_cuda_mem BIGINT NOT NULL,
  rn            BIGINT NOT NULL              -- the row's place in the upload (SQLite's rowid
                                            -- order): the last tie-break of every sort, so
                                            -- that equal rows list as SQLite lists them
);
CREATE INDEX operators_session ON operator_rows(session_id, grouping, cuda_total DESC);
CREATE VIEW operators AS
  SELECT o.session_id, o.grouping, n.s AS name, o.kind, COALESCE(sh.s, '') AS input_shapes, o.calls, o.cpu_total,
         o.self_cpu, o.cuda_total, o.self_cuda, o.cpu_mem, o.self_cpu_mem, o.cuda_mem, o.self_cuda_mem, o.rn
  FROM operator_rows o JOIN strings n ON n.session_id = o.session_id AND n.id = o.name_id
  LEFT JOIN strings sh ON sh.session_id = o.session_id AND sh.id = o.shapes_id;

CREATE TABLE kernel_rows (
  session_id BIGINT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  name_id    BIGINT NOT NULL,
  kind       TEXT COLLATE "C" NOT NULL,
  calls      BIGINT NOT NULL,
  total_us   DOUBLE PRECISION NOT NULL,
  min_us     DOUBLE PRECISION NOT NULL,
  max_us     DOUBLE PRECISION NOT NULL,
  grid_id    BIGINT,
  block_id   BIGINT,
  regs       BIGINT,
  smem       BIGINT,
  mean_bps   DOUBLE PRECISION,                -- version 5: as schema.sql's
  mean_occ   DOUBLE PRECISION,
  mean_sme   DOUBLE PRECISION
);
CREATE INDEX kernels_session ON kernel_rows(session_id, total_us DESC);
CREATE VIEW kernels AS
  SELECT k.session_id, n.s AS name, k.kind, k.calls, k.total_us, k.min_us, k.max_us, g.s AS grid, b.s AS block, k.regs, k.smem,
         k.mean_bps, k.mean_occ, k.mean_sme
  FROM kernel_rows k JOIN strings n ON n.session_id = k.session_id AND n.id = k.name_id
  LEFT JOIN strings g ON g.session_id = k.session_id AND g.id = k.grid_id
  LEFT JOIN strings b ON b.session_id = k.session_id AND b.id = k.block_id;

CREATE TABLE phase_rows (
  session_id     BIGINT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  name_id        BIGINT NOT NULL,
  kind           TEXT COLLATE "C" NOT NULL,
  count          BIGINT NOT NULL,
  total_us       DOUBLE PRECISION NOT NULL,
  gpu_busy_us    DOUBLE PRECISION NOT NULL,
  kernels        BIGINT NOT NULL,
  kernel_us      DOUBLE PRECISION NOT NULL,
  first_ts       DOUBLE PRECISION NOT NULL
);
CREATE INDEX phases_session ON phase_rows(session_id);
CREATE VIEW phases AS
  SELECT p.session_id, n.s AS name, p.kind, p.count, p.total_us, p.gpu_busy_us, p.kernels, p.kernel_us, p.first_ts
  FROM phase_rows p JOIN strings n ON n.session_id = p.session_id AND n.id = p.name_id;

CREATE TABLE analysis (
  session_id BIGINT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
  gpu        TEXT NOT NULL,
  report     TEXT NOT NULL,
  timeline   TEXT NOT NULL,
  effic      TEXT,                            -- version 5: as schema.sql's
  steps        TEXT,                          -- version 8: as schema.sql's
  step_count   BIGINT,
  step_mean_us DOUBLE PRECISION,
  step_sd_us   DOUBLE PRECISION
);

CREATE TABLE report_edits (
  session_id BIGINT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  line       TEXT COLLATE "C" NOT NULL,
  text       TEXT NOT NULL,
  edited_at  BIGINT NOT NULL,
  PRIMARY KEY (session_id, line)
);

-- Event chunks as bytea (chunk.h's format, as in SQLite). Large values are TOASTed
-- (stored out of line, compressed again only when it pays: zstd chunks seldom do).
CREATE TABLE event_chunks (
  session_id BIGINT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  track      BIGINT NOT NULL,
  seq        BIGINT NOT NULL,
  n          BIGINT NOT NULL,
  min_ts     DOUBLE PRECISION NOT NULL,
  max_end    DOUBLE PRECISION NOT NULL,
  data       BYTEA NOT NULL,
  drawn      BIGINT,                         -- version 3: as schema.sql's (NULL: decode)
  gpu        BIGINT,
  PRIMARY KEY (session_id, seq)
);
CREATE INDEX event_chunks_track ON event_chunks(session_id, track, min_ts, max_end, drawn, gpu);

CREATE TABLE timeline_buckets (
  session_id BIGINT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  track      BIGINT NOT NULL,
  data       BYTEA NOT NULL,
  PRIMARY KEY (session_id, track)
);

CREATE TABLE baselines (
  name       TEXT COLLATE "C" PRIMARY KEY,
  session_id BIGINT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq        BIGINT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE INDEX baselines_session ON baselines(session_id);

CREATE TABLE baseline_labels (
  name  TEXT COLLATE "C" NOT NULL REFERENCES baselines(name) ON DELETE CASCADE ON UPDATE CASCADE,
  key   TEXT COLLATE "C" NOT NULL,
  value TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (name, key)
);

-- Serving agents and their captures (captures.c, version 6): as schema.sql.
CREATE TABLE agents (
  name          TEXT COLLATE "C" PRIMARY KEY,
  host          TEXT COLLATE "C" NOT NULL DEFAULT '',
  version       TEXT COLLATE "C" NOT NULL DEFAULT '',
  registered_at BIGINT NOT NULL,
  last_seen     BIGINT NOT NULL,
  instance      TEXT COLLATE "C" NOT NULL DEFAULT ''  -- version 8: as schema.sql's
);
CREATE INDEX agents_last_seen ON agents(last_seen);

CREATE TABLE targets (
  name          TEXT COLLATE "C" PRIMARY KEY,
  agent         TEXT COLLATE "C" NOT NULL REFERENCES agents(name) ON DELETE CASCADE,
  engine        TEXT COLLATE "C" NOT NULL,
  url           TEXT COLLATE "C" NOT NULL,
  dir           TEXT COLLATE "C" NOT NULL DEFAULT '',
  registered_at BIGINT NOT NULL
);
CREATE INDEX targets_agent ON targets(agent);

CREATE TABLE captures (
  id          BIGSERIAL PRIMARY KEY,
  target      TEXT COLLATE "C" NOT NULL,
  agent       TEXT COLLATE "C" NOT NULL,
  engine      TEXT COLLATE "C" NOT NULL,
  seconds     BIGINT,
  steps       BIGINT,
  options     TEXT NOT NULL DEFAULT '{}',
  status      TEXT COLLATE "C" NOT NULL,
  error       TEXT,
  created_at  BIGINT NOT NULL,
  claimed_at  BIGINT,
  updated_at  BIGINT NOT NULL,
  finished_at BIGINT
);
CREATE INDEX captures_target ON captures(target, created_at);
CREATE INDEX captures_agent ON captures(agent, status);
CREATE UNIQUE INDEX captures_active ON captures(target) WHERE status IN ('queued', 'running', 'flushing');

-- Re-analysis claims and failures, and the upload order of events (schema.sql; version 7).
CREATE TABLE reanalysis (
  session_id     BIGINT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
  claimed_by     TEXT COLLATE "C",
  claimed_until  BIGINT,
  failed_at      BIGINT,
  failed_version BIGINT,
  error          TEXT
);
CREATE TABLE replay (
  session_id BIGINT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
  tracks     BYTEA NOT NULL,
  events     BIGINT NOT NULL,
  gpu_bw     TEXT,
  identity   TEXT
);

-- SQLite's CAST(t AS INTEGER) for ORDER BY (jobs.c: ranks in label text): the leading
-- integer of t, 0 when it has none, NULL for NULL; never an error.
CREATE FUNCTION fp_int(t TEXT) RETURNS BIGINT LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN t IS NULL THEN NULL
              ELSE COALESCE(substring(t FROM '^\s*([-+]?[0-9]{1,18})')::BIGINT, 0) END
$$;
