/* form.h: an upload sent as a multipart/form-data form (curl -F file=@trace.json.gz, an
 * HTML form), read as its one file part.
 *
 * form.c owns libmicrohttpd's post processor for one connection and what it has seen of
 * the form; it hands the file part's bytes, in order and never held whole, to the sink it
 * was given (http.c passes the importer's feed). It knows nothing of traces and touches
 * no store. The rules, each refused with ERR_REQUEST (400 bad_request) and a message:
 *   - exactly one file part: a part with a filename, or one named "file" or "trace";
 *   - no other field: the session's name and labels come from the query (?name=, ?label=),
 *     as for any upload, so a form field that would be ignored is refused instead;
 *   - the body ends with the form's closing boundary;
 *   - at most FORM_PREAMBLE_MAX (1 KiB) of bytes come before the first boundary (form.c).
 * form_filename gives the file part's filename; http.c names the session with it unless
 * ?name= or the trace does (the dashboard's upload sends the file's name as ?name=).
 *
 *   form *f = form_new(mc, sink, cls, &rc, err, sizeof err); // NULL: rc and err say why
 *   form_feed(f, data, n);                               // as the body arrives
 *   form_finish(f);                                      // after the last byte
 *   form_free(f);                                        // accepts NULL
 */
#ifndef FP_FORM_H
#define FP_FORM_H

#include <microhttpd.h>
#include <stddef.h>

/* Where the file part's bytes go. The sink's errors are its own (the importer's stick and
 * surface at import_finish), so its return value is not read here. */
typedef void (*form_sink)(void *cls, const char *data, size_t n);

typedef struct form form;

/* 1 when a Content-Type header value names multipart/form-data. */
int form_is_multipart(const char *content_type);
/* A form reader for mc's body (its Content-Type must name multipart/form-data). NULL with
 * the reason in err: no boundary (ERR_REQUEST) or no memory; *rc says which. */
form *form_new(struct MHD_Connection *mc, form_sink sink, void *cls, int *rc, char *err, size_t errlen);
/* The next body bytes. 0, or ERR_REQUEST (ERR_NOMEM) with form_error's message; sticky:
 * later calls return it and feed nothing. */
int form_feed(form *f, const char *data, size_t n);
/* After the body's last byte: 0 when exactly one file part was read and the form was
 * closed; else ERR_REQUEST. */
int form_finish(form *f);
/* The file part's filename when it is valid UTF-8, cut at a character boundary to
 * HTTP_TEXT_MAX bytes (?name='s limit, reply.h); NULL when it has none (or not yet).
 * Valid while f lives. */
const char *form_filename(const form *f);
/* The message of the first error ("" when none). */
const char *form_error(const form *f);
void form_free(form *f);

#endif
