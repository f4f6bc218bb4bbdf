#!/usr/bin/python3
"""oracle.py TRACE [--ops] [--gaps=N]: an independent computation (standard library only) of
what firstpass's first profiler pass should find in one trace, printed as JSON. Written apart
from the C server, to cross-check it on real traces and to label tests/triage/cases.json.

DEFINITIONS (the lead implements the same in C; every number below follows them. Round 2,
issue 41: the host's own work is named, a sync only takes what it could have queued ahead,
new categories, a busy GPU that one op owns gets a target. Round 3, issue 48 (spec48.md):
GPU time by kind of work, waste inside a busy GPU by kind, idle charged to what emptied the
queue and summed up the range tree, every suspect names its members with their own time,
per step only for the work inside the steps; Nsight Systems SQLite exports read alike)

Events
 - Kineto current schema (cat lower case), 2021 schema (cat Operator/Runtime/Kernel/Memcpy/
   Memset), the legacy autograd array (no cat: a name with "::" is a cpu_op, else a
   user_annotation) and Nsight Systems SQLite exports (load_nsys: kernels, memcpy, memset,
   runtime / driver calls, NVTX ranges as user_annotation; no operators) are read alike. Only complete events (ph "X" with ts and dur) count,
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
     * (issue 48) a call that waited inside an operator: failing the above, any other
       runtime call but a kernel launch (a pageable copy, cudaFree, a driver call, whatever
       its name, in any format) that started while the device was busy (S.ts inside its
       busy union), waited >= TELL_US for it (g0 - S.ts) and returned as the device went
       idle: g0 - SYNC_SLACK_US <= S.te <= g0 + RETURN_US (10 us).
   Instants under named host work keep their label. Every other instant goes to S, in time
   order, until S has taken sync_left = g0 - S.ts (how long S waited while the GPU still
   worked: what the host could have queued ahead); after that they keep their own label.
 - The drain's refill (issue 48: the cheap ops launched after a drain no longer take the
   blame). Without S the host would have been sync_left ahead of the GPU, and that lead
   would have covered the idle that follows until it ran out: what S did not take of
   sync_left in its own gap, less the named host work there, S carries into the host_wait
   gaps that follow on that device whose next launch is on S's thread, in time order. In
   them named host work keeps its label and uses up that much of the budget (a 30 ms
   DataLoader wait after a 10 ms drain leaves nothing to refill); every other instant goes
   to S while budget is left. It ends when the budget does, or when another blocking call
   starts a claim of its own. kernel_wait gaps (a launch already queued: a scheduling gap)
   neither take from it nor end it. Taken instants count as S's: culprit and category as
   above. S's culprit: a sync call's OUTERMOST cpu_op (the op the program called, e.g.
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
   runtime-call label -> host_work; a range with no GPU work in an Nsight export ->
   host_work; cpu_op -> launch_bound when short-kernel, else cpu_bound_op; anything else
   (python_function, a user_annotation's own time, ProfilerStep#*, (untraced)) ->
   python_overhead.
 - (issue 48) Ranges without GPU work are named host work in every format: an instance of a
   record_function / NVTX range (not a step, not a DataLoader) under which no runtime call
   with GPU activity nests labels its own time as named host work ("range_host"): the sync
   before it does not take it. Its category: host_work in an Nsight export (nothing says the
   program is Python), python_overhead in a PyTorch trace (a record_function's own time).
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
   every other activity); when the steps repeat their gradient reductions k > 1 times
   before one optimizer (repeated_reductions(): definitions in its docstring), at stake is
   min(exposed, (k-1)/k of those reductions' time) and the advice is no_sync().
 - host_work: the runtime-call labels' time (what no other category names: cudaGetDevice-
   Properties, cudaStreamCreate, cudaFuncGetAttributes, cudaMemGetInfo ... in the loop).

GPU time by kind (issue 48, spec48 "GPU time by kind"; work_kind): every GPU activity gets
one kind, first match wins:
   1. memcpy / memset -> data_movement (HtoD / DtoH are transfers: data_movement, but not
      copies_casts' waste);
   2. a communication kernel (nccl / rccl / gloo in its name) -> communication;
   3. a layout-conversion kernel name (LAYOUT_KERNEL_WORDS: nchwToNhwc, nhwcToNchw,
      transpose, tensorTransform, convert) -> data_movement, even under a math op;
   4. a math kernel name (MATH_KERNEL_WORDS: gemm, gemv, xmma, cutlass, cublas, nvjet,
      s16816 / h16816 / s1688 / h1688 / s884 / h884, implicit_gemm / implicit_convolve /
      precomputed_convolve / winograd, dgrad / wgrad / fprop, flash, fmha, attention) -> math;
   5. the innermost cpu_op on the launch stack (op_kind): a copy / cast / cat / stack / pad /
      permute / roll / flip / repeat op, or an addressing op (gather, scatter, index*,
      embedding, take, masked_select, *put_, *lookup*: FBGEMM's embedding lookups) ->
      data_movement; a GEMM-like op (GEMM_OP_WORDS)
      -> math; an elementwise, activation, normalisation, reduction, softmax, fill / zero or
      optimizer op (ELEMENTWISE_OP_WORDS; rotary counts here, not as an embedding) ->
      elementwise; nonzero / unique / sort / topk / multinomial: no kind by name;
   6. an elementwise kernel family (ELEMENTWISE_KERNEL_WORDS: elementwise_kernel,
      vectorized_elementwise, reduce_kernel, layer_norm, batch_norm, bn_fw / bn_bw,
      group_norm, rms_norm, softmax, triton_poi_ / triton_red_ / triton_per_,
      multi_tensor_apply, pooling / pool_ (a window reduction), normalize) -> elementwise;
   7. else other.
 - gpu_time_by_kind {kind: {us, fraction}} over the activity durations (every kind listed;
   they sum to the GPU activity time), per session and per phase (the record_function /
   NVTX ranges on the launch's stack, the step folded; each activity once per name).

GPU-set categories
 - copies_casts (issue 48: by kind, no longer by one name's share): the union of the
   data_movement activity, but host transfers (HtoD / DtoH memcpy) and the activity an
   addressing op launched (memory_bound_op's). Members: the outermost data-movement op on
   the launch stack, else the op it hides under (a layout conversion inside
   aten::cudnn_convolution is named by that op; evidence: the layout kernels' names and
   time), else the activity's name; each member's own time is its activity's durations.
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
 - memory_bound_op (issue 48: no 50% gate): the addressing op (innermost cpu_op; gather,
   scatter, index*, embedding, take, masked_select) with the most own GPU time (every kind
   of activity it launched); at stake = that time. compute_bound_op never names a
   data-movement or addressing op.
 - unfused_elementwise (issue 48): chains of >= 2 consecutive elementwise kernels on one
   (device, stream), no other activity between them on that stream, launched in the same
   step, with the GPU (any activity) busy for >= TINY_BUSY (0.6) of the chain's window
   [first start, last end] (waste inside a busy GPU: where the GPU idles between them the
   idle is idle's). At stake = sum over chains of (chain time - one fused pass), the fused
   pass read as the chain's longest kernel (spec48's estimate without shapes; with shapes
   the server may use the chain's external bytes / bandwidth: the corpus' at-stake
   tolerance covers the difference). It counts only when that time at stake is at least
   UNFUSED_MIN_GAIN (20%) of the GPU activity time (the lead's ruling: chains worth a tenth of
   a healthy UNet's GPU, GroupNorm -> SiLU, or a cuDNN BN backward -> ReLU backward -> add,
   are not the first experiment). Members: the innermost op of each chained kernel (else
   the kernel's name) with its time in chains.
 - tiny_kernels (issue 48): per group -- the innermost record_function / NVTX range around
   the launch (not a step), else the innermost op, else the kernel's name -- its tiny
   kernels (duration < TINY_US = 10 us, or fewer grid blocks than the device has SMs), not
   communication, not replayed by a CUDA graph (a cudaGraphLaunch already removed the
   launches). A group counts when its tiny kernels are many (>= TINY_MIN_PER_STEP = 100 a
   step in a trace with steps, else >= TINY_MIN_KERNELS = 1000) and the GPU is busy for >=
   TINY_BUSY of their windows (per range instance or per step); at stake = sum over its
   kernels of min(dur, TINY_FIXED_US = 3 us) (the fixed cost one pass would not spend).
   Members: the groups with their tiny kernels' time.
 - math_below_roof (issue 48 item 2, issue 49's time above the roof): math rows -- (op,
   Input Dims, dtype) of the innermost op that launched the kernels -- whose FLOPs and bytes
   the shapes give (op_flops_bytes: mm, addmm, bmm, baddbmm; flash attention with its
   is_causal in Concrete Inputs), on a device of DEVICE_ROOFS. Per call best_roof_us =
   max(FLOPs / the best dense peak for the dtype on that device -- fp32 may run as TF32 on
   tensor cores where the device has them --, bytes / bandwidth). A row whose
   best_roof_us / gpu_us is under MATH_OK_FRACTION (0.5), and not over 1 (impossible: not
   judged), puts gpu_us - best_roof_us at stake. Culprit: the op with the most; members:
   those rows' ops with their GPU time. (effic supplies these figures to the server.)
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
 - recomputed_work (busy GPU time that need not run at all): a prefix recomputed every step,
   generation without a KV cache (recomputed_work(): a GEMM-like op whose weight stays fixed
   while its token count M grows by one stride a step, M = s * (prompt + i); at stake: its
   kernel time x (1 - s / M), the rows that were not new); and its second mechanism, a
   per-step constant rebuilt every layer (rebuilt_constant(): rotary tables, causal masks,
   position ids made from scratch in each layer's forward; definitions in its docstring;
   the mechanism with the larger at stake is the suspect); and its third family, work whose
   result nobody uses (discarded_work(): gradients with no optimizer, dropout in a loop with
   no backward, the forward recomputed inside a backward node; definitions in its docstring);
   and its fourth, rows computed that nobody reads (unread_rows(): a GEMM's whole output
   cut to 1 of R rows right after, the lm_head over every position; its docstring);
   and its fifth, autotuning run again step after step (autotune_repeated(): op calls that
   launch many kernels and sync, on shapes not tuned before, after the first tuned step).
 - Per category one suspect; at stake = the category's sum (cpu_bound_op, compute_bound_op,
   memory_bound_op, dominant_op: the one op's; copies_casts, communication: a union;
   unfused_elementwise, tiny_kernels, math_below_roof: their estimates above).
 - (issue 48 item 5) Members: every suspect names what holds its time, each with its own
   time (members [{name, us}]); at stake <= the members' sum. The culprit: the top member
   when it holds at least half of the category; else the record_function / NVTX range (not a
   step) that holds at least half of it (the idle summed up the range tree: each charged
   idle instant belongs to the innermost range on its thread at that instant; a sync's
   taken instants to the range around the sync); else the top member.
 - (issue 48 item 3) A range that holds >= FIRE_FRACTION of the wall in idle over all the
   idle categories, while the category holding most of its idle did not fire on its own,
   is a suspect of that category named by the range (members: the labels under it).
 - A suspect fires when at_stake >= FIRE_FRACTION (5%) of the wall (dominant_op too: a
   target that holds less of the wall is no target); step_outlier whenever at stake > 0.
 - Ranked by at_stake, descending, dominant_op last. At stake per step (issue 48): the part
   of the time at stake that lies inside the steps (tb-profiler's spans), over the step
   count: at stake x length(intervals inside the steps) / length(intervals) / count, never
   above the mean step; null without steps, for startup, tail and step_outlier, and when
   none of it lies inside a step.
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
import os
import re
import sys
from collections import defaultdict

SYNC_SLACK_US = 2.0
RETURN_US = 10.0         # a call that waited for the device returns within this of the device going idle
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
IDLE_CATS = ("data_loading", "host_sync", "python_overhead", "launch_bound", "cpu_bound_op", "communication",
             "allocator_churn", "compilation", "tokenization", "garbage_collection", "synchronous_launch", "host_work")
# ---- waste inside a busy GPU (issue 48) ----
GRAPH_LAUNCH = ("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch")
TINY_US = 10.0              # a tiny kernel: shorter than this, or fewer blocks than the device has SMs
TINY_MIN_KERNELS = 1000     # ... many: this many in the trace
TINY_MIN_PER_STEP = 100     # ... or this many a step
TINY_BUSY = 0.6             # ... while the GPU is busy for this much of their windows
TINY_FIXED_US = 3.0         # the fixed cost of a kernel one pass would not spend
MATH_OK_FRACTION = 0.5      # math at this fraction of its best roof is not waste
UNFUSED_MIN_GAIN = 0.20     # unfused_elementwise: the chains' time at stake is at least this share of the GPU time
# dense peaks (TFLOP/s) by unit and bandwidth (GB/s), public spec sheets; matched by name tokens, first match wins
DEVICE_ROOFS = [
    (("h100", "pcie"), {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0}, 2000.0),
    (("h100",), {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}, 3350.0),
    (("a100", "40gb"), {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}, 1555.0),
    (("a100", "pcie"), {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}, 1935.0),
    (("a100",), {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}, 2039.0),
    (("l4",), {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0}, 300.0),
    (("v100",), {"fp32": 15.7, "fp16": 125.0}, 900.0),
]
# ---- kinds of work (issue 48, spec48 "GPU time by kind") ----
KINDS = ("math", "data_movement", "elementwise", "communication", "other")
LAYOUT_KERNEL_WORDS = ("nchwtonhwc", "nhwctonchw", "transpose", "tensortransform", "convert")
MATH_KERNEL_WORDS = ("gemm", "gemv", "xmma", "cutlass", "cublas", "nvjet", "s16816", "h16816", "s1688", "h1688", "s884",
                     "h884", "implicit_convolve", "precomputed_convolve", "implicit_gemm", "winograd", "dgrad", "wgrad",
                     "fprop", "flash", "fmha", "attention")
ELEMENTWISE_KERNEL_WORDS = ("elementwise_kernel", "vectorized_elementwise", "unrolled_elementwise", "reduce_kernel",
                            "layer_norm", "layernorm", "batch_norm", "bn_fw", "bn_bw", "group_norm", "rowwisemoments",
                            "rms_norm", "softmax", "triton_poi_", "triton_red_", "triton_per_", "multi_tensor_apply",
                            "pooling", "pool_", "normalize")
DM_OP_NAMES = {"to", "_to_copy", "copy_", "contiguous", "clone", "type_as", "cat", "stack", "hstack", "vstack", "concat",
               "pad", "constant_pad_nd", "reflection_pad2d", "permute", "transpose", "roll", "flip", "repeat",
               "repeat_interleave", "narrow_copy", "expand_copy", "_copy_from", "_copy_from_and_resize", "pin_memory"}
DM_OP_WORDS = ("copy", "_pad")
ADDRESSING_WORDS = ("gather", "scatter", "index", "embedding", "take", "masked_select", "put_", "lookup")
ELEMENTWISE_OP_WORDS = ("add", "sub", "mul", "div", "neg", "exp", "log", "pow", "sqrt", "rsqrt", "reciprocal", "abs", "sign",
                        "relu", "gelu", "silu", "sigmoid", "tanh", "hardswish", "elu", "softplus", "mish", "clamp", "where",
                        "fill", "zero", "norm", "softmax", "sum", "mean", "var", "std", "max", "min", "argm", "prod",
                        "dropout", "masked_fill", "lerp", "maximum", "minimum", "foreach", "adam", "sgd", "lamb", "cumsum",
                        "logsumexp", "threshold", "erf", "round", "floor", "ceil", "bias", "act_and_mul", "rms",
                        "remainder", "fmod", "logical", "bitwise", "isnan", "isinf", "nan_to_num", "square", "mse",
                        "cross_entropy", "nll_loss", "slice", "select", "pool")
ELEMENTWISE_OP_EXACT = {"eq", "ne", "lt", "gt", "le", "ge", "sin", "cos", "abs", "exp", "log"}
NOT_ELEMENTWISE = ("nonzero", "unique", "sort", "topk", "multinomial")   # compaction / selection: no kind by name
STEP_LABEL = "ProfilerStep#*"
UNTRACED = "(untraced)"


# ---------------------------------------------------------------- reading

def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if raw[:16] == b"SQLite format 3\x00":
        return load_nsys(path, raw)
    return json.loads(raw)


NSYS_COPY = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH", 10: "PtoP",
             11: "HtoD", 12: "DtoH", 13: "DtoD"}
NSYS_MEM = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static", 6: "Managed Static"}


def load_nsys(path, raw):
    """An Nsight Systems SQLite export (`nsys export --type sqlite`) as Kineto-like events, from
    the documented tables: CUPTI_ACTIVITY_KIND_KERNEL / MEMCPY / MEMSET (GPU activity; device =
    deviceId, stream = streamId), CUPTI_ACTIVITY_KIND_RUNTIME (eventClass 0 runtime, 1 driver;
    other classes repeat a call: skipped; the name's ABI suffix _vNNNN dropped), NVTX_EVENTS
    (eventType 59 push/pop and 60 start/end ranges: user_annotation), TARGET_INFO_GPU
    (device name, smCount). Times are ns; globalTid packs pid (bits 24-47) and tid (0-23).
    Names come from StringIds. The doc carries "_nsys": True (ranges with no GPU work are
    host_work's there: nothing says the program is Python)."""
    import sqlite3
    import tempfile
    tmp = None
    if path.endswith(".gz"):
        fd, tmp = tempfile.mkstemp(suffix=".sqlite")
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        path = tmp
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        names = dict(db.execute("SELECT id, value FROM StringIds"))
        ev = []

        def cols(t):
            return [r[1] for r in db.execute("PRAGMA table_info(%s)" % t)]

        def rows(t):
            c = cols(t)
            for r in db.execute("SELECT * FROM %s" % t):
                yield dict(zip(c, r))

        def tid_of(g):
            g = g or 0
            return str((g >> 24) & 0xFFFFFF), str(g & 0xFFFFFF)

        def x(cat, name, st, en, pid, tid, args):
            ev.append({"ph": "X", "cat": cat, "name": name, "ts": st / 1000.0, "dur": (en - st) / 1000.0, "pid": pid,
                       "tid": tid, "args": args})
        if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
            for r in rows("CUPTI_ACTIVITY_KIND_KERNEL"):
                if r["start"] is None or r["end"] is None or r["end"] < r["start"]:
                    continue
                nm = names.get(r.get("demangledName")) or names.get(r.get("shortName")) or "[unnamed kernel]"
                x("kernel", nm, r["start"], r["end"], r["deviceId"], r["streamId"],
                  {"device": r["deviceId"], "stream": r["streamId"], "correlation": r["correlationId"],
                   "grid": [r["gridX"], r["gridY"], r["gridZ"]], "block": [r["blockX"], r["blockY"], r["blockZ"]]})
        if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
            for r in rows("CUPTI_ACTIVITY_KIND_MEMCPY"):
                if r["start"] is None or r["end"] is None or r["end"] < r["start"]:
                    continue
                nm = "Memcpy %s (%s -> %s)" % (NSYS_COPY.get(r["copyKind"], "Unknown"), NSYS_MEM.get(r.get("srcKind"), "Unknown"),
                                               NSYS_MEM.get(r.get("dstKind"), "Unknown"))
                x("gpu_memcpy", nm, r["start"], r["end"], r["deviceId"], r["streamId"],
                  {"device": r["deviceId"], "stream": r["streamId"], "correlation": r["correlationId"], "bytes": r["bytes"]})
        if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
            for r in rows("CUPTI_ACTIVITY_KIND_MEMSET"):
                if r["start"] is None or r["end"] is None or r["end"] < r["start"]:
                    continue
                x("gpu_memset", "Memset (%s)" % NSYS_MEM.get(r.get("memKind"), "Unknown"), r["start"], r["end"], r["deviceId"],
                  r["streamId"], {"device": r["deviceId"], "stream": r["streamId"], "correlation": r["correlationId"]})
        if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
            for r in rows("CUPTI_ACTIVITY_KIND_RUNTIME"):
                cls = r.get("eventClass") or 0
                if cls not in (0, 1) or r["start"] is None or r["end"] is None or r["end"] < r["start"]:
                    continue
                nm = re.sub(r"_v\d+$", "", names.get(r["nameId"]) or "[unnamed call]")
                pid, tid = tid_of(r["globalTid"])
                x("cuda_driver" if cls == 1 else "cuda_runtime", nm, r["start"], r["end"], pid, tid,
                  {"correlation": r["correlationId"]})
        if "NVTX_EVENTS" in tables:
            for r in rows("NVTX_EVENTS"):
                if r["eventType"] not in (59, 60) or r["start"] is None or r["end"] is None or r["end"] < r["start"]:
                    continue
                nm = r.get("text") or names.get(r.get("textId")) or "[unnamed range]"
                pid, tid = tid_of(r["globalTid"])
                x("user_annotation", nm, r["start"], r["end"], pid, tid, {})
        dev = []
        if "TARGET_INFO_GPU" in tables:
            for r in rows("TARGET_INFO_GPU"):
                dev.append({"id": r["id"], "name": r.get("name") or "", "numSms": r.get("smCount")})
        return {"traceEvents": ev, "deviceProperties": dev, "_nsys": True}
    finally:
        db.close()
        if tmp:
            os.remove(tmp)


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
    """Named host work keeps its label under the sync rule: what the host did is its own (a
    range with no GPU work under it included, in every format: issue 48)."""
    return kind in ("dataloader", "runtime", "range_host") or is_gc(label) or is_tokenizer(label) or is_compile(label) \
        or is_allocator(label, kind)


# ---------------------------------------------------------------- kinds of work (issue 48)

def base_name(name):
    """An op's name without its namespace, lower case: "aten::_to_copy" -> "_to_copy"."""
    return name.split("::")[-1].lower()


def is_layout_kernel(name):
    n = name.lower()
    return any(w in n for w in LAYOUT_KERNEL_WORDS)


def is_math_kernel(name):
    n = name.lower()
    return any(w in n for w in MATH_KERNEL_WORDS)


def is_elementwise_kernel(name):
    n = name.lower()
    return any(w in n for w in ELEMENTWISE_KERNEL_WORDS)


def is_addressing_op(name):
    """Data-dependent addressing (memory_bound_op's): gather, scatter, index*, embedding, take,
    masked_select (rotary_embedding is arithmetic, not a lookup)."""
    n = base_name(name)
    return "rotary" not in n and any(w in n for w in ADDRESSING_WORDS)


def op_kind(name):
    """Rule 5: the kind of work an operator's own kernels do, from its name; None: unknown."""
    n = base_name(name)
    if "rotary" in n:
        return "elementwise"
    if name in COPY_OPS or n in DM_OP_NAMES or any(w in n for w in DM_OP_WORDS) or is_addressing_op(name):
        return "data_movement"
    if gemm_like_op(name) and not is_comm_range(name):
        return "math"
    if any(w in n for w in NOT_ELEMENTWISE):
        return None
    if n.strip("_") in ELEMENTWISE_OP_EXACT or any(w in n for w in ELEMENTWISE_OP_WORDS):
        return "elementwise"
    return None


def work_kind(g, inner):
    """The kind of work of one GPU activity (spec48 "GPU time by kind"), first match wins:
    memcpy/memset -> data_movement; a communication kernel -> communication; a layout-
    conversion kernel -> data_movement (even under a math op); a math kernel -> math; the
    innermost op's kind; an elementwise kernel family -> elementwise; else other."""
    if g.kind in ("gpu_memcpy", "gpu_memset"):
        return "data_movement"
    if is_comm_kernel(g.name) or "gloo" in g.name.lower():
        return "communication"
    if is_layout_kernel(g.name):
        return "data_movement"
    if is_math_kernel(g.name):
        return "math"
    if inner is not None:
        k = op_kind(inner.name)
        if k is not None:
            return k
    if is_elementwise_kernel(g.name):
        return "elementwise"
    return "other"


def host_transfer(g):
    """A copy between host and device (HtoD / DtoH): data movement, not copies_casts' waste."""
    return g.kind == "gpu_memcpy" and ("HtoD" in g.name or "DtoH" in g.name)


def kernel_short_name(name):
    """A kernel's name for grouping: before its template/argument list."""
    n = name.split("(")[0].split("<")[0].strip()
    return n.split()[-1] if n else name[:60]


class Ev:
    __slots__ = ("name", "kind", "ts", "te", "dur", "pid", "tid", "corr", "device", "stream", "parent", "children", "gpu", "dims",
                 "types", "concrete", "blocks", "has_gpu", "wkind", "inner", "rt")

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
        self.types = None
        self.concrete = None
        self.blocks = None       # a kernel's grid blocks (product of args.grid)
        self.has_gpu = False     # a host range: some runtime call with GPU activity nests under it
        self.wkind = None        # a GPU activity's kind of work (KINDS)
        self.inner = None        # ... the innermost cpu_op on its launch stack
        self.rt = None           # ... its runtime call


class Trace:
    def __init__(self, doc):
        evs = doc if isinstance(doc, list) else doc.get("traceEvents", [])
        self.nsys = isinstance(doc, dict) and bool(doc.get("_nsys"))
        self.sms = {}            # device id -> SM count (deviceProperties numSms / TARGET_INFO_GPU smCount)
        self.device_names = {}   # device id -> name
        for d in (doc.get("deviceProperties") or []) if isinstance(doc, dict) else []:
            if isinstance(d, dict):
                self.sms[d.get("id", 0)] = d.get("numSms")
                self.device_names[d.get("id", 0)] = d.get("name") or ""
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
                h.types = args.get("Input type")
                h.concrete = args.get("Concrete Inputs")
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
                grid = args.get("grid")
                if isinstance(grid, list) and grid and all(isinstance(x, (int, float)) for x in grid):
                    g.blocks = 1
                    for x in grid:
                        g.blocks *= x
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
                g.rt = r
        # a host range "has GPU work" when a runtime call with GPU activity nests under it
        for r in self.rt:
            if r.gpu:
                p = r.parent
                while p is not None and not p.has_gpu:
                    p.has_gpu = True
                    p = p.parent
        for g in self.gpu:
            g.inner = next((p for p in self.stack_of(g.rt) if p.kind == "cpu_op"), None) if g.rt is not None else None
            g.wkind = work_kind(g, g.inner)
        self.threads = defaultdict(list)
        for h in self.host:
            self.threads[(h.pid, h.tid)].append(h)
        self._labels()
        self._rsegs = {}
        self.busy_by_dev = {}
        self.sync_evidence = defaultdict(set)

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
            if ev.kind == "user_annotation" and not ev.has_gpu:
                return ev.name, "range_host"    # a range with no GPU work under it: named host work
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

    def ranges_in(self, key, a, b):
        """[(start, end, range)] of thread key over [a, b]: the innermost record_function / NVTX
        range (not a step) at each instant, None where there is none (the range tree's leaves)."""
        if key not in self._rsegs:
            evs = [h for h in self.threads.get(key, []) if h.kind == "user_annotation" and not is_step(h.name)]
            segs = sweep(evs, lambda ev, stack: (ev.name, "range"))
            self._rsegs[key] = (segs, [x[0] for x in segs])
        segs, starts = self._rsegs[key]
        out = []
        cur = a
        i = max(0, bisect.bisect_right(starts, a) - 1)
        while i < len(segs) and segs[i][0] < b:
            s, e, lab, _ = segs[i]
            lo, hi = max(s, a), min(e, b)
            if hi > lo:
                if lo > cur:
                    out.append((cur, lo, None))
                out.append((lo, hi, lab))
                cur = hi
            i += 1
        if b > cur:
            out.append((cur, b, None))
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


def category_of_label(label, kind, short, cpu_only=False, nsys=False):
    """The category of time labelled (label, kind); first match wins. A range with no GPU work
    (range_host) is host work: in an Nsight export (C/C++ or any program: nothing says it is
    Python) host_work, in a PyTorch trace python_overhead (a record_function's own time)."""
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
    if kind == "runtime" or (kind == "range_host" and nsys):
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
    pieces = defaultdict(list)             # (category, culprit) -> [[a, b, range]]: where the charged idle lies
    idle_class = defaultdict(float)
    gaps_out = []
    gap_list = []                            # (g0, g1) union-level, for phases
    class_gaps = defaultdict(list)           # (device, class) -> [g0, g1]: idle per phase
    all_act = [[g.ts, g.te] for g in t.gpu]

    def charge(cls, name, kind, cat, a, b, key=None, rng=None):
        """Charge [a, b] of idle to (category, culprit); its range: rng, else the innermost
        non-step range on thread key over [a, b] (pieces split where the range changes)."""
        if b <= a:
            return
        idle_rows[(cls, name, kind, cat)] += b - a
        if cat is None:
            return
        if rng is not None or key is None:
            pieces[(cat, name)].append([a, b, rng])
        else:
            for a2, b2, rg in t.ranges_in(key, a, b):
                pieces[(cat, name)].append([a2, b2, rg])

    if t.gpu:
        by_dev = defaultdict(list)
        for g in t.gpu:
            by_dev[g.device].append(g)
        devices = {}
        for dev, acts in sorted(by_dev.items(), key=lambda kv: str(kv[0])):
            busy = union([[g.ts, g.te] for g in acts])
            t.busy_by_dev[dev] = busy
            w0, w1 = busy[0][0], busy[-1][1]
            blen = length(busy)
            dcls = defaultdict(float)
            starts = defaultdict(list)
            for g in acts:
                starts[g.ts].append(g)
            start_keys = sorted(starts)
            carry = None   # the drain's claim on the refill: [S, culprit, category, left, thread, S's range]
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
                    rg = next((p.name for p in st if p.kind == "user_annotation" and not is_step(p.name)), None)
                    # the launch was queued before the GPU went idle (a scheduling gap between
                    # queued kernels): not a drain's refill, which only host_wait gaps are
                    charge(cls, name, op.kind if op is not None else "runtime", cat, g0, g1, rng=rg)
                    rec.update(cls=cls, culprit=name)
                else:
                    cls = "host_wait"
                    key = (r.pid, r.tid)
                    sync = find_sync(t, key, g0, dev)
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
                        srg = next((p.name for p in st if p.kind == "user_annotation" and not is_step(p.name)), None)
                        carry = [sync, name, scat, g0 - sync.ts, key, srg]
                        t.sync_evidence[name].add(sync_evidence(t, sync))
                    took = 0.0
                    named_us = 0.0
                    mine = carry is not None and carry[4] == key
                    for a, b, lab, kind in segs:
                        x = 0.0
                        if is_named_work(lab, kind):
                            named_us += b - a      # keeps its label; it used up that much of the lost lead
                            if mine and sync is None:
                                carry[3] = max(0.0, carry[3] - (b - a))
                        elif mine and carry[3] > 0:
                            x = min(carry[3], b - a)
                            carry[3] -= x
                            took += x
                            charge(cls, carry[1], "sync:" + carry[0].name, carry[2], a, a + x, rng=carry[5])
                        if b - a - x > 0:
                            labs[(lab, kind)] += b - a - x
                            charge(cls, lab, kind, category_of_label(lab, kind, short, nsys=t.nsys), a + x, b, key=key)
                    if mine and sync is not None:
                        # S's own gap: named work kept its label without using S's take (round 2's
                        # rule); what S carries on is its lead less that named time
                        carry[3] = max(0.0, carry[3] - named_us)
                    if sync is not None:
                        rec.update(sync=sync.name, sync_took_us=r3(took))
                    allv = dict(labs)
                    if took > 0:
                        allv[(carry[1], "sync")] = allv.get((carry[1], "sync"), 0.0) + took
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
            segs = t.segs_in((r.pid, r.tid), t.wall0, first.ts) if r is not None else [(t.wall0, first.ts, UNTRACED, "untraced")]
            for a, b, lab, kind in segs:
                charge("lead_in", lab, kind, "data_loading" if kind == "dataloader" else "startup", a, b, rng=None)
        # the tail, labelled on the thread that launched the GPU activity that ends last
        last = max(t.gpu, key=lambda g: (g.te, g.corr is not None, g.corr if isinstance(g.corr, (int, float)) else -1e30))
        if last.te < t.wall1:
            r = t.rt_by_corr.get(last.corr) if last.corr is not None else None
            segs = t.segs_in((r.pid, r.tid), last.te, t.wall1) if r is not None else [(last.te, t.wall1, UNTRACED, "untraced")]
            for a, b, lab, kind in segs:
                charge("tail", lab, kind, "data_loading" if kind == "dataloader" else "tail", a, b, rng=None)
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
    res["gpu_time_by_kind"] = time_by_kind(t.gpu) if t.gpu else None

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
    for n, kinds in phase_kinds(t).items():
        if n in res["phases"]:
            res["phases"][n]["gpu_time_by_kind"] = kinds
    if res["steps"] and STEP_LABEL in res["phases"]:
        # the step phase's instances and time are tb-profiler's steps (its idle stays the ranges')
        res["phases"][STEP_LABEL]["count"] = res["steps"]["count"]
        res["phases"][STEP_LABEL]["total_us"] = r3(sum(r["dur_us"] for r in res["steps_tb"]["per_step"]))

    # ---- suspects ----
    t.steps_tb = res["steps_tb"]
    res["suspects"], res["category_at_stake_us"] = suspects(t, wall, gpu, idle_rows, pieces, short, res["steps"])
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
    # the other calls that may wait inside an operator: any runtime call but a kernel launch
    wait = defaultdict(list)
    for r in t.rt:
        if not blocking_sync(r) and not r.name.startswith(LAUNCH_PREFIX):
            wait[(r.pid, r.tid)].append(r)
    t.waiting_calls = {}
    for k, v in wait.items():
        v.sort(key=lambda r: r.ts)
        t.waiting_calls[k] = (v, [r.ts for r in v])
    t.blocking = {}
    for k, v in per.items():
        v.sort(key=lambda r: r.ts)
        t.blocking[k] = (v, [r.ts for r in v])
    return t.blocking


def find_sync(t, key, g0, dev=None):
    """The blocking call S of thread key the host was in when the GPU went idle at g0: the
    latest one with S.ts < g0 <= S.te + SYNC_SLACK_US (a thread's runtime calls do not
    overlap, so the latest that started before g0). Failing that, a call that waited inside
    an operator (issue 48): any other runtime call but a kernel launch (a pageable copy, a
    cudaFree, a driver call, whatever its name) that started while the device was busy (S.ts
    inside its busy union), waited at least TELL_US for it (g0 - S.ts), and returned as the
    device went idle: g0 - SYNC_SLACK_US <= S.te <= g0 + RETURN_US."""
    b = blocking_calls(t)
    if key in b:
        lst, starts = b[key]
        i = bisect.bisect_left(starts, g0) - 1
        if i >= 0 and lst[i].te + SYNC_SLACK_US >= g0:
            return lst[i]
    lst, starts = t.waiting_calls.get(key, ([], []))
    i = bisect.bisect_left(starts, g0) - 1
    if i < 0:
        return None
    s = lst[i]
    if not (g0 - s.ts >= TELL_US and g0 - SYNC_SLACK_US <= s.te <= g0 + RETURN_US):
        return None
    busy = t.busy_by_dev.get(dev, [])
    j = bisect.bisect_right([x[0] for x in busy], s.ts) - 1
    if j < 0 or busy[j][1] <= s.ts:
        return None             # the device was idle when S started: S did not wait for it
    return s


def sync_evidence(t, s):
    """What made a blocking call block, in words: the copy's kind, or the ops under the op the
    program called (the data-dependent one: nonzero, masked_select, unique, item...)."""
    kinds = sorted({g.name for g in s.gpu if g.kind == "gpu_memcpy"})
    ops = [p.name for p in t.stack_of(s) if p.kind == "cpu_op"]
    return "%s under %s%s" % (s.name, " > ".join(reversed(ops)) or "(no op)", (" (" + ", ".join(kinds) + ")") if kinds else "")


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


class Sus:
    """One category's charged time: members (culprit name -> own us), the intervals where it
    lies (for the per-step figure), the range of each idle piece (the range tree)."""
    __slots__ = ("members", "iv", "ranges", "at", "culprit")

    def __init__(self):
        self.members = defaultdict(float)
        self.iv = []
        self.ranges = defaultdict(float)
        self.at = None          # at stake when it is not the members' sum (unions, waste estimates)
        self.culprit = None     # a culprit chosen by the rule itself (one op, a range)


def suspects(t, wall, gpu, idle_rows, pieces, short, steps):
    cats = defaultdict(Sus)
    evidence = defaultdict(dict)
    if gpu is not None:
        for (cat, name), ps in pieces.items():
            c = cats[cat]
            for a, b, rg in ps:
                c.members[name] += b - a
                c.iv.append([a, b])
                c.ranges[rg] += b - a
        if "cpu_bound_op" in cats:     # ONE suspect: the op with the most idle, its own only
            c = cats["cpu_bound_op"]
            op = max(c.members.items(), key=lambda kv: (kv[1], kv[0]))[0]
            one = Sus()
            one.members[op] = c.members[op]
            one.iv = [[a, b] for a, b, rg in pieces[("cpu_bound_op", op)]]
            cats["cpu_bound_op"] = one
        if "synchronous_launch" in cats or "host_sync" in cats:
            blocking_calls(t)
            evidence["synchronous_launch"] = {"launches_told": t.launches_told, "launches_blocked": t.launches_blocked}
            if "host_sync" in cats:
                top = max(cats["host_sync"].members.items(), key=lambda kv: kv[1])[0]
                evidence["host_sync"] = {"blocking_calls": sorted(t.sync_evidence.get(top, ()))[:5]}
        gpu_set_suspects(t, wall, gpu, short, steps, cats, evidence)
    else:
        cpu_only_suspects(t, short, cats, evidence)
        if cats.get("cpu_bound_op"):
            op = max(cats["cpu_bound_op"].members.items(), key=lambda kv: kv[1])[0]
            g = one_thread(t, op)
            if g is not None:  # one thread where the host has many: the same time, its cause named
                cats["cpu_threads"] = cats.pop("cpu_bound_op")
                evidence["cpu_threads"] = {"gflops": r3(g)}
    so = step_outliers(t, t.steps_tb if steps else None)
    if so is not None and so["at_stake_us"] > 0:
        for n, us in so["by_culprit"].items():
            cats["step_outlier"].members[n] += us
        evidence["step_outlier"] = {k: v for k, v in so.items() if k != "by_culprit"}
    spans = union([[r["start_us"], r["start_us"] + r["dur_us"]] for r in (t.steps_tb or {}).get("per_step") or []]) if steps else []
    at_stake = {}
    out = []
    fired = set()
    for cat, c in cats.items():
        if not c.members:
            continue
        tot = c.at if c.at is not None else sum(c.members.values())
        at_stake[cat] = r3(tot)
        if wall <= 0:
            continue
        if cat == "step_outlier":
            if tot <= 0:
                continue
        elif tot < FIRE_FRACTION * wall:
            continue
        fired.add(cat)
        out.append(make_suspect(cat, c, tot, wall, steps, spans, evidence.get(cat, {})))
    if gpu is not None:
        out += range_suspects(pieces, fired, wall, steps, spans)
    out.sort(key=lambda s: (s["category"] == "dominant_op", -s["at_stake_us"]))
    return out, dict(sorted(at_stake.items(), key=lambda kv: -(kv[1] or 0)))


def pick_culprit(c):
    """A category's culprit: its chosen one; else its top member when that holds at least
    half of the category; else the range (record_function / NVTX, not a step) that holds at
    least half of it; else the top member (the members carry the rest)."""
    if c.culprit is not None:
        return c.culprit
    tot = sum(c.members.values())
    top, us = max(c.members.items(), key=lambda kv: (kv[1], kv[0]))
    if us >= 0.5 * tot:
        return top
    rg = [(n, v) for n, v in c.ranges.items() if n is not None]
    if rg:
        n, v = max(rg, key=lambda kv: (kv[1], kv[0]))
        if v >= 0.5 * sum(c.ranges.values()):
            return n
    return top


def per_step(cat, tot, iv, steps, spans):
    """at_stake_per_step_us: the part of the time at stake that lies inside the steps, over the
    step count; null without steps, for one-time categories and when none of it is inside a
    step; never above the mean step."""
    if not steps or cat in ONCE or not iv:
        return None
    u = union([list(x) for x in iv])
    lu = length(u)
    inside = length(intersect(u, spans)) if spans else 0.0
    if lu <= 0 or inside <= 0:
        return None
    return min(tot * inside / lu / steps["count"], steps["mean_us"])


def make_suspect(cat, c, tot, wall, steps, spans, ev):
    ev = dict(ev)
    mem = sorted(c.members.items(), key=lambda kv: -kv[1])
    ev["top_contributors"] = [{"name": n, "us": r3(v)} for n, v in mem[:5]]
    ps = per_step(cat, tot, c.iv, steps, spans)
    return {"category": cat, "culprit": pick_culprit(c), "at_stake_us": r3(tot), "at_stake_fraction": r3(tot / wall),
            "at_stake_per_step_us": r3(ps), "members": [{"name": n, "us": r3(v)} for n, v in mem[:20]],
            "members_us": r3(sum(c.members.values())), "evidence": ev}


def range_suspects(pieces, fired, wall, steps, spans):
    """The idle summed up the range tree: a range that holds >= FIRE_FRACTION of the wall in
    idle, over all the idle categories, while the category holding most of its idle did not
    fire on its own: a suspect of that category named by the range (members: the labels
    under it with their own time)."""
    per = defaultdict(lambda: defaultdict(float))
    mem = defaultdict(lambda: defaultdict(float))
    ivs = defaultdict(list)
    for (cat, name), ps in pieces.items():
        if cat not in IDLE_CATS:
            continue
        for a, b, rg in ps:
            if rg is None:
                continue
            per[rg][cat] += b - a
            mem[rg][name] += b - a
            ivs[rg].append([a, b])
    out = []
    for rg, by in per.items():
        tot = sum(by.values())
        cat = max(by.items(), key=lambda kv: kv[1])[0]
        if tot < FIRE_FRACTION * wall or cat in fired:
            continue
        c = Sus()
        c.members = mem[rg]
        c.iv = ivs[rg]
        c.culprit = rg
        out.append(make_suspect(cat, c, tot, wall, steps, spans, {"range": rg, "by_category_us": {k: r3(v) for k, v in by.items()}}))
    return out


def gpu_set_suspects(t, wall, gpu, short, steps, cats, evidence):
    """The categories of GPU time (not of idle): communication exposed, copies and casts,
    pageable copies, copies on the critical path, the waste by kind inside a busy GPU
    (memory_bound_op, unfused_elementwise, tiny_kernels, math_below_roof), compute_bound_op
    and the dominant op."""
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
        if length(exposed) > 0:
            cats["communication"].members[top] += length(exposed)
            cats["communication"].iv += exposed
        evidence["communication"] = {"comm_kernel_us": r3(length(comm)), "exposed_us": r3(length(exposed)),
                                     "overlap_us": r3(length(comm) - length(exposed))}
        rep = repeated_reductions(t)
        if rep is not None:
            evidence["communication"]["repeated_per_step"] = rep
            if length(exposed) > 0:
                cats["communication"].at = min(length(exposed), rep["redundant_us"])
    page_iv = defaultdict(list)
    crit_iv = []
    crit_by = defaultdict(float)
    crit_streams = defaultdict(list)
    kernel_streams = set()
    copy = Sus()
    copy_u = []
    layout = defaultdict(float)
    addr = defaultdict(lambda: [0.0, []])   # memory_bound_op: addressing op -> own GPU time, intervals
    op_self = defaultdict(float)       # compute_bound_op's candidates (kernels only)
    dom_self = defaultdict(float)      # key_averages self CUDA per innermost cpu_op
    for g in t.gpu:
        st = t.stack_of(g.rt) if g.rt is not None else []
        if g.kind == "kernel":
            kernel_streams.add((str(g.device), str(g.stream)))
        if g.kind == "gpu_memcpy" and "Pageable" in g.name:
            page_iv[g.name].append([g.ts, g.te])
        copy_ops = [p for p in st if p.name in COPY_OPS]
        if host_transfer(g) and "Pageable" not in g.name:
            crit_iv.append([g.ts, g.te])
            crit_by[copy_ops[-1].name if copy_ops else g.name] += g.dur
            crit_streams[(str(g.device), str(g.stream))].append(g.dur)
        inner = g.inner
        if inner is not None and is_addressing_op(inner.name):
            addr[inner.name][0] += g.dur
            addr[inner.name][1].append([g.ts, g.te])
        elif g.wkind == "data_movement" and not host_transfer(g):
            # copies_casts: data movement but gathers/scatters and host transfers, named by the
            # outermost data-movement op, else the op it hides under (a layout conversion inside
            # a library call), else the activity's own name
            dm = [p for p in st if p.kind == "cpu_op" and op_kind(p.name) == "data_movement"]
            nm = dm[-1].name if dm else inner.name if inner is not None else (
                g.name if g.kind != "kernel" else kernel_short_name(g.name))
            copy.members[nm] += g.dur
            copy_u.append([g.ts, g.te])
            if g.kind == "kernel" and is_layout_kernel(g.name):
                layout[kernel_short_name(g.name)] += g.dur
        if inner is not None:
            dom_self[inner.name] += g.dur
            if not gemm_like_op(inner.name) and inner.name not in COPY_OPS and not is_comm_range(inner.name) \
                    and not any(p.name in COPY_OPS or gemm_like_op(p.name) or is_comm_range(p.name) for p in st) \
                    and g.kind == "kernel":
                op_self[inner.name] += g.dur
        elif g.kind == "kernel" and not gemm_like_kernel(g.name) and not is_comm_kernel(g.name):
            op_self[g.name] += g.dur
    if copy.members:
        u = union(copy_u)
        copy.iv = u
        copy.at = length(u)
        cats["copies_casts"] = copy
        evidence["copies_casts"] = {"copy_gpu_us": r3(length(u)), "share_of_gpu_busy": r3(length(u) / gpu["busy_us"]),
                                    "layout_kernels_us": {n: r3(v) for n, v in sorted(layout.items(), key=lambda kv: -kv[1])[:5]}}
    if page_iv:
        allp = union([iv for v in page_iv.values() for iv in v])
        top = max(page_iv.items(), key=lambda kv: length(union(kv[1])))[0]
        c = cats["pageable_memcpy"]
        c.members[top] += length(allp)
        c.iv = allp
        evidence["pageable_memcpy"] = {"pageable_copy_us": r3(length(allp)), "copies": sum(len(v) for v in page_iv.values())}
    if crit_iv:
        u = union(crit_iv)
        k = union([[g.ts, g.te] for g in t.gpu if g.kind == "kernel"])
        ex = subtract(u, k)
        top = max(crit_by.items(), key=lambda kv: (kv[1], kv[0]))[0]
        if length(ex) > 0:
            c = cats["copy_on_critical_path"]
            c.members[top] += length(ex)
            c.iv = ex
        evidence["copy_on_critical_path"] = {
            "copy_us": r3(length(u)), "exposed_us": r3(length(ex)),
            "on_compute_stream_us": r3(sum(sum(v) for st_, v in crit_streams.items() if st_ in kernel_streams)),
            "by_name_us": {n: r3(v) for n, v in sorted(crit_by.items(), key=lambda kv: -kv[1])[:5]}}
    named = None
    if addr:
        op, (us, iv) = max(addr.items(), key=lambda kv: (kv[1][0], kv[0]))
        c = cats["memory_bound_op"]
        c.members[op] = us
        c.iv = iv
        named = op
        evidence["memory_bound_op"] = {"op": op, "gpu_us": r3(us), "share_of_gpu_time": r3(us / total_gpu) if total_gpu else None}
    if op_self and total_gpu > 0:
        top, us = max(op_self.items(), key=lambda kv: kv[1])
        evidence["compute_bound_op"] = {"op": top, "gpu_us": r3(us), "share_of_gpu_time": r3(us / total_gpu)}
        if us / total_gpu > COMPUTE_SHARE and not is_short(short, top) and op_kind(top) != "data_movement" \
                and not is_addressing_op(top):
            c = cats["compute_bound_op"]
            c.members[top] += us
            c.iv = [[g.ts, g.te] for g in t.gpu if (g.inner.name if g.inner is not None else g.name) == top]
            named = top if named is None else named
    if dom_self and total_gpu > 0:
        top, us = max(dom_self.items(), key=lambda kv: (kv[1], kv[0]))
        evidence["dominant_op"] = {"op": top, "self_cuda_us": r3(us), "share_of_gpu_time": r3(us / total_gpu)}
        if us / total_gpu > COMPUTE_SHARE and top not in COPY_OPS and not is_comm_range(top) \
                and not is_short(short, top) and top not in cats.get("compute_bound_op", Sus()).members \
                and top not in cats.get("memory_bound_op", Sus()).members:
            c = cats["dominant_op"]
            c.members[top] += us
            c.iv = [[g.ts, g.te] for g in t.gpu if g.inner is not None and g.inner.name == top]
    unfused_elementwise(t, cats, evidence)
    tiny_kernels(t, steps, cats, evidence)
    math_below_roof(t, cats, evidence)
    recomputed_work(t, cats, evidence)
    rebuilt_constant(t, cats, evidence)
    discarded_work(t, cats, evidence)
    unread_rows(t, cats, evidence)
    autotune_repeated(t, cats, evidence)


REP_SLACK = 0.1     # repeats of one step: their activity counts within this share of the first's
REP_STEPS = 0.5     # this share of the steps (at least 2) repeat their reductions, with one k


def is_reduction_kernel(name):
    low = name.lower()
    return is_comm_kernel(name) and any(w in low for w in ("allreduce", "all_reduce", "reducescatter", "reduce_scatter"))


def repeated_reductions(t):
    """Gradient reductions repeated within a step (DDP / FSDP gradient accumulation without
    no_sync()). A step's activities: the GPU activities launched in it (step_of), by start;
    collectives other than reductions (all-reduce, reduce-scatter) left out. The step repeats
    its reductions k > 1 times when, for the largest such k dividing their count n, (a) the
    reduction sequence is periodic with period n/k (same kernel name and grid blocks in the
    same order), (b) each repeat (the activities after the previous repeat's last reduction up
    to its own last) holds >= 2 other activities, their count within REP_SLACK of the first
    repeat's (a micro-batch's forward + backward each), and (c) the activities after the last
    repeat include a name no repeat ran (the optimizer, once). It fires when REP_STEPS of the
    steps (>= 2) repeat with one k (the first such step's): redundant = (k-1)/k of their
    reductions' time; communication's at stake is min(exposed, redundant). Only where some
    name of the trace (op, range, runtime call, kernel) holds "backward" (any case): without a
    backward there are no gradients (tensor-parallel inference repeats its per-layer
    all-reduces every step)."""
    steps = sorted((h for h in t.host if is_step(h.name)), key=lambda h: h.ts)
    if len(steps) < 2:
        return None
    if not any("backward" in (x.name or "").lower() for x in list(t.host) + list(t.gpu) + list(t.rt)):
        return None
    per = defaultdict(list)
    for g in sorted(t.gpu, key=lambda g: g.ts):
        s = step_of(g)
        if s is None:
            continue
        red = g.kind == "kernel" and is_reduction_kernel(g.name)
        if g.kind == "kernel" and is_comm_kernel(g.name) and not red:
            continue
        per[s].append((g, red))
    k0, hits, red_us, calls = None, 0, 0.0, 0
    for st in steps:
        v = per.get(id(st), [])
        at = [i for i, (_g, r) in enumerate(v) if r]
        n = len(at)
        found = None
        for k in range(n, 1, -1):
            if n % k:
                continue
            p = n // k
            keys = [(v[i][0].name, v[i][0].blocks) for i in at]
            if any(keys[j] != keys[j - p] for j in range(p, n)):
                continue
            counts = []
            for r in range(k):
                lo = at[r * p - 1] + 1 if r else 0
                hi = at[r * p + p - 1] + 1
                counts.append(sum(1 for _g, rr in v[lo:hi] if not rr))
            if any(c < 2 or abs(c - counts[0]) > REP_SLACK * counts[0] for c in counts):
                continue
            names = {g.name for g, _r in v[:at[-1] + 1]}
            if not any(g.name not in names for g, _r in v[at[-1] + 1:]):
                continue
            found = k
            break
        if found and (k0 is None or found == k0):
            k0 = found
            hits += 1
            red_us += sum(v[i][0].dur for i in at)
            calls += n
    if k0 is None or hits < 2 or hits < REP_STEPS * len(steps):
        return None
    return {"repeats": k0, "steps": hits, "reduction_us": r3(red_us), "redundant_us": r3(red_us * (k0 - 1) / k0),
            "per_step": r3(calls / hits)}


def step_of(g):
    """The ProfilerStep range a GPU activity was launched in (its launch's stack), or None."""
    if g.rt is None:
        return None
    return next((id(p) for p in t_stack(g.rt) if is_step(p.name)), None)


def t_stack(x):
    out = []
    p = x.parent
    while p is not None:
        out.append(p)
        p = p.parent
    return out


def range_of(g):
    """The innermost record_function / NVTX range (not a step) around a GPU activity's launch."""
    if g.rt is None:
        return None
    return next((p for p in t_stack(g.rt) if p.kind == "user_annotation" and not is_step(p.name)), None)


def unfused_elementwise(t, cats, evidence):
    """Chains of >= 2 consecutive elementwise kernels on one stream (no other activity between
    them on that stream), per step, with the GPU busy for >= TINY_BUSY of the chain's window
    (waste inside a busy GPU: where the GPU idles between them, the idle is launch_bound's
    and a chain of per-parameter updates is tiny_kernels' or idle's): at stake = each chain's time minus one fused pass over its
    inputs and outputs, taken as the chain's longest kernel (spec48's reading without shapes:
    one read and one write of the largest tensor; the server's figure with shapes must lie
    within the corpus' tolerance of it). Members: the ops (else kernels) in chains, with their
    time in chains; the culprit: the top op, or the range holding most of the chains."""
    per = defaultdict(list)
    for g in t.gpu:
        per[(g.device, g.stream)].append(g)
    busy = Busy([[g.ts, g.te] for g in t.gpu])
    c = Sus()
    waste = 0.0
    n_chains = n_kernels = 0
    for acts in per.values():
        acts.sort(key=lambda g: (g.ts, g.te))
        cur = []
        cur_step = None

        def flush():
            nonlocal waste, n_chains, n_kernels
            if len(cur) >= 2 and busy_fraction(busy, cur[0].ts, cur[-1].te) >= TINY_BUSY:
                waste += sum(x.dur for x in cur) - max(x.dur for x in cur)
                n_chains += 1
                n_kernels += len(cur)
                for x in cur:
                    c.members[x.inner.name if x.inner is not None else kernel_short_name(x.name)] += x.dur
                    c.iv.append([x.ts, x.te])
                    rg = range_of(x)
                    c.ranges[rg.name if rg is not None else None] += x.dur
        for g in acts:
            stp = step_of(g)
            if g.kind == "kernel" and g.wkind == "elementwise":
                if cur and stp != cur_step:
                    flush()
                    cur = []
                cur.append(g)
                cur_step = stp
            else:
                flush()
                cur = []
        flush()
    total_gpu = sum(g.dur for g in t.gpu)
    if c.members and waste > 0 and waste >= UNFUSED_MIN_GAIN * total_gpu:
        c.at = waste
        cats["unfused_elementwise"] = c
        evidence["unfused_elementwise"] = {"chains": n_chains, "kernels": n_kernels, "chain_us": r3(sum(c.members.values())),
                                           "waste_us": r3(waste)}


class Busy:
    """A sorted, merged interval list with a bisect index (busy time inside a window)."""

    def __init__(self, iv):
        self.iv = union(iv)
        self.starts = [x[0] for x in self.iv]

    def within(self, a, b):
        i = max(0, bisect.bisect_right(self.starts, a) - 1)
        tot = 0.0
        while i < len(self.iv) and self.iv[i][0] < b:
            lo, hi = max(self.iv[i][0], a), min(self.iv[i][1], b)
            if hi > lo:
                tot += hi - lo
            i += 1
        return tot


def busy_fraction(busy, a, b):
    """The part of [a, b] the GPU (any activity, a Busy) is busy."""
    return busy.within(a, b) / (b - a) if b > a else 1.0


def tiny_kernels(t, steps, cats, evidence):
    """A range (the innermost record_function / NVTX range around the launch, not a step; else
    the innermost op; else the kernel's name) whose tiny kernels (each < TINY_US, or fewer
    blocks than the device has SMs) are many (>= TINY_MIN_PER_STEP a step in a trace with
    steps, else >= TINY_MIN_KERNELS in the trace: a model op called in every layer of a long
    run is not "many") while the GPU is busy around them (busy for >= TINY_BUSY of the
    windows [first, last] of each instance's tiny kernels; if it idles between them, the idle
    is launch_bound's). At stake = the fixed cost one pass would not spend: min(dur,
    TINY_FIXED_US) a kernel (the excess over bytes / bandwidth is left to the tolerance).
    Kernels a CUDA graph replays (their launch is a cudaGraphLaunch) are left out: the graph
    already did what the fix would (a graph-captured, compiled decode at its roof is healthy)."""
    groups = defaultdict(list)
    for g in t.gpu:
        if g.kind != "kernel" or g.wkind == "communication":
            continue
        if g.rt is not None and g.rt.name.startswith(GRAPH_LAUNCH):
            continue            # replayed by a CUDA graph: the launches are gone already
        sms = t.sms.get(g.device) or t.sms.get(0) if t.sms else None
        tiny = g.dur < TINY_US or (g.blocks is not None and sms and g.blocks < sms)
        if not tiny:
            continue
        rg = range_of(g)
        if rg is not None:
            groups[(rg.name, "range")].append((g, id(rg)))
        elif g.inner is not None:
            groups[(g.inner.name, "op")].append((g, step_of(g)))
        else:
            groups[(kernel_short_name(g.name), "kernel")].append((g, None))
    busy = Busy([[g.ts, g.te] for g in t.gpu])
    c = Sus()
    ev = {}
    for (name, how), lst in groups.items():
        n = len(lst)
        if (n / steps["count"] < TINY_MIN_PER_STEP) if steps else (n < TINY_MIN_KERNELS):
            continue
        win = defaultdict(lambda: [math.inf, -math.inf])
        for g, inst in lst:
            w = win[inst]
            w[0], w[1] = min(w[0], g.ts), max(w[1], g.te)
        wu = union([list(w) for w in win.values()])
        frac = sum(busy.within(a, b) for a, b in wu) / length(wu) if length(wu) > 0 else 0.0
        if frac < TINY_BUSY:
            continue
        at = sum(min(g.dur, TINY_FIXED_US) for g, _ in lst)
        c.members[name] += sum(g.dur for g, _ in lst)
        c.iv += [[g.ts, g.te] for g, _ in lst]
        c.at = (c.at or 0.0) + at
        ops = defaultdict(float)
        for g, _ in lst:
            ops[g.inner.name if g.inner is not None else kernel_short_name(g.name)] += g.dur
        ev[name] = {"kernels": n, "busy_fraction": r3(frac), "fixed_cost_us": r3(at),
                    "ops": {k: r3(v) for k, v in sorted(ops.items(), key=lambda kv: -kv[1])[:6]}}
    if c.members:
        cats["tiny_kernels"] = c
        evidence["tiny_kernels"] = {"groups": ev}


def math_below_roof(t, cats, evidence):
    """Math rows (op, Input Dims, Input type) whose FLOPs and bytes the shapes give (mm,
    addmm, bmm, baddbmm; flash attention with is_causal known), on a device of DEVICE_ROOFS:
    best_roof_us = per call max(FLOPs / the best peak for the row's dtype on that device
    (fp32: TF32 tensor cores where the device has them), bytes / bandwidth); rows under
    MATH_OK_FRACTION of it (and not over 100%: impossible, not judged) put their time above
    the roof at stake. Culprit: the op with the most; members: those rows' ops, GPU time."""
    roofs = device_roofs(t)
    if roofs is None:
        return
    peaks, bw = roofs
    rows = defaultdict(lambda: [0, 0.0, 0.0, [], set(), set()])   # key -> calls, gpu_us, best_us, iv, kernels, blocks
    per_op = defaultdict(list)
    for g in t.gpu:
        if g.kind == "kernel" and g.inner is not None:
            per_op[id(g.inner)].append(g)
    ops = {id(h): h for h in t.host if h.kind == "cpu_op"}
    for oid, ks in per_op.items():
        h = ops.get(oid)
        if h is None:
            continue
        fb = op_flops_bytes(h)
        if fb is None:
            continue
        flops, nbytes, dt = fb
        peak = best_peak(peaks, dt)
        if peak is None:
            continue
        best = max(flops / (peak * 1e6), nbytes / (bw * 1e3))
        r = rows[(h.name, json.dumps(h.dims), dt)]
        r[0] += 1
        r[1] += sum(g.dur for g in ks)
        r[2] += best
        r[3] += [[g.ts, g.te] for g in ks]
        r[4].update(kernel_short_name(g.name)[:80] for g in ks)
    c = Sus()
    above = defaultdict(float)
    ev = []
    for (name, dims, dt), (calls, us, best, iv, ks, _) in rows.items():
        if us <= 0:
            continue
        frac = best / us
        if frac > 1.0 or frac >= MATH_OK_FRACTION:
            continue
        above[name] += us - best
        c.members[name] += us
        c.iv += iv
        ev.append({"op": name, "dims": dims, "dtype": dt, "calls": calls, "gpu_us": r3(us), "best_roof_us": r3(best),
                   "best_peak_fraction": r3(frac), "kernels": sorted(ks)[:3]})
    if above:
        c.at = sum(above.values())
        c.culprit = max(above.items(), key=lambda kv: (kv[1], kv[0]))[0]
        cats["math_below_roof"] = c
        evidence["math_below_roof"] = {"rows": sorted(ev, key=lambda r: -(r["gpu_us"] - r["best_roof_us"]))[:5],
                                       "device_peaks_tflops": peaks, "bandwidth_gbps": bw}


RECOMP_OPS = ("aten::mm", "aten::addmm", "aten::linear", "aten::matmul", "aten::bmm")
RECOMP_MIN_LENGTHS = 8      # distinct token counts: 8 steps of growth
RECOMP_MIN_PREFIX = 2       # the smallest token count holds at least 2 strides (a prompt)
RECOMP_STEADY_SHARE = 0.8   # one call count for at least 80% of the token counts (each one step of the same layers)


ATTN_BSHD = ("aten::_flash_attention_forward", "aten::_efficient_attention_forward")
ATTN_BHSD = ("aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention",
             "aten::_scaled_dot_product_cudnn_attention", "aten::scaled_dot_product_attention")


def token_and_weight(name, dims):
    """(M, key) of a GEMM-like call whose second operand is a weight: M the product of the
    input's leading dims, the key (K, weight shape); of an attention call whose queries are
    all its keys (q, k of one length S: [B, S, H, D] for flash / efficient forward, [B, H, S,
    D] for the SDPA ops): M = B * S, the key (D, (B, H)); None otherwise."""
    if name in ATTN_BSHD or name in ATTN_BHSD:
        try:
            q, kk = dims[0], dims[1]
            if len(q) != 4 or len(kk) != 4:
                return None
            si, hi = (1, 2) if name in ATTN_BSHD else (2, 1)
            if q[si] != kk[si] or q[0] != kk[0]:
                return None
            return q[0] * q[si], (q[3], (q[0], q[hi]))
        except (TypeError, IndexError):
            return None
    try:
        x, w = (dims[1], dims[2]) if name == "aten::addmm" else (dims[0], dims[1])
        if len(x) < 2 or len(w) not in (2, 3):
            return None
        if name == "aten::bmm":
            if len(w) != 3 or len(x) != 3 or w[0] != x[0]:
                return None
        elif len(w) != 2:
            return None
        k = x[-1]
        if (w[1] if name == "aten::linear" else w[-2]) != k:
            return None
        return prod(x[:-1]), (k, tuple(w))
    except (TypeError, IndexError):
        return None


def recomputed_work(t, cats, evidence):
    """A prefix recomputed every step (generation without a KV cache): a GEMM-like op's calls
    grouped by (op, K, weight shape), their token count M (the input's leading dims): the
    group fires when it ran at >= RECOMP_MIN_LENGTHS distinct M that, sorted, step by one
    stride s (no hole), s divides the smallest M and the smallest M >= RECOMP_MIN_PREFIX * s
    (attention whose queries are all its keys likewise, by (op, D, B, H), M = B * S),
    with one call count at RECOMP_STEADY_SHARE of the M at least; no cpu_op with GPU work
    names a cache ("cache" in its name, any case: a KV cache is kept, M moving is the batch);
    and no host event is an autograd node ("Backward" in its name, autograd::engine...): a
    training loop's M moves with its batches' padded lengths.
    At stake: sum over its calls of their kernel time x (1 - s / M) (the last s rows are the
    new ones); members: the fired groups' ops with their kernel time; culprit: the op with the
    most recomputed time over its groups."""
    calls = defaultdict(float)
    ops = {}
    for g in t.gpu:
        if g.kind == "kernel" and g.inner is not None:
            calls[id(g.inner)] += g.dur
            ops[id(g.inner)] = g.inner
    if any("cache" in h.name.lower() for h in ops.values()):
        return
    if any("Backward" in h.name or h.name.startswith("autograd::engine") for h in t.host):
        return     # a training loop: M moves with each batch's padded length, no prefix is rerun
    groups = defaultdict(lambda: defaultdict(lambda: [0, 0.0]))    # (op, key) -> M -> [calls, us]
    for oid, us in calls.items():
        h = ops[oid]
        if (h.name not in RECOMP_OPS and h.name not in ATTN_BSHD + ATTN_BHSD) or not h.dims:
            continue
        mk = token_and_weight(h.name, h.dims)
        if mk is None or mk[0] <= 0:
            continue
        r = groups[(h.name, mk[1])][mk[0]]
        r[0] += 1
        r[1] += us
    c = Sus()
    rows = []
    for (name, key), by_m in groups.items():
        ms = sorted(by_m)
        if len(ms) < RECOMP_MIN_LENGTHS:
            continue
        n = [by_m[m][0] for m in ms]
        if max(n.count(x) for x in n) < RECOMP_STEADY_SHARE * len(n):
            continue
        s = ms[1] - ms[0]
        if s <= 0 or any(b - a != s for a, b in zip(ms, ms[1:])) or ms[0] % s or ms[0] < RECOMP_MIN_PREFIX * s:
            continue
        us = sum(by_m[m][1] for m in ms)
        redo = sum(by_m[m][1] * (1.0 - s / m) for m in ms)
        c.members[name] += us
        c.at = (c.at or 0.0) + redo
        rows.append({"op": name, "weight_shape": list(key[1]), "m_min": ms[0], "m_max": ms[-1], "m_stride": s,
                     "lengths": len(ms), "gpu_us": r3(us), "recomputed_us": r3(redo)})
    if rows:
        rows.sort(key=lambda r: -r["recomputed_us"])
        by_op = defaultdict(float)     # the culprit: the op with the most recomputed time over its groups
        for r in rows:
            by_op[r["op"]] += r["recomputed_us"]
        c.culprit = max(by_op.items(), key=lambda kv: (kv[1], kv[0]))[0]
        c.iv = [[g.ts, g.te] for g in t.gpu if g.kind == "kernel" and g.inner is not None and g.inner.name in c.members]
        cats["recomputed_work"] = c
        evidence["recomputed_work"] = {"mechanism": "prefix_recomputed", "groups": rows[:5]}


CONST_FACTORY = {"aten::arange", "aten::ones", "aten::zeros", "aten::full", "aten::linspace", "aten::logspace", "aten::eye",
                 "aten::scalar_tensor", "aten::tensor", "aten::empty", "aten::empty_strided"}
CONST_FILL = {"aten::fill_", "aten::zero_"}
CONST_BUILD = {"aten::mul", "aten::mul_", "aten::outer", "aten::einsum", "aten::cat", "aten::stack", "aten::cos", "aten::sin",
               "aten::exp", "aten::pow", "aten::div", "aten::div_", "aten::reciprocal", "aten::neg", "aten::add", "aten::add_",
               "aten::sub", "aten::sub_", "aten::triu", "aten::tril", "aten::masked_fill", "aten::masked_fill_", "aten::to",
               "aten::_to_copy", "aten::copy_", "aten::type_as", "aten::unsqueeze", "aten::expand", "aten::view", "aten::reshape",
               "aten::repeat", "aten::contiguous", "aten::clone", "aten::slice", "aten::select", "aten::where", "aten::lt",
               "aten::gt", "aten::le", "aten::ge", "aten::eq", "aten::ne", "aten::logical_not", "aten::bitwise_not",
               "aten::transpose", "aten::flatten", "aten::squeeze", "aten::detach", "aten::lift_fresh", "aten::full_like",
               "aten::zeros_like", "aten::ones_like"}
CONST_MIN_REPEATS = 4    # runs of one chain in one step: the layers
CONST_MIN_STEPS = 2      # steps where it ran that often
CONST_MAX_OPS = 16       # a longer chain is no small constant


def tensor_dims(dims):
    """The tensors of Input Dims, each a list of ints (a tensor list gives each of its own)."""
    out = []
    for x in dims or []:
        if isinstance(x, list) and x and all(isinstance(v, list) for v in x):
            out.extend(tensor_dims(x))
        elif isinstance(x, list) and x:
            out.append(x)
    return out


def op_gpu_us(t):
    """Every cpu_op's GPU time (by id): the durations of the GPU activities launched under it,
    at any depth (what the walk's cuda_total is)."""
    gpu_us = defaultdict(float)
    for g in t.gpu:
        p = g.inner
        while p is not None:
            if p.kind == "cpu_op":
                gpu_us[id(p)] += g.dur
            p = p.parent
    return gpu_us


def rebuilt_constant(t, cats, evidence):
    """A per-step constant rebuilt every layer (rotary cos/sin tables, a causal mask,
    position ids made again in each layer's forward). There is no dataflow in a trace, so a
    constant is read from how it is made:
      - a chain is a run of consecutive cpu_ops, children of one ProfilerStep / record_function
        range (or of none), that starts at a factory: a tensor made from no tensor (arange,
        ones, zeros, full, linspace, eye, scalar_tensor, tensor; empty only when fill_ /
        zero_ comes next), whose Input Dims hold no dimension at all; it goes on with the
        ops that build tables and masks (factories, fill_, elementwise math, trig, cat, casts,
        views: CONST_BUILD) whose every tensor has at most two dims other than 1 (a table
        [P, D] or a mask [S, S], not activations [B, S, H]); any other op ends it. Without
        Input Dims nothing is a factory;
      - a chain's key is its (name, Input Dims) sequence (at most CONST_MAX_OPS ops); per step
        (the ProfilerStep around the chain's first op), a key that ran CONST_MIN_REPEATS times
        or more is rebuilt there; it fires when rebuilt in CONST_MIN_STEPS steps or more.
    An op's GPU time: every GPU activity launched under it (its own launches and its
    children's). At stake: the GPU time of the runs after the first in each step where the key
    was rebuilt; members: each op of a fired chain with its GPU time over every run; culprit:
    the first op (the factory) of the chain with the most at stake. Only when it beats the
    prefix mechanism's at stake does it take the recomputed_work entry."""
    gpu_us = op_gpu_us(t)
    keys = {}             # key -> {"op_us": per op, "steps": {step: [runs, GPU time of the runs after the first]}}

    def close(ch, step):
        if not ch or step is None or len(ch) > CONST_MAX_OPS or ch[-1].name in ("aten::empty", "aten::empty_strided"):
            return
        if any(a.name in ("aten::empty", "aten::empty_strided") and b.name not in CONST_FILL for a, b in zip(ch, ch[1:])):
            return
        us = sum(gpu_us[id(x)] for x in ch)
        if us <= 0:
            return
        key = tuple((x.name, json.dumps(x.dims)) for x in ch)
        e = keys.setdefault(key, {"op_us": [0.0] * len(ch), "steps": {}})
        for i, x in enumerate(ch):
            e["op_us"][i] += gpu_us[id(x)]
        st = e["steps"].setdefault(step, [0, 0.0])
        if st[0]:
            st[1] += us
        st[0] += 1

    def factory(x):
        return x.name in CONST_FACTORY and x.dims is not None and not tensor_dims(x.dims)

    def builds(x):
        return (x.name in CONST_BUILD or x.name in CONST_FILL or factory(x)) and x.dims is not None and \
            all(sum(1 for v in d if v != 1) <= 2 for d in tensor_dims(x.dims))

    def step_around(x):
        p = x.parent
        while p is not None:
            if p.kind == "user_annotation" and is_step(p.name):
                return id(p)
            p = p.parent
        return None

    groups = [r.children for r in t.host if r.kind == "user_annotation"]     # siblings under one range
    top = defaultdict(list)                                                    # and under none, per thread
    for h in t.host + t.rt:
        if h.parent is None and h.kind != "python_function":
            top[(h.pid, h.tid)].append(h)
    groups.extend(top.values())
    for kids in groups:
        ch, step = [], None
        for x in sorted(kids, key=lambda x: x.ts):
            if x.kind != "cpu_op":
                close(ch, step)
                ch = []
            elif ch and builds(x):
                ch.append(x)
            elif factory(x):
                close(ch, step)
                ch, step = [x], step_around(x)
            else:
                close(ch, step)
                ch = []
        close(ch, step)
    fired = []
    for key, e in keys.items():
        hit = [v for v in e["steps"].values() if v[0] >= CONST_MIN_REPEATS]
        if len(hit) >= CONST_MIN_STEPS:
            fired.append((sum(v[1] for v in hit), key, e))
    if not fired:
        return
    fired.sort(key=lambda f: -f[0])
    at = sum(f[0] for f in fired)
    prev = cats.get("recomputed_work")
    if prev is not None and (prev.at or 0.0) >= at:
        return
    c = Sus()
    for _, key, e in fired:
        for (name, _), us in zip(key, e["op_us"]):
            c.members[name] += us
    c.at = at
    c.culprit = fired[0][1][0][0]
    names = {n for _, key, _ in fired for n, _ in key}
    c.iv = [[g.ts, g.te] for g in t.gpu if g.inner is not None and any(p.name in names for p in [g.inner] + t_stack(g.inner))]
    cats["recomputed_work"] = c
    evidence["recomputed_work"] = {"mechanism": "constant_rebuilt",
                                   "chains": [{"ops": [n for n, _ in key], "rebuilt_us": r3(a)} for a, key, _ in fired[:5]]}


DISCARD_RANDOM = ("aten::dropout", "aten::native_dropout", "aten::_fused_dropout", "aten::fused_dropout", "aten::feature_dropout",
                  "aten::alpha_dropout", "aten::feature_alpha_dropout", "aten::bernoulli", "aten::bernoulli_",
                  "aten::rrelu_with_noise")
DISCARD_CONSUMERS = ("optimizer", "adam", "adamw", "sgd", "lamb", "lion", "adagrad", "rmsprop", "adafactor", "zero_grad",
                     "allreduce", "all_reduce", "reduce_scatter", "reducescatter")


def discarded_work(t, cats, evidence):
    """recomputed_work's third family: GPU work whose result nobody uses, read from the
    autograd machinery's names (a trace has no dataflow). An autograd node is a cpu_op named
    "autograd::engine::evaluate_function: ..."; a random training-only op one of
    DISCARD_RANDOM; an op's GPU time every GPU activity launched under it. Needs two steps.
      - gradients unused: the outermost nodes' GPU time, when no name in the trace (ops,
        ranges, kernels) holds a word of DISCARD_CONSUMERS (optimizer, zero_grad, a gradient
        collective; a word: not followed by a lower-case letter, "lambda" is no lamb);
      - training mode in inference: the outermost random ops' GPU time, when no node has GPU
        time (no backward at all); their members then leave unfused_elementwise's chains (work
        to drop is not work to fuse), whose at stake keeps the kept members' share of the chain
        time and must pass its gate again;
      - forward recomputed in backward: per node with nodes nested in it (its nearest node
        ancestor), its GPU time less theirs (reentrant checkpointing).
    Each is a candidate recomputed_work entry: the one with the most at stake (with the
    prefix and constant mechanisms') is the suspect; members: the names with their GPU time."""
    if sum(1 for h in t.host if is_step(h.name)) < 2:
        return
    gpu_us = op_gpu_us(t)

    def is_node(x):
        return x.kind == "cpu_op" and x.name.startswith("autograd::engine::evaluate_function")

    def up(x, test):
        p = x.parent
        while p is not None:
            if test(p):
                return p
            p = p.parent
        return None

    def word(n):
        n = n or ""
        low = n.lower()
        for w in DISCARD_CONSUMERS:
            i = low.find(w)
            while i >= 0:
                j = i + len(w)
                if j >= len(n) or not n[j].islower():
                    return True
                i = low.find(w, i + 1)
        return False

    nodes, rnd, redo = defaultdict(float), defaultdict(float), defaultdict(float)
    nested = defaultdict(float)
    for h in t.host:
        if is_node(h):
            a = up(h, is_node)
            if a is not None:
                nested[id(a)] += gpu_us[id(h)]
            elif gpu_us[id(h)] > 0:
                nodes[h.name] += gpu_us[id(h)]
        elif h.kind == "cpu_op" and h.name in DISCARD_RANDOM and gpu_us[id(h)] > 0 and \
                up(h, lambda p: p.kind == "cpu_op" and p.name in DISCARD_RANDOM) is None:
            rnd[h.name] += gpu_us[id(h)]
    for h in t.host:
        if is_node(h) and nested[id(h)] > 0 and gpu_us[id(h)] > nested[id(h)]:
            redo[h.name] += gpu_us[id(h)] - nested[id(h)]
    if rnd and not nodes and "unfused_elementwise" in cats:
        # work thrown away is not advised to run faster: the random ops' members leave the
        # unfused chains (to drop, not to fuse), the at stake keeps the kept members' share
        u = cats["unfused_elementwise"]
        chain = sum(u.members.values())
        cut = sum(v for n, v in u.members.items() if n in DISCARD_RANDOM)
        if cut > 0 and chain > 0:
            for n in DISCARD_RANDOM:
                u.members.pop(n, None)
            u.at *= (chain - cut) / chain
            if not u.members or u.at <= 0 or u.at < UNFUSED_MIN_GAIN * sum(g.dur for g in t.gpu):
                del cats["unfused_elementwise"]
    cands = []
    if nodes and not any(word(x.name) for x in list(t.host) + list(t.gpu) + list(t.rt)):
        cands.append(("gradients_unused", nodes))
    if rnd and not nodes:
        cands.append(("training_mode_in_inference", rnd))
    if redo:
        cands.append(("forward_recomputed_in_backward", redo))
    if not cands:
        return
    mech, m = max(cands, key=lambda c: sum(c[1].values()))
    at = sum(m.values())
    prev = cats.get("recomputed_work")
    if prev is not None and (prev.at or 0.0) >= at:
        return
    c = Sus()
    for n, us in m.items():
        c.members[n] += us
    c.at = at
    c.culprit = max(m.items(), key=lambda kv: (kv[1], kv[0]))[0]
    c.iv = [[g.ts, g.te] for g in t.gpu if g.inner is not None and any(p.name in m for p in [g.inner] + t_stack(g.inner))]
    cats["recomputed_work"] = c
    evidence["recomputed_work"] = {"mechanism": mech, "members": {n: r3(v) for n, v in m.items()}}


UNREAD_GEMMS = ("aten::linear", "aten::matmul", "aten::mm", "aten::addmm")
UNREAD_CUTS = ("select", "slice", "narrow", "index", "gather", "take", "as_strided", "split", "unbind", "chunk")
UNREAD_MIN_ROWS = 4


def unread_rows(t, cats, evidence):
    """recomputed_work's fourth family: rows computed that nobody reads. With Input Dims, a
    GEMM-like op's output (UNREAD_GEMMS; linear: x [.., K] by w [N, K], the others w [K, N];
    addmm's input and weight after its bias) is x's leading dims then N. Follow the cpu_ops
    after it on its thread, in the order they end (a child before its parent; an op inside
    the GEMM is the GEMM's): the outermost GEMM op of a nest stands for it; an op whose first
    input is the whole output is a cut when its name (after the namespace) holds a word of
    UNREAD_CUTS, else a pass when op_kind says data_movement (a cast, a copy: its GPU time
    counts, an op around the previous pass replacing it) and before any cut, else a reader
    (the candidate is dropped); the first op with GPU time that does not read the whole output
    (and is not inside the last pass) confirms it when a cut came first and its first input is
    the output with one dim i (not the last, size >= UNREAD_MIN_ROWS) dropped (R = that size)
    or divided (R = out[i] / its size >= UNREAD_MIN_ROWS), else drops it. Needs two steps and
    two confirmed calls: at stake (1 - 1/R) of the GEMM's and its passes' GPU time, summed;
    members: the GEMM names with that GPU time; the culprit the GEMM name with the most at
    stake. The recomputed_work entry when its at stake is the larger."""
    if sum(1 for h in t.host if is_step(h.name)) < 2:
        return
    gpu_us = op_gpu_us(t)
    def first_dims(h):
        d = h.dims if isinstance(h.dims, list) else None
        if not d or not isinstance(d[0], list) or not all(isinstance(x, int) for x in d[0]):
            return None
        return d[0]

    def out_of(h):
        d = h.dims if isinstance(h.dims, list) else None
        if not d:
            return None
        ai = 1 if h.name == "aten::addmm" else 0
        if len(d) < ai + 2:
            return None
        x, w = d[ai], d[ai + 1]
        if not (isinstance(x, list) and isinstance(w, list) and len(x) >= 2 and len(w) == 2):
            return None
        k, n = (w[1], w[0]) if h.name == "aten::linear" else (w[0], w[1])
        if k != x[-1] or n <= 0:
            return None
        return x[:-1] + [n]

    def rows_cut(out, d):
        for i in range(len(out) - 1):
            if out[i] < UNREAD_MIN_ROWS:
                continue
            if len(d) == len(out) - 1 and d == out[:i] + out[i + 1:]:
                r = out[i]
            elif len(d) == len(out) and d[i] > 0 and out[i] % d[i] == 0 and d[:i] == out[:i] and d[i + 1:] == out[i + 1:]:
                r = out[i] // d[i]
            else:
                continue
            if r >= UNREAD_MIN_ROWS:
                return r
        return 0

    by_thread = defaultdict(list)
    for h in t.host:
        if h.kind == "cpu_op":
            by_thread[(h.pid, h.tid)].append(h)
    gemm_us, at_by = defaultdict(float), defaultdict(float)
    calls = 0
    for hs in by_thread.values():
        hs.sort(key=lambda h: (h.te, -h.ts))
        c = None
        for h in hs:
            us = gpu_us[id(h)]
            o = out_of(h) if h.name in UNREAD_GEMMS and us > 0 else None
            if o is not None:
                c = {"name": h.name, "ts": h.ts, "te": h.te, "us": us, "out": o, "cut": False, "pass": 0.0, "last": None}
                continue
            if c is None or h.ts < c["te"]:
                continue
            d = first_dims(h)
            base = h.name.rsplit(":", 1)[-1]
            if d == c["out"]:
                if any(w in base for w in UNREAD_CUTS):
                    c["cut"] = True
                elif c["cut"] or op_kind(h.name) != "data_movement":
                    c = None
                elif c["last"] is not None and h.ts <= c["last"][0] and h.te >= c["last"][1]:
                    c["pass"] += us - c["last"][2]
                    c["last"] = (h.ts, h.te, us)
                elif us > 0:
                    c["pass"] += us
                    c["last"] = (h.ts, h.te, us)
                continue
            if us <= 0 or (c["last"] is not None and h.ts >= c["last"][0] and h.te <= c["last"][1]):
                continue
            r = rows_cut(c["out"], d) if c["cut"] and d else 0
            if r:
                at = (c["us"] + c["pass"]) * (1 - 1 / r)
                gemm_us[c["name"]] += c["us"] + c["pass"]
                at_by[c["name"]] += at
                calls += 1
            c = None
    at = sum(at_by.values())
    if calls < 2 or at <= 0:
        return
    keep_recomputed(cats, evidence, at, gemm_us, at_by,
                    {"mechanism": "rows_unread", "calls": calls, "members": {n: r3(v) for n, v in gemm_us.items()}})


def keep_recomputed(cats, evidence, at, members, at_by, ev):
    """recomputed_work's one entry: this candidate (members: name -> GPU time; at_by: name ->
    at stake, the culprit its largest) unless the entry already there holds at least as much."""
    prev = cats.get("recomputed_work")
    if prev is not None and (prev.at or 0.0) >= at:
        return
    c = Sus()
    for n, us in members.items():
        c.members[n] += us
    c.at = at
    c.culprit = max(at_by.items(), key=lambda kv: (kv[1], kv[0]))[0]
    c.iv = []
    cats["recomputed_work"] = c
    evidence["recomputed_work"] = ev


TUNE_MIN_LAUNCHES = 5


def autotune_repeated(t, cats, evidence):
    """recomputed_work's fifth family: autotuning run again step after step. A runtime call
    belongs to the innermost cpu_op on its stack; a tuning call is a GEMM-like cpu_op
    (gemm_like_op) with TUNE_MIN_LAUNCHES or more launch calls (is_launch_call) and a sync call (a SYNC_CALLS name,
    or one with a _suffix) of its own, with GPU time, inside a step (a ProfilerStep ancestor).
    Taken in the order they end, a tuning call on an (op name, Input Dims) already tuned is
    skipped (the library cached it); the first step with a tuning call is benchmark mode's
    price and not counted; every later one adds (L - 1) / L of its GPU time (L its launches).
    Fires with two such calls: members the op names with their calls' GPU time, the culprit
    the name with the most at stake. The recomputed_work entry when its at stake is the
    larger."""
    gpu_us = op_gpu_us(t)
    launches, syncs = defaultdict(int), set()
    for r in t.rt:
        op = next((p for p in t_stack(r) if p.kind == "cpu_op"), None)
        if op is None:
            continue
        if is_launch_call(r.name):
            launches[id(op)] += 1
        if r.name in SYNC_CALLS or any(r.name.startswith(c + "_") for c in SYNC_CALLS):
            syncs.add(id(op))
    seen = set()
    first = None
    later_steps = set()
    calls = 0
    at_by, us_by = defaultdict(float), defaultdict(float)
    for h in sorted((h for h in t.host if h.kind == "cpu_op"), key=lambda h: (h.te, -h.ts)):
        n = launches.get(id(h), 0)
        if n < TUNE_MIN_LAUNCHES or id(h) not in syncs or gpu_us[id(h)] <= 0 or not gemm_like_op(h.name):
            continue
        st = next((p for p in t_stack(h) if is_step(p.name)), None)
        if st is None:
            continue
        key = (h.name, json.dumps(h.dims))
        if key in seen:
            continue
        seen.add(key)
        if first is None:
            first = id(st)
        if id(st) == first:
            continue
        later_steps.add(id(st))
        calls += 1
        at_by[h.name] += gpu_us[id(h)] * (n - 1) / n
        us_by[h.name] += gpu_us[id(h)]
    at = sum(at_by.values())
    if calls < 2 or at <= 0:
        return
    keep_recomputed(cats, evidence, at, us_by, at_by, {"mechanism": "autotune_repeated", "calls": calls, "steps": len(later_steps)})


def cpu_only_suspects(t, short, cats, evidence):
    """CPU only: label every instant of every thread; wall-clock instants go to the first
    category, in CPU_PRIORITY order, that labels them on some thread."""
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
        c = cats[cat]
        if cat == "cpu_bound_op":
            n, u = tops[0]
            mine = subtract(u, taken)
            c.members[n] = length(mine)
            c.iv = mine
            taken = union(taken + mine)
        else:
            u = union([iv for _, v in tops for iv in v])
            mine = subtract(u, taken)
            # members: each label's own part of what the category took
            for n, v in tops:
                own = length(intersect(v, mine))
                if own > 0:
                    c.members[n] = own
            c.at = length(mine)
            c.iv = mine
            taken = union(taken + mine)
        evidence[cat] = {"self_cpu_us": r3(cat_self), "self_cpu_share": r3(cat_self / self_tot) if self_tot else None,
                         "contributors": [{"name": n, "us": r3(length(v))} for n, v in tops[:5]]}


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


DTYPES = {"float": "fp32", "c10::BFloat16": "bf16", "c10::Half": "fp16"}
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


def op_flops_bytes(h):
    """(FLOPs, bytes, dtype) of one math op call from its Input Dims and Input type; None when
    they do not give it. mm / addmm / bmm / baddbmm: 2*M*N*K (x B), bytes = operands + output
    (+ bias); _flash_attention_forward ([B, S, H, D] inputs, is_causal the 9th Concrete Input)
    and _scaled_dot_product_flash_attention ([B, H, S, D], is_causal the 5th): 4*B*H*Sq*Sk*D,
    halved when causal; unknown causality: None (an upper bound is no basis for a verdict)."""
    dims, types = h.dims, h.types
    if not dims or not types:
        return None
    dt = next((DTYPES.get(x) for x in types if x in DTYPES), None)
    if dt is None:
        return None
    es = DTYPE_BYTES[dt]
    n = base_name(h.name)
    try:
        if n in ("mm", "addmm", "bmm", "baddbmm"):
            fl = matmul_flops(h.name, dims)
            if fl is None:
                return None
            if n == "mm":
                (m, k), (_, nn) = dims[0], dims[1]
                b, extra = 1, 0
            elif n == "addmm":
                (m, k), (_, nn) = dims[1], dims[2]
                b, extra = 1, prod(dims[0])
            else:
                x, y = (dims[0], dims[1]) if n == "bmm" else (dims[1], dims[2])
                b, m, k, nn = x[0], x[1], x[2], y[2]
                extra = prod(dims[0]) if n == "baddbmm" else 0
            return fl, (b * (m * k + k * nn + m * nn) + extra) * es, dt
        if n in ("_flash_attention_forward", "_scaled_dot_product_flash_attention"):
            q, kk = dims[0], dims[1]
            if n == "_flash_attention_forward":
                bb, sq, hh, d = q
                sk = kk[1]
                ci = 8
            else:
                bb, hh, sq, d = q
                sk = kk[2]
                ci = 4
            conc = h.concrete or []
            if len(conc) <= ci or conc[ci] not in ("True", "False"):
                return None
            fl = 4.0 * bb * hh * sq * sk * d * (0.5 if conc[ci] == "True" else 1.0)
            return fl, (2 * prod(q) + prod(kk) + prod(dims[2])) * es, dt
    except (TypeError, ValueError, IndexError):
        return None
    return None


def prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def device_roofs(t):
    """(dense peaks in TFLOP/s by unit, bandwidth in GB/s) of the trace's device, from
    DEVICE_ROOFS by name; None when the trace names none or one the table lacks."""
    names = [n for n in t.device_names.values() if n]
    if not names:
        return None
    toks = set(re.split(r"[^a-z0-9]+", names[0].lower()))
    for words, peaks, bw in DEVICE_ROOFS:
        if all(w in toks for w in words):
            return peaks, bw
    return None


def best_peak(peaks, dt):
    """The best roof for a dtype: fp32 math may run as TF32 on tensor cores where the device
    has them (torch.backends.cuda.matmul.allow_tf32); bf16 / fp16 on their tensor cores."""
    if dt == "fp32":
        return peaks.get("tf32") or peaks.get("fp32")
    return peaks.get(dt)


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


def time_by_kind(acts):
    """{kind: {us, fraction}} of GPU activity durations (every KINDS key; they sum to the
    activity time)."""
    by = {k: 0.0 for k in KINDS}
    for g in acts:
        by[g.wkind] += g.dur
    tot = sum(by.values())
    return {k: {"us": r3(v), "fraction": r3(v / tot) if tot > 0 else None} for k, v in by.items()}


def phase_kinds(t):
    """{phase name: gpu_time_by_kind} over the GPU activity launched inside each record_function
    / NVTX range (its launch's stack; the step folded as ProfilerStep#*); each activity counts
    once per name."""
    per = defaultdict(list)
    for g in t.gpu:
        if g.rt is None:
            continue
        names = {STEP_LABEL if is_step(p.name) else p.name for p in t_stack(g.rt) if p.kind == "user_annotation"}
        for n in names:
            per[n].append(g)
    return {n: time_by_kind(v) for n, v in per.items()}


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
