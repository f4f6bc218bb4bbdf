/* steps.c: where each step's time goes, as torch-tb-profiler's overview splits it
 * (issue 19, item 4; definitions: tests/triage/oracle.py tb_steps).
 *
 * Each step (ProfilerStep#N) is a span on the host moved to the device side: it starts where
 * the previous one ended (or at its host start, the later) and ends at its host end or at the
 * end of the last GPU work launched by a runtime call wholly inside it, the later. Each span
 * is split, in priority order, into roles: kernel, memcpy, memset, communication (collective
 * kernels, and the host's collective ranges: gloo's all_reduce runs on the CPU, and the
 * suspects call it communication too, issue 42 item 7), runtime (CUDA runtime/driver calls),
 * data_loading (DataLoader ranges), cpu_exec (any other host range), other (none of them). A role takes the part of the span covered by
 * any of its intervals (any thread, any device) that the roles before it left. The CPU
 * phases (record_function names other than steps, the 8 longest) are split the same way over
 * the union of their instances, host spans as they are.
 *
 * Owns the host ranges the walk records (steps_state: DataLoader ranges, the outermost other
 * ranges of each thread, the runtime calls; the spill file of the ranges past the limit),
 * steps_job, and the "breakdown" document (GET /sessions/{id}/steps).
 * Memory: one interval per role at a time for the GPU roles (read merged, in start order,
 * from SQL); the host ranges and the runtime calls are held, 16 bytes each once touching
 * ones are merged (a flat trace's top-level ops about 1.7 MB per 100 MB of trace, its
 * runtime calls 1 MB), at most 1,048,576 of them together (HOST_SPANS_MAX): past that they
 * go to a file as sorted runs merged back (hspill.h: one 64 KiB block a run at a time). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/an.h"
#include "lib/log.h"
#include "lib/mono.h"
#include "lib/err.h"
#include "lib/vec.h"

enum { R_KERNEL, R_MEMCPY, R_MEMSET, R_COMM, R_RUNTIME, R_DATA, R_CPU, R_OTHER, R_N };
static const char *const role_keys[R_N] = {"kernel_us", "memcpy_us", "memset_us", "communication_us", "runtime_us",
                                           "data_loading_us", "cpu_exec_us", "other_us"};
static const char *const role_names[R_N] = {"kernel", "memcpy", "memset", "communication", "runtime", "data_loading",
                                            "cpu_exec", "other"};

/* ---- what the walk records ---- */

/* In memory, not a scratch table: the breakdown runs on a connection of its own
 * (steps_job), which sees only what was committed before the walk. */
/* The ranges of every role held at most, together: 16 MiB. At that they are written as
 * sorted runs to a file of their own (hspill.h), and the job merges the runs back. Why one
 * mechanism for the runtime calls too, though ev holds them: read from ev they needed
 * SQLite to sort them (the runtime role alone once had that fallback); which ranges are
 * outermost only the walk knows. A flat trace's ranges reach the limit at about 600 MB of
 * trace (2.7 MB per 100 MB: top-level ops 1.7, runtime calls 1), a CPU-only one of bare
 * top-level ops at about 100 MB. */
#define HOST_SPANS_MAX (1L << 20)
static long host_spans_max = HOST_SPANS_MAX;
void analyze_set_host_spans_max(long n) { host_spans_max = n >= 0 ? n : HOST_SPANS_MAX; }

/* The held ranges of each role as a run into the spill file; the lists start again empty. */
static int spill_host(A *a) {
    steps_state *s = a->steps_st;
    for (int k = 0; k < SPAN_ROLES; k++) {
        int rc = hspill_write(&s->spill, k, s->span[k], s->n[k], a->err, a->errlen);
        if (rc) return rc;
        s->n[k] = 0;
    }
    return 0;
}

/* The walk is over: if the ranges spilled, the rest of them follow and the file is
 * committed, so the job's connection can read it. */
static int spill_end(A *a) {
    steps_state *s = a->steps_st;
    if (!s->spill.path) return 0;
    int rc = spill_host(a);
    return rc ? rc : hspill_close(&s->spill, a->err, a->errlen);
}

int an_step_span(A *a, int role, double ts, double te) {
    steps_state *s = a->steps_st;
    int rc = s->n[SPAN_DATA] + s->n[SPAN_CPU] + s->n[SPAN_RUNTIME] + s->n[SPAN_COMM] >= (size_t)host_spans_max ? spill_host(a) : 0;
    if (rc) return rc;
    hspan *last = s->n[role] ? &s->span[role][s->n[role] - 1] : NULL;
    /* the walk gives each thread's ranges in start order: touching ones merge here as the
     * union's reader (rs_next) would merge them, and the union is all it reads */
    if (last && ts >= last->ts && ts <= last->te) {
        if (te > last->te) last->te = te;
        return 0;
    }
    if (VEC_RESERVE(s->span[role], s->cap[role], s->n[role] + 1, 256)) return ERR_NOMEM;
    s->span[role][s->n[role]++] = (hspan){ts, te};
    return 0;
}

/* ---- role streams ---- */

/* The streams the sweep reads, in priority order: one a role up to R_CPU (rs[r] is role r's),
 * and the host's collective ranges, a second stream of R_COMM after the collective kernels. */
#define S_COMM_HOST (R_CPU + 1) /* a stream index, not a role (R_OTHER has no stream) */
#define S_N (R_CPU + 2)
static const int sweep_order[S_N] = {R_KERNEL, R_MEMCPY, R_MEMSET, R_COMM, S_COMM_HOST, R_RUNTIME, R_DATA, R_CPU};
static int role_of_stream(int k) { return k == S_COMM_HOST ? R_COMM : k; }

/* One role's intervals read merged: cur = [s, e) the current union interval. The rows come
 * from q (GPU activity), from m (the walk's ranges, when they spilled) or from span[0..n)
 * (the walk's ranges, sorted by ts). */
typedef struct role_stream {
    sqlite3_stmt *q;
    hmerge *m;
    const hspan *span;
    size_t n, i;
    int has_row, on;          /* a pending row; cur is valid */
    double ps, pe, s, e;
} role_stream;

/* The next row into (ps, pe): 0 when there is none. */
static int rs_row(role_stream *r) {
    hspan h;
    if (r->m) {
        if (!hmerge_next(r->m, &h)) return 0;
        r->ps = h.ts;
        r->pe = h.te;
        return 1;
    }
    if (!r->q) {
        if (r->i >= r->n) return 0;
        r->ps = r->span[r->i].ts;
        r->pe = r->span[r->i++].te;
        return 1;
    }
    if (sqlite3_step(r->q) != SQLITE_ROW) return 0;
    r->ps = sqlite3_column_double(r->q, 0);
    r->pe = sqlite3_column_double(r->q, 1);
    return 1;
}

static void rs_next(role_stream *r) {
    r->on = r->has_row;
    if (!r->on) return;
    r->s = r->ps;
    r->e = r->pe;
    while ((r->has_row = rs_row(r))) {
        if (r->ps > r->e) return;
        if (r->pe > r->e) r->e = r->pe;
    }
}

static void rs_start(role_stream *r) {
    if (r->q) sqlite3_reset(r->q);
    if (r->m) hmerge_rewind(r->m);
    r->i = 0;
    r->has_row = rs_row(r);
    rs_next(r);
}

/* The GPU roles' rows by start: with one device, "dev = ?3" makes them ev_gpu's (dev, ts)
 * order, read as stored; without it each role's rows were sorted (EXPLAIN QUERY PLAN: a temp
 * B-tree each; several devices have ev_gpu_ts). */
#define ROLE_SQL(kind_and, one_dev) "SELECT ts, te FROM scratch.ev WHERE cls = 2 AND kind = ?1" kind_and one_dev " ORDER BY ts"
#define ROLES_SQL(one_dev)                                                                               \
    {ROLE_SQL(" AND (fp_flags(name) & ?2) = 0", one_dev), ROLE_SQL("", one_dev), ROLE_SQL("", one_dev), \
     ROLE_SQL(" AND (fp_flags(name) & ?2) != 0", one_dev)}

static int open_streams(A *a, role_stream *rs) {
    static const char *const sql[2][R_COMM + 1] = {ROLES_SQL(""), ROLES_SQL(" AND dev = ?3")};
    /* Why: fp_flags(name) reads each kernel's row of ev (name is not in ev_gpu), a random read
     * per kernel for each of the two roles; with no collective kernel name in the trace, the
     * kernel role is every kernel and the communication role is empty (its stream has no q). */
    static const char *const kernel_sql[2] = {ROLE_SQL("", ""), ROLE_SQL("", " AND dev = ?3")};
    int one = a->ndev <= 1, comm = an_any_flagged(a, NF_COMM_KERNEL);
    long kinds[R_COMM + 1] = {a->kernel_kind, a->memcpy_kind, a->memset_kind, a->kernel_kind};
    for (int r = 0; r <= R_COMM; r++) {
        if (r == R_COMM && !comm) continue;
        /* A kind no activity has leaves its stream empty. Why ask: its query reads every GPU
         * row of the device for the kind (ev_gpu is by dev, ts): the flat shape has neither
         * copies nor memsets, two passes over 63,000 kernels at 100 MB for nothing. */
        if ((r == R_MEMCPY || r == R_MEMSET) && !an_has_gpu_rows(a, EV_GPU, kinds[r])) continue;
        if (!(rs[r].q = an_prep(a, r == R_KERNEL && !comm ? kernel_sql[one] : sql[one][r]))) return ERR_DB;
        sqlite3_bind_int64(rs[r].q, 1, kinds[r]);
        if (comm && (r == R_KERNEL || r == R_COMM)) sqlite3_bind_int(rs[r].q, 2, NF_COMM_KERNEL);
        if (one) sqlite3_bind_int64(rs[r].q, 3, a->dev0);
    }
    /* The walk went thread by thread: each role's ranges in start order, as the union needs.
     * Why the runtime calls too, not ev's cls 1 rows by ts: that order took an index
     * (ev_rt_ts) built on the upload's critical path, 11-26 ms at 100 MB. */
    steps_state *s = a->steps_st;
    static const int role_of[SPAN_ROLES] = {R_DATA, R_CPU, R_RUNTIME, S_COMM_HOST};
    for (int k = 0; k < SPAN_ROLES && s->spill.path; k++) {
        int rc = hmerge_open(a->db, &s->spill, k, &rs[role_of[k]].m);
        if (rc) return rc == ERR_DB ? an_dberr(a) : rc;
    }
    for (int k = 0; k < SPAN_ROLES; k++) {
        if (s->n[k]) qsort(s->span[k], s->n[k], sizeof *s->span[k], hspan_by_start); /* NULL when none: UB for qsort */
        rs[role_of[k]].span = s->span[k];
        rs[role_of[k]].n = s->n[k];
    }
    return 0;
}

/* A list of disjoint spans in start order that the sweep splits into roles: the steps (an
 * array; acc[i][role] += us of span i), or a CPU phase's instances as SQL gives them by
 * start, merged where they touch as a role's rows are (src, a role_stream on the phase's
 * statement; total[role]: the spans' sums added in span order). Not the steps: two steps
 * that touch stay two. */
typedef struct slist {
    const step *sp;          /* array form: sp[0..n), acc */
    size_t n, i;
    double (*acc)[R_N];
    role_stream src;         /* stream form: src.q */
    double total[R_N];
    int on;                  /* the current span [ts, te) is valid */
    double ts, te, t;        /* t: where the split of the current span is */
    double cur[R_N];         /* the current span's split so far */
} slist;

/* The current span of l into (ts, te); on = 0 after the last. */
static void sl_span(slist *l) {
    memset(l->cur, 0, sizeof l->cur);
    if (l->src.q) {
        l->on = l->src.on;
        if (l->on) l->ts = l->src.s, l->te = l->src.e;
        return;
    }
    l->on = l->i < l->n;
    if (l->on) l->ts = l->sp[l->i].ts, l->te = l->sp[l->i].te;
}

static void sl_start(slist *l) {
    l->i = 0;
    memset(l->total, 0, sizeof l->total);
    if (l->src.q) rs_start(&l->src);
    sl_span(l);
    l->t = l->on ? l->ts : 0;
}

/* The current span is split: its sums go to acc or total, and the next one comes. */
static void sl_done(slist *l) {
    for (int r = 0; r < R_N; r++) {
        if (l->src.q) l->total[r] += l->cur[r];
        else l->acc[l->i][r] = l->cur[r];
    }
    l->i++;
    if (l->src.q) rs_next(&l->src);
    sl_span(l);
}

/* Splits the spans of the k lists into roles: between two boundaries the owner is the
 * first role inside. One pass over every role's union for all the lists: a pass per list
 * read every GPU row and runtime call again for each of the 8 phases (36 of the steps job's
 * ~66 ms on the LLM shape). Why each list comes out as if swept alone: the list whose split
 * is furthest behind goes next, so the roles are read at times that never go back, and a
 * list's pieces are cut at its own boundaries and the roles' only, summed in the same order
 * (the doubles are the same). */
static void sweep(role_stream *rs, slist *L, int k) {
    for (int r = 0; r < S_N; r++) rs_start(&rs[r]);
    for (int j = 0; j < k; j++) sl_start(&L[j]);
    for (;;) {
        slist *l = NULL;
        for (int j = 0; j < k; j++) {
            if (!L[j].on) continue;
            if (L[j].t < L[j].ts) L[j].t = L[j].ts;
            if (!l || L[j].t < l->t) l = &L[j];
        }
        if (!l) break;
        double t = l->t;
        if (t >= l->te) {
            sl_done(l);
            continue;
        }
        int owner = R_OTHER;
        double next = l->te;
        for (int j = 0; j < S_N; j++) {
            int r = sweep_order[j];
            while (rs[r].on && rs[r].e <= t) rs_next(&rs[r]);
            if (!rs[r].on) continue;
            if (rs[r].s <= t) {
                if (owner == R_OTHER) owner = role_of_stream(r);
                if (rs[r].e < next) next = rs[r].e; /* the role leaves here */
            } else if (rs[r].s < next) {
                next = rs[r].s;                       /* the role enters here */
            }
        }
        l->cur[owner] += next - t;
        l->t = next;
    }
}

static json_t *roles_json(const double *acc) {
    json_t *o = json_object();
    for (int r = 0; r < R_N; r++) json_object_set_new(o, role_keys[r], json_real(acc[r]));
    return o;
}

/* The steps' ends as a tree of maxima (leaves sp[0..n) at [p, p + n), the rest -INFINITY),
 * so that the steps holding a launch are found without looking at the others. Why not a
 * scan back from the launch's place: one long step before many short ones (a hostile or
 * odd trace) made every launch scan back to it, launches x steps. */
typedef struct etree {
    double *mx;
    size_t p;
} etree;

static int etree_build(etree *t, const step *sp, size_t n) {
    for (t->p = 1; t->p < n; t->p *= 2) {}
    if (!(t->mx = malloc(2 * t->p * sizeof *t->mx))) return ERR_NOMEM;
    for (size_t i = 0; i < t->p; i++) t->mx[t->p + i] = i < n ? sp[i].te : -INFINITY;
    for (size_t i = t->p - 1; i >= 1; i--) t->mx[i] = t->mx[2 * i] > t->mx[2 * i + 1] ? t->mx[2 * i] : t->mx[2 * i + 1];
    return 0;
}

/* Credits GPU work ending at gend, gn rows, to every step among [nlo, nhi) (node's range)
 * before lo whose end is at least te. */
static void etree_credit(const etree *t, size_t node, size_t nlo, size_t nhi, size_t lo, double te, double gend, long long gn,
                         double *end, long long *cnt) {
    if (nlo >= lo || t->mx[node] < te) return;
    if (nhi - nlo == 1) {
        if (gend > end[nlo]) end[nlo] = gend;
        cnt[nlo] += gn;
        return;
    }
    size_t mid = nlo + (nhi - nlo) / 2;
    etree_credit(t, 2 * node, nlo, mid, lo, te, gend, gn, end, cnt);
    etree_credit(t, 2 * node + 1, mid, nhi, lo, te, gend, gn, end, cnt);
}

/* Credits a launch [ts, te] with GPU work ending at gend, gn rows, to every step whose span
 * holds it wholly (s.ts <= ts, ts <= s.te, te <= s.te; ts <= te): those before the first
 * step starting after ts (sp is by ts) that end at te or later. O(log n) a launch, and a
 * visit per step credited. */
static void spans_credit(const step *sp, const etree *t, size_t n, double ts, double te, double gend, long long gn, double *end,
                         long long *cnt) {
    size_t lo = 0, hi = n; /* lo: the first step starting after ts */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sp[mid].ts <= ts) lo = mid + 1;
        else hi = mid;
    }
    etree_credit(t, 1, 0, t->p, lo, te, gend, gn, end, cnt);
}

/* Each step's last GPU end (end[i], -INFINITY for none) and GPU row count (cnt[i]) of the
 * work launched by runtime calls wholly inside its host span, from one pass over ev_corr
 * backwards: each correlation's GPU rows (cls 2) come before its runtime calls (cls 1), so
 * a call is credited as it is read, whatever the number of calls an id has. Why: a query
 * per step sought each launch's GPU rows in ev_corr, ~3,500 instructions a launch, 67M of
 * the steps job's 148M on the flat shape at 30 MB (the job is the upload's tail on the GPU
 * shapes), and needed ev_rt_ts, an index built on the upload's critical path. MAX and COUNT
 * do not depend on the order; te = ts + dur is the loader's double (trace.h). */
static int spans_scan(A *a, const step *sp, size_t n, double *end, long long *cnt) {
    etree t = {NULL, 0};
    int rc = etree_build(&t, sp, n), st = SQLITE_DONE, have = 0;
    sqlite3_stmt *q = rc ? NULL : an_prep(a, "SELECT corr, cls, ts, dur FROM scratch.ev WHERE corr IS NOT NULL AND cls IN (1, 2)"
                                             " ORDER BY corr DESC, cls DESC");
    if (!rc && !q) rc = ERR_DB;
    for (size_t j = 0; j < n; j++) {
        end[j] = -INFINITY;
        cnt[j] = 0;
    }
    long long corr = 0, gn = 0;
    double gend = -INFINITY;
    while (!rc && (st = sqlite3_step(q)) == SQLITE_ROW) {
        long long c = sqlite3_column_int64(q, 0);
        if (!have || c != corr) {
            have = 1;
            corr = c;
            gn = 0;
            gend = -INFINITY;
        }
        double ts = sqlite3_column_double(q, 2), te = ts + sqlite3_column_double(q, 3);
        if (sqlite3_column_int(q, 1) == 2) {
            if (te > gend) gend = te;
            gn++;
        } else if (gn) {
            spans_credit(sp, &t, n, ts, te, gend, gn, end, cnt);
        }
    }
    if (!rc && st != SQLITE_DONE) rc = an_dberr(a);
    sqlite3_finalize(q);
    free(t.mx);
    return rc;
}

/* The steps moved to the device side (file comment); *kept: how many count. Like
 * tb-profiler, trailing steps that launched no GPU work are dropped, and the last one when
 * it launched less than 80% of what the one before did (a profile window cut mid-step).
 * Each step's launches are those inside its host span as the trace has it: every end is
 * found before any span moves. */
static int device_spans(A *a, step *sp, size_t *kept) {
    size_t n = a->nsteps;
    long long *launched = calloc(n + 1, sizeof *launched);
    double *end = malloc((n + 1) * sizeof *end);
    int rc = !launched || !end ? ERR_NOMEM : spans_scan(a, sp, n, end, launched);
    double prev = -INFINITY;
    for (size_t i = 0; !rc && i < n; i++) {
        double s = sp[i].ts > prev ? sp[i].ts : prev, e = sp[i].te > end[i] ? sp[i].te : end[i];
        sp[i].ts = s;
        sp[i].te = e > s ? e : s;
        prev = sp[i].te;
    }
    size_t last = n;
    while (last > 0 && launched[last - 1] <= 0) last--;
    *kept = n;
    if (n > 1 && last > 0) *kept = last > 1 && launched[last - 2] * 0.8 > (double)launched[last - 1] ? last - 1 : last;
    free(launched);
    free(end);
    return rc;
}

static int by_ts(const void *x, const void *y) {
    const step *p = x, *q = y;
    return p->ts < q->ts ? -1 : p->ts > q->ts;
}

static int sweep_apart;
void analyze_set_sweep_apart(int on) { sweep_apart = on; }

/* The CPU phases (steps aside), the PHASES_MAX longest by total time: each the union of its
 * instances, read by start from its own statement (SQL keeps them; one pass splits them all). */
#define PHASES_MAX 8
static int choose_phases(A *a, int *used) {
    int k = 0;
    for (; k < PHASES_MAX; k++) {
        int best = -1;
        for (size_t i = 0; i < a->nphases; i++) {
            const phase *p = &a->phases[i];
            int dup = 0;
            for (int j = 0; j < k; j++) dup |= used[j] == (int)i;
            if (dup || p->gpu || p->name == a->step_name) continue;
            if (best < 0 || p->total > a->phases[best].total) best = (int)i;
        }
        if (best < 0) break;
        used[k] = best;
    }
    return k;
}

static json_t *phase_json(A *a, const slist *l, const phase *p) {
    json_t *o = roles_json(l->total);
    json_object_set_new(o, "name", json_string(an_str(a, p->name)));
    json_object_set_new(o, "count", json_integer((json_int_t)p->count));
    json_object_set_new(o, "dur_us", json_real(p->total));
    return o;
}

int an_steps_doc(A *a, json_t **out) {
    *out = NULL;
    role_stream rs[S_N];
    memset(rs, 0, sizeof rs);
    slist L[1 + PHASES_MAX];
    memset(L, 0, sizeof L);
    int used[PHASES_MAX], nph = choose_phases(a, used);
    step *sp = a->nsteps ? malloc(a->nsteps * sizeof *sp) : NULL;
    double (*acc)[R_N] = a->nsteps ? calloc(a->nsteps, sizeof *acc) : NULL;
    int rc = a->nsteps && (!sp || !acc) ? ERR_NOMEM : 0;
    size_t n = 0;
    if (!rc && a->nsteps) {
        memcpy(sp, a->steps, a->nsteps * sizeof *sp);
        qsort(sp, a->nsteps, sizeof *sp, by_ts);
        rc = device_spans(a, sp, &n);
    }
    if (!rc) rc = open_streams(a, rs);
    L[0].sp = sp;
    L[0].n = n;
    L[0].acc = acc;
    for (int j = 0; j < nph && !rc; j++) {
        sqlite3_stmt *q = an_prep(a, "SELECT ts, te FROM scratch.ann WHERE cls = 0 AND kind = ?2 AND name = ?1 ORDER BY ts");
        if (!q) rc = ERR_DB;
        else {
            sqlite3_bind_int64(q, 1, a->phases[used[j]].name);
            sqlite3_bind_int64(q, 2, a->ua_kind);
            L[1 + j].src.q = q;
        }
    }
    json_t *roles = json_array(), *steps = json_array(), *mean = NULL, *phases = json_array();
    for (int r = 0; r < R_N; r++) json_array_append_new(roles, json_string(role_names[r]));
    if (!rc) {
        if (!sweep_apart) sweep(rs, L, 1 + nph);
        else
            for (int j = 0; j < 1 + nph; j++) sweep(rs, &L[j], 1); /* tests: one list a pass, as before */
        double sum[R_N] = {0}, dur = 0;
        for (size_t i = 0; i < n; i++) {
            json_t *o = roles_json(acc[i]);
            json_object_set_new(o, "name", json_string(an_str(a, sp[i].name)));
            json_object_set_new(o, "start_us", json_real(sp[i].ts));
            json_object_set_new(o, "dur_us", json_real(sp[i].te - sp[i].ts));
            json_array_append_new(steps, o);
            for (int r = 0; r < R_N; r++) sum[r] += acc[i][r] / (double)n;
            dur += (sp[i].te - sp[i].ts) / (double)n;
        }
        mean = n ? roles_json(sum) : json_null();
        /* the mean step beside its roles (issue 42: one step mean, this one, on every surface) */
        if (n) json_object_set_new(mean, "dur_us", json_real(dur));
        for (int j = 0; j < nph; j++) json_array_append_new(phases, phase_json(a, &L[1 + j], &a->phases[used[j]]));
        /* steps_over_cap: the ranges past --max-steps (host.c), in no step of the list */
        *out = json_pack("{s:o,s:o,s:o,s:o,s:I,s:I}", "roles", roles, "steps", steps, "mean", mean, "phases", phases, "dropped_steps",
                         (json_int_t)(a->nsteps - n), "steps_over_cap", (json_int_t)a->steps_over);
        if (!*out) rc = ERR_NOMEM;
    } else {
        json_decref(roles);
        json_decref(steps);
        json_decref(phases);
    }
    for (int r = 0; r < S_N; r++) {
        if (!rc && rs[r].m && hmerge_rc(rs[r].m)) rc = an_dberr(a);
        sqlite3_finalize(rs[r].q);
        hmerge_close(rs[r].m);
    }
    for (int j = 0; j < nph; j++) sqlite3_finalize(L[1 + j].src.q);
    free(sp);
    free(acc);
    return rc;
}

void an_steps_free(A *a) {
    steps_state *s = a->steps_st;
    if (!s) return;
    for (int k = 0; k < SPAN_ROLES; k++) free(s->span[k]);
    memset(s->span, 0, sizeof s->span);
    hspill_free(&s->spill);
}

/* ---- the breakdown on another core (steps_job, an.h) ---- */

static void *steps_job_run(void *arg) {
    steps_job *j = arg;
    STEP_BEGIN();
    j->rc = an_steps_doc(&j->b, &j->out);
    STEP_END("steps");
    return NULL;
}

int an_steps_job_start(A *a, steps_job *j) {
    memset(j, 0, sizeof *j);
    j->b = *a; /* the ids, kinds and flags; what this side still changes is copied below */
    j->b.db = NULL;
    j->b.err = j->err;
    j->b.errlen = sizeof j->err;
    j->b.busy_q = j->b.kbusy_q = NULL;
    j->b.tl_ins = NULL;
    j->b.mem_ins = NULL;
    j->b.steps_st = &j->st;
    int rc = spill_end(a);
    j->st = *a->steps_st; /* the walk is over: the host ranges (and the spill file) move to the job */
    memset(a->steps_st, 0, sizeof *a->steps_st);
    a->steps_st->on = j->st.on;
    if (rc) {
        an_steps_free(&j->b);
        return rc;
    }
    j->b.steps = a->nsteps ? malloc(a->nsteps * sizeof *a->steps) : NULL;
    j->b.phases = a->nphases ? malloc(a->nphases * sizeof *a->phases) : NULL; /* gpu_phases adds to a's */
    j->started = 1; /* from here on finish frees what start took */
    if ((a->nsteps && !j->b.steps) || (a->nphases && !j->b.phases)) return ERR_NOMEM;
    if (a->nsteps) memcpy(j->b.steps, a->steps, a->nsteps * sizeof *a->steps);
    if (a->nphases) memcpy(j->b.phases, a->phases, a->nphases * sizeof *a->phases);
    if (an_job_db(a, &j->b.db) || hspill_attach(j->b.db, &j->st.spill, j->err, sizeof j->err)) return ERR_DB;
    if (name_flags_sql(j->b.db, a->nflags, a->nnflags)) return ERR_NOMEM;
    j->threaded = pthread_create(&j->th, NULL, steps_job_run, j) == 0;
    if (!j->threaded) steps_job_run(j);
    return j->threaded ? 0 : j->rc;
}

int an_steps_job_finish(A *a, steps_job *j, json_t **out) {
    if (!j->started) return 0;
    if (j->threaded) pthread_join(j->th, NULL);
    int rc = j->rc;
    if (rc && j->err[0] && !a->err[0]) snprintf(a->err, a->errlen, "%s", j->err);
    if (out) *out = j->out;
    else json_decref(j->out);
    free(j->b.steps);
    free(j->b.phases);
    an_steps_free(&j->b);
    sqlite3_close(j->b.db);
    memset(j, 0, sizeof *j);
    return rc;
}
