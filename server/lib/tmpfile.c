/* tmpfile.c: temporary files that a crash cannot leave behind for good (tmpfile.h). */
#include "lib/tmpfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PREFIX "firstpass-"

const char *tmpfile_dir(void) {
    const char *d = getenv("TMPDIR");
    return d && *d ? d : "/tmp";
}

int tmpfile_make(const char *what, char *path, size_t size) {
    int n = snprintf(path, size, "%s/" PREFIX "%s-%ld-XXXXXX", tmpfile_dir(), what, (long)getpid());
    if (n < 0 || (size_t)n >= size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return mkostemp(path, O_CLOEXEC);
}

/* The pid in "firstpass-<what>-<pid>-XXXXXX", or 0 when the name is not of that form.
 * <what> holds no '-', so the pid is the second dash-separated field. */
static long pid_of(const char *name) {
    if (strncmp(name, PREFIX, sizeof PREFIX - 1)) return 0;
    const char *p = strchr(name + sizeof PREFIX - 1, '-');
    if (!p) return 0;
    char *end;
    long pid = strtol(p + 1, &end, 10);
    return pid > 0 && *end == '-' && strlen(end + 1) == 6 ? pid : 0;
}

int tmpfile_sweep(void) {
    const char *dir = tmpfile_dir();
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long pid = pid_of(e->d_name);
        /* kill(pid, 0): ESRCH means no such process; EPERM means it runs (as someone else) */
        if (!pid || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < sizeof path && unlink(path) == 0) n++;
    }
    closedir(d);
    return n;
}

int tmpfile_check(void) {
    char path[4096];
    int fd = tmpfile_make("check", path, sizeof path);
    if (fd < 0) return -1;
    close(fd);
    unlink(path);
    return 0;
}
