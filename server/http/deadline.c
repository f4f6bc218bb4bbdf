/* deadline.c: the head deadline and the minimum body and reply rates (deadline.h). */
#include "http/deadline.h"

#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>

#include "lib/log.h"

enum phase {
    P_HEAD, /* waiting for (the rest of) a request head */
    P_BODY, /* reading a body */
    P_BUSY, /* the handler runs: no limit */
    P_REPLY, /* the reply goes out: the client must take it at --min-download-rate */
};

typedef struct live {
    int fd;
    enum phase phase;
    double since;          /* P_HEAD: when the wait began; P_BODY: the window's start */
    unsigned long long window_bytes; /* P_BODY: bytes in the current window */
    unsigned long long acked;        /* P_REPLY: the socket's bytes acked by the client at the window's start */
    double lead;                     /* P_REPLY: bytes the client is ahead of --min-download-rate's pace, at most reply_slack() */
    int shut;              /* shutdown(2) done: MHD closes it soon */
    int feeding;           /* P_BODY: the server is processing a chunk */
    struct live *prev, *next;
} live;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_wake = PTHREAD_COND_INITIALIZER;
static live *g_head;
static unsigned g_header_s;
static unsigned long long g_min_rate;
static unsigned long long g_min_reply_rate;
static int g_running, g_stop;
static pthread_t g_thread;
static atomic_ullong g_closed_head, g_closed_body, g_closed_reply;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static live *live_of(struct MHD_Connection *mc) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

void deadline_notify(void *cls, struct MHD_Connection *mc, void **socket_context, enum MHD_ConnectionNotificationCode toe) {
    (void)cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        live *l = calloc(1, sizeof *l);
        if (!l || !ci) { /* untracked: only --timeout applies to it */
            free(l);
            return;
        }
        l->fd = ci->connect_fd;
        l->phase = P_HEAD;
        l->since = now_s();
        pthread_mutex_lock(&g_lock);
        l->next = g_head;
        if (g_head) g_head->prev = l;
        g_head = l;
        pthread_mutex_unlock(&g_lock);
        *socket_context = l;
        return;
    }
    live *l = *socket_context; /* MHD_CONNECTION_NOTIFY_CLOSED: before MHD closes the fd */
    if (!l) return;
    pthread_mutex_lock(&g_lock);
    if (l->prev) l->prev->next = l->next;
    else g_head = l->next;
    if (l->next) l->next->prev = l->prev;
    pthread_mutex_unlock(&g_lock);
    free(l);
    *socket_context = NULL;
}

/* What the client has taken of what was written to socket fd: the bytes it acknowledged
 * (TCP_INFO's tcpi_bytes_acked, Linux 4.1+) into *acked, and into *queued whether bytes wait
 * in the socket's send queue (SIOCOUTQ: written, not yet acknowledged). 0, or -1 when the
 * kernel does not say (the connection is then not held to a reply rate).
 *
 * Why the kernel's count and not the bytes MHD handed out: MHD asks for a reply's next
 * block only once the last one is written, and the send and receive buffers take megabytes
 * first, so what the server produced says little about what the client read; what the
 * client acknowledged is what it read once its receive buffer is full. */
static int tcp_taken(int fd, unsigned long long *acked, int *queued) {
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    int outq = 0;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) || len < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof ti.tcpi_bytes_acked ||
        ioctl(fd, SIOCOUTQ, &outq))
        return -1;
    *acked = ti.tcpi_bytes_acked;
    *queued = outq > 0;
    return 0;
}

/* How far a reader may fall behind --min-download-rate's pace before it is cut: 128 KiB plus
 * one window at that rate. Why a lead kept across windows and not a count per window as for
 * bodies: TCP acknowledges a slow reader in lumps. Its receive window reopens only once
 * enough of its buffer is free (receiver-side silly-window avoidance), and with Linux's
 * default 128 KiB buffer a client reading 8.5 KB/s acknowledged its 128 KiB every 15 s, none
 * in between: a per-window count at 8 KiB/s cut it, and so did a lead of two windows (160
 * KiB) capped before the window's due was taken. A reader that takes nothing is cut after
 * two or three windows (20-30 s at 8 KiB/s, 140 s at 1 KiB/s). */
static double reply_slack(void) { return 131072.0 + (double)g_min_reply_rate * DEADLINE_WINDOW_S; }

static void set_phase(struct MHD_Connection *mc, enum phase p) {
    live *l = live_of(mc);
    if (!l) return;
    pthread_mutex_lock(&g_lock);
    l->phase = p;
    l->since = now_s();
    l->window_bytes = 0;
    l->feeding = 0;
    int queued;
    if (p == P_REPLY && tcp_taken(l->fd, &l->acked, &queued)) l->phase = P_BUSY; /* not TCP: no reply rate */
    l->lead = reply_slack();
    pthread_mutex_unlock(&g_lock);
}

void deadline_head_done(struct MHD_Connection *mc) { set_phase(mc, P_BODY); }
void deadline_body_done(struct MHD_Connection *mc) { set_phase(mc, P_BUSY); }
void deadline_next_head(struct MHD_Connection *mc) { set_phase(mc, P_HEAD); }
void deadline_reply(struct MHD_Connection *mc) {
    if (g_min_reply_rate) set_phase(mc, P_REPLY);
}

void deadline_feeding(struct MHD_Connection *mc) {
    live *l = live_of(mc);
    if (!l) return;
    pthread_mutex_lock(&g_lock);
    l->feeding = 1;
    pthread_mutex_unlock(&g_lock);
}

void deadline_body(struct MHD_Connection *mc, size_t n) {
    live *l = live_of(mc);
    if (!l) return;
    pthread_mutex_lock(&g_lock);
    l->window_bytes += n;
    l->feeding = 0;
    pthread_mutex_unlock(&g_lock);
}

/* One pass over the list, under its lock (so no entry is freed, and no fd closed, meanwhile). */
static void sweep(double now) {
    for (live *l = g_head; l; l = l->next) {
        if (l->shut) continue;
        const char *why = NULL;
        if (l->phase == P_HEAD && g_header_s && now - l->since > g_header_s) {
            why = "head";
        } else if (l->phase == P_BODY && g_min_rate && now - l->since >= DEADLINE_WINDOW_S) {
            if (!l->feeding && (double)l->window_bytes < (double)g_min_rate * (now - l->since)) why = "body";
            l->since = now;
            l->window_bytes = 0;
        } else if (l->phase == P_REPLY && now - l->since >= DEADLINE_WINDOW_S) {
            /* The lead grows by what the client took and shrinks by what the rate asks over
             * the window. A window whose end finds the send queue empty asks nothing: the
             * client took all it was given, the server is the slow one then (a download's
             * next fetch). */
            unsigned long long acked;
            int queued;
            if (tcp_taken(l->fd, &acked, &queued)) continue;
            double slack = reply_slack();
            l->lead += (double)(acked - l->acked);
            if (l->lead > slack) l->lead = slack;
            if (queued) l->lead -= (double)g_min_reply_rate * (now - l->since);
            if (l->lead < 0) why = "reply";
            l->since = now;
            l->acked = acked;
        }
        if (!why) continue;
        /* A slow reader's close is a reset (linger 0 makes MHD's close(2) send RST and drop
         * the send queue): a FIN would wait behind the megabytes it has not taken, and the
         * kernel would keep them, and the socket, for minutes after MHD let go of it. */
        if (why[0] == 'r') setsockopt(l->fd, SOL_SOCKET, SO_LINGER, &(struct linger){1, 0}, sizeof(struct linger));
        shutdown(l->fd, SHUT_RDWR);
        l->shut = 1;
        atomic_fetch_add(why[0] == 'h' ? &g_closed_head : why[0] == 'b' ? &g_closed_body : &g_closed_reply, 1);
        log_line("warn", why[0] == 'h'   ? "closed a connection: its request head took over --header-timeout"
                         : why[0] == 'b' ? "closed a connection: its body came slower than --min-body-rate"
                                         : "closed a connection: its reply was taken slower than --min-download-rate",
                 "fd=%d", l->fd);
    }
}

static void *sweeper(void *arg) {
    (void)arg;
    pthread_mutex_lock(&g_lock);
    while (!g_stop) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 250 * 1000 * 1000; /* four passes a second: a deadline is kept within 0.25 s */
        if (t.tv_nsec >= 1000000000) t.tv_sec++, t.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&g_wake, &g_lock, &t);
        if (!g_stop) sweep(now_s());
    }
    pthread_mutex_unlock(&g_lock);
    return NULL;
}

int deadline_start(unsigned header_s, unsigned long long min_rate, unsigned long long min_reply_rate) {
    g_header_s = header_s;
    g_min_rate = min_rate;
    g_min_reply_rate = min_reply_rate;
    if (!header_s && !min_rate && !min_reply_rate) return 0;
    g_stop = 0;
    if (pthread_create(&g_thread, NULL, sweeper, NULL)) return -1;
    g_running = 1;
    return 0;
}

void deadline_stop(void) {
    if (!g_running) return;
    pthread_mutex_lock(&g_lock);
    g_stop = 1;
    pthread_cond_signal(&g_wake);
    pthread_mutex_unlock(&g_lock);
    pthread_join(g_thread, NULL);
    g_running = 0;
}

unsigned long long deadline_closed_head(void) { return atomic_load(&g_closed_head); }
unsigned long long deadline_closed_body(void) { return atomic_load(&g_closed_body); }
unsigned long long deadline_closed_reply(void) { return atomic_load(&g_closed_reply); }
