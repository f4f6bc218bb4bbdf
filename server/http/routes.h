/* routes.h: the route table of the REST API (routes.c) and its dispatcher. */
#ifndef FP_ROUTES_H
#define FP_ROUTES_H

#include "http/app.h"
#include "http/reply.h"

#define ROUTE_NONE 1

/* Finds the route for rq and runs it. 0 when a route answered (out filled),
 * ROUTE_NONE when no path matched (the caller serves static files or 404). */
int routes_dispatch(app *a, http_req *rq, http_reply *out);

/* The route pattern that path falls under, for metrics labels (a static string, whatever
 * the path): "/api/v1/sessions/{id}/operators", ..., "static" for a GET/HEAD outside /api/
 * that no route takes (dashboard files), "other" for anything else no route takes. */
const char *routes_pattern(const char *method, const char *path);

#endif
