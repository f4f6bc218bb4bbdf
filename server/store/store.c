/* store.c: owns the database, the schema, migrations and the connection pool.
 *
 * The schema is schema.sql (SQLite) or schema_pg.sql (PostgreSQL), embedded at build time
 * (build/gen/schema_sql.h, schema_pg_sql.h): only store_open runs DDL. A new SQLite
 * database gets schema.sql (always the newest schema) and user_version
 * STORE_SCHEMA_VERSION at once; an older one runs migrations[from..] in one transaction
 * each. PostgreSQL keeps its version in fp_meta and runs pg_migrations[] the same way,
 * under an advisory lock so that replicas starting together migrate once. Must not
 * include microhttpd.h. */
#include "store/store.h"
#include "store/db.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/logfmt.h"

#include <sqlite3.h>
#include <unistd.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "schema_sql.h"
#include "schema_pg_sql.h"

#define POOL_MAX 32

struct store {
    char *path;           /* what --db said: the file, or the PostgreSQL URI */
    char *shown;          /* path with a URI's password blanked, for logs and replies */
    int pg;               /* 1: PostgreSQL */
    pthread_mutex_t lock; /* guards pool[], npool and nopen */
    pthread_cond_t freed; /* signalled by store_put (PostgreSQL's cap on connections) */
    db_conn *pool[POOL_MAX];
    int npool;
    int nopen;            /* PostgreSQL: connections open, pooled or taken */
    int maxopen;          /* PostgreSQL: FIRSTPASS_PG_POOL (default 16) */
    pthread_mutex_t health_lock; /* guards health */
    db_conn *health;      /* PostgreSQL: store_ping's own connection, outside the pool; NULL until used */
    _Atomic unsigned long gen; /* store_generation: bumped after each committed write */
    _Atomic unsigned long lgen; /* store_list_generation: gen's writes and uploads */
    int lockfd;           /* SQLite: "<db>-lock", flock'ed for the store's life (lock_sqlite); -1 on PostgreSQL */
};

/* Forward migrations: migrations[v] takes a database from user_version v to v+1.
 * Version 0 is "empty": it gets the whole schema.sql, which already holds every later
 * table, and goes straight to the newest version. Append, never edit; a table added here
 * goes into schema.sql too, with the same DDL (test_history.py compares the two). */
static const char *const migrations[] = {
    schema_sql,
    /* 1 -> 2: named baselines (history.c). */
    "CREATE TABLE baselines (\n"
    "  name       TEXT PRIMARY KEY,\n"
    "  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,\n"
    "  seq        INTEGER NOT NULL,\n"
    "  created_at INTEGER NOT NULL,\n"
    "  updated_at INTEGER NOT NULL\n"
    ");\n"
    "CREATE INDEX baselines_session ON baselines(session_id);\n"
    "CREATE TABLE baseline_labels (\n"
    "  name  TEXT NOT NULL REFERENCES baselines(name) ON DELETE CASCADE ON UPDATE CASCADE,\n"
    "  key   TEXT NOT NULL,\n"
    "  value TEXT NOT NULL,\n"
    "  PRIMARY KEY (name, key)\n"
    ") WITHOUT ROWID;\n",
    /* 2 -> 3: sessions.id AUTOINCREMENT, so a deleted session's id is never reused. SQLite
     * cannot add it in place: the table is rebuilt (https://sqlite.org/lang_altertable.html,
     * "making other kinds of table schema changes") with foreign keys off (see migrate), so
     * the DROP cascades nothing and the children keep pointing at "sessions". Copying the
     * rows sets sqlite_sequence to the largest id; ids deleted above it before the
     * migration cannot be known. */
    "CREATE TABLE sessions_v3 (\n"
    "  id          INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  name        TEXT NOT NULL,\n"
    "  source      TEXT NOT NULL,\n"
    "  created_at  INTEGER NOT NULL,\n"
    "  start_us    REAL NOT NULL,\n"
    "  end_us      REAL NOT NULL,\n"
    "  event_count INTEGER NOT NULL,\n"
    "  hardware    TEXT NOT NULL DEFAULT '',\n"
    "  bytes_in    INTEGER NOT NULL DEFAULT 0,\n"
    "  meta        TEXT NOT NULL DEFAULT '{}',\n"
    "  summary     TEXT NOT NULL DEFAULT '{}'\n"
    ");\n"
    "INSERT INTO sessions_v3 (id, name, source, created_at, start_us, end_us, event_count, hardware, bytes_in, meta, summary)\n"
    "  SELECT id, name, source, created_at, start_us, end_us, event_count, hardware, bytes_in, meta, summary FROM sessions;\n"
    "DROP TABLE sessions;\n"
    "ALTER TABLE sessions_v3 RENAME TO sessions;\n"
    "CREATE INDEX sessions_created ON sessions(created_at DESC, id DESC);\n",
    /* 3 -> 4: operators, kernels and phases name their texts by strings.id (schema.sql,
     * issue 22). A text missing from a session's strings (none should be) is added with a
     * new id above its largest; each row is copied in rowid order, so that rows equal in a
     * sort still list in the order they did; the views keep the old tables' columns. The
     * index on strings' texts serves this lookup only. */
    "CREATE INDEX strings_text_v4 ON strings(session_id, s);\n"
    "INSERT INTO strings(session_id, id, s)\n"
    "  SELECT m.session_id, (SELECT COALESCE(MAX(x.id), -1) FROM strings x WHERE x.session_id = m.session_id)\n"
    "         + ROW_NUMBER() OVER (PARTITION BY m.session_id ORDER BY m.s), m.s\n"
    "  FROM (SELECT session_id, name AS s FROM operators\n"
    "        UNION SELECT session_id, input_shapes FROM operators WHERE input_shapes != ''\n"
    "        UNION SELECT session_id, name FROM kernels\n"
    "        UNION SELECT session_id, grid FROM kernels WHERE grid IS NOT NULL\n"
    "        UNION SELECT session_id, block FROM kernels WHERE block IS NOT NULL\n"
    "        UNION SELECT session_id, name FROM phases) m\n"
    "  WHERE NOT EXISTS (SELECT 1 FROM strings t WHERE t.session_id = m.session_id AND t.s = m.s);\n"
    "CREATE TABLE operator_rows (\n"
    "  session_id    INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,\n"
    "  grouping      INTEGER NOT NULL,\n"
    "  name_id       INTEGER NOT NULL,\n"
    "  kind          TEXT NOT NULL,\n"
    "  shapes_id     INTEGER,\n"
    "  calls         INTEGER NOT NULL,\n"
    "  cpu_total     REAL NOT NULL,\n"
    "  self_cpu      REAL NOT NULL,\n"
    "  cuda_total    REAL NOT NULL,\n"
    "  self_cuda     REAL NOT NULL,\n"
    "  cpu_mem       INTEGER NOT NULL,\n"
    "  self_cpu_mem  INTEGER NOT NULL,\n"
    "  cuda_mem      INTEGER NOT NULL,\n"
    "  self_cuda_mem INTEGER NOT NULL\n"
    ");\n"
    "CREATE TABLE kernel_rows (\n"
    "  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,\n"
    "  name_id    INTEGER NOT NULL,\n"
    "  kind       TEXT NOT NULL,\n"
    "  calls      INTEGER NOT NULL,\n"
    "  total_us   REAL NOT NULL,\n"
    "  min_us     REAL NOT NULL,\n"
    "  max_us     REAL NOT NULL,\n"
    "  grid_id    INTEGER,\n"
    "  block_id   INTEGER,\n"
    "  regs       INTEGER,\n"
    "  smem       INTEGER\n"
    ");\n"
    "CREATE TABLE phase_rows (\n"
    "  session_id     INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,\n"
    "  name_id        INTEGER NOT NULL,\n"
    "  kind           TEXT NOT NULL,\n"
    "  count          INTEGER NOT NULL,\n"
    "  total_us       REAL NOT NULL,\n"
    "  gpu_busy_us    REAL NOT NULL,\n"
    "  kernels        INTEGER NOT NULL,\n"
    "  kernel_us      REAL NOT NULL,\n"
    "  first_ts       REAL NOT NULL\n"
    ");\n"
    "INSERT INTO operator_rows\n"
    "  SELECT o.session_id, o.grouping, (SELECT MIN(t.id) FROM strings t WHERE t.session_id = o.session_id AND t.s = o.name), o.kind,\n"
    "         CASE WHEN o.input_shapes != '' THEN (SELECT MIN(t.id) FROM strings t WHERE t.session_id = o.session_id AND t.s = o.input_shapes) END,\n"
    "         o.calls, o.cpu_total, o.self_cpu, o.cuda_total, o.self_cuda, o.cpu_mem, o.self_cpu_mem, o.cuda_mem, o.self_cuda_mem\n"
    "  FROM operators o ORDER BY o.rowid;\n"
    "INSERT INTO kernel_rows\n"
    "  SELECT k.session_id, (SELECT MIN(t.id) FROM strings t WHERE t.session_id = k.session_id AND t.s = k.name), k.kind, k.calls,\n"
    "         k.total_us, k.min_us, k.max_us, (SELECT MIN(t.id) FROM strings t WHERE t.session_id = k.session_id AND t.s = k.grid),\n"
    "         (SELECT MIN(t.id) FROM strings t WHERE t.session_id = k.session_id AND t.s = k.block), k.regs, k.smem\n"
    "  FROM kernels k ORDER BY k.rowid;\n"
    "INSERT INTO phase_rows\n"
    "  SELECT p.session_id, (SELECT MIN(t.id) FROM strings t WHERE t.session_id = p.session_id AND t.s = p.name), p.kind, p.count,\n"
    "         p.total_us, p.gpu_busy_us, p.kernels, p.kernel_us, p.first_ts\n"
    "  FROM phases p ORDER BY p.rowid;\n"
    "DROP TABLE operators;\n"
    "DROP TABLE kernels;\n"
    "DROP TABLE phases;\n"
    "CREATE INDEX operators_session ON operator_rows(session_id, grouping, cuda_total DESC);\n"
    "CREATE INDEX kernels_session ON kernel_rows(session_id, total_us DESC);\n"
    "CREATE INDEX phases_session ON phase_rows(session_id);\n"
    "CREATE VIEW operators AS\n"
    "  SELECT o.session_id, o.grouping, n.s AS name, o.kind, COALESCE(sh.s, '') AS input_shapes, o.calls, o.cpu_total,\n"
    "         o.self_cpu, o.cuda_total, o.self_cuda, o.cpu_mem, o.self_cpu_mem, o.cuda_mem, o.self_cuda_mem\n"
    "  FROM operator_rows o JOIN strings n ON n.session_id = o.session_id AND n.id = o.name_id\n"
    "  LEFT JOIN strings sh ON sh.session_id = o.session_id AND sh.id = o.shapes_id;\n"
    "CREATE VIEW kernels AS\n"
    "  SELECT k.session_id, n.s AS name, k.kind, k.calls, k.total_us, k.min_us, k.max_us, g.s AS grid, b.s AS block, k.regs, k.smem\n"
    "  FROM kernel_rows k JOIN strings n ON n.session_id = k.session_id AND n.id = k.name_id\n"
    "  LEFT JOIN strings g ON g.session_id = k.session_id AND g.id = k.grid_id\n"
    "  LEFT JOIN strings b ON b.session_id = k.session_id AND b.id = k.block_id;\n"
    "CREATE VIEW phases AS\n"
    "  SELECT p.session_id, n.s AS name, p.kind, p.count, p.total_us, p.gpu_busy_us, p.kernels, p.kernel_us, p.first_ts\n"
    "  FROM phase_rows p JOIN strings n ON n.session_id = p.session_id AND n.id = p.name_id;\n"
    "DROP INDEX strings_text_v4;\n",
    /* 4 -> 5: per-chunk counts for the timeline (schema.sql); NULL in the chunks already
     * stored, which the timeline keeps decoding. */
    "ALTER TABLE event_chunks ADD COLUMN drawn INTEGER;\n"
    "ALTER TABLE event_chunks ADD COLUMN gpu INTEGER;\n"
    "DROP INDEX event_chunks_track;\n"
    "CREATE INDEX event_chunks_track ON event_chunks(session_id, track, min_ts, max_end, drawn, gpu);\n",
    /* 5 -> 6: no DDL. New sessions store each GPU row of the operator table once, in
     * grouping 2 (schema.sql); the version keeps an older server, which reads grouping 0
     * and 1 only, from serving them without their kernels. */
    "SELECT 1;\n",
    /* 6 -> 7: the kernel table's duration-weighted launch columns and the efficiency
     * document (schema.sql); NULL in the sessions already stored. */
    "ALTER TABLE kernel_rows ADD COLUMN mean_bps REAL;\n"
    "ALTER TABLE kernel_rows ADD COLUMN mean_occ REAL;\n"
    "ALTER TABLE kernel_rows ADD COLUMN mean_sme REAL;\n"
    "ALTER TABLE analysis ADD COLUMN effic TEXT;\n"
    "DROP VIEW kernels;\n"
    "CREATE VIEW kernels AS\n"
    "  SELECT k.session_id, n.s AS name, k.kind, k.calls, k.total_us, k.min_us, k.max_us, g.s AS grid, b.s AS block, k.regs, k.smem,\n"
    "         k.mean_bps, k.mean_occ, k.mean_sme\n"
    "  FROM kernel_rows k JOIN strings n ON n.session_id = k.session_id AND n.id = k.name_id\n"
    "  LEFT JOIN strings g ON g.session_id = k.session_id AND g.id = k.grid_id\n"
    "  LEFT JOIN strings b ON b.session_id = k.session_id AND b.id = k.block_id;\n",
    /* 7 -> 8: serving agents, their targets and captures (captures.c, issue 44). */
    "CREATE TABLE agents (\n"
    "  name          TEXT PRIMARY KEY,\n"
    "  host          TEXT NOT NULL DEFAULT '',\n"
    "  version       TEXT NOT NULL DEFAULT '',\n"
    "  registered_at INTEGER NOT NULL,\n"
    "  last_seen     INTEGER NOT NULL\n"
    ");\n"
    "CREATE TABLE targets (\n"
    "  name          TEXT PRIMARY KEY,\n"
    "  agent         TEXT NOT NULL REFERENCES agents(name) ON DELETE CASCADE,\n"
    "  engine        TEXT NOT NULL,\n"
    "  url           TEXT NOT NULL,\n"
    "  dir           TEXT NOT NULL DEFAULT '',\n"
    "  registered_at INTEGER NOT NULL\n"
    ");\n"
    "CREATE INDEX targets_agent ON targets(agent);\n"
    "CREATE TABLE captures (\n"
    "  id          INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  target      TEXT NOT NULL,\n"
    "  agent       TEXT NOT NULL,\n"
    "  engine      TEXT NOT NULL,\n"
    "  seconds     INTEGER,\n"
    "  steps       INTEGER,\n"
    "  options     TEXT NOT NULL DEFAULT '{}',\n"
    "  status      TEXT NOT NULL,\n"
    "  error       TEXT,\n"
    "  created_at  INTEGER NOT NULL,\n"
    "  claimed_at  INTEGER,\n"
    "  updated_at  INTEGER NOT NULL,\n"
    "  finished_at INTEGER\n"
    ");\n"
    "CREATE INDEX captures_target ON captures(target, created_at);\n"
    "CREATE INDEX captures_agent ON captures(agent, status);\n"
    "CREATE UNIQUE INDEX captures_active ON captures(target) WHERE status IN ('queued', 'running', 'flushing');\n",
    /* 8 -> 9: re-analysis (reanalysis.c, issue 52): the analysis version a session's figures
     * come from (0: stored before versions existed), the claims and failures of
     * re-analyses, and the upload order of each session's events (lib/evorder.h). */
    "ALTER TABLE sessions ADD COLUMN analysis_version INTEGER NOT NULL DEFAULT 0;\n"
    "CREATE INDEX sessions_analysis ON sessions(analysis_version, id);\n"
    "CREATE TABLE reanalysis (\n"
    "  session_id     INTEGER PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,\n"
    "  claimed_by     TEXT,\n"
    "  claimed_until  INTEGER,\n"
    "  failed_at      INTEGER,\n"
    "  failed_version INTEGER,\n"
    "  error          TEXT\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE replay (\n"
    "  session_id INTEGER PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,\n"
    "  tracks     BLOB NOT NULL,\n"
    "  events     INTEGER NOT NULL,\n"
    "  gpu_bw     TEXT,\n"
    "  identity   TEXT\n"
    ") WITHOUT ROWID;\n",
    /* 9 -> 10 (issue 50): Idempotency-Key on sessions and the keys in flight; the step breakdown
     * as a document of its own with the gate's numbers (NULL in the sessions already stored,
     * whose breakdown stays in report); an agent's instance; agents by last contact (expiry). */
    "ALTER TABLE sessions ADD COLUMN idempotency_key TEXT;\n"
    "CREATE UNIQUE INDEX sessions_idempotency ON sessions(idempotency_key) WHERE idempotency_key IS NOT NULL;\n"
    "CREATE TABLE upload_claims (\n"
    "  key        TEXT PRIMARY KEY,\n"
    "  owner      TEXT NOT NULL,\n"
    "  claimed_at INTEGER NOT NULL,\n"
    "  seen_at    INTEGER NOT NULL\n"
    ");\n"
    "ALTER TABLE analysis ADD COLUMN steps TEXT;\n"
    "ALTER TABLE analysis ADD COLUMN step_count INTEGER;\n"
    "ALTER TABLE analysis ADD COLUMN step_mean_us REAL;\n"
    "ALTER TABLE analysis ADD COLUMN step_sd_us REAL;\n"
    "ALTER TABLE agents ADD COLUMN instance TEXT NOT NULL DEFAULT '';\n"
    "CREATE INDEX agents_last_seen ON agents(last_seen);\n",
};
_Static_assert(sizeof migrations / sizeof migrations[0] == STORE_SCHEMA_VERSION, "one migration per schema version");

/* 1 (and a message in *msg, sqlite3_malloc'd) when PRAGMA foreign_key_check finds a row
 * whose parent is missing; 0 when none. */
static int fk_violations(sqlite3 *db, char **msg) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "PRAGMA foreign_key_check", -1, &st, NULL) != SQLITE_OK) {
        *msg = sqlite3_mprintf("%s", sqlite3_errmsg(db));
        return 1;
    }
    int bad = sqlite3_step(st) == SQLITE_ROW;
    if (bad) *msg = sqlite3_mprintf("foreign key violation in table %s", sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return bad;
}

/* What the start does to the schema, on one line before it does it: an upgrade's migration
 * is named with both versions (each step then says it committed), so that an operator
 * reading the log knows a rollback needs the backup taken before (docs/operations.md). */
static void log_schema(const char *backend, long long version, long long target) {
    if (version == target)
        log_line("info", "database schema is current", "backend=%s version=%lld", backend, version);
    else if (version == 0)
        log_line("info", "new database: creating the schema", "backend=%s version=%lld", backend, target);
    else
        log_line("info", "migrating the database schema: each step is one transaction; an older server refuses the result",
                 "backend=%s from=%lld to=%lld steps=%lld", backend, version, target, target - version);
}

static int migrate(sqlite3 *db, char *err, size_t errlen) {
    sqlite3_stmt *st;
    int version = 0;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK) return ERR_DB;
    if (sqlite3_step(st) == SQLITE_ROW) version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    int target = (int)(sizeof migrations / sizeof migrations[0]);
    if (version > target) {
        snprintf(err, errlen, "database schema version %d is newer than this server's %d: a newer firstpass-server wrote it; "
                 "run that version or a newer one, or restore the backup taken before the upgrade (docs/operations.md)", version, target);
        return ERR_DB;
    }
    log_schema("sqlite", version, target);
    /* A table rebuild (2 -> 3) must not cascade: foreign keys are off while migrating (the
     * pragma is a no-op inside a transaction, hence here) and checked before each COMMIT. */
    if (version < target) sqlite3_exec(db, "PRAGMA foreign_keys=OFF", NULL, NULL, NULL);
    int rc = 0;
    for (int v = version; v < target && !rc; v++) {
        char *msg = NULL;
        char pragma[64];
        /* schema.sql is the whole newest schema: an empty database skips the later steps. */
        int to = v == 0 ? target : v + 1;
        snprintf(pragma, sizeof pragma, "PRAGMA user_version=%d;", to);
        if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(db, migrations[v], NULL, NULL, &msg) != SQLITE_OK ||
            fk_violations(db, &msg) ||
            sqlite3_exec(db, pragma, NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(db, "COMMIT", NULL, NULL, &msg) != SQLITE_OK) {
            snprintf(err, errlen, "migration to schema version %d failed: %s", to, msg ? msg : "?");
            sqlite3_free(msg);
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            rc = ERR_DB;
            break;
        }
        if (version) log_line("info", "schema migration step committed", "backend=sqlite from=%d to=%d", v, to);
        v = to - 1;
    }
    sqlite3_exec(db, "PRAGMA foreign_keys=ON", NULL, NULL, NULL);
    return rc;
}

/* SQLite keeps malloc statistics by default, under one process-wide mutex that every
 * allocation of every connection takes: with a thread per request that mutex was most of
 * the sessions list's futex time (bench/README.md). Nothing here reads those statistics.
 * sqlite3_config works only before SQLite initialises, so the first store_open does it
 * (a later store, as in the unit tests, gets a harmless SQLITE_MISUSE). */
static void sqlite_setup(void) { sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); }

/* ---- PostgreSQL: schema and migrations ---- */

/* Forward migrations for PostgreSQL: pg_migrations[v] takes fp_meta.version v to v+1; 0 is
 * "empty" and gets schema_pg.sql whole. Append, never edit (as migrations[] above). */
static const char *const pg_migrations[] = {
    schema_pg_sql,
    /* 1 -> 2: operators, kernels and phases name their texts by strings.id, as SQLite's
     * 3 -> 4 (schema.sql); joined on the texts here (a hash join: PostgreSQL's B-tree
     * cannot index texts of kilobytes). rn keeps each row's place, and the rows are
     * written in their old physical order (ctid): a read without ORDER BY (compare's
     * load_side) lists them as before, and its unstable sort breaks ties alike. */
    "INSERT INTO strings(session_id, id, s)\n"
    "  SELECT m.session_id, COALESCE((SELECT MAX(x.id) FROM strings x WHERE x.session_id = m.session_id), -1)\n"
    "         + ROW_NUMBER() OVER (PARTITION BY m.session_id ORDER BY m.s), m.s\n"
    "  FROM (SELECT session_id, name AS s FROM operators\n"
    "        UNION SELECT session_id, input_shapes FROM operators WHERE input_shapes != ''\n"
    "        UNION SELECT session_id, name FROM kernels\n"
    "        UNION SELECT session_id, grid FROM kernels WHERE grid IS NOT NULL\n"
    "        UNION SELECT session_id, block FROM kernels WHERE block IS NOT NULL\n"
    "        UNION SELECT session_id, name FROM phases) m\n"
    "  WHERE NOT EXISTS (SELECT 1 FROM strings t WHERE t.session_id = m.session_id AND t.s = m.s);\n"
    "CREATE TABLE operator_rows (\n"
    "  session_id    BIGINT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,\n"
    "  grouping      BIGINT NOT NULL,\n"
    "  name_id       BIGINT NOT NULL,\n"
    "  kind          TEXT COLLATE \"C\" NOT NULL,\n"
    "  shapes_id     BIGINT,\n"
    "  calls         BIGINT NOT NULL,\n"
    "  cpu_total     DOUBLE PRECISION NOT NULL,\n"
    "  self_cpu      DOUBLE PRECISION NOT NULL,\n"
    "  cuda_total    DOUBLE PRECISION NOT NULL,\n"
    "  self_cuda     DOUBLE PRECISION NOT NULL,\n"
    "  cpu_mem       BIGINT NOT NULL,\n"
    "  self_cpu_mem  BIGINT NOT NULL,\n"
    "  cuda_mem      BIGINT NOT NULL,\n"
    "  self_cuda_mem BIGINT NOT NULL,\n"
    "  rn            BIGINT NOT NULL\n"
    ");\n"
    "CREATE TABLE kernel_rows (\n"
    "  session_id BIGINT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,\n"
    "  name_id    BIGINT NOT NULL,\n"
    "  kind       TEXT COLLATE \"C\" NOT NULL,\n"
    "  calls      BIGINT NOT NULL,\n"
    "  total_us   DOUBLE PRECISION NOT NULL,\n"
    "  min_us     DOUBLE PRECISION NOT NULL,\n"
    "  max_us     DOUBLE PRECISION NOT NULL,\n"
    "  grid_id    BIGINT,\n"
    "  block_id   BIGINT,\n"
    "  regs       BIGINT,\n"
    "  smem       BIGINT\n"
    ");\n"
    "CREATE TABLE phase_rows (\n"
    "  session_id     BIGINT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,\n"
    "  name_id        BIGINT NOT NULL,\n"
    "  kind           TEXT COLLATE \"C\" NOT NULL,\n"
    "  count          BIGINT NOT NULL,\n"
    "  total_us       DOUBLE PRECISION NOT NULL,\n"
    "  gpu_busy_us    DOUBLE PRECISION NOT NULL,\n"
    "  kernels        BIGINT NOT NULL,\n"
    "  kernel_us      DOUBLE PRECISION NOT NULL,\n"
    "  first_ts       DOUBLE PRECISION NOT NULL\n"
    ");\n"
    "INSERT INTO operator_rows\n"
    "  SELECT o.session_id, o.grouping, n.id, o.kind, sh.id, o.calls, o.cpu_total, o.self_cpu, o.cuda_total, o.self_cuda,\n"
    "         o.cpu_mem, o.self_cpu_mem, o.cuda_mem, o.self_cuda_mem, o.rn\n"
    "  FROM operators o JOIN strings n ON n.session_id = o.session_id AND n.s = o.name\n"
    "  LEFT JOIN strings sh ON sh.session_id = o.session_id AND sh.s = o.input_shapes AND o.input_shapes != ''\n"
    "  ORDER BY o.ctid;\n"
    "INSERT INTO kernel_rows\n"
    "  SELECT k.session_id, n.id, k.kind, k.calls, k.total_us, k.min_us, k.max_us, g.id, b.id, k.regs, k.smem\n"
    "  FROM kernels k JOIN strings n ON n.session_id = k.session_id AND n.s = k.name\n"
    "  LEFT JOIN strings g ON g.session_id = k.session_id AND g.s = k.grid\n"
    "  LEFT JOIN strings b ON b.session_id = k.session_id AND b.s = k.block\n"
    "  ORDER BY k.ctid;\n"
    "INSERT INTO phase_rows\n"
    "  SELECT p.session_id, n.id, p.kind, p.count, p.total_us, p.gpu_busy_us, p.kernels, p.kernel_us, p.first_ts\n"
    "  FROM phases p JOIN strings n ON n.session_id = p.session_id AND n.s = p.name\n"
    "  ORDER BY p.ctid;\n"
    "DROP TABLE operators;\n"
    "DROP TABLE kernels;\n"
    "DROP TABLE phases;\n"
    "CREATE INDEX operators_session ON operator_rows(session_id, grouping, cuda_total DESC);\n"
    "CREATE INDEX kernels_session ON kernel_rows(session_id, total_us DESC);\n"
    "CREATE INDEX phases_session ON phase_rows(session_id);\n"
    "CREATE VIEW operators AS\n"
    "  SELECT o.session_id, o.grouping, n.s AS name, o.kind, COALESCE(sh.s, '') AS input_shapes, o.calls, o.cpu_total,\n"
    "         o.self_cpu, o.cuda_total, o.self_cuda, o.cpu_mem, o.self_cpu_mem, o.cuda_mem, o.self_cuda_mem, o.rn\n"
    "  FROM operator_rows o JOIN strings n ON n.session_id = o.session_id AND n.id = o.name_id\n"
    "  LEFT JOIN strings sh ON sh.session_id = o.session_id AND sh.id = o.shapes_id;\n"
    "CREATE VIEW kernels AS\n"
    "  SELECT k.session_id, n.s AS name, k.kind, k.calls, k.total_us, k.min_us, k.max_us, g.s AS grid, b.s AS block, k.regs, k.smem\n"
    "  FROM kernel_rows k JOIN strings n ON n.session_id = k.session_id AND n.id = k.name_id\n"
    "  LEFT JOIN strings g ON g.session_id = k.session_id AND g.id = k.grid_id\n"
    "  LEFT JOIN strings b ON b.session_id = k.session_id AND b.id = k.block_id;\n"
    "CREATE VIEW phases AS\n"
    "  SELECT p.session_id, n.s AS name, p.kind, p.count, p.total_us, p.gpu_busy_us, p.kernels, p.kernel_us, p.first_ts\n"
    "  FROM phase_rows p JOIN strings n ON n.session_id = p.session_id AND n.id = p.name_id;\n",
    /* 2 -> 3: per-chunk counts, as SQLite's 4 -> 5. */
    "ALTER TABLE event_chunks ADD COLUMN drawn BIGINT, ADD COLUMN gpu BIGINT;\n"
    "DROP INDEX event_chunks_track;\n"
    "CREATE INDEX event_chunks_track ON event_chunks(session_id, track, min_ts, max_end, drawn, gpu);\n",
    /* 3 -> 4: no DDL; the GPU rows in grouping 2, as SQLite's 5 -> 6. */
    "SELECT 1;\n",
    /* 4 -> 5: the kernel table's means and the efficiency document, as SQLite's 6 -> 7. */
    "ALTER TABLE kernel_rows ADD COLUMN mean_bps DOUBLE PRECISION, ADD COLUMN mean_occ DOUBLE PRECISION,\n"
    "  ADD COLUMN mean_sme DOUBLE PRECISION;\n"
    "ALTER TABLE analysis ADD COLUMN effic TEXT;\n"
    "DROP VIEW kernels;\n"
    "CREATE VIEW kernels AS\n"
    "  SELECT k.session_id, n.s AS name, k.kind, k.calls, k.total_us, k.min_us, k.max_us, g.s AS grid, b.s AS block, k.regs, k.smem,\n"
    "         k.mean_bps, k.mean_occ, k.mean_sme\n"
    "  FROM kernel_rows k JOIN strings n ON n.session_id = k.session_id AND n.id = k.name_id\n"
    "  LEFT JOIN strings g ON g.session_id = k.session_id AND g.id = k.grid_id\n"
    "  LEFT JOIN strings b ON b.session_id = k.session_id AND b.id = k.block_id;\n",
    /* 5 -> 6: serving agents, targets and captures, as SQLite's 7 -> 8. */
    "CREATE TABLE agents (\n"
    "  name          TEXT COLLATE \"C\" PRIMARY KEY,\n"
    "  host          TEXT COLLATE \"C\" NOT NULL DEFAULT '',\n"
    "  version       TEXT COLLATE \"C\" NOT NULL DEFAULT '',\n"
    "  registered_at BIGINT NOT NULL,\n"
    "  last_seen     BIGINT NOT NULL\n"
    ");\n"
    "CREATE TABLE targets (\n"
    "  name          TEXT COLLATE \"C\" PRIMARY KEY,\n"
    "  agent         TEXT COLLATE \"C\" NOT NULL REFERENCES agents(name) ON DELETE CASCADE,\n"
    "  engine        TEXT COLLATE \"C\" NOT NULL,\n"
    "  url           TEXT COLLATE \"C\" NOT NULL,\n"
    "  dir           TEXT COLLATE \"C\" NOT NULL DEFAULT '',\n"
    "  registered_at BIGINT NOT NULL\n"
    ");\n"
    "CREATE INDEX targets_agent ON targets(agent);\n"
    "CREATE TABLE captures (\n"
    "  id          BIGSERIAL PRIMARY KEY,\n"
    "  target      TEXT COLLATE \"C\" NOT NULL,\n"
    "  agent       TEXT COLLATE \"C\" NOT NULL,\n"
    "  engine      TEXT COLLATE \"C\" NOT NULL,\n"
    "  seconds     BIGINT,\n"
    "  steps       BIGINT,\n"
    "  options     TEXT NOT NULL DEFAULT '{}',\n"
    "  status      TEXT COLLATE \"C\" NOT NULL,\n"
    "  error       TEXT,\n"
    "  created_at  BIGINT NOT NULL,\n"
    "  claimed_at  BIGINT,\n"
    "  updated_at  BIGINT NOT NULL,\n"
    "  finished_at BIGINT\n"
    ");\n"
    "CREATE INDEX captures_target ON captures(target, created_at);\n"
    "CREATE INDEX captures_agent ON captures(agent, status);\n"
    "CREATE UNIQUE INDEX captures_active ON captures(target) WHERE status IN ('queued', 'running', 'flushing');\n",
    /* 6 -> 7: re-analysis, as SQLite's 8 -> 9. */
    "ALTER TABLE sessions ADD COLUMN analysis_version BIGINT NOT NULL DEFAULT 0;\n"
    "CREATE INDEX sessions_analysis ON sessions(analysis_version, id);\n"
    "CREATE TABLE reanalysis (\n"
    "  session_id     BIGINT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,\n"
    "  claimed_by     TEXT COLLATE \"C\",\n"
    "  claimed_until  BIGINT,\n"
    "  failed_at      BIGINT,\n"
    "  failed_version BIGINT,\n"
    "  error          TEXT\n"
    ");\n"
    "CREATE TABLE replay (\n"
    "  session_id BIGINT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,\n"
    "  tracks     BYTEA NOT NULL,\n"
    "  events     BIGINT NOT NULL,\n"
    "  gpu_bw     TEXT,\n"
    "  identity   TEXT\n"
    ");\n",
    /* 7 -> 8: as SQLite's 9 -> 10 (issue 50). */
    "ALTER TABLE sessions ADD COLUMN idempotency_key TEXT COLLATE \"C\";\n"
    "CREATE UNIQUE INDEX sessions_idempotency ON sessions(idempotency_key) WHERE idempotency_key IS NOT NULL;\n"
    "CREATE TABLE upload_claims (\n"
    "  key        TEXT COLLATE \"C\" PRIMARY KEY,\n"
    "  owner      TEXT COLLATE \"C\" NOT NULL,\n"
    "  claimed_at BIGINT NOT NULL,\n"
    "  seen_at    BIGINT NOT NULL\n"
    ");\n"
    "ALTER TABLE analysis ADD COLUMN steps TEXT, ADD COLUMN step_count BIGINT, ADD COLUMN step_mean_us DOUBLE PRECISION,\n"
    "  ADD COLUMN step_sd_us DOUBLE PRECISION;\n"
    "ALTER TABLE agents ADD COLUMN instance TEXT COLLATE \"C\" NOT NULL DEFAULT '';\n"
    "CREATE INDEX agents_last_seen ON agents(last_seen);\n",
};
_Static_assert(sizeof pg_migrations / sizeof pg_migrations[0] == STORE_PG_SCHEMA_VERSION, "one migration per schema version");

/* The advisory lock key of migrations ("fpmigr" in ASCII); retention.c has its own. */
#define PG_MIGRATE_LOCK 0x66706d696772LL

static long long one_int(db_conn *c, const char *sql) {
    db_stmt *st = db_prepare(c, sql);
    long long v = -1;
    if (st && db_step(st) == DB_ROW) v = db_column_int64(st, 0);
    db_finalize(st);
    return v;
}

/* The schema version: fp_meta's, or 0 when the database is empty. */
static long long pg_version(db_conn *c) {
    if (one_int(c, "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = 'fp_meta'") != 1)
        return 0;
    return one_int(c, "SELECT version FROM fp_meta");
}

static int pg_migrate(db_conn *c, char *err, size_t errlen) {
    /* A session-level advisory lock: replicas starting together wait for the first one,
     * then find the schema current. */
    char lock[96];
    snprintf(lock, sizeof lock, "SELECT pg_advisory_lock(%lld)", PG_MIGRATE_LOCK);
    if (db_exec(c, lock)) return snprintf(err, errlen, "cannot lock for migrations: %s", db_errmsg(c)), ERR_DB;
    long long version = pg_version(c);
    long long target = STORE_PG_SCHEMA_VERSION;
    int rc = 0;
    if (version < 0) rc = ERR_DB, snprintf(err, errlen, "cannot read the schema version: %s", db_errmsg(c));
    else if (version > target)
        rc = ERR_DB, snprintf(err, errlen, "database schema version %lld is newer than this server's %lld: a newer firstpass-server wrote it; "
                              "run that version or a newer one, or restore the dump taken before the upgrade (docs/operations.md)", version, target);
    else log_schema("postgresql", version, target);
    for (long long v = version; !rc && v < target; v++) {
        long long to = v == 0 ? target : v + 1;
        char set[96];
        snprintf(set, sizeof set, "UPDATE fp_meta SET version = %lld", to);
        if (db_exec(c, "BEGIN") || db_exec(c, pg_migrations[v]) || db_exec(c, set) || db_exec(c, "COMMIT")) {
            snprintf(err, errlen, "migration to schema version %lld failed: %s", to, db_errmsg(c));
            db_exec(c, "ROLLBACK");
            rc = ERR_DB;
        } else if (version) {
            log_line("info", "schema migration step committed", "backend=postgresql from=%lld to=%lld", v, to);
        }
        v = to - 1;
    }
    snprintf(lock, sizeof lock, "SELECT pg_advisory_unlock(%lld)", PG_MIGRATE_LOCK);
    db_exec(c, lock);
    return rc;
}

/* "postgresql://user:secret@host/db" -> "postgresql://user:***@host/db"; a conninfo's
 * password=... likewise. */
static char *redact(const char *uri) {
    char *o = malloc(strlen(uri) + 8);
    if (!o) return NULL;
    strcpy(o, uri);
    char *at = strchr(o, '@'), *scheme = strstr(o, "://");
    if (scheme && at) {
        char *colon = memchr(scheme + 3, ':', (size_t)(at - scheme - 3));
        if (colon) {
            memmove(colon + 4, at, strlen(at) + 1);
            memcpy(colon, ":***", 4);
        }
    }
    char *pw = strstr(o, "password=");
    if (pw) {
        char *end = pw + 9;
        while (*end && *end != ' ') end++;
        memmove(pw + 12, end, strlen(end) + 1);
        memcpy(pw + 9, "***", 3);
    }
    return o;
}

static long env_long(const char *name, long dflt) {
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : dflt;
}

/* The first connection: PostgreSQL may be down (starting with the replicas, or restarting);
 * retried once a second for FIRSTPASS_DB_WAIT_S, each failure on one log line. */
static db_conn *first_conn(store *s, char *err, size_t errlen) {
    long wait = s->pg ? env_long("FIRSTPASS_DB_WAIT_S", 30) : 0;
    for (long tries = 0;; tries++) {
        db_conn *c = db_open(s->path, err, errlen);
        if (c || tries >= wait) {
            if (c && tries) log_line("info", "database reachable", "backend=%s tries=%ld", store_backend(s), tries + 1);
            return c;
        }
        char qdb[1100], qerr[600];
        log_line("warn", "database unreachable, retrying", "backend=%s db=%s try=%ld of=%ld error=%s", store_backend(s),
                 logfmt_quote(s->shown, qdb, sizeof qdb), tries + 1, wait + 1, logfmt_quote(err, qerr, sizeof qerr));
        sleep(1);
    }
}

/* One server per SQLite file (docs/kubernetes.md, issue 53): the reply cache's write
 * generation (gen, lgen above) lives in the server's memory, so a second server on the
 * same file served what the first had changed since from its cache: a session deleted
 * through one still 200 through the other, an upload missing from its list. That is what a
 * rolling update or `compose --scale` does. So the store holds flock(LOCK_EX) on
 * "<db>-lock" for its life (a file of its own: SQLite's locks are fcntl locks on the
 * database, which an flock there would disturb on NFS); the kernel drops it when the
 * process ends, SIGKILL included. A second server fails with the holder that the file
 * names (its pid and host, written by the holder) and the fix. */
static int lock_sqlite(store *s, char *err, size_t errlen) {
    char p[4200], holder[160] = "";
    snprintf(p, sizeof p, "%s-lock", s->path);
    s->lockfd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (s->lockfd < 0 && errno == EACCES) s->lockfd = open(p, O_RDONLY | O_CLOEXEC); /* another uid's file: the lock needs no write */
    if (s->lockfd < 0) return snprintf(err, errlen, "cannot open %s: %s", p, strerror(errno)), ERR_IO;
    if (!flock(s->lockfd, LOCK_EX | LOCK_NB)) {
        char host[64] = "?", line[160];
        gethostname(host, sizeof host - 1);
        int n = snprintf(line, sizeof line, "pid=%ld host=%s since=%lld\n", (long)getpid(), host, (long long)time(NULL));
        if (!ftruncate(s->lockfd, 0)) (void)!pwrite(s->lockfd, line, (size_t)n, 0); /* best effort: only the message needs it */
        return 0;
    }
    int e = errno;
    ssize_t n = pread(s->lockfd, holder, sizeof holder - 1, 0);
    holder[n > 0 ? n : 0] = '\0';
    holder[strcspn(holder, "\n")] = '\0';
    close(s->lockfd);
    s->lockfd = -1;
    if (e != EWOULDBLOCK) return snprintf(err, errlen, "cannot lock %s: %s", p, strerror(e)), ERR_IO;
    snprintf(err, errlen, "another firstpass-server serves this SQLite file: %s is locked by %s. One server per SQLite file: "
             "stop that one first (Kubernetes: replicas 1, strategy Recreate), or run several servers on PostgreSQL (docs/scale.md)",
             p, holder[0] ? holder : "another process");
    return ERR_CONFLICT;
}

store *store_open(const char *path, char *err, size_t errlen) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, sqlite_setup);
    store *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path)) || !(s->shown = redact(path))) {
        snprintf(err, errlen, "out of memory");
        if (s) free(s->path);
        free(s);
        return NULL;
    }
    s->pg = db_uri_is_pg(path);
    s->lockfd = -1;
    s->maxopen = (int)env_long("FIRSTPASS_PG_POOL", 16);
    if (s->maxopen < 1) s->maxopen = 1;
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->health_lock, NULL);
    pthread_cond_init(&s->freed, NULL);
    if (!s->pg && lock_sqlite(s, err, errlen)) goto fail;
    db_conn *db = first_conn(s, err, errlen);
    if (!db) goto fail;
    if (s->pg ? pg_migrate(db, err, errlen) : migrate(db_sqlite(db), err, errlen)) {
        db_close(db);
        goto fail;
    }
    s->nopen = 1;
    store_put(s, db);
    store_reserve(s); /* best effort: a full disk at start-up leaves it for later */
    return s;
fail:
    if (s->lockfd >= 0) close(s->lockfd);
    pthread_cond_destroy(&s->freed);
    pthread_mutex_destroy(&s->health_lock);
    pthread_mutex_destroy(&s->lock);
    free(s->path);
    free(s->shown);
    free(s);
    return NULL;
}

void store_close(store *s) {
    if (!s) return;
    for (int i = 0; i < s->npool; i++) db_close(s->pool[i]);
    db_close(s->health);
    if (s->lockfd >= 0) close(s->lockfd); /* after the last connection: the next server may start */
    pthread_cond_destroy(&s->freed);
    pthread_mutex_destroy(&s->health_lock);
    pthread_mutex_destroy(&s->lock);
    free(s->path);
    free(s->shown);
    free(s);
}

const char *store_path(const store *s) { return s->shown; }

const char *store_redact(const char *uri, char *out, size_t n) {
    char *r = redact(uri);
    snprintf(out, n, "%s", r ? r : "");
    free(r);
    return out;
}
const char *store_backend(const store *s) { return s->pg ? "postgresql" : "sqlite"; }
int store_is_pg(const store *s) { return s->pg; }

/* PostgreSQL: at most maxopen connections per server (the database's max_connections is
 * shared by every replica); a caller beyond it waits for one to come back. */
static int pg_reserve(store *s) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    long ms = env_long("FIRSTPASS_PG_POOL_WAIT_MS", 10000);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    int ok = 1;
    while (!s->npool && s->nopen >= s->maxopen && ok) ok = pthread_cond_timedwait(&s->freed, &s->lock, &until) == 0;
    if (!s->npool && s->nopen >= s->maxopen) return 0;
    if (!s->npool) s->nopen++;
    return 1;
}

db_conn *store_get(store *s) {
    pthread_mutex_lock(&s->lock);
    int may = !s->pg || pg_reserve(s);
    db_conn *db = may && s->npool ? s->pool[--s->npool] : NULL;
    pthread_mutex_unlock(&s->lock);
    if (db || !may) return db;
    char err[256];
    db = db_open(s->path, err, sizeof err);
    if (!db && s->pg) {
        char q[600];
        log_line("error", "database unreachable", "backend=postgresql error=%s", logfmt_quote(err, q, sizeof q));
        pthread_mutex_lock(&s->lock);
        s->nopen--;
        pthread_cond_signal(&s->freed);
        pthread_mutex_unlock(&s->lock);
    }
    return db;
}

void store_put(store *s, db_conn *db) {
    if (!db) return;
    /* A connection left inside a transaction by an error path must not poison the pool. */
    if (db_in_tx(db)) db_exec(db, "ROLLBACK");
    int keep = db_alive(db);
    pthread_mutex_lock(&s->lock);
    if (keep && s->npool < POOL_MAX) {
        s->pool[s->npool++] = db;
        db = NULL;
    } else if (s->pg) {
        s->nopen--;
    }
    pthread_cond_signal(&s->freed);
    pthread_mutex_unlock(&s->lock);
    db_close(db);
}

int store_fail(store *s, db_conn *db, int rc) {
    return rc == ERR_DB && s->pg && (!db || !db_alive(db)) ? ERR_DBDOWN : rc;
}

/* Why a connection of its own on PostgreSQL: /healthz took one from the pool, so when busy
 * requests held all FIRSTPASS_PG_POOL of them it waited FIRSTPASS_PG_POOL_WAIT_MS and
 * answered 503, and a load balancer dropped a replica that was only busy (issue 43). One
 * connection more per replica; pings take turns on it (a SELECT 1 each), and one found
 * dead is closed and opened again at the next ping. SQLite's pool never waits (a new
 * connection is opened when none is free). */
int store_ping(store *s) {
    if (!s->pg) {
        db_conn *c = store_get(s);
        if (!c) return ERR_DB;
        int rc = db_exec(c, "SELECT 1");
        store_put(s, c);
        return rc;
    }
    pthread_mutex_lock(&s->health_lock);
    char err[256];
    if (!s->health) s->health = db_open(s->path, err, sizeof err);
    int rc = s->health ? db_exec(s->health, "SELECT 1") : ERR_DB;
    if (s->health && !db_alive(s->health)) {
        db_close(s->health);
        s->health = NULL;
    }
    pthread_mutex_unlock(&s->health_lock);
    return rc;
}

struct sqlite3 *store_scratch_get(store *s, db_conn **hold) {
    *hold = NULL;
    if (!s->pg) {
        *hold = store_get(s);
        return *hold ? db_sqlite(*hold) : NULL;
    }
    /* Why the busy timeout: the analysis reads the scratch file it attaches from job
     * connections too (analyze.c); without one, its COMMIT while a job's statement held a
     * shared lock failed at once, "analysis failed: database is locked" (CI of stop 29:
     * 66 uploads on PostgreSQL under load; test_scratch_lock.py). */
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK ||
        sqlite3_busy_timeout(db, DB_BUSY_TIMEOUT_MS) != SQLITE_OK) {
        sqlite3_close(db);
        return NULL;
    }
    return db;
}

void store_scratch_put(store *s, struct sqlite3 *scratch, db_conn *hold) {
    if (hold) sqlite3_busy_timeout(db_sqlite(hold), DB_BUSY_TIMEOUT_MS); /* store_commit_session shortened it */
    if (hold) store_put(s, hold);
    else sqlite3_close(scratch);
}

int store_exclusive_begin(store *s, long long key, db_conn **held) {
    *held = NULL;
    if (!s->pg) return 1;
    db_conn *c = store_get(s);
    if (!c) return ERR_DB;
    char sql[64];
    snprintf(sql, sizeof sql, "SELECT pg_try_advisory_lock(%lld)", key);
    long long got = one_int(c, sql);
    if (got == 1) {
        *held = c;
        return 1;
    }
    store_put(s, c);
    return got == 0 ? 0 : ERR_DB;
}

void store_exclusive_end(store *s, long long key, db_conn *held) {
    if (!held) return;
    char sql[64];
    snprintf(sql, sizeof sql, "SELECT pg_advisory_unlock(%lld)", key);
    db_exec(held, sql);
    store_put(s, held);
}

/* ---- the write generation ---- */

/* On PostgreSQL the generations are the row of fp_generation, bumped inside each write
 * transaction (as its last statement, so its row lock is held for a moment only): every
 * replica reads the same counter, and a reader never sees a bump before the write it
 * stands for has committed. A read that fails answers a number never answered before, so
 * no cached reply is served on it. */
static unsigned long pg_gen(store *s, const char *col) {
    static _Atomic unsigned long miss = 1UL << 62;
    db_conn *c = store_get(s);
    long long v = -1;
    if (c) {
        v = one_int(c, col[0] == 'g' ? "SELECT gen FROM fp_generation" : "SELECT lgen FROM fp_generation");
        store_put(s, c);
    }
    return v < 0 ? miss++ : (unsigned long)v;
}

static int exec_one(store *s, const char *sql, long long id, const char *a, const char *b, int *changes) {
    db_conn *db = store_get(s);
    if (!db) return store_fail(s, NULL, ERR_DB);
    int rc = s->pg ? db_begin_write(db) : 0;
    db_stmt *st = rc ? NULL : db_prepare(db, sql);
    if (!st) rc = ERR_DB;
    if (!rc) {
        db_bind_int64(st, 1, id);
        if (a) db_bind_text(st, 2, a);
        if (b) db_bind_text(st, 3, b);
        if (b) db_bind_int64(st, 4, (long long)time(NULL));
        /* a foreign key that fails names a session deleted since the caller looked (a
         * report edit racing a DELETE): the 404 it is, not a 500 (test_delete_races.py) */
        rc = db_step(st) == DB_DONE ? 0 : db_fk_violation(db) ? ERR_NOTFOUND : db_sqlite(db) ? store_errcode(db_sqlite(db)) : ERR_DB;
        if (changes) *changes = (int)db_changes(db);
    }
    db_finalize(st);
    if (s->pg && !rc) rc = db_exec(db, "UPDATE fp_generation SET gen = gen + 1, lgen = lgen + 1");
    if (s->pg && !rc) rc = db_exec(db, "COMMIT");
    rc = store_fail(s, db, rc);
    if (!rc && !s->pg) {
        s->gen++; /* after the commit (autocommit), never before: see store_generation */
        s->lgen++;
    }
    store_put(s, db); /* rolls back what failed */
    return rc;
}

unsigned long store_generation(store *s) { return s->pg ? pg_gen(s, "gen") : s->gen; }
unsigned long store_list_generation(store *s) { return s->pg ? pg_gen(s, "lgen") : s->lgen; }
/* PostgreSQL: the commit bumped fp_generation.lgen itself (commit.c). */
void store_note_upload(store *s) {
    if (!s->pg) s->lgen++;
}

void store_note_write(store *s) {
    if (s->pg) return;
    s->gen++;
    s->lgen++;
}

int store_errcode(sqlite3 *db) { return (sqlite3_errcode(db) & 0xff) == SQLITE_FULL ? ERR_FULL : ERR_DB; }

/* Why the wait is cut short: a TRUNCATE checkpoint takes the write lock, then waits (the busy
 * handler) for every reader still on an older snapshot; with the connection's 30 s busy
 * timeout one long reader held off every writer for 30 s (issue 43). A checkpoint that
 * cannot finish in STORE_CHECKPOINT_WAIT_MS gives up: what it could copy is copied, the rest
 * waits for the next one, and journal_size_limit cuts the file back when the WAL restarts. */
int store_wal_truncate(sqlite3 *db) {
    if (!db) return 0;
    sqlite3_busy_timeout(db, STORE_CHECKPOINT_WAIT_MS);
    int rc = sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
    sqlite3_busy_timeout(db, DB_BUSY_TIMEOUT_MS);
    return rc == SQLITE_OK ? 0 : rc == SQLITE_BUSY ? ERR_CONFLICT : store_errcode(db);
}

/* ---- the reserve: room for deletes on a full disk ---- */

/* A delete writes its pages to the WAL before any space comes back, so on a full disk it
 * failed too (500) and space could not be freed through the API (issue 22). The server
 * keeps STORE_RESERVE_BYTES allocated in "<db>-reserve"; a delete that finds the disk full
 * gives it up and tries again, and it is taken back once there is room. */
static void reserve_path(const store *s, char *out, size_t n) { snprintf(out, n, "%s-reserve", s->path); }

int store_uri_is_pg(const char *uri) { return db_uri_is_pg(uri); }

int store_reserve(store *s) {
    if (s->pg) return 0; /* the database's disk is PostgreSQL's to manage, not a file here */
    char p[4200];
    reserve_path(s, p, sizeof p);
    struct stat st;
    if (!stat(p, &st) && st.st_size >= (off_t)STORE_RESERVE_BYTES) return 0;
    /* Taken only with 1 MiB left beside it, so taking it never fills the disk itself. */
    struct statvfs vs;
    if (!statvfs(s->path, &vs) && (unsigned long long)vs.f_bavail * vs.f_frsize < STORE_RESERVE_BYTES + (1ull << 20)) return ERR_FULL;
    int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return ERR_IO;
    int rc = posix_fallocate(fd, 0, (off_t)STORE_RESERVE_BYTES);
    close(fd);
    if (rc) unlink(p); /* no room yet: a partial reserve would only take space */
    return rc ? ERR_FULL : 0;
}

static int release_reserve(store *s) {
    if (s->pg) return -1;
    char p[4200];
    reserve_path(s, p, sizeof p);
    return unlink(p) ? -1 : 0;
}

int store_delete_session(store *s, long long id) {
    int changes = 0;
    int rc = exec_one(s, "DELETE FROM sessions WHERE id = ?1", id, NULL, NULL, &changes);
    if (rc == ERR_FULL && !release_reserve(s)) rc = exec_one(s, "DELETE FROM sessions WHERE id = ?1", id, NULL, NULL, &changes);
    if (!rc && changes) {
        /* the delete's WAL frames into the database (pages it freed are reused in place),
         * then the WAL emptied: its space comes back, and the reserve is taken again */
        db_conn *c = s->pg ? NULL : store_get(s);
        if (c) {
            store_wal_truncate(db_sqlite(c));
            store_put(s, c);
        }
        store_reserve(s);
    }
    return rc ? rc : changes ? 0 : ERR_NOTFOUND;
}

int store_set_report_line(store *s, long long id, const char *line, const char *text) {
    if (text && *text)
        return exec_one(s, "INSERT INTO report_edits(session_id, line, text, edited_at) VALUES (?1, ?2, ?3, ?4) "
                           "ON CONFLICT(session_id, line) DO UPDATE SET text = excluded.text, edited_at = excluded.edited_at",
                        id, line, text, NULL);
    return exec_one(s, "DELETE FROM report_edits WHERE session_id = ?1 AND line = ?2", id, line, NULL, NULL);
}

long long store_size_bytes(store *s) {
    if (s->pg) {
        db_conn *c = store_get(s);
        long long v = c ? one_int(c, "SELECT pg_database_size(current_database())") : -1;
        store_put(s, c);
        return v < 0 ? 0 : v;
    }
    struct stat st;
    long long total = 0;
    char wal[4096];
    if (stat(s->path, &st) == 0) total += st.st_size;
    snprintf(wal, sizeof wal, "%s-wal", s->path);
    if (stat(wal, &st) == 0) total += st.st_size;
    return total;
}

int store_usage_get(store *s, store_usage *u) {
    db_conn *db = store_get(s);
    if (!db) return store_fail(s, NULL, ERR_DB);
    /* One read transaction, so that the four numbers describe one snapshot. */
    int rc = db_exec(db, "BEGIN") ? ERR_DB : 0;
    if (!rc && s->pg) {
        u->sessions = one_int(db, "SELECT count(*) FROM sessions");
        u->page_size = one_int(db, "SELECT current_setting('block_size')::bigint");
        long long bytes = one_int(db, "SELECT pg_database_size(current_database())");
        u->pages = u->page_size > 0 && bytes >= 0 ? bytes / u->page_size : -1;
        u->free_pages = 0;
    } else if (!rc) {
        u->sessions = one_int(db, "SELECT count(*) FROM sessions");
        u->pages = one_int(db, "PRAGMA page_count");
        u->free_pages = one_int(db, "PRAGMA freelist_count");
        u->page_size = one_int(db, "PRAGMA page_size");
    }
    if (!rc && (u->sessions < 0 || u->pages < 0 || u->free_pages < 0 || u->page_size < 0)) rc = ERR_DB;
    if (!rc) db_exec(db, "COMMIT");
    rc = store_fail(s, db, rc);
    store_put(s, db);
    return rc;
}
