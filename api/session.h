/* session.h -- the "firstpass" object of the native session JSON (docs/contract.md).
 *
 * Shared by the server (which parses it on ingest) and the collector (which builds it before
 * upload). Owns only the metadata struct, labels, and their JSON mapping; aggregates and trace
 * events are produced elsewhere (collector/session_json.c) and read elsewhere (server ingest).
 * Uses Jansson; no CUPTI, libcurl, SQLite or MHD types may appear here. */
#ifndef FP_API_SESSION_H
#define FP_API_SESSION_H

#include <stddef.h>
#include <jansson.h>

#define FP_SESSION_FORMAT  "firstpass-session" /* value of firstpass.format */
#define FP_SESSION_VERSION 1                   /* value of firstpass.version */
#define FP_LABELS_MAX      64                  /* labels in firstpass.labels (as ?label= takes) */
#define FP_LABEL_MAX_BYTES 512                 /* one label's key:value (as ?label= takes) */

typedef struct fp_label {
    char *key;   /* non-empty, heap-owned */
    char *value; /* may be empty, heap-owned */
} fp_label;

typedef struct fp_session_meta {
    char *name;                        /* session name; NULL = unknown */
    fp_label *labels;                  /* nlabels entries, heap-owned */
    size_t nlabels;
    char *host;                        /* hostname; NULL = unknown */
    long long pid;                     /* profiled process id */
    char *command;                     /* command line, args joined by ' '; NULL = unknown */
    long long cupti_version;           /* cuptiGetVersion(), 0 = unknown */
    long long driver_version;          /* cuDriverGetVersion(), e.g. 13000; 0 = unknown */
    long long runtime_version;         /* CUDA version the collector was built for; 0 = unknown */
    long long start_ns;                /* session start, Unix epoch ns (CUPTI clock) */
    long long end_ns;                  /* session end, Unix epoch ns */
    unsigned long long dropped_records; /* CUPTI records lost (no buffer, overflow, ...) */
    int events_truncated;              /* 1 if traceEvents stopped at FIRSTPASS_MAX_EVENTS */
} fp_session_meta;

/* Parses "k:v,k2:v2" into a new array of labels. The split is on the first ':' of each entry,
 * so values may contain ':'; spaces around keys and values are trimmed. NULL or "" gives zero
 * labels. Returns 0 on success, -1 on a malformed spec (an entry with no ':', an empty key, an
 * empty entry such as a trailing ',', a key or value that is not UTF-8); on -1 *out is NULL
 * and *n is 0. Caller frees the array with fp_labels_free. */
int fp_labels_parse(const char *spec, fp_label **out, size_t *n);

/* Parses one "k:v" into *out (same rules as fp_labels_parse). 0 on success, -1 on malformed or
 * out of memory; on -1 *out is zeroed. Caller frees out->key and out->value (free()). */
int fp_label_parse_one(const char *kv, fp_label *out);

/* 1 when the n bytes at s are UTF-8 without a NUL: text the server can store and serve as
 * JSON (a name or label that is not would hide its session), 0 otherwise. */
int fp_utf8_valid(const char *s, size_t n);

/* Frees n labels and the array. Accepts NULL. */
void fp_labels_free(fp_label *l, size_t n);

/* New reference: {"k":"v",...}; a later duplicate key overwrites an earlier one. NULL on OOM. */
json_t *fp_labels_to_json(const fp_label *l, size_t n);

/* New reference: the "firstpass" object of contract.md without "aggregates": format, version,
 * name, labels, host, pid, command, cupti_version, driver_version, runtime_version, start_ns,
 * end_ns, dropped_records, events_truncated. NULL strings become JSON null. NULL on OOM. */
json_t *fp_session_meta_to_json(const fp_session_meta *m);

/* Parses the "firstpass" object (borrowed) into *out, which it zeroes first. Unknown keys are
 * ignored; missing keys and JSON null keep the zero value. A key of the wrong type, an empty
 * label key, a negative
 * dropped_records, or a "format" other than FP_SESSION_FORMAT gives -1, a one-line message in
 * err (if err and errlen > 0), and *out freed and zeroed. 0 on success; caller then frees with
 * fp_session_meta_free. */
int fp_session_meta_from_json(const json_t *obj, fp_session_meta *out, char *err, size_t errlen);

/* Frees the members of *m and zeroes it. Accepts NULL. Does not free m itself. */
void fp_session_meta_free(fp_session_meta *m);

#endif
