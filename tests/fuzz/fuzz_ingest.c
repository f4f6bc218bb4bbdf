/* fuzz_ingest.c: libFuzzer target for the streaming trace parser (server/ingest/parse.c).
 *
 * Owns nothing but its checks; links server/ingest/parse.c directly (tests/fuzz/run.sh).
 * Each input is parsed four times:
 *   A  gzip=0 (sniffing), the whole input in one ingest_feed call: the reference;
 *   B  gzip=0, the input cut into 1-3 pieces at points derived from a hash of the input
 *      (deterministic, so a crash file reproduces), one piece possibly empty;
 *   C  gzip=1 (forced inflate, as for Content-Encoding: gzip), cut at other points;
 *   D  like B, but the sink stops with an error at the k-th event.
 * The sink checks each event (below, check_event) and folds it into a digest. Chunking
 * must not change the outcome, so B's result code, event count and digest must equal
 * A's, and C's too when the input starts with the gzip magic. Any broken check aborts,
 * which libFuzzer reports as a crash with the input saved. */
#include "lib/err.h"
#include "ingest/minify.h"
#include "ingest/parse.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

/* Decompressed bytes at most: keeps gzip bombs (1000:1) from turning one input into
 * seconds of parsing; a run that hits it returns ERR_TOOBIG and skips comparisons. */
#define FUZZ_MAX_INFLATED (4u << 20)
#define SINK_STOP_CODE ERR_CONFLICT /* an ERR_* the parser itself never returns */

#define CHECK(cond, what)                                                             \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "fuzz_ingest: invariant broken: %s (%s:%d)\n", what,      \
                    __FILE__, __LINE__);                                              \
            abort();                                                                  \
        }                                                                             \
    } while (0)

typedef struct run {
    uint64_t digest;              /* FNV-1a over every event and meta value, in order */
    unsigned long long events;    /* on_event calls */
    unsigned long long metas;     /* on_meta calls */
    unsigned long long stop_at;   /* run D: fail the stop_at-th event (1-based), 0 = never */
    int stopped;                  /* the sink has returned an error */
    int rc;                       /* ingest_feed/ingest_finish result */
} run;

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}
static uint64_t fnv_str(uint64_t h, const char *s) { return s ? fnv(h, s, strlen(s) + 1) : fnv(h, "\xff", 1); }

/* Valid JSON by yajl's own reading: the stored event is served back verbatim by
 * GET /trace, so it must be a document a client can parse. (Jansson is not used: it
 * rejects legal numbers such as 1e999 that yajl replays as text.) */
static int valid_json(const char *s, size_t n) {
    yajl_handle y = yajl_alloc(NULL, NULL, NULL);
    CHECK(y != NULL, "yajl_alloc");
    yajl_config(y, yajl_allow_comments, 0);
    int ok = yajl_parse(y, (const unsigned char *)s, n) == yajl_status_ok && yajl_complete_parse(y) == yajl_status_ok;
    yajl_free(y);
    return ok;
}

static void check_bracketed(const char *s, const char *what) {
    if (!s) return;
    size_t n = strlen(s);
    CHECK(n >= 2 && s[0] == '[' && s[n - 1] == ']', what);
}

/* Invariants of one event (ingest.h's contract): every string is non-NULL where the header
 * promises "" and NUL-terminated (strlen under ASan proves the terminator is inside the
 * allocation), json is one object of json_len bytes (whitespace and all), has_* are flags. */
static void check_event(const ingest_event *e) {
    CHECK(e->name && e->cat && e->ph && e->pid && e->tid, "name/cat/ph/pid/tid are never NULL");
    (void)strlen(e->name); (void)strlen(e->cat); (void)strlen(e->ph);
    (void)strlen(e->pid); (void)strlen(e->tid);
    CHECK(e->json != NULL, "json is never NULL");
    CHECK(e->json_len > 0 && e->json_len <= INGEST_MAX_EVENT_BYTES, "0 < json_len <= INGEST_MAX_EVENT_BYTES");
    CHECK(strlen(e->json) == e->json_len, "json_len == strlen(json)");
    CHECK(e->json[0] == '{' && e->json[e->json_len - 1] == '}', "json is one object");
    CHECK(valid_json(e->json, e->json_len), "json re-parses");
    const int flags[] = {e->has_ts, e->has_dur, e->has_corr, e->has_ext, e->has_device, e->has_stream,
                         e->has_bytes, e->has_devtype, e->has_regs, e->has_smem};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) CHECK(flags[i] == 0 || flags[i] == 1, "has_* is 0 or 1");
    check_bracketed(e->shapes, "shapes is NULL or \"[...]\"");
    check_bracketed(e->grid, "grid is NULL or \"[...]\"");
    check_bracketed(e->block, "block is NULL or \"[...]\"");
}

static int on_event(void *ctx, const ingest_event *e) {
    run *r = ctx;
    CHECK(!r->stopped, "no event after the sink returned an error");
    check_event(e);
    r->events++;
    uint64_t h = r->digest;
    h = fnv_str(h, e->name); h = fnv_str(h, e->cat); h = fnv_str(h, e->ph);
    h = fnv_str(h, e->pid); h = fnv_str(h, e->tid);
    h = fnv_str(h, e->shapes); h = fnv_str(h, e->grid); h = fnv_str(h, e->block);
    const long long ints[] = {e->has_ts, e->has_dur, e->has_corr ? e->corr : -1, e->has_ext ? e->ext : -1,
                              e->has_device ? e->device : -1, e->has_stream ? e->stream : -1,
                              e->has_bytes ? e->bytes : -1, e->has_devtype ? e->devtype : -1,
                              e->has_regs ? e->regs : -1, e->has_smem ? e->smem : -1};
    h = fnv(h, ints, sizeof ints);
    if (e->has_ts) h = fnv(h, &e->ts, sizeof e->ts);
    if (e->has_dur) h = fnv(h, &e->dur, sizeof e->dur);
    /* the whitespace left in json depends on where the reads fell (ingest.h): hash the text */
    char *text = malloc(e->json_len ? e->json_len : 1);
    CHECK(text != NULL, "malloc");
    size_t tn = ingest_minify(e->json, e->json_len, text);
    CHECK(tn > 0 && tn <= e->json_len, "the text is not longer than the json");
    h = fnv(h, text, tn);
    free(text);
    r->digest = h;
    if (r->stop_at && r->events == r->stop_at) {
        r->stopped = 1;
        return SINK_STOP_CODE;
    }
    return 0;
}

static int on_meta(void *ctx, const char *key, const char *json, size_t len) {
    run *r = ctx;
    CHECK(!r->stopped, "no meta value after the sink returned an error");
    CHECK(key != NULL && json != NULL, "meta key and json are never NULL");
    (void)strlen(key);
    CHECK(len > 0 && len <= INGEST_MAX_META_BYTES, "0 < meta len <= INGEST_MAX_META_BYTES");
    CHECK(strlen(json) == len, "meta len == strlen(json)");
    CHECK(valid_json(json, len), "meta json re-parses");
    r->metas++;
    r->digest = fnv(fnv_str(r->digest, key), json, len);
    return 0;
}

/* Parses data in npieces pieces ending at cuts[0..npieces-2] (ascending, <= size). */
static void parse(run *r, int gzip, const uint8_t *data, size_t size, const size_t *cuts, int npieces) {
    ingest_sink sink = {r, on_event, on_meta, NULL};
    r->digest = 1469598103934665603ull;
    ingest *in = ingest_new(&sink, gzip, FUZZ_MAX_INFLATED);
    CHECK(in != NULL, "ingest_new");
    int rc = 0;
    size_t at = 0;
    for (int i = 0; i < npieces && !rc; i++) {
        size_t end = i == npieces - 1 ? size : cuts[i];
        rc = ingest_feed(in, data + at, end - at);
        at = end;
    }
    if (!rc) rc = ingest_finish(in);
    r->rc = rc;
    const char *msg = ingest_error(in);
    CHECK(msg != NULL, "ingest_error is never NULL");
    (void)strlen(msg);
    CHECK(rc == 0 || strcmp(msg, "no error") != 0, "a failure has a message");
    CHECK(rc == 0 || rc == ERR_PARSE || rc == ERR_INVALID || rc == ERR_NOTTRACE || rc == ERR_TOOBIG ||
              rc == ERR_FORMAT || rc == ERR_NOMEM || rc == SINK_STOP_CODE,
          "the result is one of ingest_feed's documented codes");
    CHECK((rc == SINK_STOP_CODE) == (r->stopped != 0), "the sink's error is the one returned");
    CHECK(!ingest_sniffed_sqlite(in) || rc == ERR_FORMAT, "a sniffed SQLite file fails with ERR_FORMAT");
    if (rc == 0) {
        CHECK(ingest_event_count(in) == r->events, "ingest_event_count == events delivered");
        CHECK(ingest_bytes_in(in) == size, "ingest_bytes_in == bytes fed");
    }
    ingest_free(in);
}

/* Cut points for a run, from the hash h: 1-3 pieces, any of them possibly empty. */
static int make_cuts(uint64_t h, size_t size, size_t cuts[2]) {
    int n = 1 + (int)(h % 3);
    h /= 3;
    for (int i = 0; i < n - 1; i++) {
        cuts[i] = size ? (size_t)(h % (size + 1)) : 0;
        h = h * 6364136223846793005ull + 1442695040888963407ull;
    }
    if (n == 3 && cuts[0] > cuts[1]) {
        size_t t = cuts[0];
        cuts[0] = cuts[1];
        cuts[1] = t;
    }
    return n;
}

static void same(const run *a, const run *b, const char *what) {
    if (a->rc == ERR_TOOBIG || b->rc == ERR_TOOBIG) return; /* the cap is checked per chunk */
    if (a->rc != b->rc || (a->rc == 0 && (a->events != b->events || a->metas != b->metas || a->digest != b->digest))) {
        fprintf(stderr, "fuzz_ingest: %s: rc %d vs %d, events %llu vs %llu, metas %llu vs %llu\n", what, a->rc, b->rc,
                a->events, b->events, a->metas, b->metas);
        CHECK(0, "splitting the input changes the result");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint64_t h = fnv(1469598103934665603ull, data, size);
    size_t cuts[2] = {0, 0};
    run a = {0}, b = {0}, c = {0}, d = {0};

    parse(&a, 0, data, size, cuts, 1);

    int n = make_cuts(h, size, cuts);
    parse(&b, 0, data, size, cuts, n);
    same(&a, &b, "sniffed, split");

    n = make_cuts(h * 31 + 7, size, cuts);
    parse(&c, 1, data, size, cuts, n);
    if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) same(&a, &c, "forced gzip vs sniffed");

    if (a.rc == 0 && a.events > 0) {
        d.stop_at = 1 + (h >> 7) % a.events;
        n = make_cuts(h >> 3, size, cuts);
        parse(&d, 0, data, size, cuts, n);
        if (d.rc != ERR_TOOBIG) {
            CHECK(d.rc == SINK_STOP_CODE, "a sink error stops the parse");
            CHECK(d.events == d.stop_at, "the parse stops at the event whose sink call failed");
        }
    }
    return 0;
}
