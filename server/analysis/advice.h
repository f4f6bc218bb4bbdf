/* advice.h: the rules that choose a suspect's advice from what the trace shows (issue 48
 * item 4), shared by suspects.c and the files of each family:
 *   suspects_comm.c  communication: a late peer, link-bound, already overlapped, exposed
 *   suspects_sync.c  a sync by its origin (Python in the loop, a runtime call in a C++
 *                    program, the result the step returns) and what keeps a loop out of a
 *                    CUDA graph (a host sync or a data-dependent shape inside it)
 * Each rule's premise (the evidence it computes) and its advice sit together in its file. */
#ifndef FP_ANALYSIS_ADVICE_H
#define FP_ANALYSIS_ADVICE_H

#include <stddef.h>

#include <jansson.h>

#include "analysis/an.h"

/* Adds to ev (communication's evidence) what tells its kinds apart: the collectives grouped
 * by name, launch and message size, a late peer's calls, the bytes over time. comm_us: the
 * union of the collective kernels; other_us: the union of the other GPU work (what could
 * hide them). 0 or an ERR_* code. */
int an_comm_facts(A *a, json_t *ev, double comm_us, double other_us);

/* Communication's time at stake from ev (an_comm_facts') and its exposed time: the redundant
 * share of gradient reductions repeated within a step when there are, never above exposed. */
double an_comm_at_stake(const json_t *ev, double exposed);

/* Communication's next experiment for culprit from ev (an_comm_facts'), chosen by what the
 * evidence shows; torch: the program is PyTorch (its words may be used). Writes out. */
void an_comm_advice(const json_t *ev, const char *culprit, int torch, int rocm, char *out, size_t n);

/* Where a sync comes from. */
enum sync_origin {
    SYNC_PYTHON,  /* an operator the Python loop calls (.item(), .cpu(), .tolist(), printing) */
    SYNC_RUNTIME, /* a runtime call in a program with no operators and no Python (C++) */
    SYNC_RESULT,  /* the step's final copy to the host of a step that takes input from it: the response */
    SYNC_EXPLICIT /* a synchronize call of its own (torch.cuda.synchronize()) between a step's launches: instrumentation */
};

/* The origin of host_sync's culprit (name flags: names.h's of the culprit). */
int an_sync_origin(A *a, const char *culprit, unsigned flags);

/* host_sync's next experiment for culprit of that origin. Writes out. */
void an_sync_advice(int origin, const char *culprit, int rocm, char *out, size_t n);

/* The host walk's order of syncs, launches and steps on a thread (host.c, through suspects_host.c):
 * a popped sync call (sync), a popped step range (step), a kernel launch (launch). Counts the
 * syncs that have kernel launches before and after them inside one step. */
void an_sync_walk(A *a, int sync, int step, int launch);

/* What keeps the loop out of a CUDA graph, "" for nothing the trace shows: a host sync
 * inside the steps (launches before and after it in the same step), or an op whose output shape depends
 * on the data (nonzero, masked_select, unique). Writes out (e.g. "aten::nonzero, a
 * data-dependent shape and a host sync, 16 a step"). */
void an_graph_blocker(A *a, char *out, size_t n);

/* One-time work: culprit (a name id) is a range that ran once, outside every step of a
 * trace with two or more steps (a checkpoint save after the last step, a model load before
 * the first). Then writes out the advice that says so (not "move it out of the loop": it is
 * out of it) and returns 1; else 0. */
int an_once_advice(A *a, long culprit, char *out, size_t n);

#endif
