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
 *   - an agent that registers again (a restart) fails its captures in flight: it lost them;
 *   - a claim (a poll handed the capture out) that the agent has not confirmed with a status
 *     report within claim_timeout_s goes back to the queue: the poll's reply may have been
 *     lost (a connection reset under it), and the capture must not wedge its target (issue 50);
 *   - a capture in flight can be cancelled (captures_cancel): its agent hears it in its next
 *     poll ("cancelled") and status report (the reply's status);
 *   - the registries are bounded: an agent not heard from for agent_expiry_s goes with its
 *     targets (captures_expire), at most max_agents agents and max_targets targets are
 *     registered (ERR_FULL), and GET /targets is paged;
 *   - the history is bounded: a new capture forgets the oldest finished ones (uploaded or
 *     failed) past max_captures (their sessions stay; only the capture rows go);
 *   - a registration never silently takes what a live agent holds: the name of an agent that
 *     registered with another instance id, or a target another agent holds, while that agent
 *     polled within agent_timeout_s, is ERR_CONFLICT (why names it and its last contact).
 * Names (agents, targets) longer than CAP_NAME_MAX are repaired, never cut silently:
 * captures_name_repair, applied alike wherever a name comes in. */
#ifndef FP_CAPTURES_H
#define FP_CAPTURES_H

#include <jansson.h>
#include <stddef.h>

#include "store/db.h"

#define CAP_NAME_MAX 64       /* agent and target names: [A-Za-z0-9._-]{1,64} */
#define CAP_TARGETS_MAX 32    /* targets one agent registers */
#define CAP_LIST_MAX 1000     /* captures listed at most */
#define CAP_ERROR_MAX 1024    /* bytes of a failure's message kept */

#define CAP_INSTANCE_MAX 64   /* an agent's instance id: [A-Za-z0-9._-]{1,64} */
#define CAP_PAGE_MAX 1000     /* targets listed at most in one page */

typedef struct cap_limits {
    long long max_seconds;    /* --max-capture-seconds */
    long long max_steps;      /* --max-capture-steps */
    long long per_hour;       /* --captures-per-hour: per target, any hour */
    long long agent_timeout_s; /* --agent-timeout */
    long long claim_timeout_s; /* --claim-timeout: an unconfirmed claim goes back to the queue */
    long long agent_expiry_s; /* --agent-expiry: an agent silent this long is forgotten; 0 never */
    long long max_agents;     /* --max-agents registered at once; 0: no limit */
    long long max_targets;    /* --max-targets registered at once; 0: no limit */
    long long max_captures;   /* --max-captures finished ones kept; 0: no limit */
} cap_limits;

/* One target of a registration (borrowed strings, validated by the caller). */
typedef struct cap_target {
    const char *name, *engine, *url, *dir;
} cap_target;

/* 1 when s is a name: [A-Za-z0-9._-], 1 to CAP_NAME_MAX bytes. */
int captures_name_ok(const char *s);
/* The name in[0..n) as stored: itself when it is one (captures_name_ok); a longer run of
 * [A-Za-z0-9._-] is cut at CAP_NAME_MAX - 9 bytes and ends with '-' and the first 8 hex
 * digits of the whole name's SHA-256, so that two long names sharing a prefix stay two and
 * the same long name is always the same (issue 50: a 65-byte name was cut silently). 0 with
 * out set, or -1 (empty, or a character outside the set: refused). */
int captures_name_repair(const char *in, size_t n, char out[CAP_NAME_MAX + 1]);

/* Registers agent (its instance id, "" for none; its host and version) with exactly these
 * targets (replacing the ones it had), fails the agent's captures in flight (it restarted)
 * and sets its last contact to now (unix seconds). Refused, why saying so: ERR_CONFLICT when
 * the name was registered with an instance id other than this one (none counts as other)
 * and was heard from within agent_timeout_s, or a target is held by another agent heard from
 * within it; ERR_FULL when a new agent or the targets would pass max_agents or max_targets.
 * A target of an agent not heard from for agent_timeout_s passes to this one. *out:
 * {"agent","instance","targets":[names]} (new reference). 0, ERR_CONFLICT, ERR_FULL, ERR_DB. */
int captures_register(db_conn *db, const char *agent, const char *instance, const char *host, const char *version, const cap_target *t,
                      size_t n, long long now, const cap_limits *lim, json_t **out, char *why, size_t whylen);

/* Fails the captures in flight whose agent was last heard from before now - agent_timeout_s,
 * and forgets the agents (their targets with them) last heard from before now -
 * agent_expiry_s. 0 or ERR_DB. */
int captures_expire(db_conn *db, long long now, const cap_limits *lim);

/* Asks for a capture of target for seconds or steps (one > 0, the other 0), with options (a
 * JSON object, borrowed: record_shapes, with_stack). *out: the capture (new reference).
 * ERR_NOTFOUND: no such registered target; ERR_CONFLICT: one in flight (why names it);
 * ERR_RATE: per_hour reached (why says when the next one may go); ERR_PARAM: steps or options
 * for an engine whose endpoint takes none (vLLM, torch); ERR_DB. why gets the message. */
int captures_create(db_conn *db, const char *target, long long seconds, long long steps, const json_t *options, const cap_limits *lim,
                    long long now, json_t **out, char *why, size_t whylen);

/* The agent's poll: its contact is now. When touch_only is 0, takes its oldest queued capture
 * that no poll took, or whose claim was not confirmed within claim_timeout_s (a status
 * report confirms it): *out the capture (new reference), or NULL when none. ERR_NOTFOUND: no
 * such agent (it should register); ERR_DB. */
int captures_claim(db_conn *db, const char *agent, long long now, long long claim_timeout_s, int touch_only, json_t **out);

/* 1 when agent has a capture to claim (as captures_claim), 2 when one of its claimed
 * captures was cancelled at since or later, 0 when neither, ERR_DB. A read: what a waiting
 * poll checks each second. */
int captures_waiting(db_conn *db, const char *agent, long long now, long long claim_timeout_s, long long since);

/* The ids of agent's captures cancelled after a poll took them, at since or later: *out a
 * JSON array (new reference). What its poll reply lists, so that it stops them. 0, ERR_DB. */
int captures_cancelled(db_conn *db, const char *agent, long long since, json_t **out);

/* Cancels capture id: in flight (queued, running, flushing), it becomes "cancelled" (final);
 * *out the capture. ERR_NOTFOUND; ERR_CONFLICT when it is over already (why); ERR_DB. */
int captures_cancel(db_conn *db, long long id, long long now, json_t **out, char *why, size_t whylen);

/* The agent says where capture id is: status "running", "flushing", "uploaded" or "failed"
 * (error: the reason, NULL). A status never goes back (the same one again is accepted, so a
 * retried report is harmless). A report confirms the claim (captures_claim). A report on a
 * cancelled capture changes nothing but the agent's last contact: *out says "cancelled", so
 * that the agent stops. ERR_NOTFOUND: no capture id; ERR_CONFLICT: it is another agent's,
 * over already, or the status would go back (why says which); ERR_DB. */
int captures_status(db_conn *db, long long id, const char *agent, const char *status, const char *error, long long now, json_t **out,
                    char *why, size_t whylen);

/* One capture: {"id","target","agent","engine","seconds","steps","options","status","error",
 * "created_at","claimed_at","updated_at","finished_at","elapsed_s","job","sessions":[ids]}.
 * ERR_NOTFOUND, ERR_DB. */
int captures_get(db_conn *db, long long id, long long now, json_t **out);

/* {"captures":[...]}, newest first, at most limit, of one target when target is not NULL. */
int captures_list(db_conn *db, const char *target, long long limit, long long now, json_t **out);

/* {"targets":[{"name","engine","url","dir","agent","host","version","registered_at",
 * "last_seen","last_seen_s","online","captures_last_hour","capture":{...}|null}],"total",
 * "offset","limit","limits":{...}}: the page [offset, offset + limit) by name of total
 * targets; online: heard from within agent_timeout_s. Two statements whatever the page: the
 * targets with their newest capture, then that page's captures' sessions (issue 50: a
 * capture lookup per target made 32,000 targets 13 s). */
int captures_targets(db_conn *db, long long now, const cap_limits *lim, long long offset, long long limit, json_t **out);

#endif
