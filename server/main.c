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

#include "http.h"

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
    }
    return 0;
}

int main(int argc, char **argv) {
    server_cfg cfg = {"127.0.0.1", 8080, "var/firstpass.db", "static", 1ull << 30, 8ull << 30, 20000000, 256, 4, 60, 0};
    static const char *const names[] = {"bind", "port", "db", "static", "max-upload", "max-inflated", "max-events",
                                        "max-uploads", "max-connections", "timeout", "quiet", NULL};
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
        {"help", no_argument, 0, 'h'}, {"version", no_argument, 0, 'V'}, {0, 0, 0, 0}};
    int idx, ch;
    while ((ch = getopt_long(argc, argv, "h", longopts, &idx)) != -1) {
        if (ch == 'h') { fputs(usage, stdout); return 0; }
        if (ch == 'V') { puts("firstpass-server 0.1.0"); return 0; }
        if (ch == 'q') { cfg.quiet = 1; continue; }
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
    char err[512];
    app a;
    memset(&a, 0, sizeof a);
    a.cfg = &cfg;
    a.st = store_open(cfg.db, err, sizeof err);
    if (!a.st) {
        fprintf(stderr, "firstpass-server: %s\n", err);
        return 1;
    }
    if (!realpath(cfg.static_dir, a.static_root)) {
        fprintf(stderr, "level=warn msg=\"static directory %s not found: the dashboard is off\"\n", cfg.static_dir);
        a.static_root[0] = '\0';
    }
    int rc = http_serve(&a);
    store_close(a.st);
    return rc;
}
