#!/usr/bin/python3
"""oracle.py TRACE [--ops] [--gaps=N]: an independent computation (standard library only) of
what firstpass's first profiler pass should find in one trace, printed as JSON. Written apart
from the C server, to cross-check it on real traces and to label tests/triage/cases.json.

DEFINITIONS (the lead implements the same in C; every number below follows them. Round 2,
issue 41: the host's own work is named, a sync only takes what it could have queued ahead,
new categories, a busy GPU that one op owns gets a target)

Events
 - Kineto current schema (cat lower case), 2021 schema (cat Operator/Runtime/Kernel/Memcpy/
   Memset) and the legacy autograd array (no cat: a name with "::" is a cpu_op, else a
   user_annotation) are read alike. Only complete events (ph "X" with ts and dur) count,
   plus `[memory]` instants for the wall.
 - GPU activity: cat kernel / gpu_memcpy / gpu_memset (Kernel / Memcpy / Memset). Device =
   args.device, else the pid when it is a number. NOT activity: gpu_user_annotation (a
   range), cuda_sync (a host wait seen from the GPU), cuda_profiler_range, Trace spans.
 - Host range: cat cpu_op, user_annotation, python_function, and Operator (2021: a name
   with "#" -- ProfilerStep#5, Optimizer.step#SGD.step, enumerate(DataLoader)#..., ## forward
   ## -- is a record_function, i.e. a user_annotation; any other, autograd nodes such as
   CudnnConvolutionBackward included, is a cpu_op). ProfilerStep#N is a host range and a step.
 - Runtime call: cat cuda_runtime / cuda_driver / Runtime. A GPU activity is launched by the
   runtime call with the same args.correlation (any thread); "its correlation's GPU
   activity" is every activity with that correlation.
 - Nesting (torch key_averages): per (pid, tid), sort by (start, -end); stack; pop while
   `start >= top.end or end > top.end`; the remaining top is the parent (partial overlaps do
   not nest). Runtime calls take part (they are children of the op around them).
 - Comm: a kernel whose name contains "nccl" or "rccl" (any case); a host range whose name
   starts with "nccl:", "gloo:", "mpi:", "c10d::" or is "record_param_comms".
 - DataLoader range: a host range whose name starts with "enumerate(DataLoader)#" (tb-profiler
   also wants ".__next__" at the end; every real one has it).
 - Copy/cast op: aten::to, aten::_to_copy, aten::copy_, aten::contiguous, aten::clone,
   aten::type_as, aten::_copy_from, aten::_copy_from_and_resize.
 - GEMM-like op (never a compute_bound_op): an op name containing "mm", "matmul", "linear",
   "conv", "einsum", "attention", "flash", "attn", "fmha" or "varlen_fwd" (any case); for GPU work launched outside any
   op, a kernel name containing gemm, xmma, cutlass, cublas, s16816, h16816, conv, flash.

Names ("any case" = tested on the lower-cased name; otherwise the test is case-sensitive)
 - launch/copy call: a name starting with cudaLaunch, cuLaunch, hipLaunch, hipModuleLaunch,
   hipExtLaunch, cudaGraphLaunch, cuGraphLaunch, hipGraphLaunch, or containing Memcpy,
   memcpy, Memset or memset.
 - sync call: a name of SYNC_CALLS, or such a name then "_" and a suffix (_v2, _ptds);
   plus a cudaMemcpy*Async / hipMemcpy*Async whose copy is "DtoH" to "Pageable" memory.
   SYNC_CALLS: cudaMemcpy, cudaMemcpy2D, cudaMemcpy3D, cudaMemcpyPeer, cudaMemcpyToSymbol,
   cudaMemcpyFromSymbol, cudaMemset, cudaStreamSynchronize, cudaDeviceSynchronize,
   cudaEventSynchronize, cuMemcpyHtoD, cuMemcpyDtoH, cuMemcpy, cuStreamSynchronize,
   cuCtxSynchronize, cuEventSynchronize, hipMemcpy, hipStreamSynchronize,
   hipDeviceSynchronize, hipEventSynchronize.
 - allocator: a runtime/driver call whose name starts with cudaMalloc, cudaFree,
   cudaHostAlloc, cuMemAlloc, cuMemFree, cuMemCreate, cuMemRelease, cuMemMap, cuMemUnmap,
   cuMemAddressReserve, cuMemAddressFree, cuMemHostAlloc, hipMalloc, hipFree, hipHostMalloc,
   hipHostFree, hipExtMalloc; or any name containing "empty_cache" (any case).
 - compile: any name containing (any case) "(dynamo_timed)", "torchdynamo", "compile_fx" or
   "convert_frame"; or containing "torch/_dynamo/" but neither "eval_frame" nor
   "external_utils"; or "aot_autograd" but not "runtime_wrapper"; or "torch/_inductor/"
   followed by one of its compile-time modules (INDUCTOR_COMPILE: compile_fx, graph.py,
   scheduler, lowering, codegen/, codecache, fx_passes/, ir.py, select_algorithm, autotune,
   async_compile, kernel/, decomposition, pattern_matcher; not runtime/, output_code,
   utils: the frames every call of a compiled function runs are its launch path, not a
   compile); or starting with cuModuleLoad, cuLibraryLoad, hipModuleLoad or nvrtc.
 - compiled run (a torch.compile'd model running, for python_overhead's advice): any name
   containing (any case) "torch-compiled region", "compiledfunction", "compiledfxgraph",
   "torch/_inductor/runtime/", "triton_heuristics", "torch/_dynamo/eval_frame" or
   "runtime_wrapper".
 - tokenizer: contains (any case) "tokeniz", "sentencepiece" or "tiktoken".
 - gc: contains (any case) "gc.collect", "gc_collect", "garbage collect" or
   "garbage_collect"; or is exactly "<built-in function collect>"; or starts (any case)
   with "gc:".
 - data-movement op: contains (any case) "gather", "scatter", "index", "embedding",
   "aten::cat", "aten::stack", "catarraybatchedcopy", "masked_select", "aten::take",
   "repeat", "aten::roll", "aten::flip" or "constant_pad_nd".
 - named host work (for the sync rule): an instant labelled by a DataLoader range, by a
   runtime call (below), or by a label whose name is compile, tokenizer, gc or allocator.

Wall and GPU
 - wall = [earliest start, latest end] over host ranges, runtime calls, GPU activity,
   gpu_user_annotation and [memory] instants (not Trace spans, not flows, not metadata).
 - Per device: busy = union of its activity intervals (all streams); window = [first
   activity start, last activity end]; idle = window - busy; lead_in = window start - wall
   start; tail = wall end - window end. Top level `gpu`: the same over the union of all
   devices' activity; busy_fraction = busy / window (NOT / wall). null when there is no GPU
   activity at all (CPU-only trace).

Labels of an instant (host-wait gaps, lead-in, tail, every thread of a CPU-only trace)
 - An instant of thread T is labelled by T's innermost range at that instant, ranges being
   T's host ranges AND its "labelling" runtime calls: a runtime/driver call with NO GPU
   activity of its correlation whose name is neither a launch/copy call nor a sync call
   (cudaMalloc, cudaFree, cudaFuncGetAttributes, cuModuleLoadData, ...; kind "runtime").
   They nest like any range (innermost wins; a runtime call's own time is its label). Runtime
   calls with GPU work, launch/copy calls and sync calls are invisible (their time is their
   op's). A DataLoader range anywhere on the stack takes the instant; else the INNERMOST
   range on the stack whose name is compile, tokenizer or gc takes it (the aten ops a
   compile runs are the compile's time); ProfilerStep#N labels as "ProfilerStep#*"; an
   instant with no range is "(untraced)".

Idle intervals (per device, every maximal gap [g0, g1] of the busy union inside the window)
 - N = the activity starting at the gap's end (ties: the lowest correlation); R = N's
   runtime call, on thread T.
 - other: R not found.
 - kernel_wait ("launch / kernel wait"): R started before the gap started (R.ts < g0): the
   launch was issued and the kernel starts late. Culprit: the innermost cpu_op around R
   (else the innermost host range, else R's name); launch_bound when that op is
   short-kernel, else in no category.
 - host_wait: R.ts >= g0, the next launch had not been issued when the GPU went idle. The
   gap's instants are labelled on T (above), in time order.
 - The sync rule. A blocking call S on T with S.ts < g0 <= S.te + SYNC_SLACK_US (2 us; the
   latest such call on T) means the host was blocked waiting for the GPU when it went idle:
   the gap starts as S returns. Blocking calls:
     * sync calls;
     * blocking kernel launches. A launch (a launch/copy call that is not a sync call)
       "tells" when its correlation's kernels (kind kernel) sum to >= TELL_US (10 us); it
       "blocked" when it tells and S.te >= the last end of its correlation's GPU activity
       (every kind). A launch is a blocking call when it blocked AND, on its thread,
       counting in time order the launches that tell up to and including it,
       2 x blocked >= told.
   Instants under named host work keep their label. Every other instant goes to S, in time
   order, until S has taken sync_left = g0 - S.ts (how long S waited while the GPU still
   worked: what the host could have queued ahead) in this gap; after that they keep their
   own label. S's culprit: a sync call's OUTERMOST cpu_op (the op the program called, e.g.
   aten::item), else S's name; a blocking launch's INNERMOST cpu_op, else its name. S's
   category: host_sync for a sync call; for a blocking launch synchronous_launch when, over
   the whole trace (all threads), the launches that tell mostly blocked (2 x blocked >=
   told), else host_sync.
 - Phases: per record_function name, its instances and their time, but the step phase
   ("ProfilerStep#*"), whose count and time are tb-profiler's steps' (see Steps).
 - Per culprit, the idle is summed; per class; per phase (idle inside the union of a
   user_annotation name's instances, "ProfilerStep#*" folded).

Lead-in (not idle: it lies before the GPU window, in no class, not in `idle`)
 - [wall start, first GPU activity start] (the union over devices; ties: the lowest
   correlation). N = that activity, R = its runtime call on thread T. Each instant is
   labelled on T as above, with no sync rule; R not found: all of it is "(untraced)".
Tail (not idle either: it lies after the GPU window)
 - [last GPU activity end, wall end]; N = the activity that ends last (ties: one with a
   correlation, the highest), R its runtime call on thread T; labelled as the lead-in.

Categories of labelled time (GPU traces; host_wait instants not taken by a sync rule's S),
first match wins:
   DataLoader label -> data_loading; comm range -> communication; gc -> garbage_collection;
   tokenizer -> tokenization; compile -> compilation; allocator -> allocator_churn;
   runtime-call label -> host_work; cpu_op -> launch_bound when short-kernel, else
   cpu_bound_op; anything else (python_function, a user_annotation's own time,
   ProfilerStep#*, (untraced)) -> python_overhead.
 - Lead-in instants -> startup (a DataLoader label -> data_loading); tail instants -> tail
   (a DataLoader label -> data_loading). Culprit: the label with the most of it. Startup,
   tail and step_outlier happen once: their at_stake_per_step_us is null.
 - short-kernel: a cpu_op X launches kernels and they are shorter than the op itself: the
   GPU time of the kernels (not copies, not memsets) launched with X anywhere on the
   launch's stack, summed, is less than the host duration of X's calls, summed; X has at
   least SHORT_MIN_CALLS (10) calls and its calls last at most SHORT_MAX_MEAN_HOST_US (1 ms)
   on average (per-call framework / launch overhead, not CPU work: a first call that spends
   6 ms in lazy init, or cudnn autotuning 1 s per call, is a cpu_bound_op).
 - cpu_bound_op: ONE suspect for the single op with the most such idle, at stake = that
   op's idle only (not the category's sum).
 - communication: also the exposed comm GPU time (union of comm kernels minus the union of
   every other activity).
 - host_work: the runtime-call labels' time (what no other category names: cudaGetDevice-
   Properties, cudaStreamCreate, cudaFuncGetAttributes, cudaMemGetInfo ... in the loop).

GPU-set categories
 - copies_casts: union of GPU activity launched with a copy/cast op on the stack, and every
   Memcpy DtoD, less HtoD/DtoH copies. Culprit: the outermost copy/cast op by time.
 - pageable_memcpy: union of copies whose name contains "Pageable". Culprit: that copy name.
 - copy_on_critical_path: U = union of memcpy activities whose name contains HtoD or DtoH
   and not "Pageable"; K = union of kernel activities; at stake = length(U - K) (the copy
   time no kernel runs beside). Culprit: by copy time (each copy's duration summed per
   name), the name being the outermost copy/cast op on the copy's launch stack, else the
   copy's own name. Evidence: copy_us (length U), exposed_us, on_compute_stream_us (summed
   duration of those copies on a (device, stream) that also ran a kernel).
 - compute_bound_op: the candidate is the non-GEMM-like, non-copy, non-comm op (innermost
   cpu_op around the launch, none of the ops on the stack GEMM-like / copy / comm; key_
   averages self CUDA; kernels only; GPU work outside any op: by kernel name, not GEMM-like,
   not comm) with the most GPU time. It fires when it holds > 50% of all GPU activity time
   (kernels + memcpy + memset durations) and is not short-kernel; at stake = its GPU time.
 - memory_bound_op: compute_bound_op's candidate, when it would fire and its name is a
   data-movement op: then it is memory_bound_op INSTEAD of compute_bound_op (at stake = its
   GPU time).
 - dominant_op (a target, not waste): the cpu_op with the most key_averages self CUDA (the
   GPU time -- kernels, memcpy and memset -- of the launches whose innermost cpu_op it is),
   when that is > 50% of all GPU activity time, it is not a copy/cast op, not a comm range,
   not short-kernel, and compute_bound_op / memory_bound_op did not name it. At stake = its
   self CUDA. It fires whenever it exists and is listed LAST.

step_outlier (any trace with >= 5 steps, tb-profiler's: see Steps)
 - Each step's span (tb-profiler's: the ProfilerStep range extended to its GPU work) is clipped to the GPU window [first GPU activity start, last GPU
   activity end] when the trace has GPU activity (the lead-in and the tail are startup's
   and tail's); d = the clipped duration. median = nearest-rank p50 of d (sorted[ceil(0.5 n)
   - 1]); the typical step = the step at that rank (ties by start). Outliers: d >= 1.5 x
   median. At stake = sum over outliers of (d - median).
 - An outlier's culprit (for the 5 longest; the others take the longest's): on the steps'
   thread, over the outlier's clipped span and the typical step's clipped span, each name's
   innermost time (every host event of the thread: cpu_op, user_annotation, python_function
   and EVERY runtime call, nested by torch's rule, clipped to the span; time under no event,
   and time whose innermost event is a ProfilerStep, is "(untraced)"); the culprit is the
   name whose time grew the most (outlier minus typical). Its contribution: d - median.
 - Fires whenever at stake > 0 (not only at 5% of the wall); at_stake_per_step_us null.

CPU-only traces (no GPU activity)
 - Every instant of every thread is labelled as above. Categories: DataLoader label ->
   data_loading; comm range -> communication; gc -> garbage_collection; tokenizer ->
   tokenization; compile -> compilation; a cpu_op -> cpu_bound_op (nothing is
   short-kernel); everything else (python, user_annotation, runtime-call labels) ->
   python_overhead. Wall-clock time is given out in the priority order communication,
   data_loading, garbage_collection, tokenization, compilation, cpu_bound_op (only the
   single op with the most labelled time), python_overhead: a category's at stake = the
   union over threads of its instants less what the categories before it took. (A main
   thread waiting for a gloo collective run by the gloo thread shows as its
   record_function's own time: the collective takes that time, not Python.) Evidence also
   gives each category's share of all self CPU time (summed over threads, as key_averages).
 - cpu_threads: the cpu_bound_op suspect is cpu_threads instead (the same op, the same at
   stake) when its op is GEMM-like, its calls whose FLOPs its Input Dims give (mm, matmul of
   two 2-D, addmm, linear: 2*M*N*K; bmm, baddbmm: 2*B*M*N*K) hold at least half its time, it
   has more than one call and none holds half its time, its FLOPs per call (summed over the
   known calls, divided by all its calls) reach PARALLEL_MIN_FLOPS (1e8), and it runs at no
   more than ONE_CORE_GFLOPS (200 GFLOP/s: one core's FP32 peak): one thread where the host
   has many.
 - step_outlier as above (no clipping).

Suspects
 - Per category one suspect: culprit = its largest contributor; at stake = the category's
   sum (cpu_bound_op, compute_bound_op, memory_bound_op, dominant_op: the one op's).
 - A suspect fires when at_stake >= FIRE_FRACTION (5%) of the wall (dominant_op too: a
   target that holds less of the wall is no target); step_outlier whenever at stake > 0.
 - Ranked by at_stake, descending, dominant_op last. At stake per step = at stake / step
   count (null without steps, and for startup, tail and step_outlier).
 - healthy = GPU present, busy / wall (not / window: a trace with one kernel in a long step
   is not healthy) >= 0.9, and nothing fired (dominant_op included: a busy GPU that one op
   owns is not "healthy", it has a target).

Steps (ProfilerStep#N, both schemas)
 - The steps are tb-profiler's (below): count, mean, p50, p90 of their durations; pXX is the
   nearest rank: sorted[ceil(q * n) - 1]. (The host ranges' own count and mean are
   steps_host.) One step definition on every surface (issue 42).
 - tb-profiler overview (torch_tb_profiler/profiler/step_parser.py + overall_parser.py,
   re-derived): step spans are moved to the device side (start = max(previous step's end,
   host start), end = max(host end, last end of the GPU work launched by runtime calls
   wholly inside the host step); trailing steps with no GPU work are dropped, and the last
   one when it launched < 80% of the previous). Each span is split, in priority order,
   into kernel, memcpy, memset, communication (comm kernels and host collective ranges,
   is_comm_range: firstpass's one departure, issue 42 item 7), runtime, data loading,
   CPU exec (any other host range, python_function included), other: each role takes the
   part of the span the roles before it left. Roles span all threads and devices.

key_averages' same-name merge (torch EventList._remove_dup_nodes, repeated until stable)
 - an op whose parent has the same name and exactly one child (runtime calls count as
   children; python_function events are not in the tree) is dropped: its children become
   the parent's. Calls count the ops left; the parent keeps its own duration.
"""
import bisect
import gzip
import json
import math
import sys
from collections import defaultdict

SYNC_SLACK_US = 2.0
TELL_US = 10.0           # a launch whose kernels sum to this much can show whether it blocked
FIRE_FRACTION = 0.05
ONCE = ("startup", "tail", "step_outlier")  # at_stake_per_step_us is null
HEALTHY_BUSY = 0.9
COMPUTE_SHARE = 0.5
SHORT_MIN_CALLS = 10
SHORT_MAX_MEAN_HOST_US = 1000.0
OUTLIER_MIN_STEPS = 5
OUTLIER_RATIO = 1.5
OUTLIER_NAMED = 5        # outliers whose culprit is computed; the others take the longest's
CPU_PRIORITY = ("communication", "data_loading", "garbage_collection", "tokenization", "compilation",
                "cpu_bound_op", "python_overhead")
ONE_OP = ("cpu_bound_op", "compute_bound_op", "memory_bound_op", "dominant_op", "cpu_threads")  # at stake = the one op's
ONE_CORE_GFLOPS = 200.0     # cpu_threads: a matrix op at most this fast runs on about one core
PARALLEL_MIN_FLOPS = 1e8    # ... in calls at least this big (a mean over all its calls)

GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "gpu_memcpy", "gpu_memset": "gpu_memset",
            "Kernel": "kernel", "Memcpy": "gpu_memcpy", "Memset": "gpu_memset"}
RT_CATS = {"cuda_runtime", "cuda_driver", "Runtime"}
HOST_CATS = {"cpu_op", "user_annotation", "python_function", "Operator"}
# The server's list (server/lib/cuda.c cuda_is_sync_call): a name, or a name then "_" and a suffix (_v2, _ptds).
SYNC_CALLS = {"cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cudaMemcpyPeer", "cudaMemcpyToSymbol", "cudaMemcpyFromSymbol",
              "cudaMemset", "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cuMemcpyHtoD",
              "cuMemcpyDtoH", "cuMemcpy", "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize", "hipMemcpy",
              "hipStreamSynchronize", "hipDeviceSynchronize", "hipEventSynchronize"}
COPY_OPS = {"aten::to", "aten::_to_copy", "aten::copy_", "aten::contiguous", "aten::clone", "aten::type_as",
            "aten::_copy_from", "aten::_copy_from_and_resize"}
COMM_PREFIX = ("nccl:", "gloo:", "mpi:", "c10d::")
GEMM_OP_WORDS = ("mm", "matmul", "linear", "conv", "einsum", "attention", "flash", "attn", "fmha", "varlen_fwd")
GEMM_KERNEL_WORDS = ("gemm", "xmma", "cutlass", "cublas", "s16816", "h16816", "conv", "flash")
LAUNCH_PREFIX = ("cudaLaunch", "cuLaunch", "hipLaunch", "hipModuleLaunch", "hipExtLaunch", "cudaGraphLaunch",
                 "cuGraphLaunch", "hipGraphLaunch")
LAUNCH_WORDS = ("Memcpy", "memcpy", "Memset", "memset")
ALLOC_PREFIX = ("cudaMalloc", "cudaFree", "cudaHostAlloc", "cuMemAlloc", "cuMemFree", "cuMemCreate", "cuMemRelease",
                "cuMemMap", "cuMemUnmap", "cuMemAddressReserve", "cuMemAddressFree", "cuMemHostAlloc", "hipMalloc",
                "hipFree", "hipHostMalloc", "hipHostFree", "hipExtMalloc")
COMPILE_WORDS = ("(dynamo_timed)", "torchdynamo", "compile_fx", "convert_frame")
INDUCTOR_COMPILE = ("compile_fx", "graph.py", "scheduler", "lowering", "codegen/", "codecache", "fx_passes/", "ir.py",
                    "select_algorithm", "autotune", "async_compile", "kernel/", "decomposition", "pattern_matcher")
COMPILE_PREFIX = ("cuModuleLoad", "cuLibraryLoad", "hipModuleLoad", "nvrtc")
TOKENIZER_WORDS = ("tokeniz", "sentencepiece", "tiktoken")
GC_WORDS = ("gc.collect", "gc_collect", "garbage collect", "garbage_collect")
DATA_MOVE_WORDS = ("gather", "scatter", "index", "embedding", "aten::cat", "aten::stack", "catarraybatchedcopy",
                   "masked_select", "aten::take", "repeat", "aten::roll", "aten::flip", "constant_pad_nd")
DATALOADER_PREFIX = "enumerate(DataLoader)#"
STEP_LABEL = "ProfilerStep#*"
UNTRACED = "(untraced)"


# ---------------------------------------------------------------- reading

def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw)


def is_comm_range(name):
    return name.startswith(COMM_PREFIX) or name == "record_param_comms"


def is_comm_kernel(name):
    n = name.lower()
    return "nccl" in n or "rccl" in n


def is_step(name):
    return name.startswith("ProfilerStep#")


def is_dataloader(name):
    return name.startswith(DATALOADER_PREFIX)


def gemm_like_op(name):
    n = name.lower()
    return any(w in n for w in GEMM_OP_WORDS)


def gemm_like_kernel(name):
    n = name.lower()
    return any(w in n for w in GEMM_KERNEL_WORDS)


def is_launch_call(name):
    return name.startswith(LAUNCH_PREFIX) or any(w in name for w in LAUNCH_WORDS)


def is_allocator(name, kind):
    return (kind == "runtime" and name.startswith(ALLOC_PREFIX)) or "empty_cache" in name.lower()


def is_compile(name):
    n = name.lower()
    if any(w in n for w in COMPILE_WORDS) or name.startswith(COMPILE_PREFIX):
        return True
    if "torch/_dynamo/" in n and "eval_frame" not in n and "external_utils" not in n:
        return True
    if "aot_autograd" in n and "runtime_wrapper" not in n:
        return True
    return any("torch/_inductor/" + m in n for m in INDUCTOR_COMPILE)


def is_tokenizer(name):
    n = name.lower()
    return any(w in n for w in TOKENIZER_WORDS)


def is_gc(name):
    n = name.lower()
    return any(w in n for w in GC_WORDS) or name == "<built-in function collect>" or n.startswith("gc:")


def is_data_movement(name):
    n = name.lower()
    return any(w in n for w in DATA_MOVE_WORDS)


def is_named_work(label, kind):
    """Named host work keeps its label under the sync rule: what the host did is its own."""
    return kind in ("dataloader", "runtime") or is_gc(label) or is_tokenizer(label) or is_compile(label) \
        or is_allocator(label, kind)


class Ev:
    __slots__ = ("name", "kind", "ts", "te", "dur", "pid", "tid", "corr", "device", "stream", "parent", "children", "gpu", "dims")

    def __init__(self, name, kind, ts, dur, pid, tid):
        self.name, self.kind, self.ts, self.dur = name, kind, ts, dur
        self.te = ts + dur
        self.pid, self.tid = pid, tid
        self.corr = None
        self.device = None
        self.stream = None
        self.parent = None
        self.children = []
        self.gpu = []
        self.dims = None


class Trace:
    def __init__(self, doc):
        evs = doc if isinstance(doc, list) else doc.get("traceEvents", [])
        self.host = []      # host ranges
        self.rt = []        # runtime calls
        self.gpu = []       # GPU activity
        self.wall0, self.wall1 = math.inf, -math.inf
        for e in evs:
            if not isinstance(e, dict):
                continue
            ph = e.get("ph")
            name = e.get("name")
            if not isinstance(name, str):
                continue
            if name == "[memory]" and ph in ("i", "I") and isinstance(e.get("ts"), (int, float)):
                self._wall(e["ts"], e["ts"])
                continue
            if ph != "X" or not isinstance(e.get("ts"), (int, float)) or not isinstance(e.get("dur"), (int, float)):
                continue
            cat = e.get("cat")
            ts, dur = float(e["ts"]), float(e["dur"])
            args = e.get("args") or {}
            pid, tid = str(e.get("pid")), str(e.get("tid"))
            if cat is None or cat == "":
                kind = "cpu_op" if "::" in name else "user_annotation"
                self.host.append(Ev(name, kind, ts, dur, pid, tid))
            elif cat in HOST_CATS:
                kind = cat
                if cat == "Operator":
                    kind = "user_annotation" if "#" in name else "cpu_op"
                h = Ev(name, kind, ts, dur, pid, tid)
                h.dims = args.get("Input Dims")
                self.host.append(h)
            elif cat in RT_CATS:
                r = Ev(name, "runtime", ts, dur, pid, tid)
                r.corr = args.get("correlation")
                self.rt.append(r)
            elif cat in GPU_CATS:
                g = Ev(name, GPU_CATS[cat], ts, dur, pid, tid)
                g.corr = args.get("correlation")
                dev = args.get("device")
                if dev is None:
                    try:
                        dev = int(e.get("pid"))
                    except (TypeError, ValueError):
                        dev = 0
                g.device = dev
                g.stream = args.get("stream", e.get("tid"))
                self.gpu.append(g)
            elif cat == "gpu_user_annotation":
                pass
            else:
                continue
            self._wall(ts, ts + dur)
        self.rt_by_corr = {}
        for r in self.rt:
            if r.corr is not None and r.corr not in self.rt_by_corr:
                self.rt_by_corr[r.corr] = r
        self._nest()
        for g in self.gpu:
            r = self.rt_by_corr.get(g.corr) if g.corr is not None else None
            if r is not None:
                r.gpu.append(g)
        self.threads = defaultdict(list)
        for h in self.host:
            self.threads[(h.pid, h.tid)].append(h)
        self._labels()

    def _wall(self, a, b):
        if a < self.wall0:
            self.wall0 = a
        if b > self.wall1:
            self.wall1 = b

    def _nest(self):
        """torch's rule over host ranges and runtime calls (python_function events are not
        in torch's tree: they keep parent None and take no part)."""
        per = defaultdict(list)
        for h in self.host:
            if h.kind != "python_function":
                per[(h.pid, h.tid)].append(h)
        for r in self.rt:
            per[(r.pid, r.tid)].append(r)
        for evl in per.values():
            evl.sort(key=lambda x: (x.ts, -x.te))
            stack = []
            for x in evl:
                while stack and (x.ts >= stack[-1].te or x.te > stack[-1].te):
                    stack.pop()
                x.parent = stack[-1] if stack else None
                if x.parent is not None:
                    x.parent.children.append(x)
                stack.append(x)

    # ---- per-thread labels: innermost range at each instant ----
    def labelling(self, r):
        """A runtime call that labels the time it covers: no GPU activity of its
        correlation, neither a launch/copy call nor a sync call (cudaMalloc, cudaFree,
        cuModuleLoadData, cudaGetDeviceProperties ...)."""
        return not r.gpu and not is_launch_call(r.name) and not blocking_sync(r)

    def _labels(self):
        """self.seg[(pid,tid)] = sorted [(start, end, label, kind)] covering the instants
        where some host range or labelling runtime call is active on the thread."""
        self.seg = {}
        self.seg_starts = {}
        per = defaultdict(list)
        for key, hs in self.threads.items():
            per[key].extend(hs)
        for r in self.rt:
            if self.labelling(r):
                per[(r.pid, r.tid)].append(r)

        def label_of(ev, stack):
            for s in stack:
                if is_dataloader(s[0].name) and s[0].kind != "runtime":
                    return s[0].name, "dataloader"
            if ev.kind != "runtime" and is_dataloader(ev.name):
                return ev.name, "dataloader"
            # the innermost compile / tokenizer / gc range on the stack, ev itself first
            for x in [ev] + [s[0] for s in reversed(stack)]:
                if is_compile(x.name) or is_tokenizer(x.name) or is_gc(x.name):
                    if x is not ev:
                        return x.name, x.kind
                    break
            if is_step(ev.name) and ev.kind != "runtime":
                return STEP_LABEL, "user_annotation"
            return ev.name, ev.kind

        for key, evs in per.items():
            self.seg[key] = sweep(evs, label_of)
            self.seg_starts[key] = [s[0] for s in self.seg[key]]

    def innermost(self, key):
        """[(start, end, name)] of thread key: the innermost of EVERY host event and runtime
        call (step_outlier's view); a ProfilerStep innermost is (untraced)."""
        if not hasattr(self, "_inner"):
            self._inner = {}
        if key not in self._inner:
            evs = list(self.threads.get(key, [])) + [r for r in self.rt if (r.pid, r.tid) == key]

            def name_of(ev, stack):
                return (UNTRACED, "untraced") if (is_step(ev.name) and ev.kind != "runtime") else (ev.name, ev.kind)
            segs = sweep(evs, name_of)
            self._inner[key] = (segs, [x[0] for x in segs])
        return self._inner[key]

    def names_in(self, key, a, b):
        """{name: us} of thread key's innermost events over [a, b] (uncovered: (untraced))."""
        segs, starts = self.innermost(key)
        out = defaultdict(float)
        covered = 0.0
        i = max(0, bisect.bisect_right(starts, a) - 1)
        while i < len(segs) and segs[i][0] < b:
            s, e, lab, kind = segs[i]
            lo, hi = max(s, a), min(e, b)
            if hi > lo:
                out[lab] += hi - lo
                covered += hi - lo
            i += 1
        if b - a - covered > 1e-9:
            out[UNTRACED] += b - a - covered
        return out

    def segs_in(self, key, a, b):
        """[(start, end, label, kind)] of thread key over [a, b] in time order, uncovered
        time as (untraced) pieces."""
        out = []
        segs = self.seg.get(key, [])
        starts = self.seg_starts.get(key, [])
        i = max(0, bisect.bisect_right(starts, a) - 1)
        cur = a
        while i < len(segs) and segs[i][0] < b:
            s, e, lab, kind = segs[i]
            lo, hi = max(s, a), min(e, b)
            if hi > lo:
                if lo > cur + 1e-9:
                    out.append((cur, lo, UNTRACED, "untraced"))
                out.append((lo, hi, lab, kind))
                cur = max(cur, hi)
            i += 1
        if b > cur + 1e-9:
            out.append((cur, b, UNTRACED, "untraced"))
        return out

    def labels_in(self, key, a, b):
        """{(label, kind): us} of thread key over [a, b]; uncovered time is (untraced)."""
        out = defaultdict(float)
        segs = self.seg.get(key, [])
        starts = self.seg_starts.get(key, [])
        i = max(0, bisect.bisect_right(starts, a) - 1)
        covered = 0.0
        while i < len(segs) and segs[i][0] < b:
            s, e, lab, kind = segs[i]
            lo, hi = max(s, a), min(e, b)
            if hi > lo:
                out[(lab, kind)] += hi - lo
                covered += hi - lo
            i += 1
        if b - a - covered > 1e-9:
            out[(UNTRACED, "untraced")] += b - a - covered
        return out

    def stack_of(self, x):
        """Host ranges around x (a runtime call or range), innermost first (no python)."""
        out = []
        p = x.parent
        while p is not None:
            out.append(p)
            p = p.parent
        return out


def sweep(evs, label_of):
    """Innermost-range segments of one thread: [(start, end, label, kind)], sorted, not
    overlapping, covering the instants where some event is active. Events nest by torch's
    rule (sort by (start, -end); pop while start >= top.end or end > top.end); after a
    partial overlap time never goes back. label_of(ev, stack) gives an event's (label, kind)
    from the stack of (ev, label, kind) around it."""
    hs = sorted(evs, key=lambda x: (x.ts, -x.te))
    segs = []
    stack = []
    cursor = None

    def emit(a, b, lab):
        if segs and a < segs[-1][1]:
            a = segs[-1][1]
        if b > a:
            if segs and segs[-1][2] == lab[0] and segs[-1][3] == lab[1] and abs(segs[-1][1] - a) < 1e-9:
                segs[-1] = (segs[-1][0], b, lab[0], lab[1])
            else:
                segs.append((a, b, lab[0], lab[1]))

    for ev in hs:
        while stack and (ev.ts >= stack[-1][0].te or ev.te > stack[-1][0].te):
            top = stack.pop()
            emit(cursor, top[0].te, top[1:])
            cursor = top[0].te
        if stack:
            emit(cursor, ev.ts, stack[-1][1:])
        lab = label_of(ev, stack)
        stack.append((ev,) + lab)
        cursor = ev.ts
    while stack:
        top = stack.pop()
        emit(cursor, top[0].te, top[1:])
        cursor = top[0].te
    return segs


# ---------------------------------------------------------------- interval helpers

def union(iv):
    iv = sorted(iv)
    out = []
    for a, b in iv:
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1][1] = b
        else:
            out.append([a, b])
    return out


def length(iv):
    return sum(b - a for a, b in iv)


def intersect(x, y):
    """Both merged and sorted."""
    out = []
    i = j = 0
    while i < len(x) and j < len(y):
        a, b = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        if b > a:
            out.append([a, b])
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(x, y):
    """x minus y, both merged and sorted."""
    out = []
    j = 0
    for a, b in x:
        cur = a
        while j < len(y) and y[j][1] <= cur:
            j += 1
        k = j
        while k < len(y) and y[k][0] < b:
            if y[k][0] > cur:
                out.append([cur, y[k][0]])
            cur = max(cur, y[k][1])
            k += 1
        if cur < b:
            out.append([cur, b])
    return out


def pct(sorted_vals, q):
    if not sorted_vals:
        return None
    k = max(0, math.ceil(q * len(sorted_vals)) - 1)
    return sorted_vals[k]


def r3(x):
    return None if x is None else round(x, 3)


# ---------------------------------------------------------------- analysis

def short_kernel_ops(t):
    """{op name: [kernel_us, host_us, calls]}: GPU time of the kernels launched with the op
    on the launch's stack, the host time of the op's calls, their number."""
    cnt = defaultdict(lambda: [0.0, 0.0, 0])
    for h in t.host:
        if h.kind == "cpu_op":
            cnt[h.name][1] += h.dur
            cnt[h.name][2] += 1
    for r in t.rt:
        if not r.gpu:
            continue
        k = sum(g.dur for g in r.gpu if g.kind == "kernel")
        if k <= 0:
            continue
        for n in {p.name for p in t.stack_of(r) if p.kind == "cpu_op"}:
            cnt[n][0] += k
    return cnt


def is_short(cnt, name):
    c = cnt.get(name)
    return bool(c) and c[2] >= SHORT_MIN_CALLS and c[0] > 0 and c[0] < c[1] and c[1] / c[2] <= SHORT_MAX_MEAN_HOST_US


def category_of_label(label, kind, short, cpu_only=False):
    """The category of time labelled (label, kind); first match wins."""
    if kind == "dataloader":
        return "data_loading"
    if kind != "runtime" and is_comm_range(label):
        return "communication"
    if is_gc(label):
        return "garbage_collection"
    if is_tokenizer(label):
        return "tokenization"
    if is_compile(label):
        return "compilation"
    if cpu_only:
        return "cpu_bound_op" if kind == "cpu_op" else "python_overhead"
    if is_allocator(label, kind):
        return "allocator_churn"
    if kind == "runtime":
        return "host_work"
    if kind == "cpu_op":
        return "launch_bound" if is_short(short, label) else "cpu_bound_op"
    return "python_overhead"


def analyze(doc, want_ops=False, want_gaps=0):
    t = Trace(doc)
    res = {"oracle_version": 1}
    if not math.isfinite(t.wall0):
        res.update(wall_us=0.0, gpu=None, steps=None, suspects=[], healthy=False)
        return res
    wall = t.wall1 - t.wall0
    res["wall_us"] = r3(wall)
    short = short_kernel_ops(t)

    # ---- GPU busy / idle ----
    gpu = None
    idle_rows = defaultdict(float)         # (class, culprit, kind, category) -> us
    idle_class = defaultdict(float)
    gaps_out = []
    gap_list = []                            # (g0, g1) union-level, for phases
    class_gaps = defaultdict(list)           # (device, class) -> [g0, g1]: idle per phase
    all_act = [[g.ts, g.te] for g in t.gpu]
    if t.gpu:
        by_dev = defaultdict(list)
        for g in t.gpu:
            by_dev[g.device].append(g)
        devices = {}
        for dev, acts in sorted(by_dev.items(), key=lambda kv: str(kv[0])):
            busy = union([[g.ts, g.te] for g in acts])
            w0, w1 = busy[0][0], busy[-1][1]
            blen = length(busy)
            dcls = defaultdict(float)
            starts = defaultdict(list)
            for g in acts:
                starts[g.ts].append(g)
            start_keys = sorted(starts)
            for k in range(1, len(busy)):
                g0, g1 = busy[k - 1][1], busy[k][0]
                gap = g1 - g0
                # the activity that starts at g1
                i = bisect.bisect_left(start_keys, g1 - 1e-9)
                cands = starts[start_keys[i]] if i < len(start_keys) else []
                nxt = min(cands, key=lambda g: (g.corr if isinstance(g.corr, (int, float)) else 1e30)) if cands else None
                r = t.rt_by_corr.get(nxt.corr) if nxt is not None and nxt.corr is not None else None
                rec = {"g0": r3(g0), "g1": r3(g1), "idle_us": r3(gap), "device": dev}
                if r is None:
                    cls = "other"
                    idle_rows[(cls, "(no launch)", "other", None)] += gap
                    rec.update(cls=cls)
                elif r.ts < g0:
                    cls = "kernel_wait"
                    st = t.stack_of(r)
                    op = next((p for p in st if p.kind == "cpu_op"), st[0] if st else None)
                    name = op.name if op is not None else r.name
                    if op is not None and op.kind == "cpu_op" and is_short(short, op.name):
                        cat = "launch_bound"
                    else:
                        cat = None
                    idle_rows[(cls, name, op.kind if op is not None else "runtime", cat)] += gap
                    rec.update(cls=cls, culprit=name)
                else:
                    cls = "host_wait"
                    key = (r.pid, r.tid)
                    sync = find_sync(t, key, g0)
                    segs = t.segs_in(key, g0, g1)
                    labs = defaultdict(float)
                    if sync is not None:
                        # the sync rule: S takes the unnamed instants, in time order, up to
                        # what it waited while the GPU still worked (sync_left); named host
                        # work keeps its label, and so does what S cannot take
                        st = t.stack_of(sync)
                        ops = [p for p in st if p.kind == "cpu_op"]
                        if id(sync) in t.blocking_launch:
                            name = ops[0].name if ops else sync.name
                            scat = "synchronous_launch" if synchronous_launches(t) else "host_sync"
                        else:
                            name = ops[-1].name if ops else sync.name
                            scat = "host_sync"
                        left = g0 - sync.ts
                        took = 0.0
                        for a, b, lab, kind in segs:
                            if is_named_work(lab, kind) or left <= 0:
                                labs[(lab, kind)] += b - a
                                continue
                            x = min(left, b - a)
                            took += x
                            left -= x
                            if b - a - x > 0:
                                labs[(lab, kind)] += b - a - x
                        if took > 0:
                            idle_rows[(cls, name, "sync:" + sync.name, scat)] += took
                        rec.update(sync=sync.name, sync_took_us=r3(took))
                    else:
                        for a, b, lab, kind in segs:
                            labs[(lab, kind)] += b - a
                    for (lab, kind), us in labs.items():
                        idle_rows[(cls, lab, kind, category_of_label(lab, kind, short))] += us
                    allv = dict(labs)
                    if sync is not None and took > 0:
                        allv[(name, "sync")] = allv.get((name, "sync"), 0.0) + took
                    top = max(allv.items(), key=lambda kv: kv[1])[0] if allv else (UNTRACED, "untraced")
                    rec.update(cls=cls, culprit=top[0])
                dcls[cls] += gap
                idle_class[cls] += gap
                class_gaps[(str(dev), cls)].append([g0, g1])
                if want_gaps:
                    gaps_out.append(rec)
            devices[str(dev)] = {"busy_us": r3(blen), "window_us": r3(w1 - w0), "idle_us": r3(w1 - w0 - blen),
                                 "busy_fraction": r3((blen / (w1 - w0)) if w1 > w0 else 1.0),
                                 "lead_in_us": r3(w0 - t.wall0), "tail_us": r3(t.wall1 - w1),
                                 "idle_by_class_us": {k: r3(v) for k, v in sorted(dcls.items())}}
        # the lead-in, labelled on the thread that launched the first GPU activity
        first = min(t.gpu, key=lambda g: (g.ts, g.corr if isinstance(g.corr, (int, float)) else 1e30))
        if first.ts > t.wall0:
            r = t.rt_by_corr.get(first.corr) if first.corr is not None else None
            labs = t.labels_in((r.pid, r.tid), t.wall0, first.ts) if r is not None else {(UNTRACED, "untraced"): first.ts - t.wall0}
            for (lab, kind), us in labs.items():
                idle_rows[("lead_in", lab, kind, "data_loading" if kind == "dataloader" else "startup")] += us
        # the tail, labelled on the thread that launched the GPU activity that ends last
        last = max(t.gpu, key=lambda g: (g.te, g.corr is not None, g.corr if isinstance(g.corr, (int, float)) else -1e30))
        if last.te < t.wall1:
            r = t.rt_by_corr.get(last.corr) if last.corr is not None else None
            labs = t.labels_in((r.pid, r.tid), last.te, t.wall1) if r is not None else {(UNTRACED, "untraced"): t.wall1 - last.te}
            for (lab, kind), us in labs.items():
                idle_rows[("tail", lab, kind, "data_loading" if kind == "dataloader" else "tail")] += us
        ub = union(all_act)
        w0, w1 = ub[0][0], ub[-1][1]
        bl = length(ub)
        gap_list = [[ub[i - 1][1], ub[i][0]] for i in range(1, len(ub))]
        tot = sum(g.dur for g in t.gpu)
        gemm = 0.0
        for g in t.gpu:
            r = t.rt_by_corr.get(g.corr) if g.corr is not None else None
            st = t.stack_of(r) if r is not None else []
            ops = [p for p in st if p.kind == "cpu_op"]
            if (ops and any(gemm_like_op(p.name) and "attention" not in p.name and "flash" not in p.name for p in ops)) or \
                    (not ops and g.kind == "kernel" and gemm_like_kernel(g.name) and "flash" not in g.name.lower()):
                gemm += g.dur
        gpu = {"busy_fraction": r3(bl / (w1 - w0)) if w1 > w0 else 1.0, "busy_us": r3(bl), "window_us": r3(w1 - w0),
               "idle_us": r3(w1 - w0 - bl), "lead_in_us": r3(w0 - t.wall0), "tail_us": r3(t.wall1 - w1),
               "utilization_of_wall": r3(bl / wall) if wall > 0 else None,
               "gemm_share_of_gpu_time": r3(gemm / tot) if tot > 0 else None, "devices": devices}
    res["gpu"] = gpu

    if gpu is not None:
        rows = sorted(((k, v) for k, v in idle_rows.items() if k[0] not in ("lead_in", "tail")), key=lambda kv: -kv[1])
        res["idle"] = {
            "by_class_us": {k: r3(v) for k, v in sorted(idle_class.items())},
            "by_culprit": [{"class": c, "culprit": n, "kind": k, "category": cat, "idle_us": r3(v),
                            "share_of_idle": r3(v / max(1e-9, sum(idle_class.values())))}
                           for (c, n, k, cat), v in rows[:25]],
        }
        if want_gaps:
            res["idle"]["gaps"] = sorted(gaps_out, key=lambda g: -g["idle_us"])[:want_gaps]

    # ---- steps ----
    steps = sorted((h for h in t.host if is_step(h.name)), key=lambda h: h.ts)
    res["steps"] = None
    res["steps_tb"] = tb_steps(t, steps)
    if steps and res["steps_tb"] and res["steps_tb"]["count"]:
        # the steps are tb-profiler's (one definition on every surface, issue 42)
        d = sorted(r["dur_us"] for r in res["steps_tb"]["per_step"])
        res["steps"] = {"count": len(d), "mean_us": r3(sum(d) / len(d)), "p50_us": r3(pct(d, 0.5)),
                        "p90_us": r3(pct(d, 0.9)), "min_us": r3(d[0]), "max_us": r3(d[-1])}
        res["steps_host"] = {"count": len(steps), "mean_us": r3(sum(h.dur for h in steps) / len(steps))}

    # ---- phases ----
    res["phases"] = phases(t, gap_list, class_gaps)
    if res["steps"] and STEP_LABEL in res["phases"]:
        # the step phase's instances and time are tb-profiler's steps (its idle stays the ranges')
        res["phases"][STEP_LABEL]["count"] = res["steps"]["count"]
        res["phases"][STEP_LABEL]["total_us"] = r3(sum(r["dur_us"] for r in res["steps_tb"]["per_step"]))

    # ---- suspects ----
    t.steps_tb = res["steps_tb"]
    res["suspects"], res["category_at_stake_us"] = suspects(t, wall, gpu, idle_rows, short, res["steps"])
    res["healthy"] = bool(gpu is not None and gpu["utilization_of_wall"] >= HEALTHY_BUSY and not res["suspects"])

    # ---- key_averages merge ----
    res["merge"] = merge_table(t, want_ops)
    return res


def blocking_calls(t):
    """Per thread, the blocking calls sorted by start: sync calls, and the launches that
    blocked while, on their thread, the telling launches up to them mostly blocked. Sets
    t.blocking_launch (ids of the blocking launches) and t.launches_told / _blocked (over
    the whole trace)."""
    if hasattr(t, "blocking"):
        return t.blocking
    per = defaultdict(list)
    launches = defaultdict(list)
    for r in t.rt:
        if blocking_sync(r):
            per[(r.pid, r.tid)].append(r)
        elif is_launch_call(r.name):
            launches[(r.pid, r.tid)].append(r)
    t.blocking_launch = set()
    told_all = blocked_all = 0
    for key, ls in launches.items():
        ls.sort(key=lambda r: (r.ts, r.te))
        told = blocked = 0
        for r in ls:
            k = sum(g.dur for g in r.gpu if g.kind == "kernel")
            if k < TELL_US:
                continue
            told += 1
            b = r.te >= max(g.te for g in r.gpu)
            blocked += b
            if b and 2 * blocked >= told:
                per[key].append(r)
                t.blocking_launch.add(id(r))
        told_all += told
        blocked_all += blocked
    t.launches_told, t.launches_blocked = told_all, blocked_all
    t.blocking = {}
    for k, v in per.items():
        v.sort(key=lambda r: r.ts)
        t.blocking[k] = (v, [r.ts for r in v])
    return t.blocking


def find_sync(t, key, g0):
    """The blocking call S of thread key the host was in when the GPU went idle at g0: the
    latest one with S.ts < g0 <= S.te + SYNC_SLACK_US (a thread's runtime calls do not
    overlap, so the latest that started before g0)."""
    b = blocking_calls(t)
    if key not in b:
        return None
    lst, starts = b[key]
    i = bisect.bisect_left(starts, g0) - 1
    if i >= 0 and lst[i].te + SYNC_SLACK_US >= g0:
        return lst[i]
    return None


def synchronous_launches(t):
    """Over the whole trace the telling launches mostly blocked (CUDA_LAUNCH_BLOCKING=1, a
    blocking stream): a blocking launch's time is synchronous_launch, not host_sync."""
    blocking_calls(t)
    return t.launches_told > 0 and 2 * t.launches_blocked >= t.launches_told


def blocking_sync(r):
    """A sync call: a SYNC_CALLS name (or one with a _suffix), or a cudaMemcpy*Async /
    hipMemcpy*Async whose copy is DtoH to pageable memory."""
    if r.name in SYNC_CALLS or any(r.name.startswith(c + "_") for c in SYNC_CALLS):
        return True
    n = r.name
    if (n.startswith("cudaMemcpy") or n.startswith("hipMemcpy")) and n.endswith("Async"):
        return any("DtoH" in g.name and "Pageable" in g.name for g in r.gpu)
    return False


def suspects(t, wall, gpu, idle_rows, short, steps):
    per_cat = defaultdict(lambda: defaultdict(float))    # category -> culprit -> us
    evidence = defaultdict(dict)
    if gpu is not None:
        for (cls, name, kind, cat), us in idle_rows.items():
            if cat is not None:
                per_cat[cat][name] += us
        if "synchronous_launch" in per_cat or "host_sync" in per_cat:
            blocking_calls(t)
            evidence["synchronous_launch"] = {"launches_told": t.launches_told, "launches_blocked": t.launches_blocked}
        total_gpu = sum(g.dur for g in t.gpu)
        # comm exposed
        comm = union([[g.ts, g.te] for g in t.gpu if g.kind == "kernel" and is_comm_kernel(g.name)])
        if comm:
            rest = union([[g.ts, g.te] for g in t.gpu if not (g.kind == "kernel" and is_comm_kernel(g.name))])
            exposed = subtract(comm, rest)
            fam = defaultdict(float)
            for g in t.gpu:
                if g.kind == "kernel" and is_comm_kernel(g.name):
                    fam[g.name.split("(")[0]] += g.dur
            top = max(fam.items(), key=lambda kv: kv[1])[0]
            per_cat["communication"][top] += length(exposed)
            evidence["communication"] = {"comm_kernel_us": r3(length(comm)), "exposed_us": r3(length(exposed)),
                                         "overlap_us": r3(length(comm) - length(exposed))}
        # copies / casts, pageable, copies on the critical path, compute-bound and dominant
        # op: by launch stacks
        copy_iv = defaultdict(list)
        page_iv = defaultdict(list)
        crit_iv = []
        crit_by = defaultdict(float)
        crit_streams = defaultdict(list)
        kernel_streams = set()
        op_self = defaultdict(float)       # compute_bound_op's candidates (kernels only)
        dom_self = defaultdict(float)      # key_averages self CUDA per innermost cpu_op
        for g in t.gpu:
            r = t.rt_by_corr.get(g.corr) if g.corr is not None else None
            st = t.stack_of(r) if r is not None else []
            if g.kind == "kernel":
                kernel_streams.add((str(g.device), str(g.stream)))
            if g.kind == "gpu_memcpy" and "Pageable" in g.name:
                page_iv[g.name].append([g.ts, g.te])
            host_copy = g.kind == "gpu_memcpy" and ("HtoD" in g.name or "DtoH" in g.name)
            copy_ops = [p for p in st if p.name in COPY_OPS]
            if not host_copy and (copy_ops or (g.kind == "gpu_memcpy" and "DtoD" in g.name)):
                nm = copy_ops[-1].name if copy_ops else g.name
                copy_iv[nm].append([g.ts, g.te])
            if host_copy and "Pageable" not in g.name:
                crit_iv.append([g.ts, g.te])
                crit_by[copy_ops[-1].name if copy_ops else g.name] += g.dur
                crit_streams[(str(g.device), str(g.stream))].append(g.dur)
            inner = next((p for p in st if p.kind == "cpu_op"), None)
            if inner is not None:
                dom_self[inner.name] += g.dur
                if not gemm_like_op(inner.name) and inner.name not in COPY_OPS and not is_comm_range(inner.name) \
                        and not any(p.name in COPY_OPS or gemm_like_op(p.name) or is_comm_range(p.name) for p in st) \
                        and g.kind == "kernel":
                    op_self[inner.name] += g.dur
            elif g.kind == "kernel" and not gemm_like_kernel(g.name) and not is_comm_kernel(g.name):
                op_self[g.name] += g.dur
        if copy_iv:
            allc = union([iv for v in copy_iv.values() for iv in v])
            top = max(copy_iv.items(), key=lambda kv: length(union(kv[1])))[0]
            per_cat["copies_casts"][top] += length(allc)
            evidence["copies_casts"] = {"copy_gpu_us": r3(length(allc)), "share_of_gpu_busy": r3(length(allc) / gpu["busy_us"])}
        if page_iv:
            allp = union([iv for v in page_iv.values() for iv in v])
            top = max(page_iv.items(), key=lambda kv: length(union(kv[1])))[0]
            per_cat["pageable_memcpy"][top] += length(allp)
            evidence["pageable_memcpy"] = {"pageable_copy_us": r3(length(allp)), "copies": sum(len(v) for v in page_iv.values())}
        if crit_iv:
            u = union(crit_iv)
            k = union([[g.ts, g.te] for g in t.gpu if g.kind == "kernel"])
            exposed = length(subtract(u, k))
            top = max(crit_by.items(), key=lambda kv: (kv[1], kv[0]))[0]
            per_cat["copy_on_critical_path"][top] += exposed
            evidence["copy_on_critical_path"] = {
                "copy_us": r3(length(u)), "exposed_us": r3(exposed),
                "on_compute_stream_us": r3(sum(sum(v) for st_, v in crit_streams.items() if st_ in kernel_streams)),
                "by_name_us": {n: r3(v) for n, v in sorted(crit_by.items(), key=lambda kv: -kv[1])[:5]}}
        named = None
        if op_self and total_gpu > 0:
            top, us = max(op_self.items(), key=lambda kv: kv[1])
            evidence["compute_bound_op"] = {"op": top, "gpu_us": r3(us), "share_of_gpu_time": r3(us / total_gpu)}
            if us / total_gpu > COMPUTE_SHARE and not is_short(short, top):
                cat = "memory_bound_op" if is_data_movement(top) else "compute_bound_op"
                per_cat[cat][top] += us
                evidence[cat] = evidence["compute_bound_op"]
                named = top
        if dom_self and total_gpu > 0:
            top, us = max(dom_self.items(), key=lambda kv: (kv[1], kv[0]))
            evidence["dominant_op"] = {"op": top, "self_cuda_us": r3(us), "share_of_gpu_time": r3(us / total_gpu)}
            if us / total_gpu > COMPUTE_SHARE and top not in COPY_OPS and not is_comm_range(top) \
                    and not is_short(short, top) and top != named:
                per_cat["dominant_op"][top] += us
    else:
        # CPU only: label every instant of every thread; wall-clock instants go to the first
        # category, in CPU_PRIORITY order, that labels them on some thread
        cat_iv = defaultdict(lambda: defaultdict(list))
        for key, segs in t.seg.items():
            for s, e, lab, kind in segs:
                cat_iv[category_of_label(lab, kind, short, cpu_only=True)][lab].append([s, e])
        # time under no range at all, on the threads that have some, is python's too
        self_tot = sum(e - s for segs in t.seg.values() for s, e, lab, kind in segs)
        taken = []
        for cat in CPU_PRIORITY:
            m = cat_iv.get(cat)
            if not m:
                continue
            tops = sorted(((n, union(v)) for n, v in m.items()), key=lambda kv: -length(kv[1]))
            cat_self = sum(length(v) for v in m.values())
            if cat == "cpu_bound_op":
                n, u = tops[0]
                mine = subtract(u, taken)
                per_cat[cat][n] = length(mine)
                taken = union(taken + mine)
            else:
                u = union([iv for _, v in tops for iv in v])
                mine = subtract(u, taken)
                per_cat[cat][tops[0][0]] = length(mine)
                taken = union(taken + mine)
            evidence[cat] = {"self_cpu_us": r3(cat_self), "self_cpu_share": r3(cat_self / self_tot) if self_tot else None,
                             "contributors": [{"name": n, "us": r3(length(v))} for n, v in tops[:5]]}
    if gpu is None and per_cat.get("cpu_bound_op"):
        op = max(per_cat["cpu_bound_op"].items(), key=lambda kv: kv[1])[0]
        g = one_thread(t, op)
        if g is not None:  # one thread where the host has many: the same time, its cause named
            per_cat["cpu_threads"] = per_cat.pop("cpu_bound_op")
            evidence["cpu_threads"] = {"gflops": r3(g)}
    so = step_outliers(t, t.steps_tb if steps else None)
    if so is not None and so["at_stake_us"] > 0:
        for n, us in so["by_culprit"].items():
            per_cat["step_outlier"][n] += us
        evidence["step_outlier"] = {k: v for k, v in so.items() if k != "by_culprit"}
    at_stake = {}
    out = []
    for cat, m in per_cat.items():
        if cat in ONE_OP:
            culprit, tot = max(m.items(), key=lambda kv: kv[1])
        else:
            tot = sum(m.values())
            culprit = max(m.items(), key=lambda kv: kv[1])[0]
        at_stake[cat] = r3(tot)
        if wall <= 0:
            continue
        if cat == "step_outlier":
            if tot <= 0:
                continue
        elif tot < FIRE_FRACTION * wall:
            continue
        ev = dict(evidence.get(cat, {}))
        ev["top_contributors"] = [{"name": n, "us": r3(v)} for n, v in sorted(m.items(), key=lambda kv: -kv[1])[:5]]
        out.append({"category": cat, "culprit": culprit, "at_stake_us": r3(tot), "at_stake_fraction": r3(tot / wall),
                    "at_stake_per_step_us": r3(tot / steps["count"]) if steps and cat not in ONCE else None, "evidence": ev})
    out.sort(key=lambda s: (s["category"] == "dominant_op", -s["at_stake_us"]))
    return out, dict(sorted(at_stake.items(), key=lambda kv: -(kv[1] or 0)))


def matmul_flops(name, dims):
    """2*M*N*K of a matrix op's call from its Input Dims (mm, addmm, linear, matmul of 2-D,
    bmm and baddbmm: 2*B*M*N*K); None when the op or its dims do not give it."""
    n = name.split("::")[-1]
    try:
        if n in ("mm", "matmul") and len(dims[0]) == 2 and len(dims[1]) == 2:
            (m, k), (_, nn) = dims[0], dims[1]
        elif n == "addmm":
            (m, k), (_, nn) = dims[1], dims[2]
        elif n == "linear":
            x, w = dims[0], dims[1]
            m = 1
            for d in x[:-1]:
                m *= d
            k, nn = x[-1], w[0]
        elif n in ("bmm", "baddbmm"):
            a, b = (dims[0], dims[1]) if n == "bmm" else (dims[1], dims[2])
            return 2.0 * a[0] * a[1] * a[2] * b[2]
        else:
            return None
        return 2.0 * m * nn * k
    except (TypeError, IndexError, ValueError):
        return None


def one_thread(t, op):
    """cpu_threads' premise for a CPU-only trace's cpu_bound_op: a matrix op (a GEMM-like name)
    whose calls with FLOPs known from their shapes hold at least half its time, that runs in
    more than one call with no call holding half its time (steady, not first-call work), whose
    FLOPs per call (over all its calls) reach PARALLEL_MIN_FLOPS, at no more than
    ONE_CORE_GFLOPS. Its GFLOP/s, or None."""
    if not gemm_like_op(op):
        return None
    calls = [h for h in t.host if h.kind == "cpu_op" and h.name == op]
    tot = sum(h.dur for h in calls)
    known = [(matmul_flops(h.name, h.dims), h.dur) for h in calls if h.dims]
    known = [(f, d) for f, d in known if f]
    kus = sum(d for _, d in known)
    fl = sum(f for f, _ in known)
    if len(calls) < 2 or kus <= 0 or kus < 0.5 * tot or max(h.dur for h in calls) >= 0.5 * tot:
        return None
    g = fl / kus / 1e3
    return g if fl / len(calls) >= PARALLEL_MIN_FLOPS and g <= ONE_CORE_GFLOPS else None


def step_outliers(t, steps):
    """step_outlier: the steps (tb-profiler's spans) whose GPU-window-clipped duration is >=
    1.5x the median, their excess over it, and per outlier the name whose innermost time
    grew the most against the typical step."""
    if not steps or steps.get("per_step") is None or steps["count"] < OUTLIER_MIN_STEPS:
        return None
    hs = sorted((h for h in t.host if is_step(h.name) and h.kind != "python_function"), key=lambda h: h.ts)
    if t.gpu:
        w0 = min(g.ts for g in t.gpu)
        w1 = max(g.te for g in t.gpu)
    else:
        w0, w1 = -math.inf, math.inf
    rows = []
    for h, r in zip(hs, steps["per_step"]):  # the spans are the host steps' in start order
        a, b = max(r["start_us"], w0), min(r["start_us"] + r["dur_us"], w1)
        rows.append((max(0.0, b - a), r["start_us"], h, a, max(a, b)))
    srt = sorted(rows, key=lambda x: (x[0], x[1]))
    k = max(0, math.ceil(0.5 * len(srt)) - 1)
    med, typ = srt[k][0], srt[k]
    outs = sorted((x for x in rows if x[0] >= OUTLIER_RATIO * med), key=lambda x: (-x[0], x[1]))
    if not outs:
        return {"at_stake_us": 0.0, "by_culprit": {}}
    base = t.names_in((typ[2].pid, typ[2].tid), typ[3], typ[4])
    by = defaultdict(float)
    detail = []
    first = None
    for i, (d, _, h, a, b) in enumerate(outs):
        if i < OUTLIER_NAMED:
            mine = t.names_in((h.pid, h.tid), a, b)
            grew = {n: mine.get(n, 0.0) - base.get(n, 0.0) for n in set(mine) | set(base)}
            cul, g = max(grew.items(), key=lambda kv: (kv[1], kv[0]))
            if first is None:
                first = cul
            detail.append({"step": h.name, "dur_us": r3(d), "excess_us": r3(d - med), "culprit": cul, "grew_us": r3(g)})
        else:
            cul = first
        by[cul] += d - med
    return {"at_stake_us": r3(sum(by.values())), "median_us": r3(med), "typical_step": typ[2].name,
            "outliers": len(outs), "named": detail, "by_culprit": dict(by)}


def tb_steps(t, steps):
    """tb-profiler's overview: device-adjusted step spans and the role breakdown."""
    roles = ["kernel", "memcpy", "memset", "communication", "runtime", "data_loading", "cpu_exec"]
    rr = {k: [] for k in roles}
    for g in t.gpu:
        if g.kind == "kernel":
            rr["communication" if is_comm_kernel(g.name) else "kernel"].append([g.ts, g.te])
        elif g.kind == "gpu_memcpy":
            rr["memcpy"].append([g.ts, g.te])
        else:
            rr["memset"].append([g.ts, g.te])
    for r in t.rt:
        rr["runtime"].append([r.ts, r.te])
    hmin, hmax = math.inf, -math.inf
    for h in t.host:
        if is_step(h.name):
            pass
        elif is_dataloader(h.name):
            rr["data_loading"].append([h.ts, h.te])
        elif is_comm_range(h.name):
            rr["communication"].append([h.ts, h.te])  # a collective on the host (gloo runs there)
        else:
            rr["cpu_exec"].append([h.ts, h.te])
        hmin, hmax = min(hmin, h.ts), max(hmax, h.te)
    for k in roles:
        rr[k] = union(rr[k])
    spans = [[s.ts, s.te] for s in steps]
    names = [s.name for s in steps]
    if not spans:
        if not math.isfinite(hmin):
            return None
        spans, names = [[hmin, hmax]], ["0"]
    # device side (step_parser._update_steps_consider_device_side)
    rts = sorted(t.rt, key=lambda r: r.ts)
    n = len(spans)
    dev = [None] * n
    matched = [0] * n
    seen = set()
    i_step = i_rt = 0
    dmin, dmax = math.inf, -math.inf
    while i_step < n and i_rt < len(rts):
        s0, s1 = spans[i_step]
        r = rts[i_rt]
        if r.ts < s0:
            i_rt += 1
        elif r.te <= s1:
            for g in r.gpu:
                dmin, dmax = min(dmin, g.ts), max(dmax, g.te)
                seen.add(id(g))
                matched[i_step] += 1
            i_rt += 1
        elif r.ts < s1:
            i_rt += 1
        else:
            dev[i_step] = (dmin, dmax)
            i_step += 1
            dmin, dmax = math.inf, -math.inf
    while i_step < n:
        dev[i_step] = (dmin, dmax)
        dmin, dmax = math.inf, -math.inf
        i_step += 1
    if seen:
        prev = spans[0][0]
        if dev[0][0] != math.inf:
            for g in t.gpu:
                if id(g) not in seen and g.te < dev[0][0]:
                    prev = max(prev, g.te)
        for i in range(n):
            s = max(prev, spans[i][0])
            if dev[i][0] == math.inf:
                e = max(spans[i][1], s)
            else:
                e = max(spans[i][1], dev[i][1])
                if e < s:
                    e = s
            spans[i] = [s, e]
            prev = e
        if n > 1:
            i = n - 1
            while i >= 0 and matched[i] <= 0:
                i -= 1
            if i >= 0:
                keep = i + 1
                if i > 0 and matched[i - 1] * 0.8 > matched[i]:
                    keep = i
                spans, names = spans[:keep], names[:keep]
    per = []
    tot = defaultdict(float)
    for (s, e), nm in zip(spans, names):
        slots = [[s, e]]
        row = {"name": nm, "start_us": s, "dur_us": r3(e - s)}
        for k in roles:
            part = intersect(slots, rr[k])
            row[k + "_us"] = r3(length(part))
            tot[k] += length(part)
            slots = subtract(slots, part)
        row["other_us"] = r3(length(slots))
        tot["other"] += length(slots)
        tot["dur"] += e - s
        per.append(row)
    m = len(per)
    return {"count": m, "mean_us": r3(tot["dur"] / m) if m else None,
            "breakdown_mean_us": {k: r3(tot[k] / m) for k in roles + ["other"]} if m else None,
            "per_step": per}


def phases(t, gap_list, class_gaps=None):
    """Per record_function name: instances, time, GPU idle inside (all devices' union), and
    gpu_idle_by_class_us: each device's gaps of each class inside the name's ranges, summed
    over devices (the server's idle.by_phase)."""
    inst = defaultdict(list)
    for h in t.host:
        if h.kind != "user_annotation":
            continue
        if is_step(h.name):
            inst[STEP_LABEL].append([h.ts, h.te])
        else:
            inst[h.name].append([h.ts, h.te])
    gaps = union(gap_list) if gap_list else []
    out = {}
    for name, iv in inst.items():
        u = union(iv)
        out[name] = {"count": len(iv), "total_us": r3(sum(b - a for a, b in iv)),
                     "gpu_idle_us": r3(length(intersect(u, gaps))) if gaps else None}
        if class_gaps:
            by = defaultdict(float)
            for (dev, cls), g in class_gaps.items():
                by[cls] += length(intersect(u, union(g)))
            out[name]["gpu_idle_by_class_us"] = {k: r3(v) for k, v in sorted(by.items())}
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["total_us"]))


def merge_table(t, want_ops):
    """key_averages rows after torch's same-name merge: calls, cpu total, self cpu."""
    # the op tree over host ranges but python_function, and runtime calls
    nodes = [h for h in t.host if h.kind != "python_function"] + list(t.rt)
    parent = {id(x): x.parent for x in nodes}
    children = defaultdict(list)
    for x in nodes:
        if x.parent is not None:
            children[id(x.parent)].append(x)
    order = sorted(nodes, key=lambda x: (x.pid, x.tid, x.ts, -x.te))
    deleted = set()
    while True:
        dl = []
        for x in order:
            if id(x) in deleted:
                continue
            p = parent[id(x)]
            if p is not None and p.name == x.name and len(children[id(p)]) == 1:
                children[id(p)] = children[id(x)]
                for c in children[id(x)]:
                    parent[id(c)] = p
                dl.append(id(x))
                deleted.add(id(x))
        if not dl:
            break
    rows = defaultdict(lambda: {"calls": 0, "raw_calls": 0, "cpu_total_us": 0.0, "self_cpu_us": 0.0})
    for x in nodes:
        r = rows[x.name]
        r["raw_calls"] += 1
        if id(x) in deleted:
            continue
        r["calls"] += 1
        r["cpu_total_us"] += x.dur
        r["self_cpu_us"] += x.dur - sum(c.dur for c in children[id(x)])
    diff = {n: {"calls": r["calls"], "raw_calls": r["raw_calls"]} for n, r in rows.items() if r["calls"] != r["raw_calls"]}
    out = {"merged": dict(sorted(diff.items()))}
    if want_ops:
        out["ops"] = {n: {k: (r3(v) if isinstance(v, float) else v) for k, v in r.items()} for n, r in sorted(rows.items())}
    return out


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        sys.stderr.write("usage: oracle.py TRACE [--ops] [--gaps=N]\n")
        return 2
    want_gaps = 0
    for a in argv[1:]:
        if a.startswith("--gaps="):
            want_gaps = int(a.split("=", 1)[1])
    res = analyze(load(args[0]), want_ops="--ops" in argv, want_gaps=want_gaps)
    res = {"trace": args[0], **res}
    json.dump(res, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
