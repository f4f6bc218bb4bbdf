/* captures.h: serving agents, the engines they can profile (targets) and captures (issue 44).
 *
 * An agent (firstpass-upload --target, docs/serving.md) registers the engines it reaches,
 * long-polls for capture requests (POST /api/v1/agents/{name}/poll: the agent makes every
 * connection, so the node needs no inbound port) and reports each capture's progress:
 * queued -> running -> flushing -> uploaded, or failed with the engine's own error. The
 * sessions of a capture are those labelled capture:<id>; they also share job:capture-<id>.
 *
 * captures.c owns the SQL of agents, targets and captures (schema.sql); it never touches
 * sessions except to read which carry a capture's label. Safety rules it enforces in the
 * database, so that they hold across servers sharing one (PostgreSQL):
 *   - only a registered target can be captured (ERR_NOTFOUND);
 *   - one capture of a target in flight at a time (ERR_CONFLICT; a partial unique index);
 *   - at most per_hour captures of a target in any hour (ERR_RATE);
 *   - a capture whose agent has not been heard from for agent_timeout_s fails
 *     (captures_expire, run before every read and write here);
 *   - an agent that registers again (a restart) fails its captures in flight: it lost them. */
#ifndef FP_CAPTURES_H
#define FP_CAPTURES_H

#include <jansson.h>
#include <stddef.h>

#include "store/db.h"

#define CAP_NAME_MAX 64       /* agent and target names: [A-Za-z0-9._-]{1,64} */
#define CAP_TARGETS_MAX 32    /* targets one agent registers */
#define CAP_LIST_MAX 1000     /* captures listed at most */
#define CAP_ERROR_MAX 1024    /* bytes of a failure's message kept */

typedef struct cap_limits {
    long long max_seconds;    /* --max-capture-seconds */
    long long max_steps;      /* --max-capture-steps */
    long long per_hour;       /* --captures-per-hour: per target, any hour */
    long long agent_timeout_s; /* --agent-timeout */
} cap_limits;

/* One target of a registration (borrowed strings, validated by the caller). */
typedef struct cap_target {
    const char *name, *engine, *url, *dir;
} cap_target;

/* 1 when s is a name: [A-Za-z0-9._-], 1 to CAP_NAME_MAX bytes. */
int captures_name_ok(const char *s);

/* Registers agent (its host and version) with exactly these targets (replacing the ones it
 * had; a target another agent held passes to this one), fails the agent's captures in
 * flight (it restarted) and sets its last contact to now (unix seconds). *out: {"agent",
 * "targets":[names]} (new reference). 0, ERR_DB. */
int captures_register(db_conn *db, const char *agent, const char *host, const char *version, const cap_target *t, size_t n,
                      long long now, json_t **out);

/* Fails the captures in flight whose agent was last heard from before now - agent_timeout_s.
 * 0 or ERR_DB. */
int captures_expire(db_conn *db, long long now, long long agent_timeout_s);

/* Asks for a capture of target for seconds or steps (one > 0, the other 0), with options (a
 * JSON object, borrowed: record_shapes, with_stack). *out: the capture (new reference).
 * ERR_NOTFOUND: no such registered target; ERR_CONFLICT: one in flight (why names it);
 * ERR_RATE: per_hour reached (why says when the next one may go); ERR_PARAM: steps or options
 * for an engine whose endpoint takes none (vLLM, torch); ERR_DB. why gets the message. */
int captures_create(db_conn *db, const char *target, long long seconds, long long steps, const json_t *options, const cap_limits *lim,
                    long long now, json_t **out, char *why, size_t whylen);

/* The agent's poll: its contact is now. When touch_only is 0, takes its oldest queued capture
 * that no poll took yet: *out the capture (new reference), or NULL when none. ERR_NOTFOUND: no
 * such agent (it should register); ERR_DB. */
int captures_claim(db_conn *db, const char *agent, long long now, int touch_only, json_t **out);

/* 1 when agent has a queued capture no poll took yet, 0 when none, ERR_DB. A read: what a
 * waiting poll checks each second. */
int captures_waiting(db_conn *db, const char *agent);

/* The agent says where capture id is: status "running", "flushing", "uploaded" or "failed"
 * (error: the reason, NULL). A status never goes back (the same one again is accepted, so a
 * retried report is harmless). ERR_NOTFOUND: no capture id; ERR_CONFLICT: it is another
 * agent's, over already, or the status would go back (why says which); ERR_DB. */
int captures_status(db_conn *db, long long id, const char *agent, const char *status, const char *error, long long now, json_t **out,
                    char *why, size_t whylen);

/* One capture: {"id","target","agent","engine","seconds","steps","options","status","error",
 * "created_at","claimed_at","updated_at","finished_at","elapsed_s","job","sessions":[ids]}.
 * ERR_NOTFOUND, ERR_DB. */
int captures_get(db_conn *db, long long id, long long now, json_t **out);

/* {"captures":[...]}, newest first, at most limit, of one target when target is not NULL. */
int captures_list(db_conn *db, const char *target, long long limit, long long now, json_t **out);

/* {"targets":[{"name","engine","url","dir","agent","host","version","registered_at",
 * "last_seen","last_seen_s","online","captures_last_hour","capture":{...}|null}],"limits":{...}}
 * by name; online: heard from within agent_timeout_s. */
int captures_targets(db_conn *db, long long now, const cap_limits *lim, json_t **out);

#endif
