/* text.c: fixed-width tables in the style of torch's key_averages().table(), CSV, and
 * the five-line report as text. Works on the JSON replies only; no SQL, no HTTP. */
#include "http/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"
#include "analysis/report.h"
#include "lib/timefmt.h"
#include "lib/utf8.h"

/* torch's _format_memory: "8.00 Kb", "-292 b". */
static void fmt_mem(long long b, char *out, size_t n) {
    double kb = 1024, mb = kb * 1024, gb = mb * 1024;
    double a = (double)(b < 0 ? -b : b);
    if (a >= gb) snprintf(out, n, "%.2f Gb", (double)b / gb);
    else if (a >= mb) snprintf(out, n, "%.2f Mb", (double)b / mb);
    else if (a >= kb) snprintf(out, n, "%.2f Kb", (double)b / kb);
    else snprintf(out, n, "%lld b", b);
}
static double num(const json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

char *text_operators(const json_t *reply, size_t *len) {
    const json_t *rows = json_object_get(reply, "operators");
    const json_t *tot = json_object_get(reply, "totals");
    double tcpu = num(tot, "self_cpu_time_total_us"), tcuda = num(tot, "self_cuda_time_total_us");
    int shapes = json_is_true(json_object_get(reply, "group_by_input_shape"));
    size_t namew = 4, i;
    const json_t *r;
    json_array_foreach(rows, i, r) {
        size_t l = strlen(json_string_value(json_object_get(r, "name")));
        if (l > namew) namew = l;
    }
    if (namew > 55) namew = 55;
    static const char *const hdr[] = {"Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "Self CUDA", "Self CUDA %",
                                      "CUDA total", "CUDA time avg", "CPU Mem", "Self CPU Mem", "CUDA Mem", "Self CUDA Mem", "# of Calls"};
    buf b = {0};
    char line[4096];
    size_t o = 0;
    o += (size_t)snprintf(line + o, sizeof line - o, "%-*.*s", (int)namew, (int)namew, "-------------------------------------------------------");
    for (int c = 0; c < 14; c++) o += (size_t)snprintf(line + o, sizeof line - o, "  ------------");
    if (shapes) o += (size_t)snprintf(line + o, sizeof line - o, "  ----------------------------------------");
    buf_printf(&b, "%s\n", line);
    buf_printf(&b, "%*s", (int)namew, "Name");
    for (int c = 0; c < 14; c++) buf_printf(&b, "  %12s", hdr[c]);
    if (shapes) buf_printf(&b, "  %-40s", "Input Shapes");
    buf_printf(&b, "\n%s\n", line);
    json_array_foreach(rows, i, r) {
        char v[14][32];
        double scpu = num(r, "self_cpu_time_total_us"), cpu = num(r, "cpu_time_total_us"), scuda = num(r, "self_cuda_time_total_us"),
               cuda = num(r, "cuda_time_total_us");
        snprintf(v[0], 32, "%.2f%%", tcpu > 0 ? scpu / tcpu * 100 : 0);
        timefmt_us(scpu, v[1], 32);
        snprintf(v[2], 32, "%.2f%%", tcpu > 0 ? cpu / tcpu * 100 : 0);
        timefmt_us(cpu, v[3], 32);
        timefmt_us(num(r, "cpu_time_avg_us"), v[4], 32);
        timefmt_us(scuda, v[5], 32);
        snprintf(v[6], 32, "%.2f%%", tcuda > 0 ? scuda / tcuda * 100 : 0);
        timefmt_us(cuda, v[7], 32);
        timefmt_us(num(r, "cuda_time_avg_us"), v[8], 32);
        fmt_mem((long long)num(r, "cpu_memory_usage_bytes"), v[9], 32);
        fmt_mem((long long)num(r, "self_cpu_memory_usage_bytes"), v[10], 32);
        fmt_mem((long long)num(r, "cuda_memory_usage_bytes"), v[11], 32);
        fmt_mem((long long)num(r, "self_cuda_memory_usage_bytes"), v[12], 32);
        snprintf(v[13], 32, "%lld", (long long)num(r, "calls"));
        const char *name = json_string_value(json_object_get(r, "name"));
        size_t nl = strlen(name);
        if (nl > namew) buf_printf(&b, "%.*s...", (int)namew - 3, name);
        else buf_printf(&b, "%*s", (int)namew, name);
        for (int c = 0; c < 14; c++) buf_printf(&b, "  %12s", v[c]);
        if (shapes) buf_printf(&b, "  %-40s", json_string_value(json_object_get(r, "input_shapes")));
        buf_puts(&b, "\n");
    }
    char t1[32], t2[32];
    timefmt_us(tcpu, t1, sizeof t1);
    timefmt_us(tcuda, t2, sizeof t2);
    buf_printf(&b, "%s\nSelf CPU time total: %s\nSelf CUDA time total: %s\n", line, t1, t2);
    *len = b.len;
    return b.p;
}

/* One table cell as text, in full (CSV keeps every byte of a 4 KiB kernel name). */
static void cell(const json_t *v, buf *out) {
    buf_reset(out);
    if (json_is_string(v)) buf_put(out, json_string_value(v), json_string_length(v));
    else if (json_is_integer(v)) buf_printf(out, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) buf_printf(out, "%.3f", json_real_value(v));
    else if (v && !json_is_null(v)) {
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (s) buf_puts(out, s);
        free(s);
    }
}

/* A row's value for a column: "base.calls" reads member calls of member base, so that a
 * table of nested rows (GET /compare) is written as flat columns, one number a cell. */
static const json_t *col_value(const json_t *row, const char *col) {
    const char *dot = strchr(col, '.');
    if (!dot) return json_object_get(row, col);
    char key[64];
    size_t n = (size_t)(dot - col);
    if (n >= sizeof key) return NULL;
    memcpy(key, col, n);
    key[n] = '\0';
    return col_value(json_object_get(row, key), dot + 1);
}

/* A column's header: its name with the path's dots as underscores (base.calls: base_calls). */
static void col_header(buf *b, const char *col) {
    for (const char *p = col; *p; p++) buf_put(b, *p == '.' ? "_" : p, 1);
}

char *csv_rows(const json_t *rows, const char *const *cols, size_t *len) {
    buf b = {0}, v = {0};
    for (int c = 0; cols[c]; c++) {
        if (c) buf_puts(&b, ",");
        col_header(&b, cols[c]);
    }
    buf_puts(&b, "\n");
    size_t i;
    const json_t *r;
    json_array_foreach(rows, i, r) {
        for (int c = 0; cols[c]; c++) {
            const json_t *jv = col_value(r, cols[c]);
            cell(jv, &v);
            if (c) buf_puts(&b, ",");
            /* CSV injection (OWASP's rule): a text cell that a spreadsheet would read as a
             * formula (= + - @, or a tab or CR before one) gets a leading ' and quotes, so
             * an uploaded name like =HYPERLINK(...) stays text. Numbers are never text here,
             * so -1.5 is left alone. */
            int formula = json_is_string(jv) && v.len && memchr("=+-@\t\r", buf_str(&v)[0], 6);
            /* RFC 4180: quote fields with commas, quotes or newlines; double the quotes. */
            if (!formula && !strpbrk(buf_str(&v), ",\"\n\r")) {
                buf_put(&b, buf_str(&v), v.len);
                continue;
            }
            buf_puts(&b, formula ? "\"'" : "\"");
            for (const char *p = buf_str(&v); *p; p++) {
                buf_put(&b, p, 1);
                if (*p == '"') buf_put(&b, "\"", 1);
            }
            buf_puts(&b, "\"");
        }
        buf_puts(&b, "\n");
    }
    buf_free(&v);
    *len = b.len;
    return b.p ? b.p : strdup("");
}

/* Aligned columns; a cell wider than TEXT_COL_MAX is cut there (CSV has it in full). */
#define TEXT_COL_MAX 60

char *text_rows(const json_t *rows, const char *const *cols, size_t *len) {
    int nc = 0;
    while (cols[nc] && nc < 32) nc++;
    size_t w[32] = {0}, i;
    const json_t *r;
    buf b = {0}, v = {0};
    for (int c = 0; c < nc; c++) w[c] = strlen(cols[c]);
    json_array_foreach(rows, i, r) for (int c = 0; c < nc; c++) {
        cell(col_value(r, cols[c]), &v);
        if (v.len > w[c]) w[c] = v.len > TEXT_COL_MAX ? TEXT_COL_MAX : v.len;
    }
    for (int c = 0; c < nc; c++) {
        buf h = {0};
        col_header(&h, cols[c]);
        buf_printf(&b, "%s%-*s", c ? "  " : "", (int)w[c], buf_str(&h));
        buf_free(&h);
    }
    buf_puts(&b, "\n");
    json_array_foreach(rows, i, r) {
        for (int c = 0; c < nc; c++) {
            cell(col_value(r, cols[c]), &v);
            buf_printf(&b, "%s%-*.*s", c ? "  " : "", (int)w[c], (int)w[c], buf_str(&v));
        }
        buf_puts(&b, "\n");
    }
    buf_free(&v);
    *len = b.len;
    return b.p ? b.p : strdup("");
}

char *text_report(const json_t *report, size_t *len) {
    const json_t *lines = json_object_get(report, "lines");
    buf b = {0};
    for (int i = 0; i < REPORT_LINES; i++)
        buf_printf(&b, "%s: %s\n", report_line_titles[i], json_string_value(json_object_get(lines, report_line_keys[i])));
    *len = b.len;
    return b.p;
}

char *text_regressions(const json_t *r, size_t *len) {
    static const char *const cols[] = {"direction", "kind", "category", "name", "metric", "base", "head", "delta", "relative", NULL};
    const json_t *c = json_object_get(r, "counts"), *t = json_object_get(r, "thresholds");
    char head[2048]; /* the why is at most 1 KiB (history.c), the baseline name 64 bytes */
    const json_t *v = json_object_get(r, "verdict");
    int n = snprintf(head, sizeof head,
                     "regressed: %s (%lld regressed, %lld improved); session %lld against baseline '%s' (session %lld)\n"
                     "gate %s: %s\n"
                     "thresholds: rel %g, abs_us %g, abs_calls %g, abs_share %g (both relative and absolute must be exceeded); compared %s\n",
                     json_is_true(json_object_get(r, "regressed")) ? "yes" : "no",
                     (long long)json_integer_value(json_object_get(c, "regressed")), (long long)json_integer_value(json_object_get(c, "improved")),
                     (long long)json_integer_value(json_object_get(r, "head_session_id")), json_string_value(json_object_get(r, "baseline")),
                     (long long)json_integer_value(json_object_get(r, "base_session_id")),
                     json_string_value(json_object_get(v, "gate")) ? json_string_value(json_object_get(v, "gate")) : "steps",
                     json_string_value(json_object_get(v, "why")) ? json_string_value(json_object_get(v, "why")) : "",
                     json_number_value(json_object_get(t, "rel")),
                     json_number_value(json_object_get(t, "abs_us")), json_number_value(json_object_get(t, "abs_calls")),
                     json_number_value(json_object_get(t, "abs_share")),
                     strcmp(json_string_value(json_object_get(r, "basis")) ? json_string_value(json_object_get(r, "basis")) : "", "per_step")
                         ? "per call (not both sessions have ProfilerStep#N steps)"
                         : "per step");
    if (n < 0) return NULL;
    if ((size_t)n >= sizeof head) n = (int)sizeof head - 1; /* cut, never past the buffer */
    size_t tl = 0;
    char *table = text_rows(json_object_get(r, "items"), cols, &tl);
    char *all = table ? malloc((size_t)n + tl + 1) : NULL;
    if (all) {
        memcpy(all, head, (size_t)n);
        memcpy(all + n, table, tl + 1);
        *len = (size_t)n + tl;
    }
    free(table);
    return all;
}

/* Each kind of a {kind: {us, fraction}} object: " math 61.2% (1.20s), ..." and a newline. */
static void kinds_rest(buf *b, const json_t *k) {
    static const char *const kinds[] = {"math", "data_movement", "elementwise", "communication", "other", NULL};
    char t[32];
    for (int i = 0; kinds[i]; i++) {
        const json_t *v = json_object_get(k, kinds[i]);
        buf_printf(b, "%s %s %.1f%% (%s)", i ? "," : "", kinds[i], num(v, "fraction") * 100, timefmt_us(num(v, "us"), t, sizeof t));
    }
    buf_puts(b, "\n");
}

#define KINDS_PHASES_SHOWN 3  /* gpu_time_by_kind_by_phase rows in the text forms (the reply has up to 50) */
#define KINDS_PHASE_NAME 80   /* bytes of a phase's name there (the reply has it whole, to 1 KiB) */

/* The GPU time by kind of work (issue 48), one line: "GPU time by kind: math 61.2% (1.20s),
 * ...", then one line per phase with the most GPU time (gpu_time_by_kind_by_phase, the
 * first KINDS_PHASES_SHOWN): "  in ProfilerStep* (1.10s of GPU time): math 58.2% (640ms),
 * ..."; the fractions are of the phase's GPU time. Nothing where the reply has none (CPU-only,
 * stored before it existed). */
static void kinds_line(buf *b, const json_t *k, const json_t *phases) {
    char t[32], cut[KINDS_PHASE_NAME + 4];
    if (!json_is_object(k)) return;
    buf_puts(b, "GPU time by kind:");
    kinds_rest(b, k);
    const json_t *p;
    size_t i;
    json_array_foreach(phases, i, p) {
        if (i >= KINDS_PHASES_SHOWN) break;
        const char *name = json_string_value(json_object_get(p, "phase"));
        buf_printf(b, "  in %s (%s of GPU time):", utf8_clip(name ? name : "", KINDS_PHASE_NAME, cut, sizeof cut),
                   timefmt_us(num(p, "gpu_us"), t, sizeof t));
        kinds_rest(b, p);
    }
}

char *text_suspects(const json_t *r, size_t *len) {
    buf b = {0};
    char t1[32], t2[32], t3[32];
    if (!json_is_true(json_object_get(r, "computed"))) {
        buf_printf(&b, "no suspect list: this session was stored before firstpass computed one; upload it again\n");
    } else {
        const json_t *gpu = json_object_get(r, "gpu"), *steps = json_object_get(r, "steps");
        buf_printf(&b, "healthy: %s; wall %s", json_is_true(json_object_get(r, "healthy")) ? "yes" : "no",
                   timefmt_us(num(r, "wall_us"), t1, sizeof t1));
        if (json_is_object(gpu))
            buf_printf(&b, "; busy %.1f%% of the wall, %.1f%% after its first work (lead-in %s, tail %s)", num(gpu, "utilization_of_wall") * 100,
                       num(gpu, "busy_fraction") * 100, timefmt_us(num(gpu, "lead_in_us"), t2, sizeof t2),
                       timefmt_us(num(gpu, "tail_us"), t3, sizeof t3));
        else
            buf_printf(&b, "; no GPU activity in the trace"); /* CPU-only only with no device either: the doc cannot tell */
        if (json_is_object(steps))
            buf_printf(&b, "; %lld step%s, mean %s (p50 %s, p90 ", (long long)json_integer_value(json_object_get(steps, "count")),
                       json_integer_value(json_object_get(steps, "count")) == 1 ? "" : "s",
                       timefmt_us(num(steps, "mean_us"), t1, sizeof t1), timefmt_us(num(steps, "p50_us"), t2, sizeof t2)),
                buf_printf(&b, "%s)", timefmt_us(num(steps, "p90_us"), t3, sizeof t3));
        buf_printf(&b, "\n");
        kinds_line(&b, json_object_get(r, "gpu_time_by_kind"), json_object_get(r, "gpu_time_by_kind_by_phase"));
        const json_t *s;
        size_t i;
        json_array_foreach(json_object_get(r, "suspects"), i, s) {
            buf_printf(&b, "#%zu %s: %s\n   at stake %s (%.1f%% of the wall", i + 1, json_string_value(json_object_get(s, "category")),
                       json_string_value(json_object_get(s, "culprit")), timefmt_us(num(s, "at_stake_us"), t1, sizeof t1),
                       num(s, "at_stake_fraction") * 100);
            if (json_is_number(json_object_get(s, "at_stake_per_step_us")))
                buf_printf(&b, ", %s per step", timefmt_us(num(s, "at_stake_per_step_us"), t2, sizeof t2));
            buf_printf(&b, ")\n   next: %s\n", json_string_value(json_object_get(s, "next_experiment")));
        }
        if (!i) buf_printf(&b, "no suspect holds %s of the wall\n", "5%");
    }
    *len = b.len;
    return b.p;
}

/* A figure as the text replies print it: "null" when unknown. */
static void effic_line(buf *b, const char *key, const json_t *v) {
    buf c = {0};
    cell(v, &c);
    buf_printf(b, "%s: %s\n", key, c.len ? buf_str(&c) : "null");
    buf_free(&c);
}

char *text_efficiency(const json_t *reply, const char *const *cols, size_t *len) {
    /* coverage first: the figures after it are those of the modelled share only */
    static const char *const keys[] = {"coverage", "modelled_us", "copies_us", "gpu_us", "gpu_utilization", "sm_efficiency",
                                       "achieved_occupancy", "tensor_core_fraction", "mfu", "mbu", "judged_us", "best_roof_us",
                                       "above_roof_us", NULL};
    const json_t *dev = json_object_get(reply, "device"), *s = json_object_get(reply, "session");
    buf b = {0};
    effic_line(&b, "device", json_is_object(dev) ? json_object_get(dev, "name") : json_null());
    effic_line(&b, "device_row", json_is_object(dev) ? json_object_get(dev, "row") : json_null());
    effic_line(&b, "device_table", json_is_object(dev) ? json_object_get(dev, "table") : json_null());
    if (!json_is_object(dev)) effic_line(&b, "device_reason", json_object_get(reply, "device_reason"));
    for (int i = 0; keys[i]; i++) effic_line(&b, keys[i], json_object_get(s, keys[i]));
    effic_line(&b, "mfu_peak", json_object_get(json_object_get(s, "mfu_peak"), "unit"));
    kinds_line(&b, json_object_get(reply, "gpu_time_by_kind"), json_object_get(reply, "gpu_time_by_kind_by_phase"));
    /* the unknown GPU time by reason, in full (the table cuts a reason at its width) */
    const json_t *u;
    size_t i;
    json_array_foreach(json_object_get(s, "unmodelled"), i, u) {
        char fr[32] = "null";
        const json_t *f = json_object_get(u, "fraction");
        if (json_is_number(f)) snprintf(fr, sizeof fr, "%.3f", json_number_value(f));
        buf_printf(&b, "unmodelled: %s of the GPU time (%s): %s\n", fr, json_string_value(json_object_get(u, "top")),
                   json_string_value(json_object_get(u, "reason")));
    }
    buf_puts(&b, "\n");
    size_t n;
    char *t = text_rows(json_object_get(reply, "operators"), cols, &n);
    if (t) buf_put(&b, t, n);
    free(t);
    *len = b.len;
    return b.p ? b.p : strdup("");
}
