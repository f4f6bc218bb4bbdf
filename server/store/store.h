/* store.h: the SQLite database: schema, migrations, connections.
 *
 * One store per server. Connections come from a small pool (SQLite connections are
 * not shared between threads here): take one with store_get, give it back with
 * store_put. Writers serialise inside SQLite (WAL, busy_timeout); readers never wait
 * for writers. See schema.sql for the tables and their invariants. */
#ifndef FP_STORE_H
#define FP_STORE_H

#include <sqlite3.h>
#include <stddef.h>

#define STORE_SCHEMA_VERSION 3 /* = entries in store.c's migrations[] */

typedef struct store store;

/* Opens (creating if needed) the database file and brings its schema to
 * STORE_SCHEMA_VERSION. NULL on failure with a message in err. */
store *store_open(const char *path, char *err, size_t errlen);
void store_close(store *s); /* accepts NULL */
const char *store_path(const store *s);

/* A connection with foreign keys on and a busy timeout; NULL when out of memory or
 * the file cannot be opened. Give it back with store_put (or close it on error). */
sqlite3 *store_get(store *s);
void store_put(store *s, sqlite3 *db);

/* Deletes a session and, through ON DELETE CASCADE, all it owns.
 * 0, ERR_NOTFOUND, ERR_FULL (the disk is full even with the reserve given up), ERR_DB.
 * Then the WAL is truncated and the reserve taken back (store_reserve). */
int store_delete_session(store *s, long long id);
/* STORE_RESERVE_BYTES kept allocated beside the database ("<db>-reserve") so that a delete
 * can run on a full disk; 0, or ERR_FULL when there is no room for it now (retried after
 * each delete and upload). */
#define STORE_RESERVE_BYTES (8u << 20)
int store_reserve(store *s);
/* ERR_FULL when db's last error was SQLITE_FULL (disk full), else ERR_DB. */
int store_errcode(sqlite3 *db);

/* Saves (text non-empty) or clears (text NULL or "") one edited report line. */
int store_set_report_line(store *s, long long id, const char *line, const char *text);

/* A counter bumped after every committed change to a stored session (a deletion, a
 * report edit). Read it BEFORE rendering a reply: a reply rendered at generation g is
 * current while the counter is still g (rcache.h). New uploads do not bump it: they
 * change no existing session, so one upload does not throw away every cached session reply. */
unsigned long store_generation(store *s);

/* The same, for replies about the set of sessions (the sessions list): bumped after every
 * committed upload as well as after everything that bumps store_generation. */
unsigned long store_list_generation(store *s);

/* Called after an upload's session has COMMITTED (never before: a list rendered between
 * the two would be kept as current), before its 201 goes out, so that the uploader's next
 * list shows it. */
void store_note_upload(store *s);

/* Bytes of the database file plus its WAL. */
long long store_size_bytes(const store *s);

/* What the database holds, as one connection sees it (WAL included): its sessions and
 * its pages (PRAGMA page_count, freelist_count, page_size). Pages in use, (pages -
 * free_pages) * page_size, are what retention's --max-db-bytes limits: freed pages stay
 * in the file and are reused by the next upload. 0 or ERR_DB. */
typedef struct store_usage {
    long long sessions;   /* rows in sessions */
    long long pages;      /* PRAGMA page_count */
    long long free_pages; /* PRAGMA freelist_count */
    long long page_size;  /* bytes */
} store_usage;
int store_usage_get(store *s, store_usage *u);

#endif
