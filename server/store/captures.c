/* captures.c: serving agents, their targets and captures (captures.h). Owns the SQL of the
 * agents, targets and captures tables; reads the labels table for a capture's sessions and
 * writes nothing else. Times are unix seconds of the server's clock. */
#include "store/captures.h"

#include <nettle/sha2.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "lib/timefmt.h"

#define IN_FLIGHT "('queued', 'running', 'flushing')"
#define NAME_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"

int captures_name_ok(const char *s) {
    size_t n = strspn(s, NAME_CHARS);
    return n > 0 && n <= CAP_NAME_MAX && s[n] == '\0';
}

int captures_name_repair(const char *in, size_t n, char out[CAP_NAME_MAX + 1]) {
    if (!n) return -1;
    for (size_t i = 0; i < n; i++)
        if (!in[i] || !strchr(NAME_CHARS, in[i])) return -1;
    if (n <= CAP_NAME_MAX) {
        memcpy(out, in, n);
        out[n] = '\0';
        return 0;
    }
    struct sha256_ctx c;
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_init(&c);
    sha256_update(&c, n, (const uint8_t *)in);
    sha256_digest(&c, sizeof d, d);
    size_t keep = CAP_NAME_MAX - 9;
    memcpy(out, in, keep);
    snprintf(out + keep, 10, "-%02x%02x%02x%02x", d[0], d[1], d[2], d[3]);
    return 0;
}

/* Runs sql with text and integer parameters: "t" binds the next const char *, "i" the next
 * long long, in order from ?1. 0 or ERR_DB. */
static int execf(db_conn *db, const char *sql, const char *types, ...) {
    db_stmt *s = db_prepare(db, sql);
    if (!s) return ERR_DB;
    va_list ap;
    va_start(ap, types);
    for (int i = 0; types[i]; i++) {
        if (types[i] == 't') db_bind_text(s, i + 1, va_arg(ap, const char *));
        else db_bind_int64(s, i + 1, va_arg(ap, long long));
    }
    va_end(ap);
    int st = db_step(s);
    db_finalize(s);
    return st == DB_DONE || st == DB_ROW ? 0 : ERR_DB;
}

static json_t *opt_int(db_stmt *s, int i) { return db_column_is_null(s, i) ? json_null() : json_integer(db_column_int64(s, i)); }
static json_t *opt_str(db_stmt *s, int i) {
    const char *t = (const char *)db_column_text(s, i);
    return t ? json_string(t) : json_null();
}
static json_t *opt_time(db_stmt *s, int i) {
    char buf[TIMEFMT_LEN];
    return db_column_is_null(s, i) ? json_null() : json_string(timefmt_utc(db_column_int64(s, i), 0, buf));
}

#define CAP_COLS "id, target, agent, engine, seconds, steps, options, status, error, created_at, claimed_at, updated_at, finished_at"
#define CAP_COLS_C "c.id, c.target, c.agent, c.engine, c.seconds, c.steps, c.options, c.status, c.error, c.created_at, c.claimed_at," \
                   " c.updated_at, c.finished_at"

/* The capture of the row of s whose CAP_COLS start at column k, without its sessions: new
 * reference. */
static json_t *capture_obj(db_stmt *s, int k, long long now) {
    long long id = db_column_int64(s, k), created = db_column_int64(s, k + 9);
    json_error_t je;
    const char *opts = (const char *)db_column_text(s, k + 6);
    json_t *o = json_loads(opts ? opts : "{}", 0, &je);
    long long end = db_column_is_null(s, k + 12) ? now : db_column_int64(s, k + 12);
    char job[48];
    snprintf(job, sizeof job, "capture-%lld", id);
    return json_pack("{s:I,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:I,s:s}", "id", (json_int_t)id, "target", opt_str(s, k + 1),
                     "agent", opt_str(s, k + 2), "engine", opt_str(s, k + 3), "seconds", opt_int(s, k + 4), "steps", opt_int(s, k + 5),
                     "options", o ? o : json_object(), "status", opt_str(s, k + 7), "error", opt_str(s, k + 8), "created_at",
                     opt_time(s, k + 9), "claimed_at", opt_time(s, k + 10), "updated_at", opt_time(s, k + 11), "finished_at",
                     opt_time(s, k + 12), "elapsed_s", (json_int_t)(end > created ? end - created : 0), "job", job);
}

/* The capture of the current row of s (CAP_COLS), with its sessions: new reference. */
static json_t *capture_json(db_conn *db, db_stmt *s, long long now) {
    long long id = db_column_int64(s, 0);
    json_t *c = capture_obj(s, 0, now);
    /* its sessions: whatever carries its label, whoever sent it (the spool too), read now */
    json_t *ids = json_array();
    char idtext[32];
    snprintf(idtext, sizeof idtext, "%lld", id);
    db_stmt *q = db_prepare(db, "SELECT session_id FROM labels WHERE key = 'capture' AND value = ?1 ORDER BY session_id");
    if (q) {
        db_bind_text(q, 1, idtext);
        while (db_step(q) == DB_ROW) json_array_append_new(ids, json_integer(db_column_int64(q, 0)));
        db_finalize(q);
    }
    json_object_set_new(c, "sessions", ids);
    return c;
}

int captures_get(db_conn *db, long long id, long long now, json_t **out) {
    db_stmt *s = db_prepare(db, "SELECT " CAP_COLS " FROM captures WHERE id = ?1");
    if (!s) return ERR_DB;
    db_bind_int64(s, 1, id);
    int st = db_step(s), rc = 0;
    if (st == DB_ROW) *out = capture_json(db, s, now);
    else rc = st == DB_DONE ? ERR_NOTFOUND : ERR_DB;
    db_finalize(s);
    return rc;
}

int captures_list(db_conn *db, const char *target, long long limit, long long now, json_t **out) {
    db_stmt *s = target ? db_prepare(db, "SELECT " CAP_COLS " FROM captures WHERE target = ?2 ORDER BY id DESC LIMIT ?1")
                        : db_prepare(db, "SELECT " CAP_COLS " FROM captures ORDER BY id DESC LIMIT ?1");
    if (!s) return ERR_DB;
    db_bind_int64(s, 1, limit);
    if (target) db_bind_text(s, 2, target);
    json_t *a = json_array();
    int st;
    while ((st = db_step(s)) == DB_ROW) json_array_append_new(a, capture_json(db, s, now));
    db_finalize(s);
    if (st != DB_DONE) {
        json_decref(a);
        return ERR_DB;
    }
    *out = json_pack("{s:o}", "captures", a);
    return 0;
}

/* Forgets the agents last heard from before `before`, and their targets (their captures
 * stay: history). A read first: the common case (nobody to forget) writes nothing. */
static int forget_agents(db_conn *db, long long before) {
    db_stmt *s = db_prepare(db, "SELECT 1 FROM agents WHERE last_seen < ?1 LIMIT 1");
    if (!s) return ERR_DB;
    db_bind_int64(s, 1, before);
    int st = db_step(s);
    db_finalize(s);
    if (st == DB_DONE) return 0;
    if (st != DB_ROW) return ERR_DB;
    /* the targets first, whatever the connection's foreign keys say */
    int rc = execf(db, "DELETE FROM targets WHERE agent IN (SELECT name FROM agents WHERE last_seen < ?1)", "i", before);
    return rc ? rc : execf(db, "DELETE FROM agents WHERE last_seen < ?1", "i", before);
}

static int fail_silent(db_conn *db, long long now, long long agent_timeout_s);

int captures_expire(db_conn *db, long long now, const cap_limits *lim) {
    int rc = fail_silent(db, now, lim->agent_timeout_s);
    /* never before its captures failed: an agent is forgotten no sooner than it times out */
    long long keep = lim->agent_expiry_s > lim->agent_timeout_s ? lim->agent_expiry_s : lim->agent_timeout_s;
    if (!rc && lim->agent_expiry_s > 0) rc = forget_agents(db, now - keep);
    return rc;
}

static int fail_silent(db_conn *db, long long now, long long agent_timeout_s) {
    /* A read first: the common case (nobody gone) writes nothing. */
    db_stmt *s = db_prepare(db, "SELECT 1 FROM captures c JOIN agents a ON a.name = c.agent WHERE c.status IN " IN_FLIGHT
                                " AND a.last_seen < ?1 LIMIT 1");
    if (!s) return ERR_DB;
    db_bind_int64(s, 1, now - agent_timeout_s);
    int st = db_step(s);
    db_finalize(s);
    if (st == DB_DONE) return 0;
    if (st != DB_ROW) return ERR_DB;
    char secs[32];
    snprintf(secs, sizeof secs, "%lld", agent_timeout_s);
    return execf(db,
                 "UPDATE captures SET status = 'failed', finished_at = ?1, updated_at = ?1,"
                 " error = 'the agent ' || agent || ' has not been heard from for over ' || ?2 || ' s (--agent-timeout)'"
                 " WHERE status IN " IN_FLIGHT " AND agent IN (SELECT name FROM agents WHERE last_seen < ?3)",
                 "iti", now, secs, now - agent_timeout_s);
}

/* One integer of a statement with text and integer parameters (execf's types), or -1. */
static long long count_of(db_conn *db, const char *sql, const char *p1, long long p2) {
    db_stmt *s = db_prepare(db, sql);
    if (!s) return -1;
    if (p1) db_bind_text(s, 1, p1);
    if (p2 >= 0) db_bind_int64(s, p1 ? 2 : 1, p2);
    long long v = db_step(s) == DB_ROW ? db_column_int64(s, 0) : -1;
    db_finalize(s);
    return v;
}

/* Whether agent's name is free for instance: ERR_CONFLICT (why) when another instance holds
 * it and was heard from within the timeout; *exists when the agent is registered. */
static int name_free(db_conn *db, const char *agent, const char *instance, long long now, const cap_limits *lim, int *exists, char *why,
                     size_t whylen) {
    db_stmt *s = db_prepare2(db, "SELECT instance, last_seen FROM agents WHERE name = ?1",
                             "SELECT instance, last_seen FROM agents WHERE name = ?1 FOR UPDATE");
    if (!s) return ERR_DB;
    db_bind_text(s, 1, agent);
    int st = db_step(s), rc = st == DB_ROW || st == DB_DONE ? 0 : ERR_DB;
    *exists = st == DB_ROW;
    if (st == DB_ROW) {
        const char *held = (const char *)db_column_text(s, 0);
        long long seen = db_column_int64(s, 1);
        char at[TIMEFMT_LEN];
        if (held && *held && strcmp(held, instance) && seen >= now - lim->agent_timeout_s) {
            rc = ERR_CONFLICT;
            snprintf(why, whylen, "agent %s is registered by instance %s, heard from %lld s ago (%s): another process with this name "
                                  "would take its targets; give each agent a name of its own (--agent), or register again once it "
                                  "has been silent for --agent-timeout (%lld s)", agent, held, now - seen, timefmt_utc(seen, 0, at),
                     lim->agent_timeout_s);
        }
    }
    db_finalize(s);
    return rc;
}

/* Whether target name is free for agent: ERR_CONFLICT (why) when another agent holds it and
 * was heard from within the timeout; *taken 1 when another (silent) agent held it. */
static int target_free(db_conn *db, const char *name, const char *agent, long long now, const cap_limits *lim, int *taken, char *why,
                       size_t whylen) {
    db_stmt *s = db_prepare(db, "SELECT t.agent, a.instance, a.last_seen FROM targets t JOIN agents a ON a.name = t.agent WHERE t.name = ?1");
    if (!s) return ERR_DB;
    db_bind_text(s, 1, name);
    int st = db_step(s), rc = st == DB_ROW || st == DB_DONE ? 0 : ERR_DB;
    *taken = 0;
    if (st == DB_ROW && strcmp((const char *)db_column_text(s, 0), agent)) {
        long long seen = db_column_int64(s, 2);
        const char *inst = (const char *)db_column_text(s, 1);
        char at[TIMEFMT_LEN];
        *taken = 1;
        if (seen >= now - lim->agent_timeout_s) {
            rc = ERR_CONFLICT;
            snprintf(why, whylen, "target %s is agent %s's%s%s, heard from %lld s ago (%s): give this engine a target name of its own "
                                  "(--target ...,name=NAME)", name, (const char *)db_column_text(s, 0), inst && *inst ? ", instance " : "",
                     inst ? inst : "", now - seen, timefmt_utc(seen, 0, at));
        }
    }
    db_finalize(s);
    return rc;
}

/* The checks of a registration (captures.h): 0, ERR_CONFLICT, ERR_FULL (why), ERR_DB. */
static int may_register(db_conn *db, const char *agent, const char *instance, const cap_target *t, size_t n, long long now,
                        const cap_limits *lim, char *why, size_t whylen) {
    int exists = 0, rc = name_free(db, agent, instance, now, lim, &exists, why, whylen);
    if (!rc && !exists && lim->max_agents > 0) {
        long long agents = count_of(db, "SELECT COUNT(*) FROM agents", NULL, -1);
        if (agents < 0) return ERR_DB;
        if (agents >= lim->max_agents) {
            snprintf(why, whylen, "%lld agents are registered, the most --max-agents allows; an agent silent for --agent-expiry "
                                  "(%lld s) is forgotten", agents, lim->agent_expiry_s);
            return ERR_FULL;
        }
    }
    long long taken = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        int tk = 0;
        rc = target_free(db, t[i].name, agent, now, lim, &tk, why, whylen);
        taken += tk;
    }
    if (!rc && lim->max_targets > 0) {
        long long others = count_of(db, "SELECT COUNT(*) FROM targets WHERE agent != ?1", agent, -1);
        if (others < 0) return ERR_DB;
        if (others - taken + (long long)n > lim->max_targets) {
            snprintf(why, whylen, "%lld targets of other agents are registered; %zu more would pass --max-targets (%lld)", others - taken, n,
                     lim->max_targets);
            return ERR_FULL;
        }
    }
    return rc;
}

int captures_register(db_conn *db, const char *agent, const char *instance, const char *host, const char *version, const cap_target *t,
                      size_t n, long long now, const cap_limits *lim, json_t **out, char *why, size_t whylen) {
    if (db_begin_write(db) != 0) return ERR_DB;
    int rc = may_register(db, agent, instance, t, n, now, lim, why, whylen);
    if (!rc)
        rc = execf(db,
                   "INSERT INTO agents(name, host, version, registered_at, last_seen, instance) VALUES (?1, ?2, ?3, ?4, ?4, ?5)"
                   " ON CONFLICT(name) DO UPDATE SET host = excluded.host, version = excluded.version,"
                   " registered_at = excluded.registered_at, last_seen = excluded.last_seen, instance = excluded.instance",
                   "tttit", agent, host, version, now, instance);
    /* A registration is an agent's start: what it was capturing is lost with its old process. */
    if (!rc)
        rc = execf(db,
                   "UPDATE captures SET status = 'failed', finished_at = ?1, updated_at = ?1,"
                   " error = 'the agent ' || agent || ' restarted during the capture' WHERE agent = ?2 AND status IN " IN_FLIGHT,
                   "it", now, agent);
    if (!rc) rc = execf(db, "DELETE FROM targets WHERE agent = ?1", "t", agent);
    json_t *names = json_array();
    for (size_t i = 0; !rc && i < n; i++) {
        rc = execf(db,
                   "INSERT INTO targets(name, agent, engine, url, dir, registered_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
                   " ON CONFLICT(name) DO UPDATE SET agent = excluded.agent, engine = excluded.engine, url = excluded.url,"
                   " dir = excluded.dir, registered_at = excluded.registered_at",
                   "ttttti", t[i].name, agent, t[i].engine, t[i].url, t[i].dir, now);
        json_array_append_new(names, json_string(t[i].name));
    }
    if (!rc && db_exec(db, "COMMIT") != 0) rc = ERR_DB;
    if (rc) {
        db_exec(db, "ROLLBACK");
        json_decref(names);
        return rc;
    }
    *out = json_pack("{s:s,s:s,s:o}", "agent", agent, "instance", instance, "targets", names);
    return 0;
}

/* Keeps the newest keep finished captures (uploaded, failed or cancelled) and forgets older ones, so
 * that the history stays bounded however many targets come and go (a Kubernetes pod is a
 * new target; issue 50). In the creating transaction: each creation prunes at most the few
 * rows past the bound. Reads the newest keep finished ids by the primary key. */
static int forget_captures(db_conn *db, long long keep) {
    if (keep <= 0) return 0;
    return execf(db,
                 "DELETE FROM captures WHERE status NOT IN " IN_FLIGHT " AND id < (SELECT MIN(id) FROM"
                 " (SELECT id FROM captures WHERE status NOT IN " IN_FLIGHT " ORDER BY id DESC LIMIT ?1) AS newest)",
                 "i", keep);
}

int captures_create(db_conn *db, const char *target, long long seconds, long long steps, const json_t *options, const cap_limits *lim,
                    long long now, json_t **out, char *why, size_t whylen) {
    char *opts = options ? json_dumps(options, JSON_COMPACT | JSON_SORT_KEYS) : strdup("{}");
    if (!opts) return ERR_NOMEM;
    int rc = captures_expire(db, now, lim);
    if (rc || db_begin_write(db) != 0) {
        free(opts);
        return rc ? rc : ERR_DB;
    }
    /* The target's row is locked (PostgreSQL: FOR UPDATE; SQLite: the write transaction), so
     * that the checks below and the insert are one step for every server on the database. */
    db_stmt *s = db_prepare2(db, "SELECT agent, engine FROM targets WHERE name = ?1", "SELECT agent, engine FROM targets WHERE name = ?1 FOR UPDATE");
    char agent[CAP_NAME_MAX + 1] = "", engine[16] = "";
    long long busy = 0, recent = 0, oldest = 0;
    if (!s) rc = ERR_DB;
    else {
        db_bind_text(s, 1, target);
        int st = db_step(s);
        if (st == DB_ROW) {
            snprintf(agent, sizeof agent, "%s", (const char *)db_column_text(s, 0));
            snprintf(engine, sizeof engine, "%s", (const char *)db_column_text(s, 1));
        }
        rc = st == DB_ROW ? 0 : st == DB_DONE ? ERR_NOTFOUND : ERR_DB;
        db_finalize(s);
    }
    if (rc == ERR_NOTFOUND) snprintf(why, whylen, "no registered target '%s' (GET /api/v1/targets lists them)", target);
    /* What each engine's endpoint can be told: SGLang's /start_profile takes num_steps,
     * record_shapes and with_stack; vLLM's takes no body (its profiler is set up by the
     * engine's environment), and a torch loop speaks vLLM's. */
    if (!rc && steps > 0 && strcmp(engine, "sglang")) {
        rc = ERR_PARAM;
        snprintf(why, whylen, "target '%s' is %s: its /start_profile takes no step count (vLLM stops after VLLM_PROFILER_MAX_ITERS, "
                              "set on the engine); ask for seconds", target, engine);
    }
    if (!rc && options && json_object_size(options) && strcmp(engine, "sglang")) {
        rc = ERR_PARAM;
        snprintf(why, whylen, "target '%s' is %s: record_shapes and with_stack are the engine's environment "
                              "(VLLM_TORCH_PROFILER_RECORD_SHAPES, VLLM_TORCH_PROFILER_WITH_STACK), not a capture's options", target, engine);
    }
    if (!rc) {
        s = db_prepare(db, "SELECT id FROM captures WHERE target = ?1 AND status IN " IN_FLIGHT);
        if (!s) rc = ERR_DB;
        else {
            db_bind_text(s, 1, target);
            int st = db_step(s);
            if (st == DB_ROW) busy = db_column_int64(s, 0);
            else if (st != DB_DONE) rc = ERR_DB;
            db_finalize(s);
        }
    }
    if (!rc && busy) {
        rc = ERR_CONFLICT;
        snprintf(why, whylen, "target '%s' has capture %lld in flight: one capture of a target at a time", target, busy);
    }
    if (!rc) {
        s = db_prepare(db, "SELECT COUNT(*), MIN(created_at) FROM captures WHERE target = ?1 AND created_at > ?2");
        if (!s) rc = ERR_DB;
        else {
            db_bind_text(s, 1, target);
            db_bind_int64(s, 2, now - 3600);
            if (db_step(s) == DB_ROW) {
                recent = db_column_int64(s, 0);
                oldest = db_column_int64(s, 1);
            } else {
                rc = ERR_DB;
            }
            db_finalize(s);
        }
    }
    if (!rc && recent >= lim->per_hour) {
        rc = ERR_RATE;
        snprintf(why, whylen, "target '%s' had %lld captures in the last hour, the most --captures-per-hour allows; the next may start in %lld s",
                 target, recent, oldest + 3600 - now + 1);
    }
    long long id = 0;
    if (!rc) {
        s = db_prepare(db,
                       "INSERT INTO captures(target, agent, engine, seconds, steps, options, status, created_at, updated_at)"
                       " VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'queued', ?7, ?7) RETURNING id");
        if (!s) rc = ERR_DB;
        else {
            db_bind_text(s, 1, target);
            db_bind_text(s, 2, agent);
            db_bind_text(s, 3, engine);
            if (seconds > 0) db_bind_int64(s, 4, seconds);
            if (steps > 0) db_bind_int64(s, 5, steps);
            db_bind_text(s, 6, opts);
            db_bind_int64(s, 7, now);
            if (db_step(s) == DB_ROW) id = db_column_int64(s, 0);
            else rc = ERR_DB;
            db_finalize(s);
        }
    }
    free(opts);
    if (!rc) rc = forget_captures(db, lim->max_captures);
    if (!rc && db_exec(db, "COMMIT") != 0) rc = ERR_DB;
    if (rc) {
        db_exec(db, "ROLLBACK");
        return rc;
    }
    return captures_get(db, id, now, out);
}

/* A capture a poll may take: queued, and never claimed or claimed before ?2 and still not
 * confirmed (a status report moves it out of 'queued'). */
#define CLAIMABLE "status = 'queued' AND (claimed_at IS NULL OR claimed_at < ?2)"

/* 1 when the statement (?1 the agent, ?2 an integer) finds a row, 0 when none, ERR_DB. */
static int any_row(db_conn *db, const char *sql, const char *agent, long long p2) {
    db_stmt *s = db_prepare(db, sql);
    if (!s) return ERR_DB;
    db_bind_text(s, 1, agent);
    db_bind_int64(s, 2, p2);
    int st = db_step(s);
    db_finalize(s);
    return st == DB_ROW ? 1 : st == DB_DONE ? 0 : ERR_DB;
}

/* A cancelled capture that a poll had handed out (its agent may be running it), cancelled at
 * ?2 or later. */
#define CANCELLED_CLAIMED "status = 'cancelled' AND claimed_at IS NOT NULL AND finished_at >= ?2"

int captures_waiting(db_conn *db, const char *agent, long long now, long long claim_timeout_s, long long since) {
    int rc = any_row(db, "SELECT 1 FROM captures WHERE agent = ?1 AND " CLAIMABLE " LIMIT 1", agent, now - claim_timeout_s);
    if (rc) return rc;
    rc = any_row(db, "SELECT 1 FROM captures WHERE agent = ?1 AND " CANCELLED_CLAIMED " LIMIT 1", agent, since);
    return rc == 1 ? 2 : rc;
}

int captures_cancelled(db_conn *db, const char *agent, long long since, json_t **out) {
    db_stmt *s = db_prepare(db, "SELECT id FROM captures WHERE agent = ?1 AND " CANCELLED_CLAIMED " ORDER BY id");
    if (!s) return ERR_DB;
    db_bind_text(s, 1, agent);
    db_bind_int64(s, 2, since);
    json_t *ids = json_array();
    int st;
    while ((st = db_step(s)) == DB_ROW) json_array_append_new(ids, json_integer(db_column_int64(s, 0)));
    db_finalize(s);
    if (st != DB_DONE) {
        json_decref(ids);
        return ERR_DB;
    }
    *out = ids;
    return 0;
}

int captures_claim(db_conn *db, const char *agent, long long now, long long claim_timeout_s, int touch_only, json_t **out) {
    *out = NULL;
    if (execf(db, "UPDATE agents SET last_seen = ?1 WHERE name = ?2", "it", now, agent)) return ERR_DB;
    if (db_changes(db) == 0) return ERR_NOTFOUND;
    if (touch_only) return 0;
    /* Oldest first. The claim is an UPDATE that holds only while the capture is still to be
     * claimed, so that of two polls (two servers) one gets it; the other finds the next, or
     * none. A claim older than the timeout that no status report confirmed is taken again:
     * the poll that took it may have died with its connection (issue 50). */
    for (int tries = 0; tries < 4; tries++) {
        db_stmt *s = db_prepare(db, "SELECT id FROM captures WHERE agent = ?1 AND " CLAIMABLE " ORDER BY id LIMIT 1");
        if (!s) return ERR_DB;
        db_bind_text(s, 1, agent);
        db_bind_int64(s, 2, now - claim_timeout_s);
        int st = db_step(s);
        long long id = st == DB_ROW ? db_column_int64(s, 0) : 0;
        db_finalize(s);
        if (st == DB_DONE) return 0;
        if (st != DB_ROW) return ERR_DB;
        if (execf(db, "UPDATE captures SET claimed_at = ?3, updated_at = ?3 WHERE id = ?1 AND " CLAIMABLE, "iii", id, now - claim_timeout_s, now))
            return ERR_DB;
        if (db_changes(db) == 1) return captures_get(db, id, now, out);
    }
    return 0;
}

int captures_cancel(db_conn *db, long long id, long long now, json_t **out, char *why, size_t whylen) {
    if (db_begin_write(db) != 0) return ERR_DB;
    db_stmt *s = db_prepare2(db, "SELECT status FROM captures WHERE id = ?1", "SELECT status FROM captures WHERE id = ?1 FOR UPDATE");
    char was[16] = "";
    int rc = s ? 0 : ERR_DB;
    if (s) {
        db_bind_int64(s, 1, id);
        int st = db_step(s);
        if (st == DB_ROW) snprintf(was, sizeof was, "%s", (const char *)db_column_text(s, 0));
        rc = st == DB_ROW ? 0 : st == DB_DONE ? ERR_NOTFOUND : ERR_DB;
        db_finalize(s);
    }
    if (!rc && strcmp(was, "queued") && strcmp(was, "running") && strcmp(was, "flushing")) {
        rc = ERR_CONFLICT;
        snprintf(why, whylen, "capture %lld is %s already: only a capture in flight (queued, running, flushing) can be cancelled", id, was);
    }
    char msg[96];
    snprintf(msg, sizeof msg, "cancelled (POST /api/v1/captures/%lld/cancel)", id);
    if (!rc)
        rc = execf(db, "UPDATE captures SET status = 'cancelled', error = ?3, updated_at = ?2, finished_at = ?2 WHERE id = ?1 AND status IN " IN_FLIGHT,
                   "iit", id, now, msg);
    if (!rc && db_exec(db, "COMMIT") != 0) rc = ERR_DB;
    if (rc) {
        db_exec(db, "ROLLBACK");
        return rc;
    }
    return captures_get(db, id, now, out);
}

/* The order of the statuses: a report never moves a capture back. The final ones (uploaded,
 * failed, cancelled) share the last rank. */
static int status_rank(const char *s) {
    static const char *const order[] = {"queued", "running", "flushing", "uploaded", "failed", "cancelled"};
    for (int i = 0; i < 6; i++)
        if (!strcmp(s, order[i])) return i < 4 ? i : 3;
    return -1;
}

int captures_status(db_conn *db, long long id, const char *agent, const char *status, const char *error, long long now, json_t **out,
                    char *why, size_t whylen) {
    if (db_begin_write(db) != 0) return ERR_DB;
    db_stmt *s = db_prepare(db, "SELECT agent, status FROM captures WHERE id = ?1");
    int rc = 0;
    char owner[CAP_NAME_MAX + 1] = "", was[16] = "";
    if (!s) rc = ERR_DB;
    else {
        db_bind_int64(s, 1, id);
        int st = db_step(s);
        if (st == DB_ROW) {
            snprintf(owner, sizeof owner, "%s", (const char *)db_column_text(s, 0));
            snprintf(was, sizeof was, "%s", (const char *)db_column_text(s, 1));
        }
        rc = st == DB_ROW ? 0 : st == DB_DONE ? ERR_NOTFOUND : ERR_DB;
        db_finalize(s);
    }
    int terminal = !strcmp(status, "uploaded") || !strcmp(status, "failed");
    /* cancelled: the report changes nothing, and its reply tells the agent to stop */
    int cancelled = !strcmp(was, "cancelled");
    if (!rc && strcmp(owner, agent)) {
        rc = ERR_CONFLICT;
        snprintf(why, whylen, "capture %lld is agent %s's, not %s's", id, owner, agent);
    } else if (!rc && !cancelled && strcmp(was, status) && (status_rank(was) >= 3 || status_rank(status) < status_rank(was))) {
        rc = ERR_CONFLICT;
        snprintf(why, whylen, "capture %lld is %s already; it cannot become %s", id, was, status);
    }
    /* the same status again (a retried report) changes nothing but the agent's last contact */
    if (!rc && !cancelled && strcmp(was, status))
        rc = execf(db, terminal ? "UPDATE captures SET status = ?1, error = ?2, updated_at = ?3, finished_at = ?3, claimed_at = COALESCE(claimed_at, ?3) WHERE id = ?4"
                                : "UPDATE captures SET status = ?1, error = ?2, updated_at = ?3, claimed_at = COALESCE(claimed_at, ?3) WHERE id = ?4",
                   "ttii", status, error, now, id);
    if (!rc) rc = execf(db, "UPDATE agents SET last_seen = ?1 WHERE name = ?2", "it", now, agent);
    if (!rc && db_exec(db, "COMMIT") != 0) rc = ERR_DB;
    if (rc) {
        db_exec(db, "ROLLBACK");
        return rc;
    }
    return captures_get(db, id, now, out);
}

/* The sessions of the captures in caps (an object: capture id as text -> the capture), each
 * capture's "sessions" array filled in: one statement for the page. The ids are integers the
 * server read from its own rows, formatted into the IN list as constants, never client text. */
static int page_sessions(db_conn *db, json_t *caps) {
    if (!json_object_size(caps)) return 0;
    char *sql = malloc(128 + 24 * json_object_size(caps));
    if (!sql) return ERR_NOMEM;
    size_t o = (size_t)sprintf(sql, "SELECT value, session_id FROM labels WHERE key = 'capture' AND value IN (");
    const char *k;
    json_t *c;
    int first = 1;
    json_object_foreach(caps, k, c) {
        o += (size_t)sprintf(sql + o, "%s'%lld'", first ? "" : ",", (long long)json_integer_value(json_object_get(c, "id")));
        first = 0;
    }
    sprintf(sql + o, ") ORDER BY session_id");
    db_stmt *s = db_prepare(db, sql);
    free(sql);
    if (!s) return ERR_DB;
    int st;
    while ((st = db_step(s)) == DB_ROW) {
        json_t *cap = json_object_get(caps, (const char *)db_column_text(s, 0));
        if (cap) json_array_append_new(json_object_get(cap, "sessions"), json_integer(db_column_int64(s, 1)));
    }
    db_finalize(s);
    return st == DB_DONE ? 0 : ERR_DB;
}

#define TARGET_COLS "t.name, t.engine, t.url, t.dir, t.agent, a.host, a.version, t.registered_at, a.last_seen"

int captures_targets(db_conn *db, long long now, const cap_limits *lim, long long offset, long long limit, json_t **out) {
    long long total = count_of(db, "SELECT COUNT(*) FROM targets", NULL, -1);
    if (total < 0) return ERR_DB;
    /* Each target with its newest capture's columns (from 11): one statement for the page. */
    db_stmt *s = db_prepare(db,
                            "SELECT " TARGET_COLS ", (SELECT COUNT(*) FROM captures x WHERE x.target = t.name AND x.created_at > ?1),"
                            " " CAP_COLS_C " FROM targets t JOIN agents a ON a.name = t.agent"
                            " LEFT JOIN captures c ON c.id = (SELECT y.id FROM captures y WHERE y.target = t.name"
                            " ORDER BY y.created_at DESC, y.id DESC LIMIT 1)"
                            " ORDER BY t.name LIMIT ?2 OFFSET ?3");
    if (!s) return ERR_DB;
    db_bind_int64(s, 1, now - 3600);
    db_bind_int64(s, 2, limit);
    db_bind_int64(s, 3, offset);
    json_t *arr = json_array(), *caps = json_object();
    int st;
    while ((st = db_step(s)) == DB_ROW) {
        long long seen = db_column_int64(s, 8);
        json_t *cap = json_null();
        if (!db_column_is_null(s, 10)) {
            char key[24];
            cap = capture_obj(s, 10, now);
            json_object_set_new(cap, "sessions", json_array());
            snprintf(key, sizeof key, "%lld", db_column_int64(s, 10));
            json_object_set(caps, key, cap);
        }
        json_array_append_new(arr, json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:I,s:b,s:I,s:o}", "name", opt_str(s, 0), "engine", opt_str(s, 1),
                                             "url", opt_str(s, 2), "dir", opt_str(s, 3), "agent", opt_str(s, 4), "host", opt_str(s, 5),
                                             "version", opt_str(s, 6), "registered_at", opt_time(s, 7), "last_seen", opt_time(s, 8),
                                             "last_seen_s", (json_int_t)(now - seen), "online", now - seen <= lim->agent_timeout_s,
                                             "captures_last_hour", (json_int_t)db_column_int64(s, 9), "capture", cap));
    }
    db_finalize(s);
    int rc = st == DB_DONE ? page_sessions(db, caps) : ERR_DB;
    json_decref(caps);
    if (rc) {
        json_decref(arr);
        return rc;
    }
    *out = json_pack("{s:o,s:I,s:I,s:I,s:{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}}", "targets", arr, "total", (json_int_t)total, "offset",
                     (json_int_t)offset, "limit", (json_int_t)limit, "limits", "max_seconds", (json_int_t)lim->max_seconds, "max_steps",
                     (json_int_t)lim->max_steps, "captures_per_hour", (json_int_t)lim->per_hour, "agent_timeout_s",
                     (json_int_t)lim->agent_timeout_s, "claim_timeout_s", (json_int_t)lim->claim_timeout_s, "agent_expiry_s",
                     (json_int_t)lim->agent_expiry_s, "max_agents", (json_int_t)lim->max_agents, "max_targets", (json_int_t)lim->max_targets);
    return 0;
}
