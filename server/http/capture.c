/* capture.c: the routes of serving agents and captures (capture.h). Parses and validates
 * requests, takes a pooled connection per database step (never across a poll's wait) and
 * calls store/captures.h, which enforces the safety rules in the database. */
#include "http/capture.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/text.h"
#include "lib/err.h"
#include "store/captures.h"

/* The long poll's waiting room. g_gen moves when a capture is asked for on this server;
 * g_polls counts the polls waiting (bounded by --max-polls); g_stop is set once, at stop. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static unsigned long g_gen;  /* g_lock */
static unsigned g_polls;     /* g_lock */
static int g_stop;           /* g_lock */

static void init_cond(void) {
    pthread_condattr_t at;
    pthread_condattr_init(&at);
    pthread_condattr_setclock(&at, CLOCK_MONOTONIC);
    pthread_cond_init(&g_cond, &at);
    pthread_condattr_destroy(&at);
}

static void wake_polls(void) {
    pthread_once(&g_once, init_cond);
    pthread_mutex_lock(&g_lock);
    g_gen++;
    pthread_cond_broadcast(&g_cond);
    pthread_mutex_unlock(&g_lock);
}

void capture_http_stop(void) {
    pthread_once(&g_once, init_cond);
    pthread_mutex_lock(&g_lock);
    g_stop = 1;
    pthread_cond_broadcast(&g_cond);
    pthread_mutex_unlock(&g_lock);
}

static cap_limits limits_of(const app *a) {
    const server_cfg *c = a->cfg;
    cap_limits l = {c->max_capture_seconds, c->max_capture_steps, c->captures_per_hour, c->agent_timeout_s, c->claim_timeout_s,
                    (long long)c->agent_expiry_s, (long long)c->max_agents, (long long)c->max_targets, (long long)c->max_captures};
    return l;
}

static int fail(http_reply *out, int rc) {
    if (rc == ERR_DBDOWN) return http_error(out, ERR_DBDOWN, "the database does not answer: try again later");
    if (rc == ERR_FULL) return http_error(out, ERR_FULL, "the disk is full");
    return http_error(out, rc, "the query failed");
}

/* The longest name taken in (a path segment or a body's member) before its repair: longer is
 * refused (400), so the repair's input is bounded too. */
#define NAME_IN_MAX 1024

/* A name as stored (captures_name_repair: over CAP_NAME_MAX it is cut and ends with a hash
 * of the whole, never cut silently): 0 with out, or ERR_PARAM with the 400 naming what. */
static int repaired(const char *in, size_t n, const char *what, char out[CAP_NAME_MAX + 1], http_reply *reply) {
    if (n <= NAME_IN_MAX && !captures_name_repair(in, n, out)) return 0;
    return http_error(reply, ERR_PARAM, "%s is 1 to %d of [A-Za-z0-9._-] (a longer one is cut to %d and ends with a hash of the whole)",
                      what, NAME_IN_MAX, CAP_NAME_MAX);
}

static long long now_s(void) { return (long long)time(NULL); }

/* The JSON object body of a POST or PUT: new reference, or NULL with the 400 in out. */
static json_t *body_object(http_req *rq, http_reply *out) {
    json_error_t je;
    json_t *doc = rq->body ? json_loadb(rq->body, rq->body_len, 0, &je) : NULL;
    if (json_is_object(doc)) return doc;
    json_decref(doc);
    http_error(out, ERR_PARSE, "the body must be a JSON object%s%s", rq->body ? ": " : " (it is empty)", rq->body ? je.text : "");
    return NULL;
}

/* An optional string member: 0 with *v (borrowed, NULL when absent or null), or ERR_PARAM with
 * the 400 in out when it is not a UTF-8 string of 1..max bytes. */
static int str_member(const json_t *doc, const char *key, size_t max, int required, const char **v, http_reply *out) {
    const json_t *j = json_object_get(doc, key);
    *v = NULL;
    if (!j || json_is_null(j)) {
        if (required) return http_error(out, ERR_PARAM, "\"%s\" is required", key);
        return 0;
    }
    if (!json_is_string(j) || !json_string_length(j) || json_string_length(j) > max)
        return http_error(out, ERR_PARAM, "\"%s\" must be a string of 1 to %zu bytes", key, max);
    *v = json_string_value(j);
    return 0;
}

/* The {name} of /api/v1/agents/{name}[/poll] into name, repaired (issue 50: a 65-byte name
 * was cut to 64 silently, so two agents could share one): 0, or ERR_PARAM with the 400. */
static int agent_name(http_req *rq, http_reply *out, char name[CAP_NAME_MAX + 1]) {
    const char *p = rq->path + strlen("/api/v1/agents/");
    return repaired(p, strcspn(p, "/"), "an agent's name", name, out);
}

/* ---- targets and captures, for people and the dashboard ---- */

/* An integer parameter in [lo, hi] (dflt when absent): 0, or ERR_PARAM with the 400. */
static int int_query(http_req *rq, http_reply *out, const char *key, long long dflt, long long lo, long long hi, long long *v) {
    const char *s = http_query(rq, key);
    *v = dflt;
    if (!s) return 0;
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (!*s || *end || errno || x < lo || x > hi)
        return http_error(out, ERR_PARAM, "%s must be an integer from %lld to %lld, not '%.64s'", key, lo, hi, s);
    *v = x;
    return 0;
}

int capture_h_targets(app *a, http_req *rq, http_reply *out) {
    cap_limits lim = limits_of(a);
    long long now = now_s(), off, lim_n;
    /* paged (issue 50): 32,000 targets were one 137 MB reply */
    if (int_query(rq, out, "offset", 0, 0, 1LL << 40, &off) || int_query(rq, out, "limit", CAPTURE_TARGETS_PAGE, 1, CAP_PAGE_MAX, &lim_n))
        return ERR_PARAM;
    json_t *body = NULL;
    int rc_;
    WITH_DB(a, out, captures_expire(db_, now, &lim) ? ERR_DB : captures_targets(db_, now, &lim, off, lim_n, &body));
    if (rc_) return fail(out, rc_);
    /* whether writes (Profile now) need a bearer token: the page shows its token box only
     * then (issue 51, item 5); read_auth: reads need one too */
    json_object_set_new(body, "auth", json_pack("{s:b,s:b}", "tokens", a->tokens != NULL, "read_auth", a->tokens && a->cfg->read_auth));
    const char *f = http_query(rq, "format");
    int csv = f && !strcmp(f, "csv");
    if (!csv && !http_wants_text(rq)) return http_json(out, 200, body);
    /* text and CSV: one flat row a target, its newest capture's id and status */
    static const char *const cols[] = {"name", "engine", "url", "agent", "online", "last_seen_s", "captures_last_hour", "capture_id", "capture_status", NULL};
    json_t *rows = json_array(), *t;
    size_t i;
    json_array_foreach(json_object_get(body, "targets"), i, t) {
        json_t *c = json_object_get(t, "capture");
        json_t *r = json_deep_copy(t);
        json_object_set(r, "capture_id", json_is_object(c) ? json_object_get(c, "id") : json_null());
        json_object_set(r, "capture_status", json_is_object(c) ? json_object_get(c, "status") : json_null());
        json_array_append_new(rows, r);
    }
    json_decref(body);
    size_t len;
    char *txt = csv ? csv_rows(rows, cols, &len) : text_rows(rows, cols, &len);
    json_decref(rows);
    if (!txt) return http_error(out, ERR_NOMEM, "out of memory");
    return http_text(out, 200, csv ? "text/csv; charset=utf-8" : "text/plain; charset=utf-8", txt, len);
}

int capture_h_list(app *a, http_req *rq, http_reply *out) {
    const char *tq = http_query(rq, "target"), *ls = http_query(rq, "limit"), *target = NULL;
    char tname[CAP_NAME_MAX + 1];
    long long limit = 50;
    if (tq && repaired(tq, strlen(tq), "target", tname, out)) return ERR_PARAM;
    if (tq) target = tname;
    if (ls) {
        char *end;
        errno = 0;
        limit = strtoll(ls, &end, 10);
        if (!*ls || *end || errno || limit < 1 || limit > CAP_LIST_MAX)
            return http_error(out, ERR_PARAM, "limit must be an integer from 1 to %d, not '%.64s'", CAP_LIST_MAX, ls);
    }
    long long now = now_s();
    json_t *body = NULL;
    int rc_;
    cap_limits lim = limits_of(a);
    WITH_DB(a, out, captures_expire(db_, now, &lim) ? ERR_DB : captures_list(db_, target, limit, now, &body));
    if (rc_) return fail(out, rc_);
    /* whether writes (Profile now) need a bearer token: the page shows its token box only
     * then (issue 51, item 5); read_auth: reads need one too */
    json_object_set_new(body, "auth", json_pack("{s:b,s:b}", "tokens", a->tokens != NULL, "read_auth", a->tokens && a->cfg->read_auth));
    const char *f = http_query(rq, "format");
    int csv = f && !strcmp(f, "csv");
    if (!csv && !http_wants_text(rq)) return http_json(out, 200, body);
    static const char *const cols[] = {"id", "target", "engine", "status", "seconds", "steps", "created_at", "elapsed_s", "job", "error", NULL};
    size_t len;
    char *txt = csv ? csv_rows(json_object_get(body, "captures"), cols, &len) : text_rows(json_object_get(body, "captures"), cols, &len);
    json_decref(body);
    if (!txt) return http_error(out, ERR_NOMEM, "out of memory");
    return http_text(out, 200, csv ? "text/csv; charset=utf-8" : "text/plain; charset=utf-8", txt, len);
}

/* A positive integer member no larger than max: 0 with *v (0 when absent), or ERR_PARAM. */
static int count_member(const json_t *doc, const char *key, long long max, const char *flag, long long *v, http_reply *out) {
    const json_t *j = json_object_get(doc, key);
    *v = 0;
    if (!j || json_is_null(j)) return 0;
    if (!json_is_integer(j) || json_integer_value(j) < 1)
        return http_error(out, ERR_PARAM, "\"%s\" must be a positive integer", key);
    if (json_integer_value(j) > max)
        return http_error(out, ERR_PARAM, "\"%s\" is %lld, over %s (%lld)", key, (long long)json_integer_value(j), flag, max);
    *v = json_integer_value(j);
    return 0;
}

int capture_h_create(app *a, http_req *rq, http_reply *out) {
    json_t *doc = body_object(rq, out);
    if (!doc) return ERR_PARSE;
    const char *tq;
    char target[CAP_NAME_MAX + 1];
    long long seconds = 0, steps = 0;
    int rc = str_member(doc, "target", NAME_IN_MAX, 1, &tq, out);
    if (!rc) rc = repaired(tq, strlen(tq), "\"target\"", target, out);
    if (!rc) rc = count_member(doc, "seconds", a->cfg->max_capture_seconds, "--max-capture-seconds", &seconds, out);
    if (!rc) rc = count_member(doc, "steps", a->cfg->max_capture_steps, "--max-capture-steps", &steps, out);
    if (!rc && (seconds > 0) == (steps > 0))
        rc = http_error(out, ERR_PARAM, "give one of \"seconds\" and \"steps\": how long the engine's profiler runs");
    json_t *opts = json_object_get(doc, "options");
    if (!rc && opts && !json_is_null(opts)) {
        const char *k;
        json_t *v;
        if (!json_is_object(opts)) rc = http_error(out, ERR_PARAM, "\"options\" must be an object");
        json_object_foreach(opts, k, v) {
            if (rc) break;
            if ((strcmp(k, "record_shapes") && strcmp(k, "with_stack")) || !json_is_boolean(v))
                rc = http_error(out, ERR_PARAM, "\"options\" takes record_shapes and with_stack, true or false; not '%.64s'", k);
        }
    }
    if (!rc) { /* no other members: a misspelt one is refused, not ignored */
        const char *key;
        json_t *v;
        json_object_foreach(doc, key, v) {
            (void)v;
            if (strcmp(key, "target") && strcmp(key, "seconds") && strcmp(key, "steps") && strcmp(key, "options")) {
                rc = http_error(out, ERR_PARAM, "unknown member \"%.64s\" (target, seconds, steps, options)", key);
                break;
            }
        }
    }
    if (rc) {
        json_decref(doc);
        return rc;
    }
    cap_limits lim = limits_of(a);
    char why[512] = "";
    json_t *cap = NULL;
    int rc_;
    WITH_DB(a, out, captures_create(db_, target, seconds, steps, json_is_object(opts) ? opts : NULL, &lim, now_s(), &cap, why, sizeof why));
    json_decref(doc);
    if (rc_ == ERR_NOTFOUND || rc_ == ERR_CONFLICT || rc_ == ERR_RATE || rc_ == ERR_PARAM) return http_error(out, rc_, "%s", why);
    if (rc_) return fail(out, rc_);
    wake_polls();
    snprintf(out->location, sizeof out->location, "/api/v1/captures/%lld", (long long)json_integer_value(json_object_get(cap, "id")));
    return http_json(out, 201, cap);
}

int capture_h_get(app *a, http_req *rq, http_reply *out) {
    long long now = now_s();
    json_t *body = NULL;
    int rc_;
    cap_limits lim = limits_of(a);
    WITH_DB(a, out, captures_expire(db_, now, &lim) ? ERR_DB : captures_get(db_, rq->id, now, &body));
    if (rc_ == ERR_NOTFOUND) return http_error(out, ERR_NOTFOUND, "no capture %lld", rq->id);
    return rc_ ? fail(out, rc_) : http_json(out, 200, body);
}

/* ---- the agents' side ---- */

int capture_h_status(app *a, http_req *rq, http_reply *out) {
    json_t *doc = body_object(rq, out);
    if (!doc) return ERR_PARSE;
    const char *agent, *status, *error;
    char who[CAP_NAME_MAX + 1];
    int rc = str_member(doc, "agent", NAME_IN_MAX, 1, &agent, out);
    if (!rc) rc = repaired(agent, strlen(agent), "\"agent\"", who, out);
    if (!rc) rc = str_member(doc, "status", 16, 1, &status, out);
    if (!rc && strcmp(status, "running") && strcmp(status, "flushing") && strcmp(status, "uploaded") && strcmp(status, "failed"))
        rc = http_error(out, ERR_PARAM, "\"status\" is running, flushing, uploaded or failed, not '%.32s'", status);
    if (!rc) rc = str_member(doc, "error", 1u << 16, 0, &error, out);
    char err[CAP_ERROR_MAX + 1] = "";
    if (!rc && error) {
        /* the engine's words, kept whole up to CAP_ERROR_MAX bytes, cut at a character */
        size_t n = strlen(error);
        if (n > CAP_ERROR_MAX) {
            n = CAP_ERROR_MAX;
            while (n > 0 && ((unsigned char)error[n] & 0xC0) == 0x80) n--;
        }
        memcpy(err, error, n);
        err[n] = '\0';
    }
    if (rc) {
        json_decref(doc);
        return rc;
    }
    char why[256] = "", st[17];
    snprintf(st, sizeof st, "%s", status);
    int had_error = error != NULL;
    json_decref(doc);
    json_t *cap = NULL;
    int rc_;
    WITH_DB(a, out, captures_status(db_, rq->id, who, st, had_error ? err : NULL, now_s(), &cap, why, sizeof why));
    if (rc_ == ERR_NOTFOUND) return http_error(out, ERR_NOTFOUND, "no capture %lld", rq->id);
    if (rc_ == ERR_CONFLICT) return http_error(out, ERR_CONFLICT, "%s", why);
    return rc_ ? fail(out, rc_) : http_json(out, 200, cap);
}

/* POST /api/v1/captures/{id}/cancel: a write (tokens apply). A capture that waits for its
 * agent, or one the agent runs: the agent hears it at its next poll and status report. */
int capture_h_cancel(app *a, http_req *rq, http_reply *out) {
    char why[256] = "";
    json_t *cap = NULL;
    int rc_;
    WITH_DB(a, out, captures_cancel(db_, rq->id, now_s(), &cap, why, sizeof why));
    if (rc_ == ERR_NOTFOUND) return http_error(out, ERR_NOTFOUND, "no capture %lld", rq->id);
    if (rc_ == ERR_CONFLICT) return http_error(out, ERR_CONFLICT, "%s", why);
    if (rc_) return fail(out, rc_);
    wake_polls(); /* a poll of its agent answers now, with the cancel */
    return http_json(out, 200, cap);
}

int capture_h_agent_put(app *a, http_req *rq, http_reply *out) {
    char name[CAP_NAME_MAX + 1];
    if (agent_name(rq, out, name)) return ERR_PARAM;
    json_t *doc = body_object(rq, out);
    if (!doc) return ERR_PARSE;
    const char *host, *version, *instance;
    cap_target t[CAP_TARGETS_MAX];
    char tnames[CAP_TARGETS_MAX][CAP_NAME_MAX + 1];
    size_t n = 0;
    int rc = str_member(doc, "host", 255, 0, &host, out);
    if (!rc) rc = str_member(doc, "version", 64, 0, &version, out);
    /* the agent process's random id: with it, another process of the same name is told apart */
    if (!rc) rc = str_member(doc, "instance", CAP_INSTANCE_MAX, 0, &instance, out);
    if (!rc && instance && !captures_name_ok(instance))
        rc = http_error(out, ERR_PARAM, "\"instance\" is 1 to %d of [A-Za-z0-9._-]", CAP_INSTANCE_MAX);
    json_t *ts = json_object_get(doc, "targets"), *x;
    if (!rc && !json_is_array(ts)) rc = http_error(out, ERR_PARAM, "\"targets\" must be an array (of {name, engine, url, dir})");
    if (!rc && json_array_size(ts) > CAP_TARGETS_MAX) rc = http_error(out, ERR_PARAM, "at most %d targets an agent", CAP_TARGETS_MAX);
    size_t i;
    json_array_foreach(ts, i, x) {
        if (rc) break;
        cap_target *c = &t[n];
        if (!json_is_object(x)) {
            rc = http_error(out, ERR_PARAM, "targets[%zu] must be an object", i);
            break;
        }
        const char *tn = NULL;
        char what[48];
        snprintf(what, sizeof what, "targets[%zu].name", i);
        rc = str_member(x, "name", NAME_IN_MAX, 1, &tn, out);
        if (!rc) rc = repaired(tn, strlen(tn), what, tnames[n], out);
        c->name = tnames[n];
        if (!rc) rc = str_member(x, "engine", 16, 1, &c->engine, out);
        if (!rc && strcmp(c->engine, "vllm") && strcmp(c->engine, "sglang") && strcmp(c->engine, "torch"))
            rc = http_error(out, ERR_PARAM, "targets[%zu].engine is vllm, sglang or torch", i);
        if (!rc) rc = str_member(x, "url", 1024, 1, &c->url, out);
        if (!rc && strncmp(c->url, "http://", 7) && strncmp(c->url, "https://", 8))
            rc = http_error(out, ERR_PARAM, "targets[%zu].url must be an http:// or https:// URL", i);
        if (!rc) rc = str_member(x, "dir", 4096, 0, &c->dir, out);
        for (size_t j = 0; !rc && j < n; j++)
            if (!strcmp(t[j].name, c->name)) rc = http_error(out, ERR_PARAM, "targets[%zu].name '%s' is there twice", i, c->name);
        if (!rc && !c->dir) c->dir = "";
        n++;
    }
    if (rc) {
        json_decref(doc);
        return rc;
    }
    json_t *body = NULL;
    cap_limits lim = limits_of(a);
    char why[512] = "";
    long long now = now_s();
    int rc_;
    /* expire first: a target of an agent forgotten meanwhile is free, and so is its room */
    WITH_DB(a, out, captures_expire(db_, now, &lim) ? ERR_DB
                    : captures_register(db_, name, instance ? instance : "", host ? host : "", version ? version : "", t, n, now, &lim,
                                        &body, why, sizeof why));
    json_decref(doc);
    if ((rc_ == ERR_CONFLICT || rc_ == ERR_FULL) && why[0]) return http_error(out, rc_, "%s", why);
    if (rc_) return fail(out, rc_);
    json_object_set_new(body, "poll_wait_s", json_integer(CAPTURE_POLL_WAIT_S));
    json_object_set_new(body, "agent_timeout_s", json_integer(a->cfg->agent_timeout_s));
    return http_json(out, 200, body);
}

/* Waits on the waiting room until gen moves, the stop, or deadline (CLOCK_MONOTONIC); at most
 * one second, so that a capture asked for on another server (PostgreSQL) is seen within one. */
static void wait_a_while(unsigned long *gen, const struct timespec *deadline) {
    struct timespec now, until;
    clock_gettime(CLOCK_MONOTONIC, &now);
    until = now;
    until.tv_sec += 1;
    if (until.tv_sec > deadline->tv_sec || (until.tv_sec == deadline->tv_sec && until.tv_nsec > deadline->tv_nsec)) until = *deadline;
    pthread_mutex_lock(&g_lock);
    while (*gen == g_gen && !g_stop && pthread_cond_timedwait(&g_cond, &g_lock, &until) == 0) {
    }
    *gen = g_gen;
    pthread_mutex_unlock(&g_lock);
}

/* The poll's reply: the capture handed out (or null) and, when there are any, the ids of the
 * agent's captures cancelled after a poll took them, within --agent-timeout (it stops those it
 * runs). Why only then: the reply keeps its shape for every agent that has nothing to stop. */
static int poll_reply(app *a, http_reply *out, const char *name, json_t *cap) {
    json_t *ids = NULL;
    int rc_;
    long long since = now_s() - (long long)a->cfg->agent_timeout_s;
    WITH_DB(a, out, captures_cancelled(db_, name, since, &ids));
    if (rc_) {
        json_decref(cap);
        return fail(out, rc_);
    }
    json_t *r = json_pack("{s:o}", "capture", cap ? cap : json_null());
    if (json_array_size(ids)) json_object_set(r, "cancelled", ids);
    json_decref(ids);
    return http_json(out, 200, r);
}

int capture_h_agent_poll(app *a, http_req *rq, http_reply *out) {
    char name[CAP_NAME_MAX + 1];
    if (agent_name(rq, out, name)) return ERR_PARAM;
    cap_limits lim = limits_of(a);
    long long since = now_s();
    long long wait = CAPTURE_POLL_WAIT_S;
    const char *ws = http_query(rq, "wait");
    if (ws) {
        char *end;
        errno = 0;
        wait = strtoll(ws, &end, 10);
        if (!*ws || *end || errno || wait < 0 || wait > CAPTURE_POLL_WAIT_S)
            return http_error(out, ERR_PARAM, "wait must be an integer from 0 to %d (seconds), not '%.64s'", CAPTURE_POLL_WAIT_S, ws);
    }
    /* A poll ends well inside --agent-timeout, so that a polling agent never looks gone. */
    if (wait > (long long)a->cfg->agent_timeout_s / 2) wait = a->cfg->agent_timeout_s / 2 ? a->cfg->agent_timeout_s / 2 : 1;
    pthread_once(&g_once, init_cond);
    unsigned long gen;
    pthread_mutex_lock(&g_lock);
    gen = g_gen;
    int stopping = g_stop;
    pthread_mutex_unlock(&g_lock);
    json_t *cap = NULL;
    int rc_;
    /* the first look: the agent's contact is now, and what waits for it is handed out */
    WITH_DB(a, out, captures_expire(db_, now_s(), &lim) ? ERR_DB : captures_claim(db_, name, now_s(), lim.claim_timeout_s, 0, &cap));
    if (rc_ == ERR_NOTFOUND) return http_error(out, ERR_NOTFOUND, "no agent '%s': register it first (PUT /api/v1/agents/%s)", name, name);
    if (rc_) return fail(out, rc_);
    if (cap || wait == 0 || stopping) return poll_reply(a, out, name, cap);
    pthread_mutex_lock(&g_lock);
    int room = g_polls < a->cfg->max_polls;
    if (room) g_polls++;
    pthread_mutex_unlock(&g_lock);
    if (!room) return http_json(out, 200, json_pack("{s:n,s:i}", "capture", "retry_s", CAPTURE_POLL_RETRY_S));
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += wait;
    int rc = 0;
    for (;;) {
        wait_a_while(&gen, &deadline);
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        pthread_mutex_lock(&g_lock);
        stopping = g_stop;
        pthread_mutex_unlock(&g_lock);
        if (stopping || http_client_gone(rq)) break;
        /* a read each time; the claim (a write) only when there is something to claim. No
         * WITH_DB here: its early return would leave g_polls counting this poll. */
        db_conn *db = store_get(a->st);
        if (!db) {
            rc = store_fail(a->st, NULL, ERR_DB);
            break;
        }
        rc = store_fail(a->st, db, captures_waiting(db, name, now_s(), lim.claim_timeout_s, since));
        int cancel = rc == 2;
        if (rc == 1) rc = store_fail(a->st, db, captures_claim(db, name, now_s(), lim.claim_timeout_s, 0, &cap));
        store_put(a->st, db);
        if (rc < 0 || cap || cancel) break;
        rc = 0;
        if (now.tv_sec > deadline.tv_sec || (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec)) break;
    }
    pthread_mutex_lock(&g_lock);
    g_polls--;
    pthread_mutex_unlock(&g_lock);
    if (rc == 2) rc = 0; /* a cancel woke it: the reply lists it */
    if (!rc && !cap) { /* the end of a wait is a contact too: an agent that polls is alive */
        json_t *none = NULL;
        WITH_DB(a, out, captures_claim(db_, name, now_s(), lim.claim_timeout_s, 1, &none));
        rc = rc_;
    }
    if (rc == ERR_NOTFOUND) return http_error(out, ERR_NOTFOUND, "no agent '%s': register it first (PUT /api/v1/agents/%s)", name, name);
    if (rc) {
        json_decref(cap);
        return fail(out, rc);
    }
    return poll_reply(a, out, name, cap);
}
