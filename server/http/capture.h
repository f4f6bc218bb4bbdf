/* capture.h: the routes of serving agents and captures (issue 44, docs/serving.md).
 *
 * capture.c owns their handlers (routes.c's table names them) and the long poll's waiting
 * room: a poll waits on a condition variable, not on the database (it checks, with a pooled
 * connection taken for the check alone, once a second and whenever a capture is asked for on
 * this server), for at most CAPTURE_POLL_WAIT_S, and at most --max-polls wait at once: the
 * server runs a thread per connection (libmicrohttpd cannot suspend a connection in that
 * mode), so the cap bounds the threads that waiting agents hold; a poll over it is answered
 * at once with "retry_s". */
#ifndef FP_CAPTURE_HTTP_H
#define FP_CAPTURE_HTTP_H

#include "http/app.h"
#include "http/reply.h"

#define CAPTURE_POLL_WAIT_S 25 /* the longest a poll waits (?wait=, default); at most half of --agent-timeout */
#define CAPTURE_POLL_RETRY_S 5 /* what a poll over --max-polls is told to wait */
#define CAPTURE_TARGETS_PAGE 100 /* GET /api/v1/targets: targets a page by default (?limit=, at most CAP_PAGE_MAX) */

int capture_h_targets(app *a, http_req *rq, http_reply *out);      /* GET /api/v1/targets */
int capture_h_list(app *a, http_req *rq, http_reply *out);         /* GET /api/v1/captures */
int capture_h_create(app *a, http_req *rq, http_reply *out);       /* POST /api/v1/captures */
int capture_h_get(app *a, http_req *rq, http_reply *out);          /* GET /api/v1/captures/{id} */
int capture_h_status(app *a, http_req *rq, http_reply *out);       /* POST /api/v1/captures/{id}/status */
int capture_h_cancel(app *a, http_req *rq, http_reply *out);       /* POST /api/v1/captures/{id}/cancel */
int capture_h_agent_put(app *a, http_req *rq, http_reply *out);    /* PUT /api/v1/agents/{name} */
int capture_h_agent_poll(app *a, http_req *rq, http_reply *out);   /* POST /api/v1/agents/{name}/poll */

/* Wakes every waiting poll and makes new ones answer at once: the server is stopping (http.c's
 * drain), so that no agent holds it up for a poll's wait. */
void capture_http_stop(void);

#endif
