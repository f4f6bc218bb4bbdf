/* main.c: firstpass-server's command line: flags, environment, start-up.
 *
 * Every option is a flag and an environment variable (FIRSTPASS_<NAME>); a flag wins. */
#include <errno.h>
#include <stddef.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/analyze.h"
#include "http/auth.h"
#include "http/http.h"
#include "ingest/reanalyse.h"
#include "lib/logfmt.h"
#include "lib/tmpfile.h"
#include "http/metrics.h"
#include "http/rcache.h"
#include "lib/log.h"
#include "lib/version.h"
#include "store/retention.h"

/* Every option, once: its flag, its FIRSTPASS_* variable (derived from the flag), how its
 * value is read, where it goes in server_cfg, and its --help lines. */
enum opt_kind {
    OPT_STR,   /* a string */
    OPT_BOOL,  /* a flag without value; the variable: anything but "0" turns it on */
    OPT_SIZE,  /* bytes: a number with an optional K, M or G (powers of 1024) */
    OPT_UINT,  /* an unsigned number (same syntax), stored as unsigned int, at least min */
    OPT_PORT,  /* 1..65535 */
};

typedef struct opt {
    const char *name;   /* the flag without "--" */
    enum opt_kind kind;
    size_t off;         /* offsetof(server_cfg, ...) */
    unsigned min, max;  /* OPT_UINT: a value under min becomes min; over max (when max > 0) becomes max */
    const char *arg;    /* the value's name in --help, NULL for a flag */
    const char *help;   /* --help text after the flag; "\n" continues on the next line */
} opt;

#define CFG(f) offsetof(server_cfg, f)
static const opt opts[] = {
    {"bind", OPT_STR, CFG(bind), 0, 0, "ADDR", "IPv4 address to listen on [FIRSTPASS_BIND] (default 127.0.0.1)"},
    {"port", OPT_PORT, CFG(port), 0, 0, "N", "TCP port [FIRSTPASS_PORT] (default 8080)"},
    {"db", OPT_STR, CFG(db), 0, 0, "FILE|URI",
     "SQLite database file, created if missing, or a PostgreSQL database:\n"
     "postgresql://user@host/db or a libpq conninfo (docs/scale.md) [FIRSTPASS_DB]\n(default var/firstpass.db)"},
    {"static", OPT_STR, CFG(static_dir), 0, 0, "DIR", "dashboard files served at / [FIRSTPASS_STATIC] (default static)"},
    {"max-upload", OPT_SIZE, CFG(max_upload), 0, 0, "BYTES",
     "largest upload body as sent, compressed or not [FIRSTPASS_MAX_UPLOAD]\n(default 1073741824 = 1 GiB); larger: 413"},
    {"max-inflated", OPT_SIZE, CFG(max_inflated), 0, 0, "BYTES", "largest decompressed trace [FIRSTPASS_MAX_INFLATED] (default 8 GiB)"},
    {"max-events", OPT_SIZE, CFG(max_events), 0, 0, "N", "most events in one session [FIRSTPASS_MAX_EVENTS] (default 20000000)"},
    {"max-tracks", OPT_SIZE, CFG(max_tracks), 0, 0, "N",
     "most distinct threads, processes and GPU streams (pid, tid pairs)\nin one upload [FIRSTPASS_MAX_TRACKS] (default 10000; 0 = no limit);\n"
     "more: 413 (each costs ~3.5 KB of memory until the upload ends)"},
    {"max-name-bytes-per-event", OPT_SIZE, CFG(max_name_bytes_per_event), 0, 0, "BYTES",
     "the distinct names, categories and shapes of one upload may take\n16 MiB plus BYTES per event [FIRSTPASS_MAX_NAME_BYTES_PER_EVENT]\n"
     "(default 4K; 0 = no limit); more: 413. Bounds the stored bytes of\nan upload by the events it holds"},
    {"max-distinct", OPT_SIZE, CFG(max_distinct), 0, 0, "N",
     "most distinct strings (event names, categories, input shapes, grids)\nand most distinct operators by name and input shapes in one upload,\n"
     "each [FIRSTPASS_MAX_DISTINCT] (default 256K = 262144; 0 = no limit);\nmore: 413 (what an upload holds per distinct one does not shrink\n"
     "with its events: ~70 and ~300 bytes)"},
    {"max-steps", OPT_SIZE, CFG(max_steps), 0, 0, "N",
     "most steps (ProfilerStep#N ranges) of one upload split into roles and\nstored one by one, the earliest [FIRSTPASS_MAX_STEPS] (default 10000;\n"
     "0 = no limit); the rest are counted (steps_over_cap), the step phase\nkeeps them all (each held step costs ~2 KB until the upload ends)"},
    {"max-uploads", OPT_UINT, CFG(max_uploads), 1, 0, "N", "uploads processed at once [FIRSTPASS_MAX_UPLOADS] (default 4); more: 503"},
    {"max-connections", OPT_UINT, CFG(max_connections), 1, 0, "N", "open connections at most [FIRSTPASS_MAX_CONNECTIONS] (default 256)"},
    {"timeout", OPT_UINT, CFG(timeout_s), 0, 0, "SECONDS",
     "idle connection timeout, protects against slow clients\n[FIRSTPASS_TIMEOUT] (default 60)"},
    {"header-timeout", OPT_UINT, CFG(header_timeout_s), 0, 0, "SECONDS",
     "a request head (request line and headers) must be complete this\nlong after the connection or its previous request began, else\n"
     "the connection is closed; so an idle keep-alive connection too\n[FIRSTPASS_HEADER_TIMEOUT] (default 10; 0 = none)"},
    {"min-body-rate", OPT_SIZE, CFG(min_body_rate), 0, 0, "BYTES",
     "a request body must arrive at BYTES a second or more over each\n10 s window, else the connection is closed (an upload is rolled\n"
     "back) [FIRSTPASS_MIN_BODY_RATE] (default 1K; 0 = none)"},
    {"min-download-rate", OPT_SIZE, CFG(min_download_rate), 0, 0, "BYTES",
     "a reply (a /trace download, or any reply larger than the socket\nbuffers) must be taken by its client at BYTES a second or more: one\n"
     "that falls over 128 KiB and 10 s at BYTES behind is cut\n[FIRSTPASS_MIN_DOWNLOAD_RATE] (default 8K; 0 = none)"},
    {"max-connections-per-ip", OPT_UINT, CFG(max_connections_per_ip), 1, 0, "N",
     "open connections from one client address at most, so one client\ncannot hold them all [FIRSTPASS_MAX_CONNECTIONS_PER_IP] (default 64;\n"
     "behind a proxy every client is the proxy: raise it to --max-connections)"},
    {"quiet", OPT_BOOL, CFG(quiet), 0, 0, NULL, "no access log on stderr [FIRSTPASS_QUIET=1]"},
    {"tokens-file", OPT_STR, CFG(tokens_file), 0, 0, "FILE",
     "bearer tokens, one 'NAME TOKEN' or 'NAME sha256:HEX' a line\n[FIRSTPASS_TOKENS_FILE]; then writes to /api/ (POST, PUT, DELETE)\n"
     "need 'Authorization: Bearer TOKEN' (401 without, 403 if unknown)"},
    {"cache-bytes", OPT_SIZE, CFG(cache_bytes), 0, 0, "BYTES",
     "memory for rendered read replies (operators, report, ...), which stay\nvalid until a delete or report edit [FIRSTPASS_CACHE_BYTES]\n"
     "(default 64M; 0 turns the cache off)"},
    {"read-auth", OPT_BOOL, CFG(read_auth), 0, 0, NULL,
     "with --tokens-file, GET/HEAD of /api/ need a token too; /healthz\nand the dashboard files stay open [FIRSTPASS_READ_AUTH=1]"},
    {"retain-days", OPT_SIZE, CFG(retain_days), 0, 0, "N",
     "prune sessions older than N days, oldest first [FIRSTPASS_RETAIN_DAYS]\n(default 0 = keep all); a session labelled pin:true or named by a\n"
     "baseline is never pruned"},
    {"max-db-bytes", OPT_SIZE, CFG(max_db_bytes), 0, 0, "BYTES",
     "prune the oldest sessions while the database's pages in use exceed\nBYTES [FIRSTPASS_MAX_DB_BYTES] (default 0 = no limit)"},
    {"retain-interval", OPT_UINT, CFG(retain_interval_s), 1, 86400 * 365, "SECONDS",
     "seconds between retention passes; one runs at start-up\n[FIRSTPASS_RETAIN_INTERVAL] (default 300)"},
    {"vacuum-min-bytes", OPT_SIZE, CFG(vacuum_min_bytes), 0, 0, "BYTES",
     "after a retention pass, VACUUM when at least BYTES and a quarter\nof the file are free pages, holding uploads off (503) meanwhile\n"
     "[FIRSTPASS_VACUUM_MIN_BYTES] (default 64M; 0 = never)"},
    {"backup-dir", OPT_STR, CFG(backup_dir), 0, 0, "DIR",
     "where POST /api/v1/admin/backup writes [FIRSTPASS_BACKUP_DIR]\n(default: backups/ next to --db; 'none' turns backups off: 403)"},
    {"max-capture-seconds", OPT_UINT, CFG(max_capture_seconds), 1, 0, "SECONDS",
     "longest capture POST /api/v1/captures may ask for: the engines'\nprofilers slow inference while they run (docs/serving.md)\n"
     "[FIRSTPASS_MAX_CAPTURE_SECONDS] (default 60); longer: 400"},
    {"max-capture-steps", OPT_UINT, CFG(max_capture_steps), 1, 0, "N",
     "most engine steps a capture may ask for (SGLang's num_steps)\n[FIRSTPASS_MAX_CAPTURE_STEPS] (default 1000); more: 400"},
    {"captures-per-hour", OPT_UINT, CFG(captures_per_hour), 1, 0, "N",
     "captures of one target in any hour at most\n[FIRSTPASS_CAPTURES_PER_HOUR] (default 6); more: 429"},
    {"agent-timeout", OPT_UINT, CFG(agent_timeout_s), 2, 0, "SECONDS",
     "an agent not heard from this long fails its captures in flight; a\npoll waits at most half of it [FIRSTPASS_AGENT_TIMEOUT] (default 60)"},
    {"max-polls", OPT_UINT, CFG(max_polls), 1, 0, "N",
     "agents' long polls waiting at once (each holds a connection and\nits thread); more are answered at once with retry_s\n"
     "[FIRSTPASS_MAX_POLLS] (default 32)"},
    {"devices", OPT_STR, CFG(devices_file), 0, 0, "FILE",
     "device rows (a name pattern, dense peaks per precision, bandwidth) tried\nbefore the built-in table for the efficiency figures; JSON, at most\n"
     "1 MiB and 256 rows (docs/efficiency.md) [FIRSTPASS_DEVICES]; a file\nthat does not parse stops the start-up"},
    {"reanalyse", OPT_BOOL, CFG(reanalyse), 0, 0, NULL,
     "analyse again, from their stored events, the sessions stored by an\nolder analysis (below --older-than), newest first, then exit; serves\n"
     "nothing meanwhile (docs/operations.md) [FIRSTPASS_REANALYSE=1]"},
    {"older-than", OPT_UINT, CFG(older_than), 0, 0, "VERSION",
     "with --reanalyse: the sessions whose analysis version is below\nVERSION [FIRSTPASS_OLDER_THAN] (default: this server's version)"},
    {"reanalyse-on-start", OPT_BOOL, CFG(reanalyse_on_start), 0, 0, NULL,
     "while serving, re-analyse the sessions of older analysis versions in\nthe background, one at a time at low priority, in a free upload\n"
     "slot that an upload takes over when it needs it\n[FIRSTPASS_REANALYSE_ON_START=1] (default off)"},
    {"reanalyse-lease", OPT_UINT, CFG(reanalyse_lease_s), 3, 3600, "SECONDS",
     "a re-analysis claims its session this long, renewed while it runs;\na server that dies mid-way leaves the session to the next one after\n"
     "it [FIRSTPASS_REANALYSE_LEASE] (default 60)"},
    {"claim-timeout", OPT_UINT, CFG(claim_timeout_s), 1, 0, "SECONDS",
     "a capture a poll handed out goes back to the queue when its agent\nhas not confirmed it (a status report) this long after\n"
     "[FIRSTPASS_CLAIM_TIMEOUT] (default 30: firstpass-upload confirms as\nsoon as it records the capture, before it calls the engine)"},
    {"agent-expiry", OPT_SIZE, CFG(agent_expiry_s), 0, 0, "SECONDS",
     "an agent not heard from this long is forgotten, with its targets\n(never sooner than --agent-timeout) [FIRSTPASS_AGENT_EXPIRY]\n"
     "(default 86400; 0 = never)"},
    {"max-agents", OPT_SIZE, CFG(max_agents), 0, 0, "N",
     "agents registered at once at most [FIRSTPASS_MAX_AGENTS] (default\n10000; 0 = no limit); a new one past it: 507"},
    {"max-targets", OPT_SIZE, CFG(max_targets), 0, 0, "N",
     "targets registered at once at most [FIRSTPASS_MAX_TARGETS] (default\n10000; 0 = no limit); a registration past it: 507"},
    {"max-captures", OPT_SIZE, CFG(max_captures), 0, 0, "N",
     "finished captures (uploaded, failed, cancelled) kept at most: a new capture\nforgets the oldest past it; their sessions stay [FIRSTPASS_MAX_CAPTURES]\n(default 10000; 0 = no limit)"},
    {NULL, OPT_STR, 0, 0, 0, NULL, NULL},
};

static const char usage_head[] =
    "usage: firstpass-server [options]\n"
    "\n"
    "The firstpass profiling dashboard: receives PyTorch profiler / Kineto traces and\n"
    "collector sessions, stores them in SQLite and serves the REST API and dashboard.\n"
    "\n"
    "options (environment variable in brackets; a flag wins over the environment):\n";

/* --help: the table's lines, the flag column 25 wide (a longer flag pushes its text over). */
static void usage(FILE *f) {
    fputs(usage_head, f);
    for (const opt *o = opts; o->name; o++) {
        char flag[64];
        snprintf(flag, sizeof flag, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        fprintf(f, "  %-22s%s", flag, strlen(flag) > 22 ? "  " : " ");
        for (const char *h = o->help; *h;) {
            size_t n = strcspn(h, "\n");
            fprintf(f, "%.*s\n", (int)n, h);
            h += n;
            if (*h) fprintf(f, "%25s", ""), h++;
        }
    }
    fputs("  --help                 this text\n"
          "  --version              print the version and the git revision\n"
          "\n"
          "Sizes accept a K, M or G suffix (powers of 1024). Each option that takes a text\n"
          "(--db, --tokens-file, ...) also reads FIRSTPASS_<NAME>_FILE: the first line of\n"
          "that file, for a secret mounted as a file (FIRSTPASS_DB_FILE=/run/secrets/db);\n"
          "setting both FIRSTPASS_<NAME> and FIRSTPASS_<NAME>_FILE is refused. PostgreSQL's\n"
          "password is libpq's: PGPASSWORD or PGPASSFILE, never needed in --db.\n", f);
}

static int parse_size(const char *s, unsigned long long *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) return -1;
    unsigned long long mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1ull << 10, end++;
    else if (*end == 'M' || *end == 'm') mul = 1ull << 20, end++;
    else if (*end == 'G' || *end == 'g') mul = 1ull << 30, end++;
    if (*end || (mul > 1 && v > ULLONG_MAX / mul)) return -1;
    *out = v * mul;
    return 0;
}

/* Sets option o from text v (a flag's argument or the variable's value); -1 with a line
 * on stderr when v does not fit o. */
static int set_opt(server_cfg *c, const opt *o, const char *v) {
    char *field = (char *)c + o->off;
    unsigned long long n = 0;
    switch (o->kind) {
    case OPT_STR: *(const char **)field = v; return 0;
    case OPT_BOOL: *(int *)field = strcmp(v, "0") != 0; return 0;
    default: break;
    }
    if (parse_size(v, &n)) {
        fprintf(stderr, "firstpass-server: --%s: '%s' is not a number\n", o->name, v);
        /* Kubernetes gives every pod FIRSTPASS_PORT=tcp://IP:PORT when a Service is named
         * firstpass (its "service links"), which the server would read as its port. */
        if (o->kind == OPT_PORT && !strncmp(v, "tcp://", 6))
            fprintf(stderr, "firstpass-server: FIRSTPASS_PORT looks like a Kubernetes service link (a Service named firstpass): "
                            "set enableServiceLinks: false in the pod spec, or FIRSTPASS_PORT in the container's env\n");
        return -1;
    }
    if (o->kind == OPT_SIZE) {
        *(unsigned long long *)field = n;
    } else if (o->kind == OPT_PORT) {
        if (n < 1 || n > 65535) { fprintf(stderr, "firstpass-server: --port must be 1..65535\n"); return -1; }
        *(int *)field = (int)n;
    } else {
        if (n < o->min) n = o->min;
        if (o->max && n > o->max) n = o->max;
        *(unsigned *)field = n > UINT_MAX ? UINT_MAX : (unsigned)n;
    }
    return 0;
}

/* FIRSTPASS_<NAME> for option name (upper case, '-' as '_'). */
static void env_name(const char *name, char *out, size_t n) {
    snprintf(out, n, "FIRSTPASS_%s", name);
    for (char *p = out; *p; p++) *p = *p == '-' ? '_' : (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
}

/* The values read from FIRSTPASS_<NAME>_FILE, one per option; static, so that they live
 * as long as the configuration that points at them. */
#define SECRET_MAX 65536
static char *file_values[sizeof opts / sizeof opts[0]];

/* FIRSTPASS_<NAME>_FILE (the Docker secrets convention): the value of a text option read
 * from a file, so that a secret (a --db URI with its password) reaches the server without
 * being on its command line or in its pod spec. The first line, without its newline, at most
 * SECRET_MAX bytes. NULL when the variable is not set; *bad after a line on stderr. */
static const char *file_value(const opt *o, const char *env, const char *direct, int *bad) {
    char var[80];
    snprintf(var, sizeof var, "%s_FILE", env);
    const char *path = getenv(var);
    if (o->kind != OPT_STR || !path || !*path) return NULL;
    if (direct && *direct) {
        fprintf(stderr, "firstpass-server: %s and %s are both set: keep one\n", env, var);
        *bad = 1;
        return NULL;
    }
    FILE *f = fopen(path, "r");
    char *v = f ? malloc(SECRET_MAX + 1) : NULL;
    size_t n = v ? fread(v, 1, SECRET_MAX + 1, f) : 0;
    int err = errno, failed = !v || ferror(f) || n > SECRET_MAX;
    const char *why = !f ? strerror(err) : !v ? "out of memory" : n > SECRET_MAX ? "larger than 64 KiB" : strerror(err);
    if (f) fclose(f);
    if (failed) {
        fprintf(stderr, "firstpass-server: %s: cannot read %s: %s\n", var, path, why);
        free(v);
        *bad = 1;
        return NULL;
    }
    v[n] = '\0';
    v[strcspn(v, "\r\n")] = '\0';
    file_values[o - opts] = v;
    return v;
}

/* The environment, then the flags (a flag wins). 0, 1 when --help/--version answered, 2 on
 * a refused command line. */
static int parse_options(server_cfg *cfg, int argc, char **argv) {
    for (const opt *o = opts; o->name; o++) {
        char env[64];
        env_name(o->name, env, sizeof env);
        const char *v = getenv(env);
        int bad = 0;
        const char *fv = file_value(o, env, v, &bad);
        if (bad) return 2;
        if (fv) v = fv;
        if (v && *v && set_opt(cfg, o, v)) return 2;
    }
    enum { N = sizeof opts / sizeof opts[0] };
    struct option longopts[N + 2];
    int n = 0;
    for (const opt *o = opts; o->name; o++) longopts[n++] = (struct option){o->name, o->arg ? required_argument : no_argument, 0, 0};
    longopts[n++] = (struct option){"help", no_argument, 0, 'h'};
    longopts[n++] = (struct option){"version", no_argument, 0, 'V'};
    longopts[n] = (struct option){0, 0, 0, 0};
    int idx, ch;
    while ((ch = getopt_long(argc, argv, "h", longopts, &idx)) != -1) {
        if (ch == 'h') { usage(stdout); return 1; }
        if (ch == 'V') { printf("firstpass-server %s (revision %s)\n", FP_VERSION, fp_revision()); return 1; }
        if (ch != 0) { usage(stderr); return 2; }
        if (set_opt(cfg, &opts[idx], opts[idx].arg ? optarg : "1")) return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "firstpass-server: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    return 0;
}

/* --tokens-file: a file that does not parse stops the start-up, so a typo never leaves
 * the server open. --read-auth alone is refused for the same reason. */
static int load_tokens(app *a) {
    const server_cfg *c = a->cfg;
    if (!c->tokens_file || !*c->tokens_file) {
        if (!c->read_auth) return 0;
        fprintf(stderr, "firstpass-server: --read-auth needs --tokens-file\n");
        return -1;
    }
    char err[512], q[600];
    a->tokens = auth_load(c->tokens_file, err, sizeof err);
    if (!a->tokens) {
        fprintf(stderr, "firstpass-server: --tokens-file %s\n", err);
        return -1;
    }
    struct stat st;
    if (auth_plaintext_count(a->tokens) && !stat(c->tokens_file, &st) && (st.st_mode & 077))
        log_line("warn", "the tokens file holds plaintext tokens and is readable by group or others: chmod 600 it, or store sha256:HEX",
                 "file=%s", logfmt_quote(c->tokens_file, q, sizeof q));
    log_line("info", c->read_auth ? "access tokens loaded; writes to /api/ need one, reads too" : "access tokens loaded; writes to /api/ need one",
             "tokens=%zu", auth_count(a->tokens));
    return 0;
}

/* Retention's hold on uploads for a VACUUM (retention.h): the importer's slots. */
static int pause_uploads(void *ctx) { return import_pause(ctx); }
static void resume_uploads(void *ctx) { import_resume(ctx); }

/* Why two malloc arenas: glibc gives each thread that allocates under contention an arena
 * of its own, up to 8 a core, and memory freed in one arena serves only its own threads.
 * An upload runs a request thread, a loader and up to three analysis jobs, each filling
 * and freeing buffers, so two uploads at once spread their heaps over ten arenas: two
 * 9,000-thread uploads peaked at 108 MB of RSS for 73 MB of heap (massif), 91 MB with two
 * arenas, single uploads and cached reads no slower (issue 24). MALLOC_ARENA_MAX, when
 * set, is glibc's and wins. */
static void limit_arenas(void) {
    if (!getenv("MALLOC_ARENA_MAX")) mallopt(M_ARENA_MAX, 2);
}

int main(int argc, char **argv) {
    limit_arenas();
    server_cfg cfg = {.bind = "127.0.0.1", .port = 8080, .db = "var/firstpass.db", .static_dir = "static",
                      .max_upload = 1ull << 30, .max_inflated = 8ull << 30, .max_events = 20000000, .max_tracks = 10000, .max_name_bytes_per_event = 4096, .max_distinct = 256u << 10, .max_steps = 10000,
                      .max_connections = 256, .max_uploads = 4, .timeout_s = 60, .header_timeout_s = 10, .min_body_rate = 1024, .min_download_rate = 8192, .max_connections_per_ip = 64, .quiet = 0,
                      .cache_bytes = 64ull << 20, .retain_interval_s = 300, .vacuum_min_bytes = 64ull << 20};
    cfg.max_capture_seconds = 60, cfg.max_capture_steps = 1000, cfg.captures_per_hour = 6, cfg.agent_timeout_s = 60, cfg.max_polls = 32;
    cfg.older_than = ANALYSIS_VERSION, cfg.reanalyse_lease_s = 60;
    cfg.claim_timeout_s = 30, cfg.agent_expiry_s = 86400, cfg.max_agents = 10000, cfg.max_targets = 10000, cfg.max_captures = 10000;
    int prc = parse_options(&cfg, argc, argv);
    if (prc) return prc == 1 ? 0 : prc;
    /* The database's folder is created, like `make run`'s var/ (a file only: a PostgreSQL
     * conninfo such as "host=/tmp/x dbname=y" once made a folder "host=" here). */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", cfg.db);
    int pg = store_uri_is_pg(cfg.db);
    char *slash = pg ? NULL : strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        mkdir(dir, 0755);
    }
    /* Backups default to backups/ beside the database; "none" turns them off. */
    char backups[PATH_MAX + 16];
    if (!cfg.backup_dir) {
        const char *parent = !slash ? "." : slash == dir ? "" : dir; /* dir is cut at the last '/' */
        snprintf(backups, sizeof backups, "%s/backups", parent);
        cfg.backup_dir = backups;
    } else if (!strcmp(cfg.backup_dir, "none")) {
        cfg.backup_dir = "";
    }
    char err[512], q[600];
    app a;
    memset(&a, 0, sizeof a);
    a.cfg = &cfg;
    log_line("info", "starting", "version=%s revision=%s pid=%ld", FP_VERSION, fp_revision(), (long)getpid());
    if (load_tokens(&a)) return 2;
    /* Every upload writes its scratch file in $TMPDIR: a read-only root file system without
     * a volume there made each one a 500 while /healthz said 200 (issue 53). Said at start. */
    if (tmpfile_check()) {
        char qd[600];
        int e = errno;
        log_line("error", "the scratch directory is not writable: uploads need it; set TMPDIR to a writable directory "
                          "(Kubernetes, readOnlyRootFilesystem: mount an emptyDir on /tmp)",
                 "dir=%s error=%s", logfmt_quote(tmpfile_dir(), qd, sizeof qd), logfmt_quote(strerror(e), q, sizeof q));
        return 1;
    }
    a.st = store_open(cfg.db, err, sizeof err);
    if (!a.st) {
        /* a PostgreSQL URI may hold a password: it is blanked */
        char rd[1024], qdb[1100];
        log_line("error", "cannot open the database", "db=%s error=%s", logfmt_quote(store_redact(cfg.db, rd, sizeof rd), qdb, sizeof qdb),
                 logfmt_quote(err, q, sizeof q));
        return 1;
    }
    /* Temporary files a killed server left in $TMPDIR (tmpfile.h): a 1 GB upload's scratch is ~360 MB. */
    int swept = tmpfile_sweep();
    if (swept) log_line("info", "removed temporary files of a server that is gone", "files=%d dir=%s", swept, tmpfile_dir());
    if (!realpath(cfg.static_dir, a.static_root)) {
        log_line("warn", "static directory not found: the dashboard is off", "static=%s", logfmt_quote(cfg.static_dir, q, sizeof q));
        a.static_root[0] = '\0';
    }
    a.cache = rcache_new((size_t)cfg.cache_bytes);
    if (!a.cache) {
        log_line("error", "out of memory", NULL);
        return 1;
    }
    import_limits lim = {cfg.max_upload, cfg.max_inflated, cfg.max_events, cfg.max_tracks, cfg.max_name_bytes_per_event, cfg.max_distinct, cfg.max_steps};
    a.imports = import_pool_new(a.st, cfg.max_uploads, &lim);
    if (!a.imports) {
        log_line("error", "out of memory", NULL);
        return 1;
    }
    int rc;
    if (cfg.reanalyse) { /* a batch that exits: no HTTP, no retention */
        rc = reanalyse_batch(a.imports, a.st, (int)cfg.older_than, (int)cfg.reanalyse_lease_s);
        goto out;
    }
    retention_cfg rcfg = {cfg.retain_days, cfg.max_db_bytes, cfg.retain_interval_s, cfg.vacuum_min_bytes,
                          pause_uploads, resume_uploads, metrics_pruned, a.imports};
    http_block_stop_signals(); /* before the first thread: retention's must not take SIGTERM */
    retention *ret = retention_start(a.st, &rcfg);
    reanalyse_worker *rw = cfg.reanalyse_on_start ? reanalyse_worker_start(a.imports, a.st, (int)cfg.reanalyse_lease_s) : NULL;
    if (cfg.reanalyse_on_start && !rw) log_line("error", "cannot start the re-analysis worker", NULL);
    rc = http_serve(&a);
    reanalyse_worker_stop(rw); /* before the pool and the store: it uses both */
    retention_stop(ret); /* before store_close: its pass uses the store */
out:
    import_pool_free(a.imports);
    rcache_free(a.cache);
    store_close(a.st);
    auth_free(a.tokens);
    return rc;
}
