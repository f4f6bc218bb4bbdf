/* session.c -- labels and the "firstpass" metadata object of the native session JSON.
 *
 * Owns the mapping between fp_session_meta / fp_label and Jansson values, nothing else.
 * Must not touch aggregates or traceEvents (collector/session_json.c, server ingest), and must
 * not include CUPTI, curl, SQLite or MHD headers: both the server and the collector link it. */
#include "session.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dup_range(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p == NULL)
        return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Trims [*s, *s + *n) in place (pointer and length only). */
static void trim(const char **s, size_t *n)
{
    while (*n > 0 && is_space((*s)[0])) {
        (*s)++;
        (*n)--;
    }
    while (*n > 0 && is_space((*s)[*n - 1]))
        (*n)--;
}

/* Parses the entry [kv, kv + len) into *out. 0 or -1 (malformed / OOM), *out zeroed on -1. */
/* Jansson's own validator decides (strict: no overlong forms, no surrogates, at most
 * U+10FFFF), the same one every later json_string call applies. */
int fp_utf8_valid(const char *s, size_t n)
{
    json_t *t = json_stringn(s, n);
    int ok = t != NULL && memchr(s, '\0', n) == NULL;
    json_decref(t);
    return ok;
}

static int label_parse_range(const char *kv, size_t len, fp_label *out)
{
    const char *colon = memchr(kv, ':', len);
    const char *k = kv, *v;
    size_t kn, vn;

    out->key = NULL;
    out->value = NULL;
    if (colon == NULL)
        return -1;
    kn = (size_t)(colon - kv);
    v = colon + 1;
    vn = len - kn - 1;
    trim(&k, &kn);
    trim(&v, &vn);
    if (kn == 0 || !fp_utf8_valid(k, kn) || !fp_utf8_valid(v, vn))
        return -1;
    out->key = dup_range(k, kn);
    out->value = dup_range(v, vn);
    if (out->key == NULL || out->value == NULL) {
        free(out->key);
        free(out->value);
        out->key = NULL;
        out->value = NULL;
        return -1;
    }
    return 0;
}

int fp_label_parse_one(const char *kv, fp_label *out)
{
    if (out == NULL)
        return -1;
    out->key = NULL;
    out->value = NULL;
    if (kv == NULL)
        return -1;
    return label_parse_range(kv, strlen(kv), out);
}

int fp_labels_parse(const char *spec, fp_label **out, size_t *n)
{
    fp_label *arr = NULL;
    size_t count = 0, cap = 0;
    const char *p;

    if (out == NULL || n == NULL)
        return -1;
    *out = NULL;
    *n = 0;
    if (spec == NULL || spec[0] == '\0')
        return 0;
    /* One entry per ',' plus one: an exact upper bound, so a single allocation. */
    cap = 1;
    for (p = spec; *p; p++)
        if (*p == ',')
            cap++;
    arr = calloc(cap, sizeof *arr);
    if (arr == NULL)
        return -1;
    p = spec;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (label_parse_range(p, len, &arr[count]) != 0)
            goto err;
        count++;
        if (end == NULL)
            break;
        p = end + 1;
    }
    *out = arr;
    *n = count;
    return 0;
err:
    fp_labels_free(arr, count);
    return -1;
}

void fp_labels_free(fp_label *l, size_t n)
{
    size_t i;
    if (l == NULL)
        return;
    for (i = 0; i < n; i++) {
        free(l[i].key);
        free(l[i].value);
    }
    free(l);
}

json_t *fp_labels_to_json(const fp_label *l, size_t n)
{
    json_t *obj = json_object();
    size_t i;
    if (obj == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        if (l[i].key == NULL)
            continue;
        if (json_object_set_new(obj, l[i].key, json_string(l[i].value ? l[i].value : "")) != 0)
            goto err;
    }
    return obj;
err:
    json_decref(obj);
    return NULL;
}

/* json_string(NULL) returns NULL, which set_new would reject: map NULL to JSON null instead. */
static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

json_t *fp_session_meta_to_json(const fp_session_meta *m)
{
    json_t *obj;
    int rc = 0;
    unsigned long long dropped;

    if (m == NULL)
        return NULL;
    obj = json_object();
    if (obj == NULL)
        return NULL;
    /* JSON integers are json_int_t (long long) in Jansson; saturate rather than wrap. */
    dropped = m->dropped_records > (unsigned long long)LLONG_MAX
                  ? (unsigned long long)LLONG_MAX
                  : m->dropped_records;
    rc |= json_object_set_new(obj, "format", json_string(FP_SESSION_FORMAT));
    rc |= json_object_set_new(obj, "version", json_integer(FP_SESSION_VERSION));
    rc |= json_object_set_new(obj, "name", str_or_null(m->name));
    rc |= json_object_set_new(obj, "labels", fp_labels_to_json(m->labels, m->nlabels));
    rc |= json_object_set_new(obj, "host", str_or_null(m->host));
    rc |= json_object_set_new(obj, "pid", json_integer(m->pid));
    rc |= json_object_set_new(obj, "command", str_or_null(m->command));
    rc |= json_object_set_new(obj, "cupti_version", json_integer(m->cupti_version));
    rc |= json_object_set_new(obj, "driver_version", json_integer(m->driver_version));
    rc |= json_object_set_new(obj, "runtime_version", json_integer(m->runtime_version));
    rc |= json_object_set_new(obj, "start_ns", json_integer(m->start_ns));
    rc |= json_object_set_new(obj, "end_ns", json_integer(m->end_ns));
    rc |= json_object_set_new(obj, "dropped_records", json_integer((json_int_t)dropped));
    rc |= json_object_set_new(obj, "events_truncated", json_boolean(m->events_truncated));
    if (rc != 0) {
        json_decref(obj);
        return NULL;
    }
    return obj;
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    if (err == NULL || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Reads an optional string member into a new heap copy. 0 ok (absent/null -> *dst NULL), -1 type. */
static int get_str(const json_t *obj, const char *key, char **dst, char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    *dst = NULL;
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_string(v)) {
        set_err(err, errlen, "firstpass.%s must be a string", key);
        return -1;
    }
    *dst = dup_range(json_string_value(v), json_string_length(v));
    if (*dst == NULL) {
        set_err(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

/* Reads an optional integer member. 0 ok (absent/null -> *dst 0), -1 type. */
static int get_int(const json_t *obj, const char *key, long long *dst, char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    *dst = 0;
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_integer(v)) {
        set_err(err, errlen, "firstpass.%s must be an integer", key);
        return -1;
    }
    *dst = (long long)json_integer_value(v);
    return 0;
}

static int get_labels(const json_t *obj, fp_session_meta *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, "labels");
    const char *key;
    json_t *val;
    size_t n, i = 0;

    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_object(v)) {
        set_err(err, errlen, "firstpass.labels must be an object");
        return -1;
    }
    n = json_object_size(v);
    if (n == 0)
        return 0;
    /* The same bounds as ?label=: the object was bounded only by the trace's size. */
    if (n > FP_LABELS_MAX) {
        set_err(err, errlen, "firstpass.labels has %zu labels; at most %d", n, FP_LABELS_MAX);
        return -1;
    }
    out->labels = calloc(n, sizeof *out->labels);
    if (out->labels == NULL) {
        set_err(err, errlen, "out of memory");
        return -1;
    }
    json_object_foreach((json_t *)v, key, val) {
        if (!json_is_string(val)) {
            set_err(err, errlen, "firstpass.labels.%s must be a string", key);
            return -1;
        }
        if (key[0] == '\0') {
            set_err(err, errlen, "firstpass.labels keys must not be empty");
            return -1;
        }
        if (strlen(key) + 1 + json_string_length(val) > FP_LABEL_MAX_BYTES) {
            set_err(err, errlen, "firstpass.labels.%.64s: key:value is longer than %d bytes", key, FP_LABEL_MAX_BYTES);
            return -1;
        }
        out->labels[i].key = strdup(key);
        out->labels[i].value = dup_range(json_string_value(val), json_string_length(val));
        out->nlabels = ++i; /* counted before the check so fp_session_meta_free frees it */
        if (out->labels[i - 1].key == NULL || out->labels[i - 1].value == NULL) {
            set_err(err, errlen, "out of memory");
            return -1;
        }
    }
    return 0;
}

int fp_session_meta_from_json(const json_t *obj, fp_session_meta *out, char *err, size_t errlen)
{
    json_t *v;
    long long dropped = 0, version = 0;

    if (out == NULL)
        return -1;
    memset(out, 0, sizeof *out);
    if (err && errlen > 0)
        err[0] = '\0';
    if (obj == NULL || !json_is_object(obj)) {
        set_err(err, errlen, "firstpass must be an object");
        return -1;
    }
    v = json_object_get(obj, "format");
    if (v != NULL && !json_is_null(v)) {
        if (!json_is_string(v)) {
            set_err(err, errlen, "firstpass.format must be a string");
            goto err;
        }
        if (strcmp(json_string_value(v), FP_SESSION_FORMAT) != 0) {
            set_err(err, errlen, "firstpass.format is \"%s\", expected \"" FP_SESSION_FORMAT "\"",
                    json_string_value(v));
            goto err;
        }
    }
    if (get_int(obj, "version", &version, err, errlen) != 0)
        goto err;
    if (get_str(obj, "name", &out->name, err, errlen) != 0)
        goto err;
    if (get_labels(obj, out, err, errlen) != 0)
        goto err;
    if (get_str(obj, "host", &out->host, err, errlen) != 0)
        goto err;
    if (get_int(obj, "pid", &out->pid, err, errlen) != 0)
        goto err;
    if (get_str(obj, "command", &out->command, err, errlen) != 0)
        goto err;
    if (get_int(obj, "cupti_version", &out->cupti_version, err, errlen) != 0)
        goto err;
    if (get_int(obj, "driver_version", &out->driver_version, err, errlen) != 0)
        goto err;
    if (get_int(obj, "runtime_version", &out->runtime_version, err, errlen) != 0)
        goto err;
    if (get_int(obj, "start_ns", &out->start_ns, err, errlen) != 0)
        goto err;
    if (get_int(obj, "end_ns", &out->end_ns, err, errlen) != 0)
        goto err;
    if (get_int(obj, "dropped_records", &dropped, err, errlen) != 0)
        goto err;
    if (dropped < 0) {
        set_err(err, errlen, "firstpass.dropped_records must not be negative");
        goto err;
    }
    out->dropped_records = (unsigned long long)dropped;
    v = json_object_get(obj, "events_truncated");
    if (v != NULL && !json_is_null(v)) {
        if (!json_is_boolean(v)) {
            set_err(err, errlen, "firstpass.events_truncated must be a boolean");
            goto err;
        }
        out->events_truncated = json_is_true(v);
    }
    return 0;
err:
    fp_session_meta_free(out);
    return -1;
}

void fp_session_meta_free(fp_session_meta *m)
{
    if (m == NULL)
        return;
    free(m->name);
    free(m->host);
    free(m->command);
    fp_labels_free(m->labels, m->nlabels);
    memset(m, 0, sizeof *m);
}
