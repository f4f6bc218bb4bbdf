/* parse_only FILE: server/ingest/parse.c alone over a trace, with a sink that only counts, so the
 * parser thread's own cost can be measured without HTTP, the loader or SQLite.
 *
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iserver -o bench/out/parse_only bench/parse_only.c \
 *      server/ingest/parse.c $(pkg-config --cflags --libs yajl zlib) -lm
 *   bench/out/parse_only bench/out/trace-100MB.json
 *
 * Prints the wall seconds of the parse, the events and the bytes of event text handed on. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ingest/parse.h"

static unsigned long long nev, bytes;

static int on_event(void *ctx, const ingest_event *e) {
    (void)ctx;
    nev++;
    bytes += e->json_len;
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: parse_only FILE\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    static unsigned char b[1 << 16]; /* the size of the reads MHD hands the server */
    ingest_sink sink = {NULL, on_event, NULL};
    ingest *in = ingest_new(&sink, 0, 0);
    if (!in) return 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t n;
    int rc = 0;
    while (!rc && (n = fread(b, 1, sizeof b, f)) > 0) rc = ingest_feed(in, b, n);
    if (!rc) rc = ingest_finish(in);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc) fprintf(stderr, "parse_only: %s\n", ingest_error(in));
    else
        printf("%.3f s, %llu events, %llu bytes of event text\n",
               (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, nev, bytes);
    ingest_free(in);
    fclose(f);
    return rc ? 1 : 0;
}
