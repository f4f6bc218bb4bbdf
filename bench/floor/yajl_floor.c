/* yajl_floor.c: floor.cc's work (sum "dur" per "name" over traceEvents) done with YAJL, the
 * parser the server streams uploads through (ingest/parse.c). Why a second floor: the
 * simdjson floor is what any importer must do at the least; this one is what the server
 * must do at the least with its own parser, so the gap between the two is the parser's and
 * the rest of an upload's time is firstpass's (bench/shapes.sh prints both).
 *
 *   make bench-floor          (also builds bench/out/floor)
 *   bench/out/yajl_floor FILE prints: seconds events names total_dur  (floor.cc's line)
 *
 * The file is read 64 KiB at a time, as the server reads a request body, and the names are
 * kept in an open-addressing table of FNV-1a hashes (at most NAMES_MAX of them: the bench's
 * shapes have up to 100,072). Why not glibc's hsearch_r: its hash of these templated
 * kernel names collides so often that the many-name shape took 162 s. An event is an object directly inside the top-level "traceEvents" array; its
 * "name" (a string) and "dur" (a number) are read at that object's own level only. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <yajl/yajl_parse.h>

#define NAMES_MAX (1u << 20)
#define SLOTS (2 * NAMES_MAX) /* a power of two: load factor at most 1/2 */

typedef struct {
    char *name; /* NULL: an empty slot */
    uint64_t hash;
    double sum;
} slot;

typedef struct {
    int depth;       /* maps and arrays open: 1 the top object, 2 traceEvents, 3 an event */
    int in_events;   /* the array open at depth 2 is traceEvents */
    int key;         /* the last key at the event's level: 0 other, 1 name, 2 dur */
    int top_key_te;  /* the last key of the top object was "traceEvents" */
    char *name;      /* the event's name (malloc'd), NULL for none */
    double dur;
    unsigned long long events;
    size_t names;
    double total;
    slot *tab; /* SLOTS of them */
} floor_state;

static int at_event(const floor_state *f) { return f->in_events && f->depth == 3; }

static int cb_key(void *c, const unsigned char *k, size_t n) {
    floor_state *f = c;
    if (f->depth == 1) f->top_key_te = n == 11 && !memcmp(k, "traceEvents", 11);
    if (at_event(f)) f->key = n == 4 && !memcmp(k, "name", 4) ? 1 : n == 3 && !memcmp(k, "dur", 3) ? 2 : 0;
    return 1;
}

static int cb_number(void *c, const char *s, size_t n) {
    floor_state *f = c;
    if (at_event(f) && f->key == 2) {
        char tmp[64];
        if (n >= sizeof tmp) return 1;
        memcpy(tmp, s, n);
        tmp[n] = 0;
        f->dur = strtod(tmp, NULL);
    }
    return 1;
}

static int cb_string(void *c, const unsigned char *s, size_t n) {
    floor_state *f = c;
    if (at_event(f) && f->key == 1) {
        free(f->name);
        f->name = strndup((const char *)s, n);
        if (!f->name) return 0;
    }
    return 1;
}

static int cb_start_map(void *c) {
    floor_state *f = c;
    if (++f->depth == 3 && f->in_events) {
        f->key = 0;
        f->dur = 0;
        free(f->name);
        f->name = NULL;
    }
    return 1;
}

static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The slot of name: its own, or the empty one where it goes; NULL when the table is full. */
static slot *find(floor_state *f, const char *name, uint64_t h) {
    for (size_t i = h & (SLOTS - 1), n = 0; n < SLOTS; i = (i + 1) & (SLOTS - 1), n++)
        if (!f->tab[i].name || (f->tab[i].hash == h && !strcmp(f->tab[i].name, name))) return &f->tab[i];
    return NULL;
}

/* An event's end: its dur added to its name's sum (a name seen first is stored). */
static int cb_end_map(void *c) {
    floor_state *f = c;
    if (at_event(f)) {
        const char *name = f->name ? f->name : "";
        uint64_t h = fnv1a(name);
        slot *s = find(f, name, h);
        if (!s) return 0;
        if (!s->name) {
            if (f->names == NAMES_MAX || !(s->name = strdup(name))) return 0;
            s->hash = h;
            f->names++;
        }
        s->sum += f->dur;
        f->total += f->dur;
        f->events++;
    }
    f->depth--;
    return 1;
}

static int cb_start_array(void *c) {
    floor_state *f = c;
    if (++f->depth == 2) f->in_events = f->top_key_te;
    return 1;
}

static int cb_end_array(void *c) {
    floor_state *f = c;
    if (f->depth-- == 2) f->in_events = 0;
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: yajl_floor FILE\n");
        return 2;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    FILE *in = fopen(argv[1], "rb");
    if (!in) {
        fprintf(stderr, "yajl_floor: cannot read %s\n", argv[1]);
        return 1;
    }
    static floor_state f;
    if (!(f.tab = calloc(SLOTS, sizeof *f.tab))) return fprintf(stderr, "yajl_floor: out of memory\n"), 1;
    yajl_callbacks cb = {.yajl_number = cb_number, .yajl_string = cb_string, .yajl_start_map = cb_start_map,
                         .yajl_map_key = cb_key, .yajl_end_map = cb_end_map, .yajl_start_array = cb_start_array,
                         .yajl_end_array = cb_end_array};
    yajl_handle h = yajl_alloc(&cb, NULL, &f);
    static unsigned char chunk[1 << 16];
    size_t n;
    yajl_status st = yajl_status_ok;
    while (st == yajl_status_ok && (n = fread(chunk, 1, sizeof chunk, in)) > 0) st = yajl_parse(h, chunk, n);
    if (st == yajl_status_ok) st = yajl_complete_parse(h);
    if (st != yajl_status_ok) {
        unsigned char *msg = yajl_get_error(h, 0, NULL, 0);
        fprintf(stderr, "yajl_floor: %s%s\n", msg, f.names >= NAMES_MAX ? " (more names than NAMES_MAX)" : "");
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%.3f %llu %zu %.3f\n", (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9, f.events, f.names,
           f.total);
    return 0;
}
