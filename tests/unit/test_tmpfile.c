/* test_tmpfile.c -- cmocka cases for server/lib/tmpfile.c: names, mode, and the sweep that
 * removes only what a dead server left. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/tmpfile.h"

static char dir[] = "/tmp/fp-tmpfile-test-XXXXXX";

static int setup(void **state) {
    (void)state;
    if (!mkdtemp(dir)) return -1;
    return setenv("TMPDIR", dir, 1);
}
static int teardown(void **state) {
    (void)state;
    return rmdir(dir); /* fails, and so the run, if a test left a file */
}

static int exists(const char *name) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}
static void touch(const char *name) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_CREAT | O_WRONLY, 0600);
    assert_true(fd >= 0);
    close(fd);
}
static void rm(const char *name) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    unlink(p);
}

static void test_tmpfile_name_and_mode(void **state) {
    (void)state;
    char path[256], want[128];
    int fd = tmpfile_make("scratch", path, sizeof path);
    assert_true(fd >= 0);
    snprintf(want, sizeof want, "%s/firstpass-scratch-%ld-", dir, (long)getpid());
    assert_int_equal(strncmp(path, want, strlen(want)), 0);
    assert_int_equal(strlen(path), strlen(want) + 6);
    struct stat sb;
    assert_int_equal(fstat(fd, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    close(fd);
    /* a live owner's file survives the sweep */
    assert_int_equal(tmpfile_sweep(), 0);
    assert_int_equal(access(path, F_OK), 0);
    unlink(path);
    char small[16];
    errno = 0;
    assert_int_equal(tmpfile_make("scratch", small, sizeof small), -1);
    assert_int_equal(errno, ENAMETOOLONG);
}

/* The files of a pid that has exited go; a running one's (our parent), other names, and
 * names that only look alike stay. */
static void test_tmpfile_sweep_only_dead_owners(void **state) {
    (void)state;
    pid_t child = fork();
    if (child == 0) _exit(0);
    assert_true(child > 0);
    assert_int_equal(waitpid(child, NULL, 0), child);
    char dead[64], dead2[64], live[64];
    snprintf(dead, sizeof dead, "firstpass-scratch-%ld-abcDEF", (long)child);
    snprintf(dead2, sizeof dead2, "firstpass-nsys-%ld-123456", (long)child);
    snprintf(live, sizeof live, "firstpass-scratch-%ld-abcDEF", (long)getppid());
    const char *keep[] = {live, "firstpass-scratch-abc-123456", "other-scratch-1-123456", "firstpass-scratch-1-short",
                          "firstpass-nsys-XXXXXX"};
    touch(dead);
    touch(dead2);
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) touch(keep[i]);
    assert_int_equal(tmpfile_sweep(), 2);
    assert_false(exists(dead));
    assert_false(exists(dead2));
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        assert_true(exists(keep[i]));
        rm(keep[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tmpfile_name_and_mode),
        cmocka_unit_test(test_tmpfile_sweep_only_dead_owners),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
