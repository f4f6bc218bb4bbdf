/* wake.c -- the collector thread's wake-up pipe and the SIGTERM handler (wake.h).
 *
 * Owns two pipes (wake: anyone -> the thread; ack: the thread -> a SIGTERM handler) and the
 * disposition SIGTERM had before ours. The handler runs on whatever application thread the
 * kernel picked, so it only does async-signal-safe things: write, poll, read, getpid,
 * sigaction, raise, clock_gettime, and it calls the previous handler. Everything else (the
 * flush, encoding, spooling) happens on the collector's thread, which blocks all signals.
 * Must not include CUPTI or touch collector state beyond the flag it is given. */
#include "wake.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int wake_p[2] = {-1, -1}, ack_p[2] = {-1, -1};
static struct sigaction prev;            /* SIGTERM before us; written once, before install */
static pid_t owner;
static int wait_ms;
static volatile sig_atomic_t *abort_flag;
static atomic_int busy;                  /* a handler is waiting for the thread */

int fp_wake_init(void)
{
    if (pipe2(wake_p, O_CLOEXEC) != 0)
        return -1;
    if (pipe2(ack_p, O_CLOEXEC) != 0) {
        close(wake_p[0]);
        close(wake_p[1]);
        wake_p[0] = wake_p[1] = -1;
        return -1;
    }
    /* Writers never block: a full pipe already holds a wake-up. */
    (void)fcntl(wake_p[1], F_SETFL, O_NONBLOCK);
    (void)fcntl(ack_p[1], F_SETFL, O_NONBLOCK);
    return 0;
}

int fp_wake_fd(void)
{
    return wake_p[0];
}

int fp_wake_read(void)
{
    unsigned char c;
    ssize_t r;
    do
        r = read(wake_p[0], &c, 1);
    while (r < 0 && errno == EINTR);
    return r == 1 ? c : -1;
}

static int send_byte(int fd, char c)
{
    ssize_t r;
    do
        r = write(fd, &c, 1);
    while (r < 0 && errno == EINTR);
    return r == 1 ? 0 : -1;
}

int fp_wake_stop(void)
{
    return send_byte(wake_p[1], FP_WAKE_STOP);
}

void fp_wake_ack(void)
{
    (void)send_byte(ack_p[1], 'A');
}

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for the thread's ack, up to wait_ms, across EINTR. */
static void wait_ack(void)
{
    long long end = mono_ms() + wait_ms;
    for (;;) {
        struct pollfd p;
        long long left = end - mono_ms();
        unsigned char c;
        int r;
        if (left <= 0)
            return;
        p.fd = ack_p[0];
        p.events = POLLIN;
        p.revents = 0;
        r = poll(&p, 1, (int)left);
        if (r > 0) {
            if (read(ack_p[0], &c, 1) == 1)
                return;
        } else if (r == 0 || errno != EINTR) {
            return;
        }
    }
}

/* What SIGTERM would have done without us. */
static void chain(int sig, siginfo_t *si, void *uc)
{
    if (prev.sa_flags & SA_SIGINFO) {
        if (prev.sa_sigaction)
            prev.sa_sigaction(sig, si, uc);
    } else if (prev.sa_handler == SIG_DFL) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        (void)sigaction(sig, &dfl, NULL);
        /* SIGTERM is blocked while this handler runs: it is delivered, with the default
         * action, when the handler returns. */
        (void)raise(sig);
    } else if (prev.sa_handler != SIG_IGN) {
        prev.sa_handler(sig);
    }
}

static void on_term(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    if (getpid() != owner) {
        chain(sig, si, uc); /* a forked child: no collector thread here to wait for */
    } else if (atomic_exchange(&busy, 1) == 0) {
        if (abort_flag)
            *abort_flag = 1;
        if (send_byte(wake_p[1], FP_WAKE_TERM) == 0)
            wait_ack();
        chain(sig, si, uc);
        atomic_store(&busy, 0); /* the previous handler returned: the process goes on */
    }
    /* else: another thread is already handling a SIGTERM and will chain it */
    errno = saved;
}

int fp_wake_sigterm(pid_t who, int ms, volatile sig_atomic_t *flag)
{
    struct sigaction sa;
    if (sigaction(SIGTERM, NULL, &prev) != 0)
        return -1;
    if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler == SIG_IGN)
        return 1;
    owner = who;
    wait_ms = ms;
    abort_flag = flag;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_term;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGTERM, &sa, NULL) == 0 ? 0 : -1;
}
