/* app.h: the server's configuration (flags, http/main.c) and the state every handler sees.
 *
 * Types only. main.c fills server_cfg from flags and FIRSTPASS_* variables and builds the
 * app; http.c hands it to every handler (MHD's cls). Nothing here runs. */
#ifndef FP_APP_H
#define FP_APP_H

#include "ingest/import.h"
#include "store/store.h"

typedef struct server_cfg {
    const char *bind;          /* --bind, default 127.0.0.1 */
    int port;                  /* --port, default 8080 */
    const char *db;            /* --db, default var/firstpass.db */
    const char *static_dir;    /* --static, default static */
    unsigned long long max_upload;   /* --max-upload bytes as received, default 1 GiB */
    unsigned long long max_inflated; /* --max-inflated decompressed bytes, default 8 GiB */
    unsigned long long max_events;   /* --max-events per session, default 20,000,000 */
    unsigned long long max_tracks;   /* --max-tracks distinct (pid, tid) per upload, default 10,000 */
    unsigned long long max_name_bytes_per_event; /* --max-name-bytes-per-event, default 4096 */
    unsigned long long max_distinct; /* --max-distinct strings and operators by shapes per upload, default 256K */
    unsigned long long max_steps;    /* --max-steps split and stored one by one per upload, default 10,000 */
    unsigned max_connections;  /* --max-connections, default 256 */
    unsigned max_uploads;      /* --max-uploads concurrent, default 4 */
    unsigned timeout_s;        /* --timeout idle connection seconds, default 60 */
    unsigned header_timeout_s; /* --header-timeout: a request head must be complete within it, default 10 */
    unsigned long long min_body_rate; /* --min-body-rate bytes/s over 10 s windows, default 1024; 0 off */
    unsigned max_connections_per_ip;  /* --max-connections-per-ip, default 64 (capped at max_connections) */
    int quiet;                 /* --quiet: no access log */
    const char *tokens_file;   /* --tokens-file: bearer tokens (auth.h); NULL: no auth */
    int read_auth;             /* --read-auth: GET/HEAD of /api/ need a token too */
    unsigned long long cache_bytes; /* --cache-bytes: reply cache (rcache.h), default 64 MiB; 0 off */
    unsigned long long retain_days;  /* --retain-days: prune sessions older than this (retention.h); 0 off */
    unsigned long long max_db_bytes; /* --max-db-bytes: prune oldest while pages in use exceed it; 0 off */
    unsigned retain_interval_s;      /* --retain-interval seconds between retention passes, default 300 */
    unsigned long long vacuum_min_bytes; /* --vacuum-min-bytes: retention VACUUMs when this much is free; 0 never */
    const char *backup_dir;          /* --backup-dir for POST /api/v1/admin/backup; "" when off */
    unsigned max_capture_seconds;    /* --max-capture-seconds: longest capture asked for, default 60 */
    unsigned max_capture_steps;      /* --max-capture-steps: most engine steps a capture asks for, default 1000 */
    unsigned captures_per_hour;      /* --captures-per-hour: captures of one target in any hour, default 6 */
    unsigned agent_timeout_s;        /* --agent-timeout: an agent silent this long fails its captures, default 60 */
    unsigned max_polls;              /* --max-polls: agents' long polls waiting at once, default 32 */
    unsigned claim_timeout_s;        /* --claim-timeout: a capture handed out and not confirmed goes back, default 90 */
    unsigned long long agent_expiry_s; /* --agent-expiry: an agent silent this long is forgotten with its targets, default 86400; 0 never */
    unsigned long long max_agents;   /* --max-agents registered at once, default 10,000; 0 no limit */
    unsigned long long max_targets;  /* --max-targets registered at once, default 10,000; 0 no limit */
    unsigned long long max_captures; /* --max-captures finished ones kept, default 10,000; 0 no limit */
    unsigned long long min_download_rate; /* --min-download-rate: a reply taken slower (bytes/s, deadline.h) is cut; default 8192; 0 off */
    const char *devices_file;        /* --devices: device rows for the efficiency figures (devfile.h); NULL: none */
    int reanalyse;                   /* --reanalyse: re-analyse the older sessions, then exit (ingest/reanalyse.h) */
    unsigned older_than;             /* --older-than: with --reanalyse, below this version; default ANALYSIS_VERSION */
    int reanalyse_on_start;          /* --reanalyse-on-start: the background worker */
    unsigned reanalyse_lease_s;      /* --reanalyse-lease: a re-analysis's claim lasts this long unrenewed, default 60 */
} server_cfg;

typedef struct app {
    const server_cfg *cfg;
    store *st;
    char static_root[4096];    /* realpath of static_dir, "" when absent */
    struct auth_tokens *tokens; /* from cfg->tokens_file; NULL: every request is allowed */
    struct rcache *cache;      /* rendered read replies (rcache.h); NULL: none */
    import_pool *imports;      /* the upload slots and limits (ingest/import.h) */
} app;

/* Runs call with a pooled connection, db_, its result (through store_fail: a lost connection
 * leaves the pool) in the caller's int rc_; with no connection, replies (http_error, reply.h)
 * and returns. The handlers' one way to the database (routes.c, capture.c). */
#define WITH_DB(a, out, call)                                                                          \
    do {                                                                                               \
        db_conn *db_ = store_get((a)->st);                                                             \
        if (!db_) return http_error(out, store_fail((a)->st, NULL, ERR_DB), "no database connection"); \
        rc_ = store_fail((a)->st, db_, call);                                                          \
        store_put((a)->st, db_);                                                                       \
    } while (0)

#endif
