/* upload_main.c -- firstpass-upload: sends spooled sessions and trace files to a server.
 *
 * Owns argument parsing and the spool walk. Uses upload.c for HTTP and the spool layout; must
 * not need CUPTI (it is built even where CUDA is absent). Deletes a spooled file only after
 * the server answered 201 for it. */
#include <curl/curl.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "upload.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: firstpass-upload --server URL [--token T] [--spool DIR]\n"
            "       firstpass-upload --server URL [--token T] [--name N] [--label k:v]... FILE...\n"
            "\n"
            "Without FILE: sends every session in the spool directory (default: $FIRSTPASS_SPOOL,\n"
            "else $XDG_STATE_HOME/firstpass/spool, else /tmp/firstpass-spool-$UID), deleting each\n"
            "file the server accepts (HTTP 201) and keeping the others.\n"
            "With FILE...: uploads each trace file (Kineto / Chrome trace / native session JSON,\n"
            "plain or gzip) and prints the session URL; files are never deleted.\n"
            "\n"
            "  --server URL     server base URL (default $FIRSTPASS_SERVER)\n"
            "  --token T        bearer token (default $FIRSTPASS_TOKEN)\n"
            "  --spool DIR      spool directory to send\n"
            "  --name N         session name for FILE uploads (query ?name=)\n"
            "  --label k:v      label for FILE uploads, repeatable (query ?label=)\n"
            "  --timeout S      total timeout per upload in seconds (default 300)\n"
            "  --help           this text\n"
            "\n"
            "Exit status: 0 when every upload got 201 (or nothing to send), 1 if any failed,\n"
            "2 on a usage error.\n");
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

static int send_one(const fp_upload_opts *o, const char *path, int delete_on_success)
{
    char resp[1024], err[256];
    long status = 0;
    if (fp_upload_file(o, path, &status, resp, sizeof resp, err, sizeof err) != 0) {
        fprintf(stderr, "firstpass-upload: %s: failed: %s%s%s\n", path, err,
                resp[0] ? ": " : "", resp);
        return -1;
    }
    printf("%s: 201 %s\n", path, resp);
    if (delete_on_success && unlink(path) != 0) {
        fprintf(stderr, "firstpass-upload: %s: uploaded but could not delete it\n", path);
        return -1;
    }
    return 0;
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
        if (send_one(o, names[i], 1) != 0)
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
    const char *spool = NULL, *name = NULL;
    char query[4096] = "", dir[4096];
    int i, nfiles = 0, failed = 0;

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
    if (fp_upload_global_init() != 0) {
        fprintf(stderr, "firstpass-upload: curl_global_init failed\n");
        return 1;
    }
    if (nfiles > 0) {
        o.query = query;
        for (i = 1; i <= nfiles; i++)
            if (send_one(&o, argv[i], 0) != 0)
                failed++;
        return failed ? 1 : 0;
    }
    if (spool == NULL) {
        if (fp_spool_dir(dir, sizeof dir, 0) != 0) {
            fprintf(stderr, "firstpass-upload: cannot name the spool directory\n");
            return 1;
        }
        spool = dir;
    }
    return send_spool(&o, spool) == 0 ? 0 : 1;
bad:
    fprintf(stderr, "firstpass-upload: query string too long\n");
    return 2;
}
