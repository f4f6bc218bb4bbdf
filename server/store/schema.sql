-- schema.sql: the firstpass database, version 10 (PRAGMA user_version = 10).
--
-- Embedded into the server at build time; store.c runs it on an empty database and
-- runs the migrations in store.c's `migrations[]` on older ones. Nothing else runs DDL.
--
-- Invariants (store.c keeps them; tests/unit/test_store.c checks them):
--  * A session and everything below it is written in ONE transaction: a session row
--    exists only if its operators, phases, analysis and event chunks exist too.
--  * Every child row carries session_id with ON DELETE CASCADE: deleting the session
--    row deletes the session, nothing else is needed (foreign_keys=ON per connection).
--  * Times are microseconds (REAL) in the trace's own time base; bytes are integers.
--  * Aggregates are computed once, at ingest (analyze.c); reads never re-scan events.
--  * A session id is never used twice (AUTOINCREMENT): a deleted session's URL never
--    names another session. Version 3 rebuilt the table to get it.
--  * A baseline names one existing session (history.c): deleting that session deletes
--    the baseline and its labels (ON DELETE CASCADE), so a baseline never dangles.
--  * This file is always the newest schema; a new database runs it whole. Each table
--    added later is also in store.c's migrations[] with the same DDL.

-- One uploaded profile.
CREATE TABLE sessions (
  id          INTEGER PRIMARY KEY AUTOINCREMENT, -- the public id: /api/v1/sessions/{id}; never reused
  name        TEXT NOT NULL,                -- ?name=, firstpass.name, or "session N"
  source      TEXT NOT NULL,                -- 'kineto' | 'legacy' | 'firstpass' | 'nsys'
  created_at  INTEGER NOT NULL,             -- unix seconds, server clock
  start_us    REAL NOT NULL,                -- first event start (trace time base)
  end_us      REAL NOT NULL,                -- last event end
  event_count INTEGER NOT NULL,             -- events in the upload, all kinds
  hardware    TEXT NOT NULL DEFAULT '',     -- "Tesla V100-SXM2-32GB x8", '' if unknown
  bytes_in    INTEGER NOT NULL DEFAULT 0,   -- bytes received (compressed as sent)
  meta        TEXT NOT NULL DEFAULT '{}',   -- JSON: top-level trace keys (deviceProperties,
                                            -- schemaVersion, firstpass, ...) for the download
  summary     TEXT NOT NULL DEFAULT '{}',   -- JSON: totals; counts; top operator; smells:
                                            -- what the sessions list shows; precomputed
                                            -- (no comma in this comment: ALTER TABLE DROP
                                            -- COLUMN of the next one misreads it)
  analysis_version INTEGER NOT NULL DEFAULT 0 -- version 9: the ANALYSIS_VERSION (analysis/analyze.h)
                                            -- its figures come from; 0: stored before versions
  -- version 10: the Idempotency-Key header of the upload (one session a key), NULL when none.
  -- The comma leads: ALTER TABLE DROP COLUMN of a last column deletes from the comma before
  -- it, and a comma in the comment above would be taken for it.
  , idempotency_key TEXT
);
CREATE INDEX sessions_created ON sessions(created_at DESC, id DESC);
CREATE INDEX sessions_analysis ON sessions(analysis_version, id);
CREATE UNIQUE INDEX sessions_idempotency ON sessions(idempotency_key) WHERE idempotency_key IS NOT NULL;

-- Idempotency keys of uploads in flight (version 10, store/idem.c): claimed when an upload
-- with the header begins, deleted in the transaction that stores its session or when it
-- fails. A claim whose server has not refreshed it for IDEM_STALE_S (a server that died)
-- may be taken by another upload of the key.
CREATE TABLE upload_claims (
  key        TEXT PRIMARY KEY,                -- the Idempotency-Key
  owner      TEXT NOT NULL,                   -- the server process holding it (random, per start)
  claimed_at INTEGER NOT NULL,                -- unix seconds
  seen_at    INTEGER NOT NULL                 -- its server's last refresh, unix seconds
);

-- key:value labels of a session; a key appears once per session.
CREATE TABLE labels (
  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  key        TEXT NOT NULL,
  value      TEXT NOT NULL,
  PRIMARY KEY (session_id, key)
) WITHOUT ROWID;
CREATE INDEX labels_kv ON labels(key, value, session_id);

-- Interned strings of one session (event names, categories): event chunks refer to them.
CREATE TABLE strings (
  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  id         INTEGER NOT NULL,
  s          TEXT NOT NULL,
  PRIMARY KEY (session_id, id)
) WITHOUT ROWID;

-- The operator, kernel and phase tables name their texts (names, shapes, grids, blocks)
-- by id in strings (session_id, id), never by a copy (version 4, issue 22): each distinct
-- text is stored once per session, however many rows name it. The *_rows tables hold the
-- ids; the views operators, kernels and phases put the texts back, with the columns the
-- tables had up to version 3, and are what every reader selects from. No FOREIGN KEY to
-- strings: a session's delete would then search the rows for each string it deletes.

-- The operator table: torch.profiler key_averages() semantics (analyze.c says how).
-- grouping 0: one row per (name, kind); grouping 1: per (name, kind, input_shapes); grouping 2
-- (version 6): the GPU rows (kernels, copies, memsets, GPU annotations), which have no shapes
-- and are the same in both, stored once. So the table by name is grouping IN (0, 2), by
-- shapes IN (1, 2); sessions stored before version 6 have their GPU rows in 0 and 1 and no 2,
-- which the same reads serve alike.
CREATE TABLE operator_rows (
  session_id    INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  grouping      INTEGER NOT NULL,
  name_id       INTEGER NOT NULL,            -- strings.id of the name
  kind          TEXT NOT NULL,               -- the event category: cpu_op, kernel, ...
  shapes_id     INTEGER,                     -- strings.id of str(input_shapes) like torch; NULL when none
  calls         INTEGER NOT NULL,
  cpu_total     REAL NOT NULL,               -- CPU time total, us
  self_cpu      REAL NOT NULL,               -- minus direct children on the same thread
  cuda_total    REAL NOT NULL,               -- GPU time of everything launched below it
  self_cuda     REAL NOT NULL,               -- GPU time launched directly by it
  cpu_mem       INTEGER NOT NULL,            -- bytes, [memory] events inside the span
  self_cpu_mem  INTEGER NOT NULL,
  cuda_mem      INTEGER NOT NULL,
  self_cuda_mem INTEGER NOT NULL
);
CREATE INDEX operators_session ON operator_rows(session_id, grouping, cuda_total DESC);
CREATE VIEW operators AS
  SELECT o.session_id, o.grouping, n.s AS name, o.kind, COALESCE(sh.s, '') AS input_shapes, o.calls, o.cpu_total,
         o.self_cpu, o.cuda_total, o.self_cuda, o.cpu_mem, o.self_cpu_mem, o.cuda_mem, o.self_cuda_mem
  FROM operator_rows o JOIN strings n ON n.session_id = o.session_id AND n.id = o.name_id
  LEFT JOIN strings sh ON sh.session_id = o.session_id AND sh.id = o.shapes_id;

-- The kernel table: one row per GPU activity name (kernels, copies, memsets).
CREATE TABLE kernel_rows (
  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  name_id    INTEGER NOT NULL,                -- strings.id of the name
  kind       TEXT NOT NULL,
  calls      INTEGER NOT NULL,
  total_us   REAL NOT NULL,
  min_us     REAL NOT NULL,
  max_us     REAL NOT NULL,
  grid_id    INTEGER,                         -- strings.id of "[1, 1, 1]" of one launch, NULL if unknown
  block_id   INTEGER,
  regs       INTEGER,                         -- registers per thread
  smem       INTEGER,                         -- shared memory bytes
  -- version 7: tb-profiler's kernel-table columns, means over every launch weighted by its
  -- duration (a launch without the figure counts as 0); NULL when no launch had it, and in
  -- sessions stored before (query.c then estimates from the one launch above)
  mean_bps   REAL,                            -- "blocks per SM"
  mean_occ   REAL,                            -- "est. achieved occupancy %" (percent)
  mean_sme   REAL                             -- min(1, blocks per SM): est. SM efficiency
);
CREATE INDEX kernels_session ON kernel_rows(session_id, total_us DESC);
CREATE VIEW kernels AS
  SELECT k.session_id, n.s AS name, k.kind, k.calls, k.total_us, k.min_us, k.max_us, g.s AS grid, b.s AS block, k.regs, k.smem,
         k.mean_bps, k.mean_occ, k.mean_sme
  FROM kernel_rows k JOIN strings n ON n.session_id = k.session_id AND n.id = k.name_id
  LEFT JOIN strings g ON g.session_id = k.session_id AND g.id = k.grid_id
  LEFT JOIN strings b ON b.session_id = k.session_id AND b.id = k.block_id;

-- Phases: NVTX ranges / record_function (user_annotation) and gpu_user_annotation.
CREATE TABLE phase_rows (
  session_id     INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  name_id        INTEGER NOT NULL,            -- strings.id of the name
  kind           TEXT NOT NULL,               -- 'cpu' (user_annotation) | 'gpu'
  count          INTEGER NOT NULL,
  total_us       REAL NOT NULL,               -- wall time summed over instances
  gpu_busy_us    REAL NOT NULL,               -- union of GPU activity inside the instances
  kernels        INTEGER NOT NULL,            -- GPU activities launched inside
  kernel_us      REAL NOT NULL,               -- their summed duration
  first_ts       REAL NOT NULL                -- start of the first instance
);
CREATE INDEX phases_session ON phase_rows(session_id);
CREATE VIEW phases AS
  SELECT p.session_id, n.s AS name, p.kind, p.count, p.total_us, p.gpu_busy_us, p.kernels, p.kernel_us, p.first_ts
  FROM phase_rows p JOIN strings n ON n.session_id = p.session_id AND n.id = p.name_id;

-- Everything else the analysis computed, as JSON documents: GPU facts, the report
-- draft and the smells. Small (kilobytes), read whole.
CREATE TABLE analysis (
  session_id INTEGER PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
  gpu        TEXT NOT NULL,                   -- GET /gpu reply
  report     TEXT NOT NULL,                   -- {"draft":{five lines},"smells":[...]}
  timeline   TEXT NOT NULL,                   -- tracks and the level-of-detail pyramid meta
  effic      TEXT,                            -- version 7: GET /efficiency (analysis/effic.c);
                                              -- NULL in sessions stored before
  -- version 10: the step breakdown (GET /steps; in report's "breakdown" before) and the
  -- regression gate's numbers of its steps (history.h); NULL in sessions stored before
  steps        TEXT,
  step_count   INTEGER,
  step_mean_us REAL,
  step_sd_us   REAL                           -- the sample standard deviation
) WITHOUT ROWID;

-- Edits a team made to the five-line report; an edit wins over the draft.
CREATE TABLE report_edits (
  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  line       TEXT NOT NULL,                   -- workload | hardware | top_cuda_time | ...
  text       TEXT NOT NULL,
  edited_at  INTEGER NOT NULL,
  PRIMARY KEY (session_id, line)
) WITHOUT ROWID;

-- The events themselves, for the Chrome-trace download and the zoomed-in timeline.
-- Each chunk holds up to CHUNK_EVENTS events of ONE track in file order: a zstd column
-- store (version 2) or, in databases written before 2026-12-03, deflated records
-- (version 1); chunk.h documents both. Chunks of a track do not overlap in seq.
-- drawn and gpu (version 5) let a timeline count a chunk that lies wholly inside its
-- window without decoding it; NULL in chunks stored before, which are decoded.
CREATE TABLE event_chunks (
  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  track      INTEGER NOT NULL,                -- index into analysis.timeline tracks
  seq        INTEGER NOT NULL,                -- chunk number within the session
  n          INTEGER NOT NULL,                -- events in the chunk
  min_ts     REAL NOT NULL,                   -- earliest start in the chunk
  max_end    REAL NOT NULL,                   -- latest end in the chunk
  data       BLOB NOT NULL,
  drawn INTEGER,                              -- of n, the events a timeline draws (chunk_drawn_cls)
  gpu INTEGER,                                -- of drawn, GPU activities (EV_GPU)
  PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
-- Covers the counts (query.c track_count): summing them reads no chunk.
CREATE INDEX event_chunks_track ON event_chunks(session_id, track, min_ts, max_end, drawn, gpu);

-- Per-track busy buckets at a fixed resolution, for zoomed-out timeline views.
CREATE TABLE timeline_buckets (
  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  track      INTEGER NOT NULL,
  data       BLOB NOT NULL,                   -- TL_BUCKETS x {float busy_us; u32 count; u32 top_name},
                                              -- raw or deflated behind a tag (tlblob.h)
  PRIMARY KEY (session_id, track)
) WITHOUT ROWID;

-- Named baselines (history.c, schema version 2): a session later sessions are checked
-- against. PUT /api/v1/baselines/{name} replaces the session and the labels of a name.
CREATE TABLE baselines (
  name       TEXT PRIMARY KEY,                -- [A-Za-z0-9._-]{1,64}
  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq        INTEGER NOT NULL,                -- grows on every PUT: "newest" = largest seq
  created_at INTEGER NOT NULL,                -- unix seconds, first PUT
  updated_at INTEGER NOT NULL                 -- unix seconds, last PUT
);
CREATE INDEX baselines_session ON baselines(session_id);

-- key:value labels a baseline stands for (default: its session's labels at PUT time).
CREATE TABLE baseline_labels (
  name  TEXT NOT NULL REFERENCES baselines(name) ON DELETE CASCADE ON UPDATE CASCADE,
  key   TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (name, key)
) WITHOUT ROWID;

-- Serving agents and their captures (captures.c, schema version 8, issue 44). An agent is a
-- firstpass-upload --target beside serving engines; it registers the engines it can profile
-- (targets), long-polls for capture requests and reports each one's progress.
CREATE TABLE agents (
  name          TEXT PRIMARY KEY,             -- [A-Za-z0-9._-]{1,64}
  host          TEXT NOT NULL DEFAULT '',
  version       TEXT NOT NULL DEFAULT '',
  registered_at INTEGER NOT NULL,             -- unix seconds, its last registration
  last_seen     INTEGER NOT NULL              -- unix seconds, its last request (poll, status)
  , instance    TEXT NOT NULL DEFAULT ''      -- version 10: a random id of the agent process; empty: none
);
CREATE INDEX agents_last_seen ON agents(last_seen);

-- The engines agents can profile: only these can be captured. A name is one target whichever
-- agent registered it last; an agent's registration replaces all of its targets.
CREATE TABLE targets (
  name          TEXT PRIMARY KEY,             -- [A-Za-z0-9._-]{1,64}
  agent         TEXT NOT NULL REFERENCES agents(name) ON DELETE CASCADE,
  engine        TEXT NOT NULL,                -- 'vllm' | 'sglang' | 'torch'
  url           TEXT NOT NULL,                -- the engine's base URL as its agent reaches it
  dir           TEXT NOT NULL DEFAULT '',     -- where its traces land, as its agent sees them
  registered_at INTEGER NOT NULL
);
CREATE INDEX targets_agent ON targets(agent);

-- One profile of a target asked for by POST /api/v1/captures. Its sessions are those
-- labelled capture:<id> (the agent sends them so, with job:capture-<id>). Invariant: at most
-- one capture of a target is in flight (queued, running or flushing): the partial unique
-- index, so that two servers on one database cannot both start one.
CREATE TABLE captures (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  target      TEXT NOT NULL,                  -- no foreign key: a capture outlives its target
  agent       TEXT NOT NULL,                  -- the agent that held the target when asked
  engine      TEXT NOT NULL,
  seconds     INTEGER,                        -- how long; NULL when by steps
  steps       INTEGER,                        -- how many engine steps (SGLang); NULL when by seconds
  options     TEXT NOT NULL DEFAULT '{}',     -- JSON: record_shapes, with_stack
  status      TEXT NOT NULL,                  -- 'queued' | 'running' | 'flushing' | 'uploaded' | 'failed'
  error       TEXT,                           -- why it failed (the engine's own words, or a timeout)
  created_at  INTEGER NOT NULL,               -- unix seconds
  claimed_at  INTEGER,                        -- the agent's poll took it
  updated_at  INTEGER NOT NULL,
  finished_at INTEGER                         -- uploaded or failed
);
CREATE INDEX captures_target ON captures(target, created_at);
CREATE INDEX captures_agent ON captures(agent, status);
CREATE UNIQUE INDEX captures_active ON captures(target) WHERE status IN ('queued', 'running', 'flushing');

-- Re-analysis (reanalysis.c, schema version 9, issue 52): a session's figures computed again
-- from its stored events by today's analysis. At most one server works on a session at a
-- time: it holds the claim (claimed_by, until claimed_until, renewed while it works; a
-- server that died leaves a claim that expires). A re-analysis that failed leaves the old
-- figures and says why here; the row goes when one succeeds.
CREATE TABLE reanalysis (
  session_id     INTEGER PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
  claimed_by     TEXT,                        -- "host:pid:n" of the worker, NULL when none
  claimed_until  INTEGER,                     -- unix seconds the claim lasts to
  failed_at      INTEGER,                     -- unix seconds of the last failure, NULL when none
  failed_version INTEGER,                     -- the ANALYSIS_VERSION that failed
  error          TEXT                         -- why
) WITHOUT ROWID;

-- What a re-analysis needs besides the events and meta: the order in which the upload's
-- events came across its tracks (lib/evorder.h), so that they are fed back as they came and
-- the figures equal a fresh upload's to the last digit, an Nsight export's measured DRAM
-- bandwidths (not in its events), and the name and labels as the upload gave them (the
-- report's workload line names them: the labels table keeps no order, and a session without
-- a name is stored as "session N"). Sessions stored before version 9 have no row: their
-- events are fed back a track at a time.
CREATE TABLE replay (
  session_id INTEGER PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
  tracks     BLOB NOT NULL,                   -- runs (lib/evorder.h)
  events     INTEGER NOT NULL,                -- the events the runs count
  gpu_bw     TEXT,                            -- JSON [[device, bytes/s], ...], NULL when none
  identity   TEXT                             -- JSON {"name": the name the upload gave (null: none), "labels":
                                              -- {its labels, in the order the analysis saw them}}
) WITHOUT ROWID;
