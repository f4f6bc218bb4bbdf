/* backup.c: online backups of the database with the sqlite3_backup_* API.
 *
 * Owns the one-backup-at-a-time flag and the backup files' naming. It reads the live
 * database through a pooled connection (store_get) and writes the copy through its own
 * connection; it never writes to the live database. Must not see MHD types. */
#include "store/backup.h"
#include "store/db.h"

#include <sqlite3.h>

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/err.h"
#include "lib/logfmt.h"
#include "lib/log.h"
#include "lib/timefmt.h"

static atomic_int g_running; /* 1 while a backup runs: a second one is a 409 */

/* mkdir -p, mode 0750 (a backup holds every session). */
static int make_dirs(const char *dir, char *err, size_t errlen) {
    char p[PATH_MAX];
    if ((size_t)snprintf(p, sizeof p, "%s", dir) >= sizeof p) return snprintf(err, errlen, "--backup-dir is too long"), ERR_IO;
    for (char *s = p + 1; ; s++) {
        if (*s != '/' && *s) continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, 0750) && errno != EEXIST) {
            snprintf(err, errlen, "cannot create %s: %s", p, strerror(errno));
            return ERR_IO;
        }
        if (!(*s = c)) break;
    }
    return 0;
}

/* dir/firstpass-YYYYMMDDTHHMMSSZ.db, or -2, -3, ... when that name is taken (two backups
 * in one second). */
static int pick_name(const char *dir, char *path, size_t n) {
    char stamp[TIMEFMT_LEN];
    timefmt_utc((long long)time(NULL), 1, stamp);
    struct stat st;
    for (int i = 1; i < 1000; i++) {
        int w = i == 1 ? snprintf(path, n, "%s/firstpass-%s.db", dir, stamp) : snprintf(path, n, "%s/firstpass-%s-%d.db", dir, stamp, i);
        if (w < 0 || (size_t)w + 6 >= n) return ERR_IO; /* room for ".part" */
        if (stat(path, &st) && errno == ENOENT) return 0;
    }
    return ERR_IO;
}

static long long count_sessions(sqlite3 *db) {
    sqlite3_stmt *st = NULL;
    long long n = -1;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM sessions", -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

/* Copies the live database into a new file at tmp in one backup step: step(-1) runs in a
 * single read transaction, so the copy is one snapshot and never restarts when an upload
 * commits meanwhile. The copy is switched to journal_mode=DELETE so that it is one
 * self-contained file (a WAL-mode copy grows -wal/-shm files whenever it is opened). */
static int copy_db(store *st, const char *tmp, long long *sessions, char *err, size_t errlen) {
    db_conn *conn = store_get(st);
    sqlite3 *src = conn ? db_sqlite(conn) : NULL, *dst = NULL;
    int rc = ERR_DB;
    if (!src) return store_put(st, conn), snprintf(err, errlen, "no database connection"), ERR_DB;
    unlink(tmp); /* a .part left by a crash is garbage */
    if (sqlite3_open_v2(tmp, &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot create %s: %s", tmp, dst ? sqlite3_errmsg(dst) : "out of memory");
        rc = ERR_IO;
        goto out;
    }
    sqlite3_backup *b = sqlite3_backup_init(dst, "main", src, "main");
    if (!b) {
        snprintf(err, errlen, "backup_init: %s", sqlite3_errmsg(dst));
        goto out;
    }
    int step = sqlite3_backup_step(b, -1);
    sqlite3_backup_finish(b);
    if (step != SQLITE_DONE) {
        snprintf(err, errlen, "backup: %s", sqlite3_errstr(step));
        goto out;
    }
    if (sqlite3_exec(dst, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL) != SQLITE_OK || (*sessions = count_sessions(dst)) < 0) {
        snprintf(err, errlen, "the copy cannot be read back: %s", sqlite3_errmsg(dst));
        goto out;
    }
    rc = 0;
out:
    if (sqlite3_close(dst) != SQLITE_OK && !rc) rc = ERR_IO, snprintf(err, errlen, "cannot close %s", tmp);
    store_put(st, conn);
    return rc;
}

/* fsync of a file or a folder by path; 0 or ERR_IO. */
static int sync_path(const char *p) {
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ERR_IO;
    int rc = fsync(fd) ? ERR_IO : 0;
    close(fd);
    return rc;
}

/* The copy becomes visible under its final name only once it is complete and on disk. */
static int publish(const char *tmp, const char *path, const char *dir, char *err, size_t errlen) {
    if (sync_path(tmp) || rename(tmp, path)) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return ERR_IO;
    }
    sync_path(dir); /* the rename's durability; a failure here loses nothing already written */
    return 0;
}

int backup_run(store *st, const char *dir, backup_result *res, char *err, size_t errlen) {
    /* PostgreSQL has its own tools, which copy one snapshot with the server running and
     * restore into any cluster: docs/scale.md, "Backup and restore". */
    if (store_is_pg(st)) {
        snprintf(err, errlen, "the database is PostgreSQL: back it up with pg_dump (docs/scale.md), not through the server");
        return ERR_OFF;
    }
    int idle = 0;
    if (!atomic_compare_exchange_strong(&g_running, &idle, 1)) {
        snprintf(err, errlen, "a backup is already running; retry when it is done");
        return ERR_CONFLICT;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char tmp[PATH_MAX + 8];
    char real[PATH_MAX];
    int rc = make_dirs(dir, err, errlen);
    /* The reply and the log name the file absolutely: a relative --db is the server's cwd's. */
    if (!rc && realpath(dir, real)) dir = real;
    if (!rc && pick_name(dir, res->path, sizeof res->path)) rc = ERR_IO, snprintf(err, errlen, "no free backup file name in %s", dir);
    if (!rc) {
        snprintf(tmp, sizeof tmp, "%s.part", res->path);
        rc = copy_db(st, tmp, &res->sessions, err, errlen);
        if (!rc) rc = publish(tmp, res->path, dir, err, errlen);
        if (rc) unlink(tmp);
    }
    struct stat sb;
    res->bytes = !rc && !stat(res->path, &sb) ? (long long)sb.st_size : 0;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    char q1[PATH_MAX + 64], q2[1024];
    if (rc) log_line("error", "backup failed", "dir=%s error=%s", logfmt_quote(dir, q1, sizeof q1), logfmt_quote(err, q2, sizeof q2));
    else log_line("info", "backup", "path=%s bytes=%lld sessions=%lld ms=%.1f", logfmt_quote(res->path, q1, sizeof q1), res->bytes,
                 res->sessions, ms);
    atomic_store(&g_running, 0);
    return rc;
}
