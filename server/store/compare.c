/* compare.c: GET /compare's lead (compare.h): steps by role, memory peaks, hardware, the
 * family of a renamed phase. */
#include "store/compare.h"

#include <stdio.h>
#include <string.h>

static double num(const json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

/* A side's {"count","mean"}, or null without steps (GET /steps' mean is null then). */
static json_t *step_side(const json_t *st) {
    const json_t *mean = json_object_get(st, "mean");
    if (!json_is_object(mean) || !json_array_size(json_object_get(st, "steps"))) return json_null();
    return json_pack("{s:I,s:O}", "count", (json_int_t)json_array_size(json_object_get(st, "steps")), "mean", mean);
}

json_t *compare_steps(const json_t *base_steps, const json_t *head_steps) {
    const json_t *roles = json_object_get(base_steps, "roles");
    if (!json_is_array(roles)) roles = json_object_get(head_steps, "roles");
    json_t *b = step_side(base_steps), *h = step_side(head_steps), *delta = json_null();
    if (!json_is_null(b) && !json_is_null(h)) {
        const json_t *bm = json_object_get(b, "mean"), *hm = json_object_get(h, "mean"), *r;
        size_t i;
        delta = json_object();
        json_array_foreach(roles, i, r) {
            char key[64];
            snprintf(key, sizeof key, "%s_us", json_string_value(r) ? json_string_value(r) : "");
            json_object_set_new(delta, key, json_real(num(hm, key) - num(bm, key)));
        }
        json_object_set_new(delta, "dur_us", json_real(num(hm, "dur_us") - num(bm, "dur_us")));
    }
    return json_pack("{s:O,s:o,s:o,s:o}", "roles", roles ? roles : json_array(), "base", b, "head", h, "delta", delta);
}

/* A device's peaks as the compare lists them, or null when the side has no such device. */
static json_t *mem_side(const json_t *mem, const char *device) {
    const json_t *d;
    size_t i;
    json_array_foreach(json_object_get(mem, "devices"), i, d) {
        const char *name = json_string_value(json_object_get(d, "device"));
        if (!name || strcmp(name, device)) continue;
        const json_t *res = json_object_get(d, "reserved_peak_bytes"), *from = json_object_get(d, "allocated_from");
        return json_pack("{s:O,s:O,s:O}", "peak_bytes", json_object_get(d, "peak_bytes"), "reserved_peak_bytes", res ? res : json_null(),
                         "allocated_from", from ? from : json_null());
    }
    return json_null();
}

/* Appends device's row to rows unless a row names it already. */
static void mem_row(json_t *rows, const char *device, const json_t *base_mem, const json_t *head_mem) {
    const json_t *r;
    size_t i;
    json_array_foreach(rows, i, r) if (!strcmp(json_string_value(json_object_get(r, "device")), device)) return;
    json_t *b = mem_side(base_mem, device), *h = mem_side(head_mem, device);
    json_t *d = !json_is_null(b) && !json_is_null(h) ? json_real(num(h, "peak_bytes") - num(b, "peak_bytes")) : json_null();
    json_array_append_new(rows, json_pack("{s:s,s:o,s:o,s:o}", "device", device, "base", b, "head", h, "delta_peak_bytes", d));
}

json_t *compare_memory(const json_t *base_mem, const json_t *head_mem) {
    json_t *rows = json_array();
    const json_t *sides[2] = {base_mem, head_mem}, *d;
    size_t i;
    for (int s = 0; s < 2; s++)
        json_array_foreach(json_object_get(sides[s], "devices"), i, d) {
            const char *name = json_string_value(json_object_get(d, "device"));
            if (name) mem_row(rows, name, base_mem, head_mem);
        }
    return rows;
}

/* The length of the run's part of a hardware string: "NAME xN" without " (of M on the node)". */
static size_t run_part(const char *hw) {
    const char *of = strstr(hw, " (of ");
    return of ? (size_t)(of - hw) : strlen(hw);
}

json_t *compare_hardware(const char *base, const char *head) {
    base = base ? base : "";
    head = head ? head : "";
    json_t *same = json_null();
    if (*base && *head) {
        size_t nb = run_part(base), nh = run_part(head);
        same = json_boolean(nb == nh && !memcmp(base, head, nb));
    }
    return json_pack("{s:s,s:s,s:o}", "base", base, "head", head, "same", same);
}

int compare_family(const char *name, char *out, size_t n) {
    out[0] = '\0';
    const char *hash = strchr(name, '#'), *dot = hash ? strrchr(hash, '.') : NULL;
    /* a class between # and the method: at least one character, no blank (a phrase is not a class) */
    if (!hash || !dot || dot == hash + 1 || strcspn(hash + 1, " \t") < (size_t)(dot - hash - 1)) return 0;
    int w = snprintf(out, n, "%.*s#*%s", (int)(hash - name), name, dot);
    if (w < 0 || (size_t)w >= n) {
        out[0] = '\0';
        return 0;
    }
    return 1;
}
