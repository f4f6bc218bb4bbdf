/* version.h: which firstpass-server this is: its version and the git revision it was built
 * from (firstpass-server --version, GET /livez, the start-up log line).
 *
 * The revision comes from the build (Makefile: FP_REVISION, default `git describe` of the
 * checkout; the images pass it as a build argument because their context has no .git):
 * twelve hex digits of the commit, with "-dirty" when the tree had uncommitted changes, or
 * "unknown" when the build could not tell. Owns nothing else. */
#ifndef FP_VERSION_H
#define FP_VERSION_H

#define FP_VERSION "0.1.0"

/* The git revision compiled in, never NULL nor empty. */
const char *fp_revision(void);

#endif
