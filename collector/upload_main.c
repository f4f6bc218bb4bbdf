/* upload_main.c -- firstpass-upload: sends spooled sessions and trace files to a server.
 *
 * Owns argument parsing and the spool walk. Uses upload.c for HTTP and the spool layout; must
 * not need CUPTI (it is built even where CUDA is absent). Deletes a spooled file only after
 * the server answered 201 for it. */
#include <curl/curl.h>
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "upload.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: firstpass-upload --server URL [--token T] [--spool DIR]\n"
            "       firstpass-upload --server URL [--token T] [--name N] [--label k:v]... FILE...\n"
            "       firstpass-upload --watch DIR... [--target ENGINE=URL...] (firstpass-upload --watch x --help)\n"
            "       firstpass-upload --check-against BASELINE [--server URL] [--name N] [--label k:v]...\n"
            "                        [--rel X] [--abs-us X] [--abs-calls X] [--gate steps|operators] FILE\n"
            "\n"
            "Without FILE: sends every session in the spool directory (default: $FIRSTPASS_SPOOL,\n"
            "else $XDG_STATE_HOME/firstpass/spool, else $HOME/.local/state/firstpass/spool, else\n"
            "/tmp/firstpass-spool-$UID), each with Idempotency-Key (the file_id of the agent's\n"
            "watch-<file_id>.json.gz, else the file's name: what its first upload sent), deleting each\n"
            "file the server stores (HTTP 201 with a session id, or 200: stored already) and keeping\n"
            "the others (409: an upload of it is in flight on the server: run again later). A file the\n"
            "server refuses (a 4xx other than 401, 403, 408, 409, 429) is renamed NAME.refused and\n"
            "never sent again. The directory must be your own: not a symlink, owned by you, mode 0700;\n"
            "or a group's (a Kubernetes fsGroup volume): setgid, group rwx, no bits for others, its\n"
            "group one of yours, owned by you or root (mode 2770). Any other is refused.\n"
            "With FILE...: uploads each trace file (Kineto / Chrome trace / native session JSON,\n"
            "plain or gzip) and prints the session URL; files are never deleted.\n"
            "With --check-against: uploads FILE, checks the new session against the named baseline\n"
            "(GET /api/v1/sessions/{id}/regressions), prints the five-line report and the\n"
            "regressions as text; thresholds default to the server's (rel 0.10, abs_us 100,\n"
            "abs_calls 10). The verdict is the server's \"regressed\": the step time and each named\n"
            "phase's beyond the steps' own noise (--gate steps, the default); --gate operators\n"
            "also fails on any operator, kernel or phase item past the thresholds.\n"
            "\n"
            "  --server URL     server base URL (default $FIRSTPASS_SERVER)\n"
            "  --token T        bearer token (default $FIRSTPASS_TOKEN)\n"
            "  --spool DIR      spool directory to send\n"
            "  --name N         session name for FILE uploads (query ?name=)\n"
            "  --label k:v      label for FILE uploads, repeatable (query ?label=)\n"
            "  --timeout S      deadline of each request in seconds, connect to the reply's last\n"
            "                   byte (default 300); replies over 64 KiB (uploads) or 16 MiB\n"
            "                   (--check-against's reads) are not read and count as failures\n"
            "  --help           this text\n"
            "\n"
            "Exit status: 0 when every upload got 201 (or nothing to send), 1 if any failed,\n"
            "2 on a usage error. With --check-against: 0 no regression, 1 regression found,\n"
            "2 usage error, failed upload or failed request.\n");
}

/* Appends "&key=escaped(value)" to q. 0 or -1. */
static int query_add(char *q, size_t len, const char *key, const char *value)
{
    char *e = curl_easy_escape(NULL, value, 0);
    size_t used = strlen(q);
    int w;
    if (e == NULL)
        return -1;
    w = snprintf(q + used, len - used, "%s%s=%s", used ? "&" : "", key, e);
    curl_free(e);
    return (w < 0 || (size_t)w >= len - used) ? -1 : 0;
}

/* ---- --check-against: upload, then the regression check (docs/collector.md) ---- */

/* The largest GET reply read (a report, a regression check); a longer one is a failed request. */
#define GET_REPLY_MAX (16 * 1024 * 1024)

static size_t on_get_body(char *data, size_t size, size_t nmemb, void *ud)
{
    fp_membuf *b = ud;
    size_t n = size * nmemb;
    if (n > GET_REPLY_MAX - b->len)
        return 0; /* CURLE_WRITE_ERROR: the rest is never read */
    return fp_membuf_write(ud, data, n) == 0 ? n : 0;
}

/* GET <server><path> with Accept; the whole reply goes to body. 0 when the server answered
 * (any status, in *status), -1 on a transport error (reason in err). */
static int http_get(const fp_upload_opts *o, const char *path, const char *accept, fp_membuf *body,
                    long *status, char *err, size_t errlen)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    char url[4096], hdr[1100], cerr[CURL_ERROR_SIZE] = "";
    size_t n = strlen(o->server);
    CURLcode rc;
    if (c == NULL) {
        snprintf(err, errlen, "curl_easy_init failed");
        return -1;
    }
    while (n > 0 && o->server[n - 1] == '/')
        n--;
    snprintf(url, sizeof url, "%.*s%s", (int)n, o->server, path);
    snprintf(hdr, sizeof hdr, "Accept: %s", accept);
    h = curl_slist_append(h, hdr);
    fp_curl_common(c, o, &h, cerr);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_get_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)GET_REPLY_MAX);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "firstpass-upload/1");
    rc = curl_easy_perform(c);
    *status = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    else if (rc == CURLE_WRITE_ERROR || rc == CURLE_FILESIZE_EXCEEDED)
        snprintf(err, errlen, "the reply is larger than %d bytes; not read", GET_REPLY_MAX);
    else
        snprintf(err, errlen, "%s", cerr[0] ? cerr : curl_easy_strerror(rc));
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return rc == CURLE_OK ? 0 : -1;
}

/* GET path; on 200 prints the body to stdout when print is set and hands it back in out
 * (caller frees). -1 after printing why on stderr otherwise. */
static int get_ok(const fp_upload_opts *o, const char *path, const char *accept, int print, fp_membuf *out)
{
    char err[CURL_ERROR_SIZE + 64] = "";
    long status = 0;
    memset(out, 0, sizeof *out);
    if (http_get(o, path, accept, out, &status, err, sizeof err) != 0 || status != 200) {
        if (err[0])
            fprintf(stderr, "firstpass-upload: GET %s: %s\n", path, err);
        else
            fprintf(stderr, "firstpass-upload: GET %s: HTTP %ld: %s\n", path, status, out->p ? out->p : "");
        fp_membuf_free(out);
        return -1;
    }
    if (print && out->p)
        fputs(out->p, stdout);
    return 0;
}

/* 1 when name is a baseline name ([A-Za-z0-9._-]{1,64}), so it goes into a URL as is. */
static int baseline_name_ok(const char *name)
{
    size_t n = strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-");
    return n > 0 && n <= 64 && name[n] == '\0';
}

/* Exit status: 0 clean, 1 regressions found, 2 the upload or a request failed. */
static int check_against(const fp_upload_opts *o, const char *file, const char *baseline,
                         const char *thresholds)
{
    char resp[1024], err[256], path[1024];
    long status = 0;
    json_error_t je;
    json_t *doc;
    fp_membuf b;
    long long id;
    int regressed;

    if (fp_upload_file(o, file, &status, resp, sizeof resp, err, sizeof err) != 0) {
        fprintf(stderr, "firstpass-upload: %s: failed: %s%s%s\n", file, err, resp[0] ? ": " : "", resp);
        return 2;
    }
    doc = json_loads(resp, 0, &je);
    id = json_integer_value(json_object_get(doc, "id"));
    json_decref(doc);
    if (id <= 0) {
        fprintf(stderr, "firstpass-upload: %s: the server's reply has no session id: %s\n", file, resp);
        return 2;
    }
    printf("%s: 201 %s\n", file, resp);
    /* The JSON reply decides the exit status; the text replies are what a person reads. */
    snprintf(path, sizeof path, "/api/v1/sessions/%lld/regressions?baseline=%s%s", id, baseline, thresholds);
    if (get_ok(o, path, "application/json", 0, &b) != 0)
        return 2;
    doc = json_loads(b.p ? b.p : "", 0, &je);
    fp_membuf_free(&b);
    if (!json_is_boolean(json_object_get(doc, "regressed"))) {
        fprintf(stderr, "firstpass-upload: GET %s: the reply has no \"regressed\"\n", path);
        json_decref(doc);
        return 2;
    }
    regressed = json_is_true(json_object_get(doc, "regressed"));
    json_decref(doc);
    snprintf(path, sizeof path, "/api/v1/sessions/%lld/report", id);
    if (get_ok(o, path, "text/plain", 1, &b) != 0)
        return 2;
    fp_membuf_free(&b);
    printf("\n");
    snprintf(path, sizeof path, "/api/v1/sessions/%lld/regressions?baseline=%s%s&format=text", id, baseline, thresholds);
    if (get_ok(o, path, "text/plain", 1, &b) != 0)
        return 2;
    fp_membuf_free(&b);
    return regressed ? 1 : 0;
}

/* Appends "&key=value" for a threshold option; value must be a number >= 0. 0 or -1. */
static int threshold_add(char *q, size_t len, const char *key, const char *value)
{
    char *end;
    double v = strtod(value, &end);
    size_t used = strlen(q);
    int w;
    if (!*value || *end || !(v >= 0))
        return -1;
    w = snprintf(q + used, len - used, "&%s=%s", key, value);
    return (w < 0 || (size_t)w >= len - used) ? -1 : 0;
}

static int send_one(const fp_upload_opts *o, const char *path, int delete_on_success)
{
    char resp[1024], err[256];
    long status = 0;
    if (fp_upload_file(o, path, &status, resp, sizeof resp, err, sizeof err) != 0) {
        fprintf(stderr, "firstpass-upload: %s: failed: %s%s%s\n", path, err,
                resp[0] ? ": " : "", resp);
        return -1;
    }
    printf("%s: %ld %s\n", path, status, resp);
    if (delete_on_success && unlink(path) != 0) {
        fprintf(stderr, "firstpass-upload: %s: uploaded but could not delete it\n", path);
        return -1;
    }
    return 0;
}

/* One spooled file: sent with the Idempotency-Key its first upload had (fp_spool_key), so that
 * a session the server stored already (200) or is storing (409) is not stored again; deleted
 * once stored. A document the server refuses (fp_upload_refused) is renamed NAME.refused,
 * never sent again (issue 50: it was sent again at every run). 0 sent, -1 not. */
static int send_spooled(const fp_upload_opts *o, const char *path)
{
    char resp[1024], err[256], key[65], to[4200];
    long status = 0, ra = 0;
    fp_upload_opts ko = *o;
    fp_spool_key(path, key);
    ko.idempotency_key = key;
    ko.retry_after_s = &ra;
    if (fp_upload_file(&ko, path, &status, resp, sizeof resp, err, sizeof err) == 0) {
        printf("%s: %ld %s%s\n", path, status, resp, status == 200 ? " (stored already)" : "");
        if (unlink(path) != 0) {
            fprintf(stderr, "firstpass-upload: %s: uploaded but could not delete it\n", path);
            return -1;
        }
        return 0;
    }
    if (status == 409) {
        fprintf(stderr, "firstpass-upload: %s: an upload of it is in flight on the server (HTTP 409); kept: run again "
                        "after %ld s\n", path, ra > 0 ? ra : 10);
        return -1;
    }
    if (fp_upload_refused(status)) {
        snprintf(to, sizeof to, "%s.refused", path);
        fprintf(stderr, "firstpass-upload: %s: refused by the server: %s%s%s; renamed %s (not sent again)\n", path, err,
                resp[0] ? ": " : "", resp, rename(path, to) == 0 ? to : "(rename failed: kept)");
        return -1;
    }
    fprintf(stderr, "firstpass-upload: %s: failed: %s%s%s; kept\n", path, err, resp[0] ? ": " : "", resp);
    return -1;
}

static int is_spool_name(const char *n)
{
    size_t len = strlen(n);
    if (n[0] == '.')
        return 0; /* tmp files being written, "." and ".." */
    return (len > 8 && strcmp(n + len - 8, ".json.gz") == 0) ||
           (len > 5 && strcmp(n + len - 5, ".json") == 0);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int send_spool(const fp_upload_opts *o, const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char **names = NULL;
    size_t n = 0, cap = 0, i;
    int failed = 0, sent = 0;

    if (d == NULL) {
        printf("spool %s: nothing to send (no such directory)\n", dir);
        return 0;
    }
    while ((de = readdir(d)) != NULL) {
        if (!is_spool_name(de->d_name))
            continue;
        if (n == cap) {
            char **p = realloc(names, (cap = cap ? cap * 2 : 16) * sizeof *names);
            if (p == NULL) {
                failed = 1;
                break;
            }
            names = p;
        }
        names[n] = malloc(strlen(dir) + strlen(de->d_name) + 2);
        if (names[n] == NULL) {
            failed = 1;
            break;
        }
        sprintf(names[n], "%s/%s", dir, de->d_name);
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str); /* oldest first: names embed the start time */
    for (i = 0; i < n; i++) {
        if (send_spooled(o, names[i]) != 0)
            failed++;
        else
            sent++;
        free(names[i]);
    }
    free(names);
    printf("spool %s: %d sent, %d failed\n", dir, sent, failed);
    return failed ? -1 : 0;
}

int main(int argc, char **argv)
{
    fp_upload_opts o;
    const char *spool = NULL, *name = NULL, *check = NULL;
    char query[4096] = "", dir[4096], thresholds[512] = "", why[4096 + 300];
    int i, nfiles = 0, failed = 0;

    if (fp_agent_wanted(argc, argv)) /* the agent beside serving engines (agent.h) */
        return fp_agent_main(argc, argv);
    memset(&o, 0, sizeof o);
    o.server = getenv("FIRSTPASS_SERVER");
    o.token = getenv("FIRSTPASS_TOKEN");
    o.timeout_s = 300;
    o.connect_timeout_s = 10;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--server") == 0 && has_val) {
            o.server = argv[++i];
        } else if (strcmp(a, "--token") == 0 && has_val) {
            o.token = argv[++i];
        } else if (strcmp(a, "--spool") == 0 && has_val) {
            spool = argv[++i];
        } else if (strcmp(a, "--name") == 0 && has_val) {
            name = argv[++i];
            if (query_add(query, sizeof query, "name", name) != 0)
                goto bad;
        } else if (strcmp(a, "--label") == 0 && has_val) {
            if (strchr(argv[i + 1], ':') == NULL) {
                fprintf(stderr, "firstpass-upload: --label wants k:v, got '%s'\n", argv[i + 1]);
                return 2;
            }
            if (query_add(query, sizeof query, "label", argv[++i]) != 0)
                goto bad;
        } else if (strcmp(a, "--timeout") == 0 && has_val) {
            o.timeout_s = atol(argv[++i]);
        } else if (strcmp(a, "--check-against") == 0 && has_val) {
            check = argv[++i];
            if (!baseline_name_ok(check)) {
                fprintf(stderr, "firstpass-upload: --check-against wants a baseline name "
                                "([A-Za-z0-9._-], 1 to 64), got '%s'\n", check);
                return 2;
            }
        } else if ((strcmp(a, "--rel") == 0 || strcmp(a, "--abs-us") == 0 || strcmp(a, "--abs-calls") == 0) && has_val) {
            if (threshold_add(thresholds, sizeof thresholds, strcmp(a, "--rel") == 0 ? "rel"
                              : strcmp(a, "--abs-us") == 0 ? "abs_us" : "abs_calls", argv[i + 1]) != 0) {
                fprintf(stderr, "firstpass-upload: %s wants a number >= 0, got '%s'\n", a, argv[i + 1]);
                return 2;
            }
            i++;
        } else if (strcmp(a, "--gate") == 0 && has_val) {
            if (strcmp(argv[i + 1], "steps") != 0 && strcmp(argv[i + 1], "operators") != 0) {
                fprintf(stderr, "firstpass-upload: --gate wants steps or operators, got '%s'\n", argv[i + 1]);
                return 2;
            }
            /* a fixed word, checked above: no escaping needed */
            if (strlen(thresholds) + strlen("&gate=") + strlen(argv[i + 1]) >= sizeof thresholds)
                goto bad;
            strcat(thresholds, "&gate=");
            strcat(thresholds, argv[++i]);
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "firstpass-upload: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        } else {
            argv[nfiles + 1] = argv[i]; /* compact file arguments in place */
            nfiles++;
        }
    }
    if (o.server == NULL || o.server[0] == '\0') {
        fprintf(stderr, "firstpass-upload: --server URL (or FIRSTPASS_SERVER) is required\n");
        usage(stderr);
        return 2;
    }
    if (nfiles > 0 && spool) {
        fprintf(stderr, "firstpass-upload: give either --spool or FILE..., not both\n");
        return 2;
    }
    if (thresholds[0] && !check) {
        fprintf(stderr, "firstpass-upload: --rel, --abs-us, --abs-calls and --gate go with --check-against\n");
        return 2;
    }
    if (check && (nfiles != 1 || spool)) {
        fprintf(stderr, "firstpass-upload: --check-against takes exactly one FILE\n");
        return 2;
    }
    if (fp_upload_global_init() != 0) {
        fprintf(stderr, "firstpass-upload: curl_global_init failed\n");
        return check ? 2 : 1;
    }
    if (check) {
        o.query = query;
        return check_against(&o, argv[1], check, thresholds);
    }
    if (nfiles > 0) {
        o.query = query;
        for (i = 1; i <= nfiles; i++)
            if (send_one(&o, argv[i], 0) != 0)
                failed++;
        return failed ? 1 : 0;
    }
    /* Only the user's own directory is sent from (and deleted in): files another user planted
     * would go out with this user's token (fp_spool_check). */
    switch (fp_spool_prepare(spool, 0, dir, sizeof dir, why, sizeof why)) {
    case 0:
        return send_spool(&o, dir) == 0 ? 0 : 1;
    case 1:
        printf("spool %s: nothing to send (no such directory)\n", dir);
        return 0;
    default:
        fprintf(stderr, "firstpass-upload: spool %s\n", why);
        return 1;
    }
bad:
    fprintf(stderr, "firstpass-upload: query string too long\n");
    return 2;
}
