/* version.c: the revision compiled in (version.h). Only this file sees the generated
 * header, so a new commit recompiles one object. */
#include "lib/version.h"

#include "revision.h" /* $(BUILD)/gen/revision.h: #define FP_REVISION "..." */

const char *fp_revision(void) { return FP_REVISION[0] ? FP_REVISION : "unknown"; }
