/* test_watch.c -- cmocka cases for collector/watch.c: what a trace file's name says, whether
 * a file is whole (gzip trailer, JSON end, SQLite size), and the state file across a restart. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "watch.h"

static char g_dir[256];

static void path_in(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", g_dir, name); }

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

static int setup(void **st)
{
    (void)st;
    snprintf(g_dir, sizeof g_dir, "/tmp/fp-test-watch-XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **st)
{
    char cmd[300];
    (void)st;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_watch_names_vllm_sglang_torch(void **st)
{
    fp_name_info i;
    (void)st;
    assert_int_equal(fp_name_parse("0123abcd-rank-3.1718000000123.pt.trace.json.gz", &i), FP_KIND_JSON_GZ);
    assert_string_equal(i.engine, "vllm");
    assert_string_equal(i.rank, "3");
    assert_string_equal(i.group, "0123abcd");
    assert_int_equal(i.stamp, 1718000000123LL);
    assert_string_equal(i.name, "0123abcd-rank-3.1718000000123");

    assert_int_equal(fp_name_parse("decode_dp1_pp0_tp2_dcp0_ep0_rank6.1718000000456789.pt.trace.json.gz", &i), FP_KIND_JSON_GZ);
    assert_string_equal(i.engine, "vllm");
    assert_string_equal(i.rank, "6");
    assert_string_equal(i.tp_rank, "2");
    assert_string_equal(i.dp_rank, "1");
    assert_string_equal(i.pp_rank, "0");
    assert_string_equal(i.group, "decode");

    assert_int_equal(fp_name_parse("dp0_pp0_tp1_dcp0_ep0_rank1.17.pt.trace.json", &i), FP_KIND_JSON);
    assert_string_equal(i.group, "vllm");

    assert_int_equal(fp_name_parse("1718000042.5-TP-1.trace.json.gz", &i), FP_KIND_JSON_GZ);
    assert_string_equal(i.engine, "sglang");
    assert_string_equal(i.tp_rank, "1");
    assert_string_equal(i.rank, "1");
    assert_string_equal(i.group, "1718000042.5");
    assert_string_equal(i.stage, "");
    assert_string_equal(i.name, "1718000042.5-TP-1");

    assert_int_equal(fp_name_parse("1718000042.5-TP-0-DP-1-PP-2-EXTEND.trace.json.gz", &i), FP_KIND_JSON_GZ);
    assert_string_equal(i.tp_rank, "0");
    assert_string_equal(i.dp_rank, "1");
    assert_string_equal(i.pp_rank, "2");
    assert_string_equal(i.stage, "EXTEND");
    assert_int_equal(fp_name_parse("1718000042.5-TP-3-ForwardMode.DECODE.trace.json.gz", &i), FP_KIND_JSON_GZ);
    assert_string_equal(i.stage, "DECODE");

    assert_int_equal(fp_name_parse("gpu-7_4242.1718000000789.pt.trace.json", &i), FP_KIND_JSON);
    assert_string_equal(i.engine, "torch");
    assert_string_equal(i.rank, "");
    assert_string_equal(i.group, "gpu-7_4242");
    assert_int_equal(fp_name_parse("rank3.17.pt.trace.json.gz", &i), FP_KIND_JSON_GZ);
    assert_string_equal(i.rank, "3");
    assert_int_equal(fp_name_parse("worker_rank-12.17.pt.trace.json.gz", &i), FP_KIND_JSON_GZ);
    assert_string_equal(i.rank, "12");
    assert_int_equal(fp_name_parse("frank5.17.pt.trace.json.gz", &i), FP_KIND_JSON_GZ);
    assert_string_equal(i.rank, ""); /* "rank" inside a word is not a rank */

    assert_int_equal(fp_name_parse("report.sqlite", &i), FP_KIND_SQLITE);
    assert_string_equal(i.engine, "");
    assert_int_equal(fp_name_parse("trace.json", &i), FP_KIND_JSON);
    assert_string_equal(i.engine, "");
    /* not traces */
    assert_int_equal(fp_name_parse("profiler_out_0.txt", &i), FP_KIND_NONE);
    assert_int_equal(fp_name_parse("1718-TP-0-memory.pickle", &i), FP_KIND_NONE);
    assert_int_equal(fp_name_parse(".x.json.gz", &i), FP_KIND_NONE);
    assert_int_equal(fp_name_parse("x.json.tmp", &i), FP_KIND_NONE);
    assert_int_equal(fp_name_parse("report.nsys-rep", &i), FP_KIND_NONE);
}

static size_t gzip_of(const char *text, unsigned char *out, size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (Bytef *)text;
    z.avail_in = (uInt)strlen(text);
    z.next_out = out;
    z.avail_out = (uInt)cap;
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    size_t n = cap - z.avail_out;
    deflateEnd(&z);
    return n;
}

static void test_watch_gzip_whole_only_with_its_trailer(void **st)
{
    char p[300], err[256], text[20000];
    unsigned char gz[40000], two[80000];
    (void)st;
    size_t o = (size_t)snprintf(text, sizeof text, "{\"traceEvents\":[");
    for (int i = 0; i < 300; i++)
        o += (size_t)snprintf(text + o, sizeof text - o, "%s{\"name\":\"op%d\",\"ph\":\"X\",\"ts\":%d,\"dur\":1}", i ? "," : "", i, i);
    snprintf(text + o, sizeof text - o, "]}");
    size_t n = gzip_of(text, gz, sizeof gz);
    path_in(p, sizeof p, "t.json.gz");
    write_file(p, gz, n);
    assert_int_equal(fp_file_complete(p, FP_KIND_JSON_GZ, err, sizeof err), 1);
    /* cut anywhere, the trailer included: not whole yet */
    size_t cuts[] = {1, 10, n / 2, n - 8, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        write_file(p, gz, cuts[i]);
        assert_int_equal(fp_file_complete(p, FP_KIND_JSON_GZ, err, sizeof err), 0);
    }
    /* a wrong CRC in the trailer: corrupt, never whole */
    memcpy(two, gz, n);
    two[n - 8] ^= 0xff;
    write_file(p, two, n);
    assert_int_equal(fp_file_complete(p, FP_KIND_JSON_GZ, err, sizeof err), -1);
    assert_non_null(strstr(err, "corrupt"));
    /* two members (concatenated gzip) are whole; the second one cut is not */
    memcpy(two, gz, n);
    memcpy(two + n, gz, n);
    write_file(p, two, 2 * n);
    assert_int_equal(fp_file_complete(p, FP_KIND_JSON_GZ, err, sizeof err), 1);
    write_file(p, two, 2 * n - 3);
    assert_int_equal(fp_file_complete(p, FP_KIND_JSON_GZ, err, sizeof err), 0);
    /* not gzip at all */
    write_file(p, "{\"x\":1}", 7);
    assert_int_equal(fp_file_complete(p, FP_KIND_JSON_GZ, err, sizeof err), -1);
}

static void test_watch_json_and_sqlite_ends(void **st)
{
    char p[300], err[256];
    (void)st;
    path_in(p, sizeof p, "t.json");
    write_file(p, "{\"traceEvents\":[{\"a\":1}]}\n\n", 27);
    assert_int_equal(fp_file_complete(p, FP_KIND_JSON, err, sizeof err), 1);
    write_file(p, "[{\"a\":1},\n", 10);
    assert_int_equal(fp_file_complete(p, FP_KIND_JSON, err, sizeof err), 0);
    write_file(p, "", 0);
    assert_int_equal(fp_file_complete(p, FP_KIND_JSON, err, sizeof err), 0);

    /* an SQLite file: 2 pages of 4096 by its header; a -journal beside it means unfinished */
    unsigned char db[8192];
    memset(db, 0, sizeof db);
    memcpy(db, "SQLite format 3", 16);
    db[16] = 0x10; /* page size 4096 */
    db[27] = 7;    /* change counter 7 ... */
    db[95] = 7;    /* ... = version-valid-for: the page count holds */
    db[31] = 2;    /* 2 pages */
    path_in(p, sizeof p, "r.sqlite");
    write_file(p, db, sizeof db);
    assert_int_equal(fp_file_complete(p, FP_KIND_SQLITE, err, sizeof err), 1);
    write_file(p, db, 4096);
    assert_int_equal(fp_file_complete(p, FP_KIND_SQLITE, err, sizeof err), 0);
    write_file(p, db, sizeof db);
    char j[320];
    snprintf(j, sizeof j, "%s-journal", p);
    write_file(j, "x", 1);
    assert_int_equal(fp_file_complete(p, FP_KIND_SQLITE, err, sizeof err), 0);
    unlink(j);
    write_file(p, "not sqlite at all, no", 21);
    assert_int_equal(fp_file_complete(p, FP_KIND_SQLITE, err, sizeof err), 0); /* shorter than a header */
    memset(db, 'x', 100);
    write_file(p, db, 200);
    assert_int_equal(fp_file_complete(p, FP_KIND_SQLITE, err, sizeof err), -1);
}

static void test_watch_state_survives_a_restart(void **st)
{
    char sp[300], a[300], b[300], err[256];
    struct stat sa, sb;
    (void)st;
    path_in(sp, sizeof sp, "state/sub/watch.state"); /* the directory is made */
    path_in(a, sizeof a, "odd\tname%\n.json");        /* escaped in the file */
    path_in(b, sizeof b, "b.json");
    write_file(a, "[]", 2);
    write_file(b, "{}", 2);
    assert_int_equal(stat(a, &sa), 0);
    assert_int_equal(stat(b, &sb), 0);
    long long ma = (long long)sa.st_mtim.tv_sec * 1000000000LL + sa.st_mtim.tv_nsec;
    long long mb = (long long)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;

    fp_state *s = fp_state_open(sp, err, sizeof err);
    assert_non_null(s);
    assert_int_equal(fp_state_put(s, a, 2, ma, FP_ST_SENDING, 0), 0);
    assert_int_equal(fp_state_put(s, a, 2, ma, FP_ST_DONE, 42), 0);
    assert_int_equal(fp_state_put(s, b, 2, mb, FP_ST_SENDING, 0), 0);
    fp_state_close(s);

    s = fp_state_open(sp, err, sizeof err);
    assert_non_null(s);
    long long sid = 0;
    assert_int_equal(fp_state_get(s, a, 2, ma, &sid), FP_ST_DONE);
    assert_int_equal(sid, 42);
    assert_int_equal(fp_state_get(s, a, 3, ma, NULL), FP_ST_NONE); /* another version */
    assert_int_equal(fp_state_get(s, b, 2, mb, NULL), FP_ST_SENDING);
    const char *path;
    long long size, mt;
    assert_int_equal(fp_state_sending(s, 0, &path, &size, &mt), 1);
    assert_string_equal(path, b);
    assert_int_equal(fp_state_sending(s, 1, &path, &size, &mt), 0);
    fp_state_close(s);

    /* a changed file: its entry is dropped at the next open; a file that cannot be stat'ed now
     * keeps its entry (its directory may not be mounted yet: issue 50 sent it all again) */
    write_file(a, "[ ]", 3);
    unlink(b);
    s = fp_state_open(sp, err, sizeof err);
    assert_non_null(s);
    assert_int_equal(fp_state_get(s, a, 2, ma, NULL), FP_ST_NONE);
    assert_int_equal(fp_state_get(s, b, 2, mb, NULL), FP_ST_SENDING);
    assert_int_equal(fp_state_sending(s, 0, &path, &size, &mt), 1);
    assert_string_equal(path, b);
    fp_state_close(s);
}

/* An entry of a file gone for longer than FP_STATE_KEEP_GONE_S (by its mtime) is dropped. */
static void test_watch_state_drops_entries_gone_long_ago(void **st)
{
    char sp[300], old[300], err[256];
    (void)st;
    path_in(sp, sizeof sp, "old.state");
    path_in(old, sizeof old, "gone-long-ago.json");
    long long long_ago = ((long long)time(NULL) - FP_STATE_KEEP_GONE_S - 3600) * 1000000000LL;
    fp_state *s = fp_state_open(sp, err, sizeof err);
    assert_non_null(s);
    assert_int_equal(fp_state_put(s, old, 2, long_ago, FP_ST_DONE, 7), 0);
    assert_int_equal(fp_state_put(s, "/nonexistent/recent.json", 2, (long long)time(NULL) * 1000000000LL, FP_ST_DONE, 8), 0);
    fp_state_close(s);
    s = fp_state_open(sp, err, sizeof err);
    assert_non_null(s);
    assert_int_equal(fp_state_get(s, old, 2, long_ago, NULL), FP_ST_NONE);
    fp_state_close(s);
}

/* fp_state_open of path as uid 65534 when we are root (a state file written by a run as root,
 * read by the agent's own user), as ourselves otherwise: 1 when it refused with the reason
 * and the fix, 0 when it opened. */
static int refused_as_another_user(const char *path)
{
    char err[512];
    if (geteuid() != 0) {
        fp_state *s = fp_state_open(path, err, sizeof err);
        fp_state_close(s);
        return !s && strstr(err, "Permission denied") && strstr(err, "fix:");
    }
    pid_t pid = fork();
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(3);
        fp_state *s = fp_state_open(path, err, sizeof err);
        _exit(!s && strstr(err, "Permission denied") && strstr(err, "fix:") ? 1 : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 3);
    return WEXITSTATUS(status);
}

/* A state file that exists but cannot be read is an error that names the fix; it is not
 * taken as empty and replaced (issue 50: a state written by a run as root was replaced, and
 * everything sent again). */
static void test_watch_state_unreadable_is_an_error(void **st)
{
    char dir[300], sp[330];
    struct stat sb;
    (void)st;
    chmod(g_dir, 0711); /* the other user reaches the shared directory */
    path_in(dir, sizeof dir, "shared");
    mkdir(dir, 0777);
    chmod(dir, 0777); /* another user could replace a file in it: only the refusal to start stops that */
    snprintf(sp, sizeof sp, "%s/watch.state", dir);
    static const char line[] = "done\t2\t1\t1\t/x.json\n";
    write_file(sp, line, sizeof line - 1);
    chmod(sp, 0600);
    if (geteuid() != 0)
        chmod(sp, 0); /* not root: our own file made unreadable */
    assert_int_equal(refused_as_another_user(sp), 1);
    assert_int_equal(stat(sp, &sb), 0);
    assert_int_equal(sb.st_size, (long long)sizeof line - 1); /* not replaced */
    assert_int_equal(sb.st_uid, geteuid());
}

/* A capture in flight is remembered across a restart until it is cleared. */
static void test_watch_state_remembers_captures_in_flight(void **st)
{
    char sp[300], err[256];
    fp_state_capture c[4];
    (void)st;
    path_in(sp, sizeof sp, "cap.state");
    fp_state *s = fp_state_open(sp, err, sizeof err);
    assert_non_null(s);
    assert_int_equal(fp_state_capture_put(s, "vllm-a", "http://127.0.0.1:8000", 41), 0);
    assert_int_equal(fp_state_capture_put(s, "sgl-b", "http://127.0.0.1:30000", 42), 0);
    assert_int_equal(fp_state_capture_put(s, "vllm-a", "http://127.0.0.1:8000", 0), 0);
    assert_int_equal(fp_state_capture_put(s, "tab\tname", "http://h:1/x", 43), 0);
    fp_state_close(s);
    s = fp_state_open(sp, err, sizeof err);
    assert_non_null(s);
    assert_int_equal(fp_state_captures(s, c, 4), 2);
    assert_string_equal(c[0].target, "sgl-b");
    assert_string_equal(c[0].url, "http://127.0.0.1:30000");
    assert_int_equal(c[0].id, 42);
    assert_int_equal(c[1].id, 43);
    fp_state_close(s);
}

static void test_watch_scan_hands_out_whole_files_once(void **st)
{
    char d[300], p[320], q[320], sp[300], err[256];
    (void)st;
    path_in(d, sizeof d, "w");
    mkdir(d, 0700);
    snprintf(p, sizeof p, "%s/a.json", d);
    snprintf(q, sizeof q, "%s/b.json", d);
    write_file(p, "[{\"a\":1}]", 9);
    write_file(q, "[{\"a\":1},", 9); /* not whole */
    path_in(sp, sizeof sp, "w.state");
    fp_state *s = fp_state_open(sp, err, sizeof err);
    fp_watch *w = fp_watch_new(0.2);
    assert_non_null(s);
    assert_non_null(w);
    assert_int_equal(fp_watch_add(w, d), 0);
    fp_watch_file f;
    assert_int_equal(fp_watch_scan(w), 0);
    assert_int_equal(fp_watch_next(w, s, &f), 0); /* not settled yet */
    usleep(300 * 1000);
    assert_int_equal(fp_watch_scan(w), 0);
    assert_int_equal(fp_watch_next(w, s, &f), 1);
    assert_string_equal(f.path, p);
    assert_string_equal(f.dir, d);
    assert_int_equal(fp_watch_next(w, s, &f), 0); /* b.json is not whole */
    assert_int_equal(fp_watch_pending(w, s, d, 0), 2);
    assert_int_equal(fp_state_put(s, p, f.size, f.mtime_ns, FP_ST_DONE, 1), 0);
    assert_int_equal(fp_watch_pending(w, s, d, 0), 1);
    assert_int_equal(fp_watch_scan(w), 0);
    assert_int_equal(fp_watch_next(w, s, &f), 0); /* a.json is in the state now */
    fp_watch_free(w);
    fp_state_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_watch_names_vllm_sglang_torch),
        cmocka_unit_test(test_watch_gzip_whole_only_with_its_trailer),
        cmocka_unit_test(test_watch_json_and_sqlite_ends),
        cmocka_unit_test(test_watch_state_survives_a_restart),
        cmocka_unit_test(test_watch_state_drops_entries_gone_long_ago),
        cmocka_unit_test(test_watch_state_unreadable_is_an_error),
        cmocka_unit_test(test_watch_state_remembers_captures_in_flight),
        cmocka_unit_test(test_watch_scan_hands_out_whole_files_once),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
