/* deadline.h: time limits on a connection's request head and on its body's rate.
 *
 * deadline.c owns the list of open connections (MHD_OPTION_NOTIFY_CONNECTION), what each
 * is waiting for, and one sweeper thread. libmicrohttpd's --timeout closes only a
 * connection that sends nothing at all; one header byte every few seconds, or a body
 * trickled at a byte a second, held a connection (and an upload slot) for ever (issue 22).
 * The sweeper closes a connection whose request head is not complete --header-timeout
 * seconds after the connection (or its previous request) began, one whose body arrives
 * slower than --min-body-rate bytes a second over a DEADLINE_WINDOW_S window, and one whose
 * client takes the reply slower than --min-download-rate bytes a second on average, having
 * fallen behind that pace by more than 128 KiB and a window's worth (a /trace download read
 * at a trickle held its connection, and before issue 43 a database transaction, for as long
 * as the client liked; measured on the socket, deadline.c says why so).
 *
 * How a connection is closed from outside MHD's thread: shutdown(2) on its socket, under
 * the list's lock; MHD's own thread then reads EOF and closes it the usual way (the
 * request's completion callback runs, so an upload is rolled back). The entry leaves the
 * list in MHD's NOTIFY_CLOSED callback, which MHD calls before it closes the descriptor,
 * so the sweeper never shuts down a descriptor number that was reused. */
#ifndef FP_DEADLINE_H
#define FP_DEADLINE_H

#include <microhttpd.h>
#include <stddef.h>

#define DEADLINE_WINDOW_S 10 /* the body rate is measured over windows this long */

/* Starts the sweeper. header_s 0: no head deadline; min_rate 0: no body rate;
 * min_reply_rate 0: no reply rate. */
int deadline_start(unsigned header_s, unsigned long long min_rate, unsigned long long min_reply_rate);
void deadline_stop(void);

/* MHD_OPTION_NOTIFY_CONNECTION's callback (cls unused). */
void deadline_notify(void *cls, struct MHD_Connection *mc, void **socket_context, enum MHD_ConnectionNotificationCode toe);

/* From the access handler: the head is complete (a body may follow). */
void deadline_head_done(struct MHD_Connection *mc);
/* A body chunk is being processed (an upload's parse): a window that ends meanwhile does
 * not count, since the server, not the client, is the slow one then. */
void deadline_feeding(struct MHD_Connection *mc);
/* n body bytes arrived and were processed. */
void deadline_body(struct MHD_Connection *mc, size_t n);
/* The body is complete: the handler runs and replies; no limit applies. */
void deadline_body_done(struct MHD_Connection *mc);
/* The reply is queued: until the request completes, the client must take it at the reply
 * rate (a window in which the server left nothing unsent to it does not count). */
void deadline_reply(struct MHD_Connection *mc);
/* The request completed: the connection waits for the next head. */
void deadline_next_head(struct MHD_Connection *mc);

/* Connections closed so far for a late head / a slow body / a slow reader (for /metrics and tests). */
unsigned long long deadline_closed_head(void);
unsigned long long deadline_closed_body(void);
unsigned long long deadline_closed_reply(void);

#endif
