/* wake.h -- waking the collector's thread, and the SIGTERM handler that waits for it. */
#ifndef FP_COLLECTOR_WAKE_H
#define FP_COLLECTOR_WAKE_H

#include <signal.h>
#include <sys/types.h>

#define FP_WAKE_STOP 'S' /* at exit: finish and return */
#define FP_WAKE_TERM 'T' /* SIGTERM: send the session now, then fp_wake_ack() */

/* Creates the pipes. 0, or -1 (errno set). */
int fp_wake_init(void);
/* The descriptor the thread polls (readable when a byte is waiting). */
int fp_wake_fd(void);
/* Reads the byte that woke the thread: FP_WAKE_STOP, FP_WAKE_TERM, or -1. */
int fp_wake_read(void);
/* Asks the thread to stop (at exit). 0 or -1. */
int fp_wake_stop(void);
/* Tells a waiting SIGTERM handler that the session is safe. */
void fp_wake_ack(void);

/* Installs the SIGTERM handler for process owner (a forked child that inherits it only chains).
 * On SIGTERM it sets *abort_flag (so that an upload in flight gives up: its part is spooled),
 * wakes the thread with FP_WAKE_TERM, waits up to wait_ms for fp_wake_ack(), then does what the
 * previous disposition says (its handler, or the default action: the process ends). Not
 * installed when SIGTERM is ignored. 0 installed, 1 not (ignored), -1 error. */
int fp_wake_sigterm(pid_t owner, int wait_ms, volatile sig_atomic_t *abort_flag);

#endif
