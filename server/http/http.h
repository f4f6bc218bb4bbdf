/* http.h: the embedded HTTP server (libmicrohttpd): the daemon and its signals.
 *
 * http.c owns the MHD daemon, per-connection state, body streaming (uploads go through
 * the importer's door, ingest/import.h), static files and sending replies; routes.c owns
 * the route table and the handlers (reply.h is what they see). */
#ifndef FP_HTTP_H
#define FP_HTTP_H

#include "http/app.h"

/* Blocks SIGINT and SIGTERM in the calling thread and so in every thread it creates later:
 * call it first in main(), before any thread, so that only http_serve's sigwait takes them. */
void http_block_stop_signals(void);

/* Starts the daemon; returns after SIGINT/SIGTERM with in-flight requests finished. */
int http_serve(app *a);

#endif
