/* fuzz_session_meta.c: libFuzzer target for the "firstpass" metadata codec (api/session.c).
 *
 * Owns nothing but its checks; links api/session.c and Jansson (tests/fuzz/run.sh).
 * One input drives three parsers:
 *   1. json_loadb(JSON_DECODE_ANY, as server/ingest/load.c reads top-level values), then
 *      fp_session_meta_from_json on the document's "firstpass" member when it has one,
 *      else on the value itself; on success the result goes through
 *      fp_session_meta_to_json and back, and must come back unchanged;
 *   2. fp_labels_parse on the input as a C string ("k:v,k2:v2", the CLI/env syntax);
 *   3. fp_label_parse_one on the same string (the ?label= query syntax).
 * Each result is checked against session.h's contract; a broken check aborts. */
#include "session.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, what)                                                             \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "fuzz_session_meta: invariant broken: %s (%s:%d)\n", what, \
                    __FILE__, __LINE__);                                              \
            abort();                                                                  \
        }                                                                             \
    } while (0)

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static int all_zero(const fp_session_meta *m) {
    static const fp_session_meta zero;
    return !memcmp(m, &zero, sizeof zero);
}

static int str_eq(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

/* A label as session.h promises it: key non-empty, both heap strings, trimmed. */
static void check_label(const fp_label *l, int from_spec) {
    CHECK(l->key != NULL && l->value != NULL, "label key and value are never NULL");
    size_t kn = strlen(l->key), vn = strlen(l->value);
    if (!from_spec) return; /* JSON labels keep their text as sent (see session.h) */
    CHECK(kn > 0, "label key is non-empty");
    CHECK(!is_space(l->key[0]) && !is_space(l->key[kn - 1]), "label key is trimmed");
    CHECK(vn == 0 || (!is_space(l->value[0]) && !is_space(l->value[vn - 1])), "label value is trimmed");
    CHECK(!strchr(l->key, ':'), "label key holds no ':' (the split is on the first)");
}

static void check_meta(const fp_session_meta *m, const json_t *obj) {
    if (m->name) (void)strlen(m->name);
    if (m->host) (void)strlen(m->host);
    if (m->command) (void)strlen(m->command);
    json_t *jl = json_object_get(obj, "labels");
    size_t want = json_is_object(jl) ? json_object_size(jl) : 0;
    CHECK(m->nlabels == want, "one label per member of firstpass.labels");
    CHECK(m->nlabels == 0 || m->labels != NULL, "labels array present when nlabels > 0");
    for (size_t i = 0; i < m->nlabels; i++) check_label(&m->labels[i], 0);
}

/* to_json then from_json must give back the same metadata. Strings holding a NUL
 * (Jansson keeps \u0000 only with JSON_ALLOW_NUL, which the server does not set) cannot
 * occur here, so every C string is the whole value. */
static void check_roundtrip(const fp_session_meta *m) {
    json_t *j = fp_session_meta_to_json(m);
    CHECK(j != NULL, "fp_session_meta_to_json of a parsed meta");
    fp_session_meta back;
    char err[128];
    int rc = fp_session_meta_from_json(j, &back, err, sizeof err);
    if (rc != 0) fprintf(stderr, "round trip: %s\n", err);
    CHECK(rc == 0, "to_json output parses back");
    CHECK(str_eq(m->name, back.name) && str_eq(m->host, back.host) && str_eq(m->command, back.command),
          "strings survive the round trip");
    CHECK(m->pid == back.pid && m->cupti_version == back.cupti_version && m->driver_version == back.driver_version &&
              m->runtime_version == back.runtime_version && m->start_ns == back.start_ns && m->end_ns == back.end_ns &&
              m->dropped_records == back.dropped_records && m->events_truncated == back.events_truncated,
          "numbers survive the round trip");
    CHECK(m->nlabels == back.nlabels, "label count survives the round trip");
    for (size_t i = 0; i < m->nlabels; i++) {
        int found = 0;
        for (size_t k = 0; k < back.nlabels && !found; k++)
            found = !strcmp(m->labels[i].key, back.labels[k].key) && !strcmp(m->labels[i].value, back.labels[k].value);
        CHECK(found, "every label survives the round trip");
    }
    fp_session_meta_free(&back);
    json_decref(j);
}

static void fuzz_meta(const uint8_t *data, size_t size) {
    json_error_t jerr;
    json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY, &jerr);
    if (!doc) return;
    json_t *fp = json_is_object(doc) && json_object_get(doc, "firstpass") ? json_object_get(doc, "firstpass") : doc;
    fp_session_meta m;
    char err[128];
    memset(err, 'x', sizeof err);
    int rc = fp_session_meta_from_json(fp, &m, err, sizeof err);
    CHECK(rc == 0 || rc == -1, "fp_session_meta_from_json returns 0 or -1");
    CHECK(memchr(err, '\0', sizeof err) != NULL, "err is NUL-terminated");
    if (rc == 0) {
        CHECK(err[0] == '\0', "no message on success");
        check_meta(&m, fp);
        check_roundtrip(&m);
    } else {
        CHECK(err[0] != '\0', "a failure has a message");
        CHECK(all_zero(&m), "on -1 *out is freed and zeroed");
    }
    fp_session_meta_free(&m);
    CHECK(all_zero(&m), "fp_session_meta_free zeroes");
    fp_session_meta_free(NULL);
    /* err == NULL must be accepted too */
    rc = fp_session_meta_from_json(fp, &m, NULL, 0);
    fp_session_meta_free(&m);
    json_decref(doc);
}

static void fuzz_labels(const uint8_t *data, size_t size) {
    char *spec = malloc(size + 1);
    CHECK(spec != NULL, "malloc");
    memcpy(spec, data, size);
    spec[size] = '\0';
    size_t commas = 0;
    for (const char *p = spec; *p; p++) commas += *p == ',';

    fp_label *l = (fp_label *)0x1;
    size_t n = 12345;
    int rc = fp_labels_parse(spec, &l, &n);
    CHECK(rc == 0 || rc == -1, "fp_labels_parse returns 0 or -1");
    if (rc == 0) {
        CHECK(spec[0] == '\0' ? n == 0 : n == commas + 1, "one label per ','-separated entry");
        CHECK(n == 0 || l != NULL, "labels array present when n > 0");
        for (size_t i = 0; i < n; i++) {
            check_label(&l[i], 1);
            CHECK(!strchr(l[i].key, ',') && !strchr(l[i].value, ','), "no ',' inside a label");
        }
        json_t *j = fp_labels_to_json(l, n);
        CHECK(j != NULL, "fp_labels_to_json");
        CHECK(json_object_size(j) <= n, "duplicate keys collapse");
        json_decref(j);
    } else {
        CHECK(l == NULL && n == 0, "on -1 *out is NULL and *n is 0");
    }
    fp_labels_free(l, n);

    fp_label one;
    rc = fp_label_parse_one(spec, &one);
    CHECK(rc == 0 || rc == -1, "fp_label_parse_one returns 0 or -1");
    if (rc == 0) {
        check_label(&one, 1);
        CHECK(strchr(spec, ':') != NULL, "a parsed label had a ':'");
    } else {
        CHECK(one.key == NULL && one.value == NULL, "on -1 *out is zeroed");
    }
    free(one.key);
    free(one.value);
    free(spec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_meta(data, size);
    fuzz_labels(data, size);
    return 0;
}
