/* kinds.h: the kind of work of a GPU activity (issue 48, "GPU time by kind"), from names.
 *
 * Owns the classification rules only (tests/triage/oracle.py's work_kind / op_kind: the
 * lists there and here must match): pure functions of a name, no state, no trace. Must not
 * read or write the analysis context (an.h), scratch or the suspects: waste.c applies them
 * to the trace's activities and suspects_waste.c turns the waste into suspects. */
#ifndef FP_KINDS_H
#define FP_KINDS_H

/* The kinds, in the reply's order (wk_name). */
enum { WK_MATH, WK_DATA_MOVEMENT, WK_ELEMENTWISE, WK_COMMUNICATION, WK_OTHER, WK_N };

/* What a GPU activity is, before its name is read. */
enum { WA_KERNEL, WA_MEMCPY, WA_MEMSET };

/* The reply's name of kind k ("math", "data_movement", ...). */
const char *wk_name(int k);

/* The kind an operator's own kernels do, from its name (oracle rule 5), -1 for unknown. */
int wk_op_kind(const char *op);

/* The kind a kernel's name alone gives (oracle rules 2-4), -1 when the name does not say
 * (the op around its launch decides, then the elementwise families: wk_activity). */
int wk_kernel_kind(const char *kernel);

/* Whether a kernel's name is an elementwise / normalisation / reduction family (rule 6). */
int wk_elementwise_kernel(const char *kernel);

/* Whether a kernel is a layout conversion (nchwToNhwc, nhwcToNchw, transpose ...). */
int wk_layout_kernel(const char *kernel);

/* Whether an op is data-dependent addressing (gather, scatter, index*, embedding ...). */
int wk_addressing_op(const char *op);

/* The kind of one GPU activity: what (WA_*), its name, the innermost op around its launch
 * (NULL: none), first match wins (oracle work_kind). */
int wk_activity(int what, const char *name, const char *inner_op);

#endif
