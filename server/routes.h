/* routes.h: the route table of the REST API (routes.c) and its dispatcher. */
#ifndef FP_ROUTES_H
#define FP_ROUTES_H

#include "http.h"

#define ROUTE_NONE 1

/* Finds the route for rq and runs it. 0 when a route answered (out filled),
 * ROUTE_NONE when no path matched (the caller serves static files or 404). */
int routes_dispatch(app *a, http_req *rq, http_reply *out);

#endif
