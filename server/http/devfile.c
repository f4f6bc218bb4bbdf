/* devfile.c: the --devices file of devfile.h: its parser and the rows it installs. */
#include "http/devfile.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/devices.h"

#define STR_MAX 255

/* The installed rows and the strings they point to (one allocation each). */
static device_extra *rows;
static char *strs;

void devfile_free(void) {
    devices_set_extra(NULL, 0);
    free(rows);
    free(strs);
    rows = NULL;
    strs = NULL;
}

/* A string member k of o into the pool at *p (NULL when absent and !required); -1 bad. */
static int str_member(const json_t *o, const char *k, int required, char **p, const char **out, char *err, size_t n, size_t i) {
    const json_t *v = json_object_get(o, k);
    *out = NULL;
    if (!v && !required) return 0;
    size_t len = json_string_length(v);
    if (!json_is_string(v) || !len || len > STR_MAX) {
        snprintf(err, n, "devices[%zu].%s: %s", i, k, required ? "a string of 1 to 255 bytes is required" : "must be a string of 1 to 255 bytes");
        return -1;
    }
    memcpy(*p, json_string_value(v), len + 1);
    *out = *p;
    *p += len + 1;
    return 0;
}

/* A number member k of o, scaled, in [0, max]; absent: 0 (required: an error). */
static int num_member(const json_t *o, const char *k, double scale, double max, int required, double *out, char *err, size_t n,
                      const char *where) {
    const json_t *v = json_object_get(o, k);
    *out = 0;
    if (!v && !required) return 0;
    double x = json_number_value(v);
    if (!json_is_number(v) || !isfinite(x) || x < 0 || x > max || (required && !(x > 0))) {
        snprintf(err, n, "%s.%s: a number %sup to %g is required", where, k, required ? "over 0 and " : "from 0 ", max);
        return -1;
    }
    *out = x * scale;
    return 0;
}

static int parse_row(const json_t *o, size_t i, device_extra *x, char **pool, char *err, size_t n) {
    char where[48];
    snprintf(where, sizeof where, "devices[%zu]", i);
    if (!json_is_object(o)) return snprintf(err, n, "%s: an object is required", where), -1;
    const char *label;
    if (str_member(o, "match", 1, pool, &x->pattern, err, n, i) || str_member(o, "id", 1, pool, &x->row.id, err, n, i) ||
        str_member(o, "label", 0, pool, &label, err, n, i) || str_member(o, "source", 0, pool, &x->row.source, err, n, i))
        return -1;
    x->row.label = label ? label : x->row.id;
    if (!x->row.source) x->row.source = "the --devices file";
    const json_t *pk = json_object_get(o, "peaks_tflops"), *mem = json_object_get(o, "memory_gib"), *sms = json_object_get(o, "sms");
    if (!json_is_object(pk)) return snprintf(err, n, "%s.peaks_tflops: an object is required", where), -1;
    char pw[64];
    snprintf(pw, sizeof pw, "%s.peaks_tflops", where);
    device_row *r = &x->row;
    if (num_member(pk, "fp32", 1e12, 1e6, 1, &r->fp32, err, n, pw) || num_member(pk, "tf32_tensor", 1e12, 1e6, 0, &r->tf32, err, n, pw) ||
        num_member(pk, "fp32_matrix", 1e12, 1e6, 0, &r->fp32m, err, n, pw) || num_member(pk, "fp16_tensor", 1e12, 1e6, 0, &r->fp16, err, n, pw) ||
        num_member(pk, "bf16_tensor", 1e12, 1e6, 0, &r->bf16, err, n, pw) || num_member(pk, "fp8_tensor", 1e12, 1e6, 0, &r->fp8, err, n, pw) ||
        num_member(o, "bandwidth_gbps", 1e9, 1e6, 1, &r->bw, err, n, where))
        return -1;
    if (sms) {
        json_int_t v = json_integer_value(sms);
        if (!json_is_integer(sms) || v < 1 || v > 1000000) return snprintf(err, n, "%s.sms: an integer 1..1000000 is required", where), -1;
        x->sms = (int)v;
    }
    if (mem) {
        double lo = json_number_value(json_array_get(mem, 0)), hi = json_number_value(json_array_get(mem, 1));
        if (json_array_size(mem) != 2 || !json_is_number(json_array_get(mem, 0)) || !json_is_number(json_array_get(mem, 1)) ||
            !isfinite(lo) || !isfinite(hi) || lo < 0 || hi <= lo || hi > 1e7)
            return snprintf(err, n, "%s.memory_gib: [low, high] in GiB, 0 <= low < high, is required", where), -1;
        x->mem_lo = lo, x->mem_hi = hi;
    }
    return 0;
}

int devfile_parse(const char *text, size_t len, char *err, size_t errlen) {
    json_error_t je;
    json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!doc) return snprintf(err, errlen, "line %d: %s", je.line, je.text), -1;
    const json_t *list = json_object_get(doc, "devices");
    size_t n = json_array_size(list);
    int rc = -1;
    device_extra *xs = NULL;
    char *pool = NULL;
    if (!json_is_array(list) || !n || n > DEVICES_EXTRA_MAX) {
        snprintf(err, errlen, "\"devices\": an array of 1 to %d rows is required", DEVICES_EXTRA_MAX);
        goto done;
    }
    /* every string of every row fits in len bytes plus their terminators */
    xs = calloc(n, sizeof *xs);
    pool = malloc(len + 4 * n + 1);
    if (!xs || !pool) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    char *p = pool;
    for (size_t i = 0; i < n; i++)
        if (parse_row(json_array_get(list, i), i, &xs[i], &p, err, errlen)) goto done;
    devfile_free();
    rows = xs, strs = pool;
    xs = NULL, pool = NULL;
    devices_set_extra(rows, n);
    rc = 0;
done:
    free(xs);
    free(pool);
    json_decref(doc);
    return rc;
}

int devfile_load(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) return snprintf(err, errlen, "%s: cannot open it", path), -1;
    char *buf = malloc(DEVFILE_BYTES_MAX + 1);
    size_t len = buf ? fread(buf, 1, DEVFILE_BYTES_MAX + 1, f) : 0;
    int bad = ferror(f);
    fclose(f);
    char why[400];
    int rc = -1;
    if (!buf) snprintf(why, sizeof why, "out of memory");
    else if (bad) snprintf(why, sizeof why, "cannot read it");
    else if (len > DEVFILE_BYTES_MAX) snprintf(why, sizeof why, "over %u bytes", DEVFILE_BYTES_MAX);
    else rc = devfile_parse(buf, len, why, sizeof why);
    free(buf);
    if (rc) snprintf(err, errlen, "%s: %s", path, why);
    return rc;
}
