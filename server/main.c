/* main.c: firstpass-server's command line: flags, environment, start-up.
 *
 * Every option is a flag and an environment variable (FIRSTPASS_<NAME>); a flag wins. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "auth.h"
#include "http.h"
#include "logfmt.h"
#include "tmpfile.h"
#include "rcache.h"
#include "retention.h"

static const char usage[] =
    "usage: firstpass-server [options]\n"
    "\n"
    "The firstpass profiling dashboard: receives PyTorch profiler / Kineto traces and\n"
    "collector sessions, stores them in SQLite and serves the REST API and dashboard.\n"
    "\n"
    "options (environment variable in brackets; a flag wins over the environment):\n"
    "  --bind ADDR            IPv4 address to listen on [FIRSTPASS_BIND] (default 127.0.0.1)\n"
    "  --port N               TCP port [FIRSTPASS_PORT] (default 8080)\n"
    "  --db FILE              SQLite database file, created if missing [FIRSTPASS_DB]\n"
    "                         (default var/firstpass.db)\n"
    "  --static DIR           dashboard files served at / [FIRSTPASS_STATIC] (default static)\n"
    "  --max-upload BYTES     largest upload body as sent, compressed or not [FIRSTPASS_MAX_UPLOAD]\n"
    "                         (default 1073741824 = 1 GiB); larger: 413\n"
    "  --max-inflated BYTES   largest decompressed trace [FIRSTPASS_MAX_INFLATED] (default 8 GiB)\n"
    "  --max-events N         most events in one session [FIRSTPASS_MAX_EVENTS] (default 20000000)\n"
    "  --max-uploads N        uploads processed at once [FIRSTPASS_MAX_UPLOADS] (default 4); more: 503\n"
    "  --max-connections N    open connections at most [FIRSTPASS_MAX_CONNECTIONS] (default 256)\n"
    "  --timeout SECONDS      idle connection timeout, protects against slow clients\n"
    "                         [FIRSTPASS_TIMEOUT] (default 60)\n"
    "  --quiet                no access log on stderr [FIRSTPASS_QUIET=1]\n"
    "  --tokens-file FILE     bearer tokens, one 'NAME TOKEN' or 'NAME sha256:HEX' a line\n"
    "                         [FIRSTPASS_TOKENS_FILE]; then writes to /api/ (POST, PUT, DELETE)\n"
    "                         need 'Authorization: Bearer TOKEN' (401 without, 403 if unknown)\n"
    "  --cache-bytes BYTES    memory for rendered read replies (operators, report, ...), which stay\n"
    "                         valid until a delete or report edit [FIRSTPASS_CACHE_BYTES]\n"
    "                         (default 64M; 0 turns the cache off)\n"
    "  --read-auth            with --tokens-file, GET/HEAD of /api/ need a token too; /healthz\n"
    "                         and the dashboard files stay open [FIRSTPASS_READ_AUTH=1]\n"
    "  --retain-days N        prune sessions older than N days, oldest first [FIRSTPASS_RETAIN_DAYS]\n"
    "                         (default 0 = keep all); a session labelled pin:true or named by a\n"
    "                         baseline is never pruned\n"
    "  --max-db-bytes BYTES   prune the oldest sessions while the database's pages in use exceed\n"
    "                         BYTES [FIRSTPASS_MAX_DB_BYTES] (default 0 = no limit)\n"
    "  --retain-interval SECONDS  seconds between retention passes; one runs at start-up\n"
    "                         [FIRSTPASS_RETAIN_INTERVAL] (default 300)\n"
    "  --vacuum-min-bytes BYTES  after a retention pass, VACUUM when at least BYTES and a quarter\n"
    "                         of the file are free pages, holding uploads off (503) meanwhile\n"
    "                         [FIRSTPASS_VACUUM_MIN_BYTES] (default 64M; 0 = never)\n"
    "  --backup-dir DIR       where POST /api/v1/admin/backup writes [FIRSTPASS_BACKUP_DIR]\n"
    "                         (default: backups/ next to --db; 'none' turns backups off: 403)\n"
    "  --help                 this text\n"
    "  --version              print the version\n"
    "\n"
    "Sizes accept a K, M or G suffix (powers of 1024).\n";

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

static int set_opt(server_cfg *c, const char *name, const char *v) {
    unsigned long long n;
    if (!strcmp(name, "bind")) c->bind = v;
    else if (!strcmp(name, "db")) c->db = v;
    else if (!strcmp(name, "static")) c->static_dir = v;
    else if (!strcmp(name, "quiet")) c->quiet = strcmp(v, "0") != 0;
    else if (!strcmp(name, "tokens-file")) c->tokens_file = v;
    else if (!strcmp(name, "read-auth")) c->read_auth = strcmp(v, "0") != 0;
    else if (!strcmp(name, "backup-dir")) c->backup_dir = v;
    else {
        if (parse_size(v, &n)) {
            fprintf(stderr, "firstpass-server: --%s: '%s' is not a number\n", name, v);
            return -1;
        }
        if (!strcmp(name, "port")) {
            if (n < 1 || n > 65535) { fprintf(stderr, "firstpass-server: --port must be 1..65535\n"); return -1; }
            c->port = (int)n;
        } else if (!strcmp(name, "max-upload")) c->max_upload = n;
        else if (!strcmp(name, "max-inflated")) c->max_inflated = n;
        else if (!strcmp(name, "max-events")) c->max_events = n;
        else if (!strcmp(name, "max-uploads")) c->max_uploads = n ? (unsigned)n : 1;
        else if (!strcmp(name, "max-connections")) c->max_connections = n ? (unsigned)n : 1;
        else if (!strcmp(name, "timeout")) c->timeout_s = (unsigned)n;
        else if (!strcmp(name, "cache-bytes")) c->cache_bytes = n;
        else if (!strcmp(name, "retain-days")) c->retain_days = n;
        else if (!strcmp(name, "max-db-bytes")) c->max_db_bytes = n;
        else if (!strcmp(name, "retain-interval")) c->retain_interval_s = n ? (unsigned)(n > 86400 * 365 ? 86400 * 365 : n) : 1;
        else if (!strcmp(name, "vacuum-min-bytes")) c->vacuum_min_bytes = n;
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
    char err[512];
    a->tokens = auth_load(c->tokens_file, err, sizeof err);
    if (!a->tokens) {
        fprintf(stderr, "firstpass-server: --tokens-file %s\n", err);
        return -1;
    }
    struct stat st;
    if (auth_plaintext_count(a->tokens) && !stat(c->tokens_file, &st) && (st.st_mode & 077))
        fprintf(stderr, "level=warn msg=\"%s holds plaintext tokens and is readable by group or others: chmod 600 it, or store sha256:HEX\"\n",
                c->tokens_file);
    fprintf(stderr, "level=info msg=\"%zu access token(s) loaded; writes to /api/ need one%s\"\n", auth_count(a->tokens),
            c->read_auth ? ", reads too" : "");
    return 0;
}

int main(int argc, char **argv) {
    server_cfg cfg = {.bind = "127.0.0.1", .port = 8080, .db = "var/firstpass.db", .static_dir = "static",
                      .max_upload = 1ull << 30, .max_inflated = 8ull << 30, .max_events = 20000000,
                      .max_connections = 256, .max_uploads = 4, .timeout_s = 60, .quiet = 0,
                      .cache_bytes = 64ull << 20, .retain_interval_s = 300, .vacuum_min_bytes = 64ull << 20};
    static const char *const names[] = {"bind", "port", "db", "static", "max-upload", "max-inflated", "max-events",
                                        "max-uploads", "max-connections", "timeout", "quiet", "tokens-file", "read-auth", "cache-bytes",
                                        "retain-days", "max-db-bytes", "retain-interval", "vacuum-min-bytes", "backup-dir", NULL};
    /* Environment first, so that flags override it. */
    for (int i = 0; names[i]; i++) {
        char env[64];
        snprintf(env, sizeof env, "FIRSTPASS_%s", names[i]);
        for (char *p = env; *p; p++) *p = *p == '-' ? '_' : (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
        const char *v = getenv(env);
        if (v && *v && set_opt(&cfg, names[i], v)) return 2;
    }
    static const struct option longopts[] = {
        {"bind", required_argument, 0, 0}, {"port", required_argument, 0, 0}, {"db", required_argument, 0, 0},
        {"static", required_argument, 0, 0}, {"max-upload", required_argument, 0, 0}, {"max-inflated", required_argument, 0, 0},
        {"max-events", required_argument, 0, 0}, {"max-uploads", required_argument, 0, 0},
        {"max-connections", required_argument, 0, 0}, {"timeout", required_argument, 0, 0}, {"quiet", no_argument, 0, 'q'},
        {"tokens-file", required_argument, 0, 0}, {"read-auth", no_argument, 0, 'r'},
        {"cache-bytes", required_argument, 0, 0},
        {"retain-days", required_argument, 0, 0}, {"max-db-bytes", required_argument, 0, 0},
        {"retain-interval", required_argument, 0, 0}, {"vacuum-min-bytes", required_argument, 0, 0},
        {"backup-dir", required_argument, 0, 0},
        {"help", no_argument, 0, 'h'}, {"version", no_argument, 0, 'V'}, {0, 0, 0, 0}};
    int idx, ch;
    while ((ch = getopt_long(argc, argv, "h", longopts, &idx)) != -1) {
        if (ch == 'h') { fputs(usage, stdout); return 0; }
        if (ch == 'V') { puts("firstpass-server 0.1.0"); return 0; }
        if (ch == 'q') { cfg.quiet = 1; continue; }
        if (ch == 'r') { cfg.read_auth = 1; continue; }
        if (ch != 0) { fputs(usage, stderr); return 2; }
        if (set_opt(&cfg, longopts[idx].name, optarg)) return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "firstpass-server: unexpected argument '%s'\n%s", argv[optind], usage);
        return 2;
    }
    /* The database's folder is created, like `make run`'s var/. */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", cfg.db);
    char *slash = strrchr(dir, '/');
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
    char err[512];
    app a;
    memset(&a, 0, sizeof a);
    a.cfg = &cfg;
    if (load_tokens(&a)) return 2;
    a.st = store_open(cfg.db, err, sizeof err);
    if (!a.st) {
        char q[600];
        fprintf(stderr, "level=error msg=\"cannot open the database\" db=%s error=%s\n", cfg.db, logfmt_quote(err, q, sizeof q));
        return 1;
    }
    /* Temporary files a killed server left in $TMPDIR (tmpfile.h): a 1 GB upload's scratch is ~360 MB. */
    int swept = tmpfile_sweep();
    if (swept) fprintf(stderr, "level=info msg=\"removed temporary files of a server that is gone\" files=%d dir=%s\n", swept, tmpfile_dir());
    if (!realpath(cfg.static_dir, a.static_root)) {
        fprintf(stderr, "level=warn msg=\"static directory %s not found: the dashboard is off\"\n", cfg.static_dir);
        a.static_root[0] = '\0';
    }
    a.cache = rcache_new((size_t)cfg.cache_bytes);
    if (!a.cache) {
        fprintf(stderr, "level=error msg=\"out of memory\"\n");
        return 1;
    }
    retention_cfg rcfg = {cfg.retain_days, cfg.max_db_bytes, cfg.retain_interval_s, cfg.vacuum_min_bytes,
                          http_uploads_pause, http_uploads_resume};
    http_block_stop_signals(); /* before the first thread: retention's must not take SIGTERM */
    retention *ret = retention_start(a.st, &rcfg);
    int rc = http_serve(&a);
    retention_stop(ret); /* before store_close: its pass uses the store */
    rcache_free(a.cache);
    store_close(a.st);
    auth_free(a.tokens);
    return rc;
}
