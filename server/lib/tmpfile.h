/* tmpfile.h: the server's temporary files (the scratch database of an upload, the spool of
 * an nsys export), named so that a crash cannot leave them for good.
 *
 * Each is $TMPDIR/firstpass-<what>-<pid>-XXXXXX ($TMPDIR unset or empty: /tmp), mode 0600
 * (mkostemp), and its owner unlinks it when the upload ends. A server killed in the middle
 * of an upload cannot, so tmpfile_sweep, at start, removes the files of this pattern whose
 * pid is no longer running: another live server's files sharing $TMPDIR stay. */
#ifndef FP_TMPFILE_H
#define FP_TMPFILE_H

#include <stddef.h>

/* Creates the file for `what` ("scratch", "nsys"), its path in path (size bytes). The open
 * descriptor (O_CLOEXEC), or -1 with errno set (ENAMETOOLONG when path is too small). */
int tmpfile_make(const char *what, char *path, size_t size);

/* The directory tmpfile_make uses. */
const char *tmpfile_dir(void);

/* Removes the files a dead server left; how many. */
int tmpfile_sweep(void);

/* Whether tmpfile_make works now: a file is made there and removed. 0, or -1 with errno set
 * (a read-only root file system without a volume on /tmp: EROFS). Checked at start, so
 * that such a server exits with the fix instead of answering 500 to every upload. */
int tmpfile_check(void);

#endif
