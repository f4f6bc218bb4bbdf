/* backup.h: online backups of the database (POST /api/v1/admin/backup).
 *
 * A backup is a consistent copy of one snapshot, written with SQLite's online backup API
 * while the server keeps answering and storing uploads (WAL: the copy's read transaction
 * blocks no writer). Restoring is copying the file back with the server stopped
 * (README.md, "Backup and restore"). */
#ifndef FP_BACKUP_H
#define FP_BACKUP_H

#include <limits.h>

#include "store/store.h"

typedef struct backup_result {
    char path[PATH_MAX]; /* the backup file, as dir/firstpass-YYYYMMDDTHHMMSSZ[-N].db */
    long long bytes;     /* its size */
    long long sessions;  /* sessions in it (counted in the copy, not the source) */
} backup_result;

/* Writes a backup of st into dir (created, with its parents, if missing). One backup runs
 * at a time: a second call meanwhile returns ERR_CONFLICT at once. The copy is written as
 * NAME.part, synced, then renamed, so a file named *.db is always complete.
 * 0, ERR_CONFLICT, ERR_IO (dir or file) or ERR_DB, with a message in err. On PostgreSQL
 * nothing is written: ERR_OFF, the message says to use pg_dump (docs/scale.md). */
int backup_run(store *st, const char *dir, backup_result *res, char *err, size_t errlen);

#endif
