/* suspects_unread.c: recomputed_work, rows computed that nobody reads (the fourth family,
 * after suspects_recompute.c's prefix and constants and suspects_discard.c's unused work).
 *
 * Premise: a trace recorded with shapes (Input Dims) shows what each op reads, so a GEMM's
 * output can be followed through the ops after it on its thread without dataflow: the
 * output of a GEMM-like op (linear: x [.., K] by w [N, K]; mm / addmm / matmul: w [K, N]) is
 * x's leading dims then N. When the ops after it read that whole shape only to pass it on
 * (a cast, a copy: `logits.float()`; wk_op_kind's data movement), then a view op cuts it (select, slice, narrow, index,
 * gather, take, as_strided, split, unbind, chunk), and the next op with GPU work reads a
 * shape that is the output with one of its dims dropped (R its size) or cut R times
 * smaller (R >= UNREAD_MIN_ROWS), then R - 1 of every R rows were computed, and cast, for nothing: the lm_head over
 * every position when only the last one's logits are read (generation, classification by
 * the next token). At stake: (1 - 1/R) of the GEMM's GPU time and of the passes'. Any other
 * op with GPU work between the GEMM and the cut, or reading the whole output after the
 * cut, means someone reads it: no evidence. Needs steps and two such GEMM calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/suspects_unread.h"
#include "analysis/suspects_entry.h"
#include "analysis/kinds.h"
#include "lib/err.h"
#include "lib/flops.h"

#define UNREAD_RANK 6          /* output ranks followed */
#define UNREAD_MIN_ROWS 4      /* a cut that keeps 1 of fewer rows is not worth telling */
#define UNREAD_NAMES 8         /* GEMM names kept; the rest are not told apart */

typedef struct ucand {
    int on, sliced;
    long name, track;
    double ts, te, gemm_us;    /* the GEMM (its outermost op) and its GPU time */
    double pass_us, pts, pte;  /* the passes over its whole output; the last pass's span */
    double last_us;            /* the last pass's GPU time */
    long long out[UNREAD_RANK];
    int rank;
} ucand;

typedef struct uname { long name, pass; long long calls, rows; double gemm_us, pass_us, at; } uname;

/* Why caches: the hook sees every op of the trace (30,000 in 20 MB of the llm shape) and the
 * names and shapes repeat layer after layer: a name's class is read once, and a shape
 * string's parse is kept in a direct-mapped slot (key + 1: 0 is an empty slot). Without them
 * the hook cost 1,400 instructions an op (callgrind). */
#define UNREAD_CACHE 64
enum { UK_KNOWN = 1, UK_GEMM = 2, UK_CUT = 4, UK_MOVE = 8 };
typedef struct dslot { long key1, name; int r; long long d[UNREAD_RANK]; } dslot;

struct unread_state {
    unsigned char *cls;        /* per name id: UK_* bits, 0 not read yet */
    dslot gemm[UNREAD_CACHE];  /* (GEMM name, shapes) -> its output's shape */
    dslot in0[UNREAD_CACHE];   /* shapes -> the first input's dims */
    ucand c;
    uname n[UNREAD_NAMES];
    size_t nn;
    long long calls;
    double at;
};

static const char *const gemm_ops[] = {"aten::linear", "aten::matmul", "aten::mm", "aten::addmm", NULL};
static const char *const cut_words[] = {"select", "slice", "narrow", "index", "gather", "take", "as_strided", "split",
                                        "unbind", "chunk", NULL};

static int in_list(const char *const *l, const char *n) {
    for (; n && *l; l++)
        if (!strcmp(*l, n)) return 1;
    return 0;
}

/* Whether op n is a cut: its name holds one of cut_words after its namespace. */
static int is_cut(const char *n) {
    const char *b = n ? strrchr(n, ':') : NULL;
    b = b ? b + 1 : n;
    for (const char *const *w = cut_words; b && *w; w++)
        if (strstr(b, *w)) return 1;
    return 0;
}

/* The output shape of a GEMM-like op from its Input Dims: its rank, 0 when not one. */
static int gemm_out(const char *name, const char *dims, long long *out) {
    long long x[UNREAD_RANK], w[3];
    int ai = !strcmp(name, "aten::addmm"); /* addmm: bias, input, weight */
    int xr = flops_dims_at(dims, ai, x, UNREAD_RANK), wr = flops_dims_at(dims, ai + 1, w, 3);
    if (xr < 2 || wr != 2) return 0;
    int lin = !strcmp(name, "aten::linear");
    long long k = lin ? w[1] : w[0], nn = lin ? w[0] : w[1];
    if (k != x[xr - 1] || nn <= 0) return 0;
    memcpy(out, x, (size_t)(xr - 1) * sizeof *out);
    out[xr - 1] = nn;
    return xr;
}

/* The rows kept 1 of by a read of shape d (rank r) from the output: R when d is the output
 * with one dim of size R dropped (select), or that dim cut to a divisor of it, R times
 * smaller (slice [-1:], index of one row a sequence); else 0. */
static long long rows_cut(const ucand *c, const long long *d, int r) {
    for (int i = 0; i < c->rank - 1; i++) { /* the last dim is N: cutting it is not a row */
        if (c->out[i] < UNREAD_MIN_ROWS) continue;
        int ok = 1;
        long long rows = 0;
        if (r == c->rank - 1) { /* dropped */
            for (int j = 0, o = 0; ok && j < c->rank; j++)
                if (j != i) ok = d[o++] == c->out[j];
            rows = c->out[i];
        } else if (r == c->rank && d[i] > 0 && c->out[i] % d[i] == 0) { /* cut */
            for (int j = 0; ok && j < c->rank; j++) ok = j == i || d[j] == c->out[j];
            rows = c->out[i] / d[i];
        } else {
            ok = 0;
        }
        if (ok && rows >= UNREAD_MIN_ROWS) return rows;
    }
    return 0;
}

static void confirm(unread_state *s, long long rows) {
    ucand *c = &s->c;
    double at = (c->gemm_us + c->pass_us) * (1.0 - 1.0 / (double)rows);
    s->at += at, s->calls++;
    size_t i = 0;
    while (i < s->nn && s->n[i].name != c->name) i++;
    if (i == s->nn) {
        if (s->nn == UNREAD_NAMES) i = UNREAD_NAMES - 1; /* folded into the last */
        else s->n[s->nn++] = (uname){c->name, -1, 0, rows, 0, 0, 0};
    }
    s->n[i].calls++, s->n[i].gemm_us += c->gemm_us, s->n[i].pass_us += c->pass_us, s->n[i].at += at;
    if (rows > s->n[i].rows) s->n[i].rows = rows;
    c->on = 0;
}

/* The UK_* class of op name (id). */
static unsigned klass(unread_state *s, A *a, long name) {
    if (name < 0 || (size_t)name >= a->nnflags) return UK_KNOWN;
    if (!s->cls[name]) {
        const char *n = an_str(a, name);
        s->cls[name] = (unsigned char)(UK_KNOWN | (in_list(gemm_ops, n) ? UK_GEMM : 0) | (is_cut(n) ? UK_CUT : 0) |
                                       (wk_op_kind(n) == WK_DATA_MOVEMENT ? UK_MOVE : 0));
    }
    return s->cls[name];
}

/* gemm_out of (name, shapes), through its slot. */
static int gemm_out_cached(unread_state *s, A *a, long name, long shapes, long long *out) {
    dslot *x = &s->gemm[(size_t)(shapes * 31 + name) & (UNREAD_CACHE - 1)];
    if (x->key1 != shapes + 1 || x->name != name) {
        x->key1 = shapes + 1, x->name = name;
        x->r = gemm_out(an_str(a, name), an_str(a, shapes), x->d);
    }
    if (x->r > 0) memcpy(out, x->d, (size_t)x->r * sizeof *out);
    return x->r;
}

/* The first input's dims of shapes, through its slot; -1 when none. */
static int in0_cached(unread_state *s, A *a, long shapes, long long *d) {
    if (shapes < 0) return -1;
    dslot *x = &s->in0[(size_t)shapes & (UNREAD_CACHE - 1)];
    if (x->key1 != shapes + 1) x->key1 = shapes + 1, x->r = flops_dims_at(an_str(a, shapes), 0, x->d, UNREAD_RANK);
    if (x->r > 0) memcpy(d, x->d, (size_t)x->r * sizeof *d);
    return x->r;
}

int unread_pop(unread_state **sp, A *a, const frame *f) {
    unread_state *s = *sp;
    if (!s) {
        if (!(s = *sp = calloc(1, sizeof *s)) || !(s->cls = calloc(a->nnflags + 1, 1))) return ERR_NOMEM;
    }
    if (f->cls != EV_HOST_OP || f->kind == a->ua_kind) return 0;
    ucand *c = &s->c;
    unsigned k = klass(s, a, f->name);
    long long out[UNREAD_RANK];
    int r = 0;
    if (k & UK_GEMM && f->shapes >= 0 && f->cuda_total > 0 && (r = gemm_out_cached(s, a, f->name, f->shapes, out)) > 0) {
        /* the outermost GEMM op of a nest (linear -> mm) pops last and replaces it */
        *c = (ucand){.on = 1, .name = f->name, .track = f->track, .ts = f->ts, .te = f->te, .gemm_us = f->cuda_total, .rank = r};
        memcpy(c->out, out, (size_t)r * sizeof *out);
        return 0;
    }
    if (!c->on || f->track != c->track || f->ts < c->te) return 0; /* another thread, or inside the GEMM */
    long long d[UNREAD_RANK];
    int dr = in0_cached(s, a, f->shapes, d);
    int whole = dr == c->rank && !memcmp(d, c->out, (size_t)dr * sizeof *d);
    if (whole) {
        /* a cut may come in several views (x[:, -1:] is a slice of dim 0, then of dim 1); the
         * passes are copies and casts only (any other reader is a consumer) */
        if (k & UK_CUT) c->sliced = 1;
        else if (c->sliced || !(k & UK_MOVE)) c->on = 0;
        else if (c->pte > 0 && f->ts <= c->pts && f->te >= c->pte) {
            c->pass_us += f->cuda_total - c->last_us; /* the outer op of the last pass (copy_ -> _to_copy -> to) */
            c->last_us = f->cuda_total, c->pts = f->ts, c->pte = f->te;
        } else if (f->cuda_total > 0) {
            c->pass_us += f->cuda_total, c->last_us = f->cuda_total, c->pts = f->ts, c->pte = f->te;
        }
        return 0;
    }
    if (f->cuda_total <= 0 || (c->pte > 0 && f->ts >= c->pts && f->te <= c->pte)) return 0;
    long long rows = c->sliced && dr > 0 ? rows_cut(c, d, dr) : 0;
    if (rows) confirm(s, rows);
    else c->on = 0; /* GPU work that reads something else first: the output's fate is unknown */
    return 0;
}

void unread_free(unread_state *s) {
    if (s) free(s->cls);
    free(s);
}

int unread_suspects(unread_state *s, A *a, json_t *list, double min_us, int *nfired) {
    if (!s || !s->nn || a->nsteps < 2 || s->calls < 2 || s->at < min_us) return 0;
    size_t top = 0;
    for (size_t i = 1; i < s->nn; i++)
        if (s->n[i].at > s->n[top].at) top = i;
    const uname *t = &s->n[top];
    json_t *members = json_array();
    double members_us = 0;
    for (size_t i = 0; i < s->nn; i++) {
        members_us += s->n[i].gemm_us + s->n[i].pass_us;
        json_array_append_new(members, json_pack("{s:s,s:f,s:I,s:f}", "name", an_str(a, s->n[i].name), "gpu_us",
                                                 s->n[i].gemm_us + s->n[i].pass_us, "calls", s->n[i].calls, "pass_us", s->n[i].pass_us));
    }
    const char *c = an_str(a, t->name);
    char next[1024];
    snprintf(next, sizeof next,
             "%s computes every row of its output and only one of every %lld is read: the next op cuts its [..., %lld, N] "
             "output down to one row (a select / slice / index)%s, %lld times, %.1f ms of its GPU time for rows nobody reads. "
             "Compute only the rows that are read: slice the input first (hidden[:, -1:] before the head, the last position "
             "only; Hugging Face: logits_to_keep=1 / num_logits_to_keep=1), then check that %s's GPU time falls by that share",
             c, t->rows, t->rows, t->pass_us > 0 ? ", after a cast of the whole output" : "", t->calls, s->at / 1e3, c);
    double at = s->at;
    json_t *e = an_recomputed_entry(a, c, at, members, members_us,
                                    json_pack("{s:s,s:I,s:I}", "mechanism", "rows_unread", "rows", (json_int_t)t->rows, "calls",
                                              (json_int_t)s->calls),
                                    next);
    if (!e || json_array_append_new(list, e)) return ERR_NOMEM;
    ++*nfired;
    return 0;
}
