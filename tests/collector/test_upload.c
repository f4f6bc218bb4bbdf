/* test_upload.c -- cmocka cases for collector/upload.c: gzip, spool, and the HTTP request
 * (checked against a one-shot HTTP server on a loopback thread). No CUPTI. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "upload.h"

static int count_files(const char *dir, int dotfiles);

/* ---- a one-request HTTP server ---------------------------------------------------------- */

typedef struct srv {
    int fd;
    int port;
    int status;           /* status to answer; 0 = never answer (read until the client goes) */
    const char *watch;    /* a directory whose files are counted when the request is complete */
    int watched;          /* that count */
    const char *body;     /* the reply's body instead of the default one */
    size_t big;           /* > 0: a body of this many bytes, without Content-Length */
    int trickle_ms;       /* > 0: the whole reply one byte at a time, this far apart (10 s at most) */
    size_t sent;          /* bytes of the reply written before the client hung up */
    char req[1 << 16];    /* request head + body as received */
    size_t req_len;
    size_t body_off;
    pthread_t th;
} srv;

static void *srv_main(void *arg)
{
    srv *s = arg;
    int c = accept(s->fd, NULL, NULL);
    size_t clen = 0;
    char reply[256];
    const char *cl;
    int n;
    if (c < 0)
        return NULL;
    for (;;) {
        ssize_t r = read(c, s->req + s->req_len, sizeof s->req - 1 - s->req_len);
        char *end;
        if (r <= 0)
            break;
        s->req_len += (size_t)r;
        s->req[s->req_len] = '\0';
        end = strstr(s->req, "\r\n\r\n");
        if (end == NULL)
            continue;
        s->body_off = (size_t)(end + 4 - s->req);
        cl = strcasestr(s->req, "Content-Length:");
        clen = cl ? (size_t)atol(cl + 15) : 0;
        if (s->req_len >= s->body_off + clen)
            break;
    }
    if (s->watch)
        s->watched = count_files(s->watch, 0);
    if (s->status == 0) {
        char sink[4096];
        while (read(c, sink, sizeof sink) > 0)
            ;
        close(c);
        return NULL;
    }
    if (s->big > 0) {
        static char block[65536];
        memset(block, 'x', sizeof block);
        n = snprintf(reply, sizeof reply, "HTTP/1.1 %d X\r\nContent-Type: text/html\r\n"
                     "Connection: close\r\n\r\n", s->status);
        if (write(c, reply, (size_t)n) == n)
            while (s->sent < s->big) {
                size_t want = s->big - s->sent < sizeof block ? s->big - s->sent : sizeof block;
                ssize_t w = write(c, block, want);
                if (w <= 0)
                    break; /* the client hung up (EPIPE: SIGPIPE is ignored in main) */
                s->sent += (size_t)w;
            }
        close(c);
        return NULL;
    }
    {
        const char *body = s->body ? s->body
                           : s->status == 201 ? "{\"id\":7,\"url\":\"/api/v1/sessions/7\"}" : "{}";
        n = snprintf(reply, sizeof reply,
                     "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s", s->status, strlen(body), body);
    }
    if (s->trickle_ms > 0) {
        int i;
        for (i = 0; i < n && (long)i * s->trickle_ms < 10000; i++) {
            if (write(c, reply + i, 1) != 1)
                break;
            s->sent++;
            usleep((useconds_t)s->trickle_ms * 1000);
        }
    } else if (write(c, reply, (size_t)n) < 0)
        perror("write");
    close(c);
    return NULL;
}

static srv *srv_start(int status)
{
    srv *s = calloc(1, sizeof *s);
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    s->status = status;
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(s->fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(s->fd, 1), 0);
    getsockname(s->fd, (struct sockaddr *)&a, &len);
    s->port = ntohs(a.sin_port);
    pthread_create(&s->th, NULL, srv_main, s);
    return s;
}

static int s_watched_last;   /* srv->watched of the last server stopped */
static size_t s_sent_last;  /* srv->sent of the last server stopped */
static const char *s_home;  /* $HOME when the tests began */

static void srv_stop(srv *s)
{
    pthread_join(s->th, NULL);
    s_watched_last = s->watched;
    s_sent_last = s->sent;
    close(s->fd);
    free(s);
}

/* A port that refuses connections: bound then closed. */
static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, (struct sockaddr *)&a, sizeof a);
    getsockname(fd, (struct sockaddr *)&a, &len);
    port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static char *gunzip(const void *p, size_t n, size_t *outn)
{
    z_stream zs;
    size_t cap = 1 << 20;
    char *out = malloc(cap);
    memset(&zs, 0, sizeof zs);
    assert_int_equal(inflateInit2(&zs, 15 + 16), Z_OK);
    zs.next_in = (Bytef *)p;
    zs.avail_in = (uInt)n;
    zs.next_out = (Bytef *)out;
    zs.avail_out = (uInt)cap - 1;
    assert_int_equal(inflate(&zs, Z_FINISH), Z_STREAM_END);
    *outn = zs.total_out;
    out[*outn] = '\0';
    inflateEnd(&zs);
    return out;
}

static char tmpdir[256];

static int setup_dir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/fp-test-upload-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    return 0;
}

static int teardown_dir(void **state)
{
    char cmd[300];
    (void)state;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static int count_files(const char *dir, int dotfiles)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;
    if (d == NULL)
        return -1;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if ((de->d_name[0] == '.') == (dotfiles != 0))
            n++;
    }
    closedir(d);
    return n;
}

/* ---- cases ------------------------------------------------------------------------------ */

static void test_upload_gzip_round_trip(void **state)
{
    fp_gz g;
    char *plain, *back;
    size_t i, n = 3 * 65536 + 17, m;
    (void)state;
    plain = malloc(n);
    for (i = 0; i < n; i++)
        plain[i] = (char)('a' + (i * 7) % 26);
    assert_int_equal(fp_gz_init(&g), 0);
    assert_int_equal(fp_gz_write(&g, plain, 1000), 0);
    assert_int_equal(fp_gz_write(&g, plain + 1000, n - 1000), 0);
    assert_int_equal(fp_gz_finish(&g), 0);
    assert_true(g.out.len > 18 && g.out.len < n);
    assert_int_equal((unsigned char)g.out.p[0], 0x1f);
    assert_int_equal((unsigned char)g.out.p[1], 0x8b);
    back = gunzip(g.out.p, g.out.len, &m);
    assert_int_equal(m, n);
    assert_memory_equal(back, plain, n);
    free(back);
    free(plain);
    fp_gz_free(&g);
}

static void test_upload_spool_dir_precedence(void **state)
{
    char buf[512], want[512];
    (void)state;
    setenv("FIRSTPASS_SPOOL", "/x/spool", 1);
    setenv("XDG_STATE_HOME", "/y/state", 1);
    assert_int_equal(fp_spool_dir(buf, sizeof buf, 0), 0);
    assert_string_equal(buf, "/x/spool");
    unsetenv("FIRSTPASS_SPOOL");
    assert_int_equal(fp_spool_dir(buf, sizeof buf, 0), 0);
    assert_string_equal(buf, "/y/state/firstpass/spool");
    unsetenv("XDG_STATE_HOME");
    setenv("HOME", "relative", 1);
    assert_int_equal(fp_spool_dir(buf, sizeof buf, 0), 0);
    snprintf(want, sizeof want, "/tmp/firstpass-spool-%u", (unsigned)getuid());
    assert_string_equal(buf, want);
}

/* Without FIRSTPASS_SPOOL and XDG_STATE_HOME the spool is under a home the user owns, not in
 * /tmp where another user can make the directory first (issue 43). */
static void test_upload_spool_dir_defaults_to_home(void **state)
{
    char buf[512], want[512], home[300];
    (void)state;
    unsetenv("FIRSTPASS_SPOOL");
    unsetenv("XDG_STATE_HOME");
    snprintf(home, sizeof home, "%s/home", tmpdir);
    assert_int_equal(mkdir(home, 0700), 0);
    setenv("HOME", home, 1);
    assert_int_equal(fp_spool_dir(buf, sizeof buf, 0), 0);
    snprintf(want, sizeof want, "%s/.local/state/firstpass/spool", home);
    assert_string_equal(buf, want);
    setenv("HOME", "/proc/no/such/home", 1); /* no such directory: /tmp */
    assert_int_equal(fp_spool_dir(buf, sizeof buf, 0), 0);
    snprintf(want, sizeof want, "/tmp/firstpass-spool-%u", (unsigned)getuid());
    assert_string_equal(buf, want);
    if (geteuid() == 0) { /* a home of another user's: /tmp too */
        assert_int_equal(chown(home, 65534, 65534), 0);
        setenv("HOME", home, 1);
        assert_int_equal(fp_spool_dir(buf, sizeof buf, 0), 0);
        assert_string_equal(buf, want);
    }
    if (s_home)
        setenv("HOME", s_home, 1);
}

/* fp_deliver spools only into the user's own directory: a symlink, group or other bits, or
 * another owner (as root: a directory chown'ed to nobody) and the session is not written
 * there (LOST without a server). */
static void test_upload_deliver_refuses_a_spool_that_is_not_ours(void **state)
{
    char dir[512], link[512];
    static const int modes[] = {0755, 0770, 0707, 0701, 01777};
    size_t i;
    fp_upload_opts o;
    (void)state;
    memset(&o, 0, sizeof o);
    setenv("FIRSTPASS_QUIET", "1", 1);
    snprintf(dir, sizeof dir, "%s/theirs", tmpdir);
    assert_int_equal(mkdir(dir, 0700), 0);
    setenv("FIRSTPASS_SPOOL", dir, 1);
    for (i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        assert_int_equal(chmod(dir, (mode_t)modes[i]), 0);
        assert_int_equal(fp_deliver(&o, "gz", 2, "s.json.gz"), -1);
        assert_int_equal(count_files(dir, 0), 0);
        assert_int_equal(count_files(dir, 1), 0);
    }
    assert_int_equal(chmod(dir, 0700), 0);
    snprintf(link, sizeof link, "%s/link", tmpdir);
    assert_int_equal(symlink(dir, link), 0);
    setenv("FIRSTPASS_SPOOL", link, 1);
    assert_int_equal(fp_deliver(&o, "gz", 2, "s.json.gz"), -1);
    assert_int_equal(count_files(dir, 0), 0);
    if (geteuid() == 0) {
        assert_int_equal(chown(dir, 65534, 65534), 0);
        setenv("FIRSTPASS_SPOOL", dir, 1);
        assert_int_equal(fp_deliver(&o, "gz", 2, "s.json.gz"), -1);
        assert_int_equal(count_files(dir, 0), 0);
        assert_int_equal(chown(dir, 0, 0), 0);
    }
    setenv("FIRSTPASS_SPOOL", dir, 1); /* ours again: spooled */
    assert_int_equal(fp_deliver(&o, "gz", 2, "s.json.gz"), 1);
    assert_int_equal(count_files(dir, 0), 1);
    unsetenv("FIRSTPASS_SPOOL");
    unsetenv("FIRSTPASS_QUIET");
}

/* The reasons fp_spool_check and fp_spool_prepare give. */
static void test_upload_spool_check_says_why(void **state)
{
    char dir[512], buf[600], why[1024], want[1024], file[600];
    (void)state;
    snprintf(dir, sizeof dir, "%s/check", tmpdir);
    assert_int_equal(fp_spool_prepare(dir, 0, buf, sizeof buf, why, sizeof why), 1); /* missing */
    assert_int_equal(fp_spool_prepare(dir, 1, buf, sizeof buf, why, sizeof why), 0);
    assert_string_equal(buf, dir);
    assert_int_equal(fp_spool_check(dir, why, sizeof why), 0);
    assert_int_equal(chmod(dir, 0750), 0);
    assert_int_equal(fp_spool_prepare(dir, 0, buf, sizeof buf, why, sizeof why), -1);
    snprintf(want, sizeof want, "%s has mode 0750: a directory shared with a group must be setgid with group "
             "rwx and nothing for others; refused (chmod 700 it, or chmod 2770 it)", dir);
    assert_string_equal(why, want);
    assert_int_equal(fp_spool_prepare(dir, 1, buf, sizeof buf, why, sizeof why), -1);
    /* a Kubernetes fsGroup volume (issue 53): setgid, group rwx, a group of ours: used */
    assert_int_equal(chown(dir, (uid_t)-1, getegid()), 0);
    assert_int_equal(chmod(dir, 02770), 0);
    assert_int_equal(fp_spool_check(dir, why, sizeof why), 0);
    assert_int_equal(chmod(dir, 02775), 0); /* ... but not when others may read it */
    assert_int_equal(fp_spool_check(dir, why, sizeof why), -1);
    snprintf(want, sizeof want, "%s has mode 2775: any user may read what is spooled there or plant files in "
             "it; refused (chmod 700 it; for a volume shared with a group, chmod 2770 it)", dir);
    assert_string_equal(why, want);
    assert_int_equal(chmod(dir, 0700), 0);
    snprintf(file, sizeof file, "%s/f", dir);
    fclose(fopen(file, "w"));
    assert_int_equal(fp_spool_check(file, why, sizeof why), -1);
    assert_non_null(strstr(why, "is not a directory"));
    if (geteuid() == 0) {
        assert_int_equal(chown(dir, 65534, 0), 0);
        assert_int_equal(fp_spool_check(dir, why, sizeof why), -1);
        snprintf(want, sizeof want, "%s belongs to uid 65534, not to you (uid 0)", dir);
        assert_true(strncmp(why, want, strlen(want)) == 0);
        assert_int_equal(chown(dir, 0, 0), 0);
    }
}

static void test_upload_spool_write_is_atomic_and_creates_dirs(void **state)
{
    char dir[512], path[600], buf[64];
    struct stat st;
    FILE *f;
    (void)state;
    snprintf(dir, sizeof dir, "%s/a/b", tmpdir);
    setenv("FIRSTPASS_SPOOL", dir, 1);
    assert_int_equal(fp_spool_dir(buf, sizeof buf, 1), 0);
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(fp_spool_write(dir, "s1.json.gz", "hello", 5, path, sizeof path), 0);
    assert_int_equal(count_files(dir, 0), 1);
    assert_int_equal(count_files(dir, 1), 0); /* no tmp left behind */
    f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(buf, 1, sizeof buf, f), 5);
    fclose(f);
    assert_memory_equal(buf, "hello", 5);
    assert_int_equal(fp_spool_write("/nonexistent/dir", "s.json.gz", "x", 1, NULL, 0), -1);
    unsetenv("FIRSTPASS_SPOOL");
}

static void test_upload_sends_gzip_bearer_and_gets_201(void **state)
{
    srv *s = srv_start(201);
    char url[64], resp[128];
    fp_upload_opts o;
    fp_gz g;
    long status = 0;
    const char *doc = "{\"schemaVersion\":1,\"traceEvents\":[]}";
    (void)state;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", s->port);
    memset(&o, 0, sizeof o);
    o.server = url;
    o.token = "s3cret";
    o.connect_timeout_s = 2;
    o.timeout_s = 5;
    fp_gz_init(&g);
    fp_gz_write(&g, doc, strlen(doc));
    fp_gz_finish(&g);
    assert_int_equal(fp_upload_mem(&o, g.out.p, g.out.len, 1, &status, resp, sizeof resp), 0);
    srv_stop(s);
    assert_int_equal(status, 201);
    assert_string_equal(resp, "{\"id\":7,\"url\":\"/api/v1/sessions/7\"}");
    fp_gz_free(&g);
}

static void test_upload_request_shape(void **state)
{
    srv *s = srv_start(201);
    char url[64];
    fp_upload_opts o;
    fp_gz g;
    long status = 0;
    char *plain;
    size_t n;
    const char *doc = "{\"schemaVersion\":1}";
    (void)state;
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s->port);
    memset(&o, 0, sizeof o);
    o.server = url;
    o.token = "tok";
    o.query = "name=a%20b";
    fp_gz_init(&g);
    fp_gz_write(&g, doc, strlen(doc));
    fp_gz_finish(&g);
    assert_int_equal(fp_upload_mem(&o, g.out.p, g.out.len, 1, &status, NULL, 0), 0);
    pthread_join(s->th, NULL);
    assert_true(strncmp(s->req, "POST /api/v1/sessions?name=a%20b HTTP/1.1\r\n", 43) == 0);
    assert_non_null(strcasestr(s->req, "\r\nContent-Encoding: gzip\r\n"));
    assert_non_null(strcasestr(s->req, "\r\nAuthorization: Bearer tok\r\n"));
    assert_non_null(strcasestr(s->req, "\r\nContent-Type: application/json\r\n"));
    assert_int_equal(s->req_len - s->body_off, g.out.len);
    plain = gunzip(s->req + s->body_off, g.out.len, &n);
    assert_string_equal(plain, doc);
    free(plain);
    close(s->fd);
    free(s);
    fp_gz_free(&g);
}

static void test_upload_non_201_is_failure(void **state)
{
    srv *s = srv_start(400);
    char url[64];
    fp_upload_opts o;
    long status = 0;
    (void)state;
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s->port);
    memset(&o, 0, sizeof o);
    o.server = url;
    assert_int_equal(fp_upload_mem(&o, "{}", 2, 0, &status, NULL, 0), -1);
    assert_int_equal(status, 400);
    srv_stop(s);
}

/* A 201 that is not firstpass's answer (a proxy's page, `{}`, an id that is no positive
 * integer) confirms nothing: the upload failed. */
static const char *const no_id_bodies[] = {
    "{}", "<html><body>Welcome to the proxy</body></html>", "{\"id\":\"7\"}", "{\"id\":0}",
    "[7]", "",
};

static void test_upload_201_without_a_session_id_is_failure(void **state)
{
    char url[64], err[256], path[512];
    fp_upload_opts o;
    long status = 0;
    size_t i;
    FILE *f;
    (void)state;
    snprintf(path, sizeof path, "%s/noid.json", tmpdir);
    f = fopen(path, "wb");
    fputs("{}", f);
    fclose(f);
    for (i = 0; i < sizeof no_id_bodies / sizeof no_id_bodies[0]; i++) {
        srv *s = srv_start(201);
        s->body = no_id_bodies[i];
        snprintf(url, sizeof url, "http://127.0.0.1:%d", s->port);
        memset(&o, 0, sizeof o);
        o.server = url;
        assert_int_equal(fp_upload_mem(&o, "{}", 2, 0, &status, NULL, 0), -1);
        assert_int_equal(status, 201);
        srv_stop(s);
        s = srv_start(201);
        s->body = no_id_bodies[i];
        snprintf(url, sizeof url, "http://127.0.0.1:%d", s->port);
        assert_int_equal(fp_upload_file(&o, path, &status, NULL, 0, err, sizeof err), -1);
        assert_string_equal(err, "HTTP 201 without a session id in the reply (not a firstpass "
                                 "server's answer)");
        srv_stop(s);
    }
}

/* fp_deliver keeps the spooled copy when the 201 has no session id. */
static void test_upload_deliver_keeps_the_spooled_copy_on_a_201_without_id(void **state)
{
    srv *s = srv_start(201);
    char url[64], dir[512];
    fp_upload_opts o;
    (void)state;
    s->body = "<html>proxy</html>";
    snprintf(dir, sizeof dir, "%s/spool-noid", tmpdir);
    setenv("FIRSTPASS_SPOOL", dir, 1);
    setenv("FIRSTPASS_QUIET", "1", 1);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s->port);
    memset(&o, 0, sizeof o);
    o.server = url;
    assert_int_equal(fp_deliver(&o, "gz", 2, "noid.json.gz"), 1);
    srv_stop(s);
    assert_int_equal(count_files(dir, 0), 1);
    unsetenv("FIRSTPASS_SPOOL");
    unsetenv("FIRSTPASS_QUIET");
}

/* A reply of 256 MiB is cut at FP_UPLOAD_REPLY_MAX: the client stops reading, so the server
 * cannot write more than that plus the sockets' buffers; a 201 that long is a failure. */
static void test_upload_huge_reply_is_not_read(void **state)
{
    static const int statuses[] = {400, 201};
    char url[64], resp[128], err[256];
    fp_upload_opts o;
    long status = 0;
    size_t i;
    (void)state;
    for (i = 0; i < 2; i++) {
        srv *s = srv_start(statuses[i]);
        struct timespec t0, t1;
        s->big = (size_t)256 << 20;
        snprintf(url, sizeof url, "http://127.0.0.1:%d", s->port);
        memset(&o, 0, sizeof o);
        o.server = url;
        o.timeout_s = 20;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        assert_int_equal(fp_upload_mem(&o, "{}", 2, 0, &status, resp, sizeof resp), -1);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        pthread_join(s->th, NULL);
        assert_int_equal(status, statuses[i]);
        assert_true(s->sent < ((size_t)32 << 20));
        assert_true(t1.tv_sec - t0.tv_sec <= 3);
        assert_int_equal(strncmp(resp, "xxxx", 4), 0); /* the head is still there to show */
        close(s->fd);
        free(s);
    }
    {
        srv *s = srv_start(400);
        char path[512];
        FILE *f;
        s->big = (size_t)256 << 20;
        snprintf(path, sizeof path, "%s/big.json", tmpdir);
        f = fopen(path, "wb");
        fputs("{}", f);
        fclose(f);
        snprintf(url, sizeof url, "http://127.0.0.1:%d", s->port);
        o.server = url;
        assert_int_equal(fp_upload_file(&o, path, &status, NULL, 0, err, sizeof err), -1);
        pthread_join(s->th, NULL);
        assert_string_equal(err, "HTTP 400 with a reply over 65536 bytes (not read)");
        assert_true(s->sent < ((size_t)32 << 20));
        close(s->fd);
        free(s);
    }
}

/* A reply trickled one byte every 200 ms (a per-read timeout would never fire) ends at the
 * whole-request timeout. */
static void test_upload_trickled_reply_ends_at_the_timeout(void **state)
{
    srv *s = srv_start(201);
    char url[64];
    fp_upload_opts o;
    long status = 0;
    struct timespec t0, t1;
    (void)state;
    s->trickle_ms = 200;
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s->port);
    memset(&o, 0, sizeof o);
    o.server = url;
    o.timeout_s = 2;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(fp_upload_mem(&o, "{}", 2, 0, &status, NULL, 0), -1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_true(t1.tv_sec - t0.tv_sec <= 3);
    assert_int_equal(status, 0); /* no complete answer */
    srv_stop(s);
    assert_true(s_sent_last > 3); /* it did trickle */
}

static void test_upload_closed_port_fails_fast(void **state)
{
    char url[64];
    fp_upload_opts o;
    long status = 99;
    time_t t = time(NULL);
    (void)state;
    snprintf(url, sizeof url, "http://127.0.0.1:%d", closed_port());
    memset(&o, 0, sizeof o);
    o.server = url;
    o.connect_timeout_s = 2;
    o.timeout_s = 3;
    assert_int_equal(fp_upload_mem(&o, "{}", 2, 0, &status, NULL, 0), -1);
    assert_int_equal(status, 0);
    assert_true(time(NULL) - t <= 4);
    memset(&o, 0, sizeof o); /* no server at all */
    assert_int_equal(fp_upload_mem(&o, "{}", 2, 0, &status, NULL, 0), -1);
}

static void test_upload_deliver_spools_when_unreachable(void **state)
{
    char url[64], dir[512];
    fp_upload_opts o;
    (void)state;
    snprintf(dir, sizeof dir, "%s/spool", tmpdir);
    setenv("FIRSTPASS_SPOOL", dir, 1);
    setenv("FIRSTPASS_QUIET", "1", 1);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", closed_port());
    memset(&o, 0, sizeof o);
    o.server = url;
    o.connect_timeout_s = 2;
    o.timeout_s = 3;
    assert_int_equal(fp_deliver(&o, "gzbytes", 7, "session-h-1-1-0.json.gz"), 1);
    assert_int_equal(count_files(dir, 0), 1);
    memset(&o, 0, sizeof o); /* no FIRSTPASS_SERVER: straight to the spool */
    assert_int_equal(fp_deliver(&o, "gzbytes", 7, "session-h-1-2-0.json.gz"), 1);
    assert_int_equal(count_files(dir, 0), 2);
    setenv("FIRSTPASS_SPOOL", "/proc/no/such/dir", 1);
    assert_int_equal(fp_deliver(&o, "gzbytes", 7, "x.json.gz"), -1); /* lost, and says so */
    unsetenv("FIRSTPASS_SPOOL");
    unsetenv("FIRSTPASS_QUIET");
}

static void test_upload_deliver_uploads_when_reachable(void **state)
{
    srv *s = srv_start(201);
    char url[64], dir[512];
    fp_upload_opts o;
    (void)state;
    snprintf(dir, sizeof dir, "%s/spool2", tmpdir);
    setenv("FIRSTPASS_SPOOL", dir, 1);
    setenv("FIRSTPASS_QUIET", "1", 1);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s->port);
    memset(&o, 0, sizeof o);
    o.server = url;
    s->watch = dir;
    assert_int_equal(fp_deliver(&o, "gz", 2, "s.json.gz"), 0);
    srv_stop(s);
    assert_int_equal(s_watched_last, 1);       /* spooled before the upload began */
    assert_int_equal(count_files(dir, 0), 0);  /* and removed after the 201 */
    assert_int_equal(count_files(dir, 1), 0);  /* no temporary file either */
    unsetenv("FIRSTPASS_SPOOL");
    unsetenv("FIRSTPASS_QUIET");
}

/* A server that takes the request and never answers: the upload ends at the timeout, and the
 * session is in the spool (it was there before the upload began). */
static void test_upload_deliver_keeps_the_spooled_copy_when_the_server_hangs(void **state)
{
    srv *s = srv_start(0);
    char url[64], dir[512];
    fp_upload_opts o;
    time_t t = time(NULL);
    (void)state;
    snprintf(dir, sizeof dir, "%s/spool3", tmpdir);
    setenv("FIRSTPASS_SPOOL", dir, 1);
    setenv("FIRSTPASS_QUIET", "1", 1);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s->port);
    memset(&o, 0, sizeof o);
    o.server = url;
    o.timeout_s = 1;
    s->watch = dir;
    assert_int_equal(fp_deliver(&o, "gz", 2, "hang.json.gz"), 1);
    assert_true(time(NULL) - t <= 3);
    srv_stop(s);
    assert_int_equal(s_watched_last, 1);
    assert_int_equal(count_files(dir, 0), 1);
    unsetenv("FIRSTPASS_SPOOL");
    unsetenv("FIRSTPASS_QUIET");
}

static volatile sig_atomic_t abort_now;

static void *set_abort(void *arg)
{
    (void)arg;
    usleep(200000);
    abort_now = 1;
    return NULL;
}

/* The collector's exit and SIGTERM stop a part's upload in flight through abort_flag. */
static void test_upload_abort_flag_stops_an_upload_in_flight(void **state)
{
    srv *s = srv_start(0);
    char url[64];
    fp_upload_opts o;
    pthread_t th;
    long status = 0;
    struct timespec t0, t1;
    (void)state;
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s->port);
    memset(&o, 0, sizeof o);
    o.server = url;
    o.timeout_s = 30;
    o.abort_flag = &abort_now;
    abort_now = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_create(&th, NULL, set_abort, NULL);
    assert_int_equal(fp_upload_mem(&o, "{}", 2, 0, &status, NULL, 0), -1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_join(th, NULL);
    srv_stop(s);
    assert_true(t1.tv_sec - t0.tv_sec <= 3); /* not the 30 s timeout */
}

static void test_upload_file_detects_gzip(void **state)
{
    srv *s = srv_start(201);
    char url[64], path[512], err[128], resp[128];
    fp_upload_opts o;
    long status = 0;
    FILE *f;
    (void)state;
    snprintf(path, sizeof path, "%s/t.json.gz", tmpdir);
    f = fopen(path, "wb");
    fwrite("\x1f\x8b\x08\x00rest", 1, 8, f);
    fclose(f);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s->port);
    memset(&o, 0, sizeof o);
    o.server = url;
    assert_int_equal(fp_upload_file(&o, path, &status, resp, sizeof resp, err, sizeof err), 0);
    pthread_join(s->th, NULL);
    assert_non_null(strcasestr(s->req, "\r\nContent-Encoding: gzip\r\n"));
    assert_int_equal(s->req_len - s->body_off, 8);
    close(s->fd);
    free(s);
    assert_int_equal(fp_upload_file(&o, "/no/such/file", &status, NULL, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot open"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_upload_gzip_round_trip),
        cmocka_unit_test(test_upload_spool_dir_precedence),
        cmocka_unit_test(test_upload_spool_dir_defaults_to_home),
        cmocka_unit_test(test_upload_deliver_refuses_a_spool_that_is_not_ours),
        cmocka_unit_test(test_upload_spool_check_says_why),
        cmocka_unit_test(test_upload_spool_write_is_atomic_and_creates_dirs),
        cmocka_unit_test(test_upload_sends_gzip_bearer_and_gets_201),
        cmocka_unit_test(test_upload_request_shape),
        cmocka_unit_test(test_upload_non_201_is_failure),
        cmocka_unit_test(test_upload_201_without_a_session_id_is_failure),
        cmocka_unit_test(test_upload_deliver_keeps_the_spooled_copy_on_a_201_without_id),
        cmocka_unit_test(test_upload_huge_reply_is_not_read),
        cmocka_unit_test(test_upload_trickled_reply_ends_at_the_timeout),
        cmocka_unit_test(test_upload_closed_port_fails_fast),
        cmocka_unit_test(test_upload_deliver_spools_when_unreachable),
        cmocka_unit_test(test_upload_deliver_uploads_when_reachable),
        cmocka_unit_test(test_upload_deliver_keeps_the_spooled_copy_when_the_server_hangs),
        cmocka_unit_test(test_upload_abort_flag_stops_an_upload_in_flight),
        cmocka_unit_test(test_upload_file_detects_gzip),
    };
    signal(SIGPIPE, SIG_IGN); /* the test server writes to clients that hung up */
    s_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    return cmocka_run_group_tests_name("collector_upload", tests, setup_dir, teardown_dir);
}
