#!/usr/bin/python3
"""gen_cases.py OUTDIR [CASE...]: writes the labelled corpus of tests/triage/ (one gzip'd
Kineto trace per case, OUTDIR/<case>.json.gz), deterministic: the same code writes the same
bytes (seeded random.Random per case, gzip mtime 0).

Each trace is built around ONE known cause (README.md lists them), in the shape Kineto
(torch 2.x) writes: an object with schemaVersion, deviceProperties, distributedInfo where
distributed, baseTimeNanoseconds, traceEvents of cat cpu_op / user_annotation /
python_function / cuda_runtime / kernel / gpu_memcpy / gpu_memset / gpu_user_annotation,
ac2g flows, `External id` / `correlation` args, ProfilerStep#N ranges, a `Trace` span and
the process/thread metadata; one case (schema2021_pageable) is in the 2021 schema
(cat Operator / Runtime / Kernel / Memcpy, string tids, `external id`, `async` flows).

Time is kept in integer nanoseconds and written as microseconds with 3 decimals (ts around
2e9 us, where a double keeps far more than ns), so that a child never ends after its parent
by a rounding: every range closes at least 10 ns after its last child.

Standard library only."""
import gzip
import json
import os
import random
import sys
from contextlib import contextmanager

US = 1000  # ns per us

H100 = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85029158912, "computeMajor": 9,
        "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
        "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 132,
        "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448,
        "sharedMemPerMultiprocessor": 233472}
A100 = {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85097971712, "computeMajor": 8,
        "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
        "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 108,
        "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 166912,
        "sharedMemPerMultiprocessor": 167936}

# Kernel names as CUDA/cuBLAS/PyTorch name them (the suspects must name them, so they are real).
K_GEMM_H100 = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
K_GEMM_SMALL_H100 = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
K_GEMM_A100 = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn"
K_GEMM_A100_NN = "ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_nn"
K_LAYERNORM = ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>"
               "(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)")
K_FLASH = ("void pytorch_flash::flash_fwd_splitkv_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, "
           "cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, false, false, "
           "false, false, true, false, false>(pytorch_flash::Flash_fwd_params)")
K_ADD_BF16 = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
              "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)")
K_ADD_F32 = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
             "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)")
K_SILU = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)"
          "::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >"
          "(int, at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}"
          "::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)")
K_MUL = ("void at::native::vectorized_elementwise_kernel<4, at::native::binary_internal::MulFunctor<c10::BFloat16>, "
         "at::detail::Array<char*, 3> >(int, at::native::binary_internal::MulFunctor<c10::BFloat16>, at::detail::Array<char*, 3>)")
K_ARGMAX = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::ArgMaxOps<float>, unsigned int, "
            "long, 4> >(at::native::ReduceOp<c10::BFloat16, at::native::ArgMaxOps<float>, unsigned int, long, 4>)")
K_EMBED = ("void at::native::(anonymous namespace)::indexSelectSmallIndex<c10::BFloat16, long, unsigned int, 2, 2, -2>"
           "(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, "
           "at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, long)")
K_CAST = ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}"
          "::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>, "
          "TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, "
          "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, "
          "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}"
          "::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>, TrivialOffsetCalculator<1, unsigned int>, "
          "TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1>)")
K_SOFTMAX = ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
             "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)")
K_BMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
K_SCALE = ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, "
           "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2> >(int, at::native::AUnaryFunctor<float, "
           "float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2>)")
K_NCCL_AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
K_CONV_FWD = "sm80_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_stage4_warpsize2x2x1_g1_tensor16x8x16_kernel"
K_CONV_DGRAD = "sm80_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nchw_tilesize128x128x64_stage4_warpsize2x2x1_g1_tensor16x8x16_kernel"
K_CONV_WGRAD = "sm80_xmma_wgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_stage4_warpsize2x2x1_g1_tensor16x8x16_kernel"
K_BN = ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<__nv_bfloat16, float, 512, true, 1>(cudnnTensorStruct, __nv_bfloat16 const*, "
        "cudnnTensorStruct, __nv_bfloat16*, float const*, float const*, float, float, float*, float*, float*, float*, float, float)")
K_RELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, "
          "c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#14}::operator()() const"
          "::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, at::native::(anonymous namespace)::launch_clamp_scalar"
          "(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const"
          "::{lambda()#14}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)")
K_SGD = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<3>, "
         "at::native::(anonymous namespace)::FusedSgdMathFunctor<float, 3>, double, float*, float const*, double, double, bool, bool, "
         "bool, float const*, float const*>(at::native::(anonymous namespace)::TensorListMetadata<3>, "
         "at::native::(anonymous namespace)::FusedSgdMathFunctor<float, 3>, double, float*, float const*, double, double, bool, "
         "bool, bool, float const*, float const*)")
K_SUM = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
         "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, "
         "float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>"
         "::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4>)")
K_FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >"
          "(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)")

DATALOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


class KTrace:
    """A Kineto trace being written: one host thread (pid == tid, as Kineto writes the main
    thread), one GPU (pid 0, tid = stream). Host time `self.t` in ns advances as ranges open
    and close; launches put GPU activity on a stream no earlier than the stream is free."""

    def __init__(self, seed, device=H100, pid=48213, base_ns=2_000_000_000_000_000, schema2021=False):
        self.rng = random.Random(seed)
        self.device = device
        self.pid = pid
        self.tid = pid
        self.t = base_ns + 1_234_567
        self.t0 = self.t
        self.ev = []
        self.stack = []
        self.ext = 0
        self.corr = 1_000
        self.pyid = 0
        self.ev_idx = 0
        self.stream_end = {}
        self.streams = set()
        self.old = schema2021
        self.extra_meta = {}
        self.python = False      # with_stack: python_function events around the model code
        self.launch_blocking = False  # CUDA_LAUNCH_BLOCKING=1: each launch returns when its kernel is done
        self.max_queue = None    # a stream's launch queue depth: a launch past it blocks until a kernel ends
        self.queue = {}
        self.old_shapes = False  # 2021 schema with record_shapes: Input Dims / Input type kept (torch 1.9 writes them)

    # ---- time ----
    def j(self, us, rel=0.05):
        """us (float) jittered by +-rel, in ns."""
        return max(1, int(us * US * (1.0 + self.rng.uniform(-rel, rel))))

    def adv(self, ns):
        self.t += int(ns)

    def host(self, us, rel=0.1):
        """Untraced host time (Python between traced ranges when with_stack is off)."""
        self.adv(self.j(us, rel))

    # ---- output helpers ----
    @staticmethod
    def us(ns):
        return round(ns / 1000.0, 3)

    def _x(self, cat, name, ts, te, pid, tid, args):
        self.ev.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
                        "ts": self.us(ts), "dur": self.us(te - ts), "args": args})

    def host_tid(self):
        return str(self.tid) if self.old else self.tid

    # ---- host ranges ----
    @contextmanager
    def rng_(self, cat, name, pre=1.0, post=0.6, args=None):
        self.adv(self.j(pre, 0.3))
        fr = {"cat": cat, "name": name, "ts": self.t, "gpu": [], "args": dict(args or {})}
        if cat in ("cpu_op", "user_annotation"):
            self.ext += 1
            fr["ext"] = self.ext
        if cat == "python_function":
            self.pyid += 1
            fr["pyid"] = self.pyid
            parent = next((f for f in reversed(self.stack) if f["cat"] == "python_function"), None)
            fr["pyparent"] = parent["pyid"] if parent else 0
        self.stack.append(fr)
        try:
            yield fr
        finally:
            self.adv(max(10, self.j(post, 0.3)))
            self.stack.pop()
            self._close(fr)

    def _close(self, fr):
        cat = fr["cat"]
        if cat == "python_function":
            args = {"Python parent id": fr["pyparent"], "Python id": fr["pyid"], "Python thread": 0}
        else:
            args = {"External id": fr["ext"], "Record function id": 0}
            args.update(fr["args"])
            args["Ev Idx"] = self.ev_idx
            self.ev_idx += 1
        if self.old:
            cat = "Operator" if cat in ("cpu_op", "user_annotation") else cat
            args = {"Device": self.pid, "External id": fr.get("ext", 0), "Trace name": "PyTorch Profiler",
                    "Trace iteration": 0}
            if self.old_shapes:
                args.update({x: fr["args"][x] for x in ("Input Dims", "Input type") if x in fr["args"]})
        self._x(cat, fr["name"], fr["ts"], self.t, self.pid, self.host_tid(), args)
        if fr["cat"] == "user_annotation" and fr["gpu"] and not fr["name"].startswith("ProfilerStep#") and not self.old:
            s = min(g[0] for g in fr["gpu"])
            e = max(g[1] for g in fr["gpu"])
            st = fr["gpu"][0][2]
            self._x("gpu_user_annotation", fr["name"], s, e, 0, st, {"External id": fr["ext"]})
        # the enclosing ranges saw this GPU work too
        for f in self.stack:
            f["gpu"].extend(fr["gpu"])

    def op(self, name, pre=1.5, post=0.8, dims=None, types=None, concrete=None, **kw):
        args = {}
        if dims is not None:
            args["Input Dims"] = dims
        if types is not None:
            args["Input type"] = types
        if concrete is not None:
            args["Concrete Inputs"] = concrete        # torch >= 2.3 with record_shapes: the scalars' values
        return self.rng_("cpu_op", name, pre, post, args)

    def ann(self, name, pre=1.0, post=0.5):
        return self.rng_("user_annotation", name, pre, post)

    def py(self, name, pre=0.3, post=0.2):
        return self.rng_("python_function", name, pre, post)

    def cur_ext(self):
        for f in reversed(self.stack):
            if "ext" in f:
                return f["ext"]
        return 0

    # ---- CUDA runtime ----
    def _runtime(self, name, ts, te, corr, cbid, cat="cuda_runtime"):
        if self.old:
            self._x("Runtime", name, ts, te, self.pid, self.host_tid(),
                    {"cbid": cbid, "correlation": corr, "external id": self.cur_ext(), "external ts": self.us(ts - 300)})
        else:
            self._x(cat, name, ts, te, self.pid, self.tid,
                    {"External id": self.cur_ext(), "cbid": cbid, "correlation": corr})

    def _flow(self, corr, ts_rt, ts_gpu, stream):
        if self.old:
            self.ev.append({"ph": "s", "id": corr, "pid": self.pid, "tid": self.tid, "ts": self.us(ts_rt), "cat": "async", "name": "launch"})
            self.ev.append({"ph": "f", "id": corr, "pid": 0, "tid": "stream %d" % stream, "ts": self.us(ts_gpu), "cat": "async",
                            "name": "launch", "bp": "e"})
        else:
            self.ev.append({"ph": "s", "id": corr, "pid": self.pid, "tid": self.tid, "ts": self.us(ts_rt), "cat": "ac2g", "name": "ac2g"})
            self.ev.append({"ph": "f", "id": corr, "pid": 0, "tid": stream, "ts": self.us(ts_gpu), "cat": "ac2g", "name": "ac2g",
                            "bp": "e"})

    def _gpu(self, cat, name, s, e, stream, corr, args):
        self.streams.add(stream)
        a = {"External id": self.cur_ext()} if not self.old else {}
        if cat == "kernel":
            a.update({"queued": 0, "device": 0, "context": 1, "stream": stream, "correlation": corr})
        else:
            a.update({"device": 0, "context": 1, "stream": stream, "correlation": corr})
        if self.old:
            a["external id"] = self.cur_ext()
        a.update(args)
        if self.old:
            cat = {"kernel": "Kernel", "gpu_memcpy": "Memcpy", "gpu_memset": "Memset"}[cat]
            self._x(cat, name, s, e, 0, "stream %d" % stream, a)
        else:
            self._x(cat, name, s, e, 0, stream, a)
        for f in self.stack:
            if f["cat"] == "user_annotation":
                f["gpu"].append((s, e, stream))

    def launch(self, kname, gpu_us, stream=7, api_us=5.0, lat_us=4.0, grid=(1024, 1, 1), block=(256, 1, 1),
               regs=32, smem=0, rel=0.04, api="cudaLaunchKernel", extra=None, gpu_ns=None, blocking=None):
        """blocking: the call returns only when its kernel is done (CUDA_LAUNCH_BLOCKING=1);
        default self.launch_blocking."""
        self.corr += 1
        corr = self.corr
        ts = self.t + self.j(0.3, 0.5)
        te = ts + self.j(api_us, 0.15)
        gs = max(self.stream_end.get(stream, 0) + self.j(1.0, 0.5), ts + self.j(lat_us, 0.2))
        ge = gs + (gpu_ns if gpu_ns is not None else self.j(gpu_us, rel))
        self.stream_end[stream] = ge
        if self.launch_blocking if blocking is None else blocking:
            te = max(te, ge + self.j(2.5, 0.3))
        if self.max_queue:
            q = self.queue.setdefault(stream, [])
            while q and q[0] <= ts:
                q.pop(0)
            if len(q) >= self.max_queue:
                te = max(te, q[len(q) - self.max_queue] + self.j(3.0, 0.3))
            q.append(ge)
        if api.startswith("cu") and not api.startswith("cuda"):
            self._runtime(api, ts, te, corr, 307, cat="cuda_driver")
        else:
            self._runtime(api, ts, te, corr, 211 if api == "cudaLaunchKernel" else 307)
        blocks = grid[0] * grid[1] * grid[2]
        sms = self.device["numSms"]
        args = {"registers per thread": regs, "shared memory": smem, "blocks per SM": round(blocks / sms, 6),
                "warps per SM": round(blocks * block[0] * block[1] * block[2] / 32.0 / sms, 6),
                "grid": list(grid), "block": list(block), "est. achieved occupancy %": 100 if blocks >= sms else int(100 * blocks / sms)}
        args.update(extra or {})
        self._gpu("kernel", kname, gs, ge, stream, corr, args)
        self._flow(corr, ts, gs, stream)
        self.t = te
        return gs, ge

    def graph_launch(self, kernels, stream=7, api_us=8.0, lat_us=10.0):
        """One cudaGraphLaunch (cbid 311) replaying a captured graph: its kernels, (name, us)
        each, run back to back on the stream and all carry the launch's correlation id, as
        CUPTI reports a graph's kernels (one flow, to the first)."""
        self.corr += 1
        corr = self.corr
        ts = self.t + self.j(0.3, 0.5)
        te = ts + self.j(api_us, 0.15)
        gs = max(self.stream_end.get(stream, 0) + self.j(1.0, 0.5), ts + self.j(lat_us, 0.2))
        self._runtime("cudaGraphLaunch", ts, te, corr, 311)
        self._flow(corr, ts, gs, stream)
        s = gs
        for kname, us in kernels:
            e = s + self.j(us, 0.04)
            self._gpu("kernel", kname, s, e, stream, corr, {"grid": [132, 1, 1], "block": [128, 1, 1]})
            s = e + self.j(0.8, 0.3)
        self.stream_end[stream] = e
        self.t = te
        return gs, e

    def memcpy(self, kind, nbytes, gbps, stream=7, blocking=False, api_us=6.0, lat_us=5.0, api="cudaMemcpyAsync"):
        """kind: 'HtoD (Pageable -> Device)', 'DtoH (Device -> Pageable)', 'DtoD (Device -> Device)',
        'HtoD (Pinned -> Device)'. blocking: the runtime call returns when the copy is done
        (pageable memory: the host stages the copy and waits)."""
        self.corr += 1
        corr = self.corr
        ts = self.t + self.j(0.3, 0.5)
        gs = max(self.stream_end.get(stream, 0) + self.j(1.0, 0.5), ts + self.j(lat_us, 0.2))
        dur = max(1000, int(nbytes / (gbps * self.rng.uniform(0.97, 1.03))))  # bytes / (GB/s) = ns
        ge = gs + dur
        self.stream_end[stream] = ge
        te = (ge + self.j(3.0, 0.3)) if (blocking or self.launch_blocking) else ts + self.j(api_us, 0.15)
        self._runtime(api, ts, te, corr, 41)
        self._gpu("gpu_memcpy", "Memcpy " + kind, gs, ge, stream, corr,
                  {"bytes": nbytes, "memory bandwidth (GB/s)": round(nbytes / (ge - gs), 6)})
        self._flow(corr, ts, gs, stream)
        self.t = te
        return gs, ge

    def memset(self, nbytes, stream=7):
        self.corr += 1
        corr = self.corr
        ts = self.t + self.j(0.3, 0.5)
        te = ts + self.j(4.0, 0.15)
        gs = max(self.stream_end.get(stream, 0) + self.j(1.0, 0.5), ts + self.j(3.0, 0.2))
        ge = gs + max(1000, nbytes // 1000)
        self.stream_end[stream] = ge
        self._runtime("cudaMemsetAsync", ts, te, corr, 51)
        self._gpu("gpu_memset", "Memset (Device)", gs, ge, stream, corr,
                  {"bytes": nbytes, "memory bandwidth (GB/s)": round(nbytes / (ge - gs), 6)})
        self._flow(corr, ts, gs, stream)
        self.t = te

    def sync(self, stream=7, api="cudaStreamSynchronize"):
        """The host blocks until the stream is drained."""
        self.corr += 1
        ts = self.t + self.j(0.3, 0.5)
        end = max(ts + self.j(1.5, 0.3), self.stream_end.get(stream, 0) + self.j(2.0, 0.3))
        self._runtime(api, ts, end, self.corr, 131 if api == "cudaStreamSynchronize" else 165)
        self.t = end

    def runtime_only(self, name, us, cbid=0, rel=0.2, cat="cuda_runtime"):
        """A runtime (or driver: cat cuda_driver) call with no GPU work (cudaMalloc,
        cudaFree, cuModuleLoadData, cudaGetDeviceProperties_v2 ...)."""
        self.corr += 1
        ts = self.t + self.j(0.3, 0.5)
        te = ts + self.j(us, rel)
        self._runtime(name, ts, te, self.corr, cbid, cat=cat)
        self.t = te

    # ---- the document ----
    def doc(self, distributed=None, name="trace", cpu_only=False):
        end = max([self.t] + list(self.stream_end.values())) + 25_000
        meta = []
        hp, ht = self.pid, self.tid
        if self.old:
            meta.append({"name": "process_name", "ph": "M", "ts": self.us(self.t0), "pid": hp, "tid": 0, "args": {"name": "python"}})
            meta.append({"name": "process_labels", "ph": "M", "ts": self.us(self.t0), "pid": hp, "tid": 0, "args": {"labels": "CPU"}})
            meta.append({"name": "process_name", "ph": "M", "ts": self.us(self.t0), "pid": 0, "tid": 0, "args": {"name": "python"}})
            meta.append({"name": "process_labels", "ph": "M", "ts": self.us(self.t0), "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}})
            meta.append({"name": "thread_name", "ph": "M", "ts": self.us(self.t0), "pid": hp, "tid": str(ht),
                         "args": {"name": "thread %d (python)" % ht}})
            for s in sorted(self.streams):
                meta.append({"name": "thread_name", "ph": "M", "ts": self.us(self.t0), "pid": 0, "tid": "stream %d" % s,
                             "args": {"name": "stream %d" % s}})
            meta.append({"ph": "X", "cat": "Trace", "ts": self.us(self.t0), "dur": self.us(end - self.t0), "pid": "Traces",
                         "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {"Op count": 0}})
        else:
            for p, label, idx in ((hp, "CPU", hp),) + (() if cpu_only else ((0, "GPU 0", 16777216),)):
                meta.append({"name": "process_name", "ph": "M", "ts": self.us(self.t0), "pid": p, "tid": 0, "args": {"name": "python3.11"}})
                meta.append({"name": "process_labels", "ph": "M", "ts": self.us(self.t0), "pid": p, "tid": 0, "args": {"labels": label}})
                meta.append({"name": "process_sort_index", "ph": "M", "ts": self.us(self.t0), "pid": p, "tid": 0,
                             "args": {"sort_index": idx}})
            for s in sorted(self.streams):
                meta.append({"name": "thread_name", "ph": "M", "ts": self.us(self.t0), "pid": 0, "tid": s, "args": {"name": "stream %d " % s}})
                meta.append({"name": "thread_sort_index", "ph": "M", "ts": self.us(self.t0), "pid": 0, "tid": s, "args": {"sort_index": s}})
            meta.append({"name": "thread_name", "ph": "M", "ts": self.us(self.t0), "pid": hp, "tid": ht,
                         "args": {"name": "thread %d (python3.11)" % ht}})
            meta.append({"name": "thread_sort_index", "ph": "M", "ts": self.us(self.t0), "pid": hp, "tid": ht, "args": {"sort_index": ht}})
            meta.append({"ph": "X", "cat": "Trace", "ts": self.us(self.t0), "dur": self.us(end - self.t0), "pid": "Spans",
                         "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {"Op count": 0}})
            meta.append({"name": "process_sort_index", "ph": "M", "ts": self.us(self.t0), "pid": "Spans", "tid": 0,
                         "args": {"sort_index": 536870912}})
            meta.append({"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces",
                         "tid": "Trace PyTorch Profiler", "ts": self.us(self.t0)})
            meta.append({"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": self.us(end)})
        evs = sorted(self.ev, key=lambda e: (e["ts"], -e.get("dur", 0)))
        dev = dict(self.device)
        out = {"schemaVersion": 1, "deviceProperties": [] if cpu_only else [dev]}
        if distributed:
            out["distributedInfo"] = distributed
        if not self.old and not cpu_only:
            out["cupti_version"] = 24
            out["cuda_runtime_version"] = 12040
            out["cuda_driver_version"] = 12040
        if not self.old:
            out["record_shapes"] = 1
            out["with_stack"] = 1 if self.python else 0
        out["traceEvents"] = evs + meta
        if not self.old:
            out["traceName"] = "/tmp/firstpass-triage/%s.pt.trace.json" % name
            out["displayTimeUnit"] = "ms"
            out["baseTimeNanoseconds"] = 1765000000000000000
        return out


# ---------------------------------------------------------------- building blocks

def gemm_dims(dims, bias=False):
    """aten::linear's Input Dims (input [..., K], weight [N, K]) as the mm / addmm under it
    records them: [[M, K], [K, N]] (addmm: [[N], [M, K], [K, N], [], []])."""
    if not dims:
        return None
    m = 1
    for d in dims[0][:-1]:
        m *= d
    kk, n = dims[0][-1], dims[1][0]
    return [[n], [m, kk], [kk, n], [], []] if bias else [[m, kk], [kk, n]]


BF16x2 = ["c10::BFloat16", "c10::BFloat16"]


def linear(k, gemm_us, kname=K_GEMM_H100, grid=(132, 1, 1), dims=None, api_us=5.0):
    with k.op("aten::linear", pre=2.0, dims=dims, types=BF16x2 + [""] if dims else None):
        with k.op("aten::t", pre=0.8, post=0.4):
            with k.op("aten::transpose", pre=0.6, post=0.3):
                with k.op("aten::as_strided", pre=0.3, post=0.2):
                    pass
        with k.op("aten::mm", pre=1.2, dims=gemm_dims(dims), types=BF16x2 if dims else None):
            k.launch(kname, gemm_us, grid=grid, block=(384, 1, 1), regs=168, smem=213504, api_us=api_us)


def eltwise(k, opname, kname, us, api_us=5.0, pre=1.5):
    with k.op(opname, pre=pre):
        k.launch(kname, us, api_us=api_us)


def layer_norm(k, us):
    with k.op("aten::layer_norm", pre=1.5):
        with k.op("aten::native_layer_norm", pre=1.2):
            with k.op("aten::empty", pre=0.5, post=0.2):
                pass
            k.launch(K_LAYERNORM, us, grid=(16, 1, 1), block=(512, 1, 1))


def sdpa(k, us, kname=K_FLASH):
    with k.op("aten::scaled_dot_product_attention", pre=2.0):
        with k.op("aten::_scaled_dot_product_flash_attention", pre=1.5):
            with k.op("aten::_flash_attention_forward", pre=1.5):
                with k.op("aten::empty", pre=0.5, post=0.2):
                    pass
                with k.op("aten::empty", pre=0.5, post=0.2):
                    pass
                k.launch(kname, us, grid=(4, 32, 1), block=(128, 1, 1), regs=255, smem=49152)


H100_ROOF = (989.4e12, 3.35e12)     # dense bf16 FLOP/s, HBM3 bytes/s (H100 SXM spec sheet)
A100_ROOF = (312e12, 2.039e12)      # dense bf16/fp16 FLOP/s, HBM2e bytes/s (A100 SXM4 80GB)


def roof_us(m, n, kk, frac=0.8, roof=H100_ROOF, es=2):
    """A GEMM [m, kk] x [kk, n] running at `frac` of its roofline on a device (`roof`: peak
    FLOP/s, bytes/s): max(FLOPs / peak, bytes / bandwidth) / frac, in us. The generated
    GEMMs whose shapes are recorded take this time, so that their efficiency is what the
    case says it is (issue 48: math is judged against its roof)."""
    flops = 2.0 * m * n * kk
    nbytes = (m * kk + kk * n + m * n) * es
    return max(flops / roof[0], nbytes / roof[1]) / frac * 1e6


def fused_norm(k, us):
    """vLLM's fused residual add + RMSNorm: one kernel (nothing left to fuse)."""
    with k.op("_C::fused_add_rms_norm", pre=3.0):
        k.launch(K_VLLM_RMS, us, grid=(32, 1, 1), block=(1024, 1, 1))


def silu_and_mul(k, us):
    with k.op("_C::silu_and_mul", pre=3.0):
        k.launch(K_VLLM_SILU, us)


def decoder_layer(k, scale=1.0, gemm=K_GEMM_H100, flash_scale=1.0, m=None):
    """One transformer decoder layer of a decode step (hidden 4096, H100). With m (the tokens
    a step): fused norms (vLLM-style fused_add_rms_norm, silu_and_mul: no elementwise chain)
    and the GEMMs' shapes recorded, each at 80% of its H100 roof (at small m: the weights'
    bytes at ~2.7 TB/s); the other kernels' times x scale. Without m (no shapes): the eager
    HF layer (layer_norm, add, silu, mul), every time x scale, GEMMs ~80% of its GPU time."""
    if m is None:
        layer_norm(k, 6.0 * scale)
        linear(k, 60.0 * scale, gemm)                  # qkv
        sdpa(k, 20.0 * scale * flash_scale)
        linear(k, 25.0 * scale, gemm)                  # o_proj
        eltwise(k, "aten::add", K_ADD_BF16, 3.0 * scale)
        layer_norm(k, 6.0 * scale)
        linear(k, 80.0 * scale, gemm)                  # up
        eltwise(k, "aten::silu", K_SILU, 5.0 * scale)
        eltwise(k, "aten::mul", K_MUL, 4.0 * scale)
        linear(k, 70.0 * scale, gemm)                  # down
        eltwise(k, "aten::add", K_ADD_BF16, 3.0 * scale)
        return
    fused_norm(k, 4.0 * scale)
    linear(k, roof_us(m, 12288, 4096), gemm, dims=[[m, 1, 4096], [12288, 4096]])        # qkv
    sdpa(k, 20.0 * scale * flash_scale)
    linear(k, roof_us(m, 4096, 4096), gemm, dims=[[m, 1, 4096], [4096, 4096]])          # o_proj
    fused_norm(k, 4.0 * scale)
    linear(k, roof_us(m, 28672, 4096), gemm, dims=[[m, 1, 4096], [28672, 4096]])        # gate_up
    silu_and_mul(k, 4.0 * scale)
    linear(k, roof_us(m, 4096, 14336), gemm, dims=[[m, 1, 14336], [4096, 14336]])       # down


def item_sync(k, stream=7):
    """tensor.item(): a DtoH copy of 8 bytes to pageable memory, then the host waits."""
    with k.op("aten::item", pre=2.0):
        with k.op("aten::_local_scalar_dense", pre=1.5):
            k.memcpy("DtoH (Device -> Pageable)", 8, 0.005, stream=stream, api_us=8.0)
            k.sync(stream)


def argmax(k):
    with k.op("aten::argmax", pre=2.0):
        k.launch(K_ARGMAX, 6.0, grid=(32, 1, 1), block=(512, 1, 1))


def embedding(k):
    with k.op("aten::embedding", pre=2.0):
        with k.op("aten::reshape", pre=0.5, post=0.3):
            with k.op("aten::view", pre=0.3, post=0.2):
                pass
        with k.op("aten::index_select", pre=1.5):
            k.launch(K_EMBED, 3.0, grid=(64, 1, 1), block=(128, 1, 1))


# ---------------------------------------------------------------- the cases

def decode_loop(seed, steps, layers=8, flash_scale=1.0, name="healthy", scale=1.6, prelude=None, postlude=None, per_step=None,
                m=32):
    """A healthy decode loop (m tokens a step, vLLM-style fused norms, GEMMs at 80% of their
    H100 roof): per step embedding, `layers` decoder layers, lm_head, argmax on the GPU, then
    `.item()` of the token (one tiny sync) and a few us of Python. The host runs ahead inside
    a step, so the GPU is packed (GEMMs ~75% of GPU time, >95% busy).
    prelude(k), if given, runs first; postlude(k) after the last step; per_step(k, s) after
    each step's sync."""
    k = KTrace(seed)
    k.host(40)
    if prelude:
        prelude(k)
    for s in range(steps):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            embedding(k)
            for _ in range(layers):
                decoder_layer(k, scale=scale, flash_scale=flash_scale, m=m)
            fused_norm(k, 4.0 * scale)
            linear(k, roof_us(m, 128256, 4096), dims=[[m, 1, 4096], [128256, 4096]])    # lm_head
            argmax(k)
            item_sync(k)
            if per_step:
                per_step(k, s)
            k.host(12)
    if postlude:
        postlude(k)
    k.host(30)
    return k.doc(name=name)


def case_healthy():
    return decode_loop(1001, 45)


def lazy_cuda_init(k):
    """The first `model.to('cuda')` of a process: creating the CUDA context shows as one long
    runtime call under aten::to -> aten::_to_copy -> aten::empty_strided, with no GPU work."""
    with k.op("aten::to", pre=3.0, dims=[[4096, 4096], [], [], [], []]):
        with k.op("aten::_to_copy", pre=2.0):
            with k.op("aten::empty_strided", pre=0.5, post=0.3):
                k.runtime_only("cudaDeviceGetStreamPriorityRange", 120000.0)
    k.host(25)


def case_startup():
    return decode_loop(9001, 30, name="startup", prelude=lazy_cuda_init)


def detokenize_on_host(k):
    """After generation: the tokens decoded and scored on the host with no GPU work left,
    ~90 ms of a record_function("detokenize") around one long host op."""
    with k.ann("detokenize", pre=5.0):
        with k.op("aten::to", pre=2.0, dims=[[1, 4096], [], [], [], []]):
            k.host(2000)
        k.host(88000)


def case_tail():
    return decode_loop(9002, 30, name="tail", postlude=detokenize_on_host)


def case_compare_37():
    return decode_loop(1002, 37, name="compare_37")


def case_compare_45_slow():
    return decode_loop(1003, 45, flash_scale=1.25, name="compare_45_slow")


def case_data_loading():
    """ResNet-style training on an A100 with a single-process DataLoader: each step starts
    with ~30 ms of `enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__` on the main
    thread (decode + augment on the CPU) while the GPU idles; then a pinned HtoD copy of
    the batch, forward, backward, fused SGD."""
    k = KTrace(2001, device=A100)
    k.host(60)
    for s in range(8):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            with k.ann(DATALOADER, pre=3.0, post=2.0):
                k.host(600)
                for _ in range(64):                       # per-sample transforms (CPU tensors)
                    k.host(380, 0.3)
                    with k.op("aten::to", pre=2.0):
                        with k.op("aten::_to_copy", pre=1.5):
                            with k.op("aten::copy_", pre=1.0):
                                k.adv(k.j(18.0, 0.3))
                    with k.op("aten::div_", pre=2.0):
                        k.adv(k.j(25.0, 0.3))
                with k.op("aten::stack", pre=3.0):
                    with k.op("aten::cat", pre=2.0):
                        k.adv(k.j(1500.0, 0.1))
                with k.op("aten::pin_memory", pre=3.0):
                    k.adv(k.j(900.0, 0.1))
            with k.op("aten::to", pre=3.0):
                with k.op("aten::_to_copy", pre=2.0):
                    with k.op("aten::copy_", pre=2.0):
                        k.memcpy("HtoD (Pinned -> Device)", 64 * 3 * 224 * 224 * 2, 24.0)
            with k.ann("## forward ##"):
                for i in range(40):
                    with k.op("aten::conv2d", pre=3.0):
                        with k.op("aten::convolution", pre=2.0):
                            with k.op("aten::_convolution", pre=2.0):
                                with k.op("aten::cudnn_convolution", pre=4.0):
                                    k.launch(K_CONV_FWD, 140.0, grid=(256, 2, 1), block=(128, 1, 1), regs=232, smem=98304)
                    with k.op("aten::batch_norm", pre=2.0):
                        with k.op("aten::cudnn_batch_norm", pre=3.0):
                            k.launch(K_BN, 30.0, grid=(64, 1, 1), block=(512, 1, 1))
                    eltwise(k, "aten::relu_", K_RELU, 18.0)
                k.launch(K_GEMM_A100, 40.0)
            with k.ann("## backward ##"):
                for i in range(40):
                    with k.op("autograd::engine::evaluate_function: ConvolutionBackward0", pre=3.0):
                        with k.op("ConvolutionBackward0", pre=2.0):
                            with k.op("aten::convolution_backward", pre=3.0):
                                k.launch(K_CONV_DGRAD, 150.0, grid=(256, 2, 1), block=(128, 1, 1), regs=232, smem=98304)
                                k.launch(K_CONV_WGRAD, 160.0, grid=(256, 2, 1), block=(128, 1, 1), regs=232, smem=98304)
            with k.ann("Optimizer.step#SGD.step"):
                with k.op("aten::_fused_sgd_", pre=5.0):
                    for _ in range(4):
                        k.launch(K_SGD, 90.0, grid=(320, 1, 1), block=(512, 1, 1))
            item_sync(k)                         # loss.item() for the log line
            k.host(30)
    k.host(40)
    return k.doc(name="data_loading")


def case_host_sync():
    """A decode loop (with_stack) that calls `.item()` on the next-token logits every step:
    the host blocks in cudaStreamSynchronize until the GPU drained, then samples in Python
    (`sampling.py(41): sample_top_p`, ~1.2 ms) while the GPU waits for the next launch."""
    k = KTrace(3001)
    k.python = True
    k.host(40)
    with k.py("generate.py(212): <module>"):
        with k.py("generate.py(150): generate"):
            for s in range(40):
                with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
                    with k.py("torch/nn/modules/module.py(1736): _wrapped_call_impl"):
                        with k.py("model.py(301): forward"):
                            embedding(k)
                            for _ in range(8):
                                with k.py("model.py(212): forward"):
                                    decoder_layer(k, scale=1.5, m=8)
                            linear(k, roof_us(8, 128256, 4096), dims=[[8, 1, 4096], [128256, 4096]])
                    with k.py("generate.py(163): <lambda>"):
                        item_sync(k)                                   # logits.argmax().item() -> blocks
                    with k.py("sampling.py(41): sample_top_p"):
                        with k.py("<built-in function sorted>"):
                            k.adv(k.j(180.0, 0.1))
                        for _ in range(12):
                            with k.py("sampling.py(18): apply_repetition_penalty"):
                                k.adv(k.j(70.0, 0.1))
                        with k.py("<built-in method append of list object at 0x7f3a2c1b8e40>"):
                            k.adv(k.j(1.0, 0.1))
                    k.host(6)
    k.host(30)
    return k.doc(name="host_sync")


def case_python_overhead():
    """An MoE decode (with_stack) whose router is Python: between the attention launches and
    the expert GEMMs each layer runs `model.py(88): _route_tokens` (~160 us of Python loops
    over tokens), so the GPU sits idle between short bursts."""
    k = KTrace(4001)
    k.python = True
    k.host(40)
    with k.py("serve.py(77): <module>"):
        for s in range(30):
            with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
                with k.py("model.py(140): forward"):
                    embedding(k)
                    for _ in range(8):
                        with k.py("model.py(101): forward"):
                            layer_norm(k, 4.0)
                            linear(k, 18.0, K_GEMM_SMALL_H100)
                            sdpa(k, 12.0)
                            linear(k, 10.0, K_GEMM_SMALL_H100)
                            eltwise(k, "aten::add", K_ADD_BF16, 3.0)
                            layer_norm(k, 4.0)
                            linear(k, 6.0, K_GEMM_SMALL_H100)                   # router logits
                            with k.py("model.py(88): _route_tokens"):
                                for _ in range(16):
                                    with k.py("<built-in method tolist of Tensor object at 0x7f01c4a2b8f0>"):
                                        k.adv(k.j(1.2, 0.2))
                                    k.adv(k.j(8.5, 0.2))
                            for _e in range(2):
                                with k.py("model.py(64): expert_forward"):
                                    linear(k, 16.0, K_GEMM_SMALL_H100)
                                    eltwise(k, "aten::silu", K_SILU, 3.0)
                                    linear(k, 14.0, K_GEMM_SMALL_H100)
                            eltwise(k, "aten::add", K_ADD_BF16, 3.0)
                    linear(k, 60.0)
                    argmax(k)
            k.host(5)
    k.host(30)
    return k.doc(name="python_overhead")


def case_graph_replay_python():
    """A decode loop already captured as CUDA graphs, one per layer (piecewise graphs, as a
    serving engine replays them from Python): 16 cudaGraphLaunch a step under no aten op,
    each graph 4 short kernels (~14 us in all), and ~60 us of Python between replays
    (`model_runner.py(1714): _prepare_layer_inputs`). The GPU idles on the Python; the
    advice must not be "capture it in a CUDA graph" alone: the loop already does."""
    k = KTrace(4101)
    k.python = True
    k.host(40)
    body = [(K_GEMM_SMALL_H100, 5.0), (K_ADD_BF16, 2.0), (K_FLASH, 5.0), (K_ADD_BF16, 2.0)]
    with k.py("serve.py(77): <module>"):
        for s in range(24):
            with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
                with k.py("model_runner.py(1690): execute_model"):
                    for _ in range(16):
                        with k.py("model_runner.py(1714): _prepare_layer_inputs"):
                            k.adv(k.j(60.0, 0.2))
                        with k.py("torch/cuda/graphs.py(88): replay"):
                            k.graph_launch(body)
                    argmax(k)
            k.host(5)
    k.host(30)
    return k.doc(name="graph_replay_python")


def case_launch_bound():
    """A training loop whose optimizer is a Python loop over 1000 parameters (`p.add_(g)`,
    foreach off): each step launches 1000 elementwise kernels of ~2.5 us, each shorter than
    its ~5 us cudaLaunchKernel; forward/backward are a few ms of GEMMs."""
    k = KTrace(5001)
    k.host(40)
    for s in range(4):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            with k.ann("## forward ##"):
                for _ in range(12):
                    linear(k, 90.0)
                    eltwise(k, "aten::gelu", K_SILU, 10.0)
            with k.ann("## backward ##"):
                for _ in range(12):
                    with k.op("autograd::engine::evaluate_function: MmBackward0", pre=3.0):
                        with k.op("MmBackward0", pre=2.0):
                            with k.op("aten::mm", pre=1.5):
                                k.launch(K_GEMM_H100, 90.0, grid=(132, 1, 1), block=(384, 1, 1), regs=168, smem=213504)
                            with k.op("aten::mm", pre=1.5):
                                k.launch(K_GEMM_H100, 90.0, grid=(132, 1, 1), block=(384, 1, 1), regs=168, smem=213504)
            with k.ann("Optimizer.step#SGD.step", pre=3.0):
                for _ in range(1000):
                    k.host(0.9, 0.3)
                    with k.op("aten::add_", pre=1.2, post=0.6, dims=[[1024], [1024], []]):
                        k.launch(K_ADD_F32, 2.5, api_us=4.8, lat_us=3.5, grid=(1, 1, 1), block=(128, 1, 1), rel=0.06)
            k.host(20)
    k.host(30)
    return k.doc(name="launch_bound")


def case_copies_casts():
    """Inference whose layers cast activations to fp32 and back and make them contiguous:
    `aten::to` (cast kernels) and `aten::contiguous` -> `aten::copy_` (Memcpy DtoD) hold
    most of the GPU time while the GPU is busy, pretending to be model work."""
    k = KTrace(6001)
    k.host(40)
    for s in range(20):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            for _ in range(8):
                with k.op("aten::to", pre=2.0, dims=[[16, 2048, 4096], [], [], [], []]):
                    with k.op("aten::_to_copy", pre=1.5):
                        with k.op("aten::empty_strided", pre=0.5, post=0.3):
                            pass
                        with k.op("aten::copy_", pre=1.0):
                            k.launch(K_CAST, 95.0, grid=(65536, 1, 1), block=(128, 1, 1))
                linear(k, 60.0)
                with k.op("aten::contiguous", pre=1.5):
                    with k.op("aten::clone", pre=1.5):
                        with k.op("aten::empty_like", pre=0.5, post=0.3):
                            pass
                        with k.op("aten::copy_", pre=1.0):
                            k.memcpy("DtoD (Device -> Device)", 268435456, 2600.0)
                linear(k, 45.0)
                with k.op("aten::to", pre=2.0, dims=[[16, 2048, 4096], [], [], [], []]):
                    with k.op("aten::_to_copy", pre=1.5):
                        with k.op("aten::empty_strided", pre=0.5, post=0.3):
                            pass
                        with k.op("aten::copy_", pre=1.0):
                            k.launch(K_CAST, 90.0, grid=(65536, 1, 1), block=(128, 1, 1))
                eltwise(k, "aten::add", K_ADD_BF16, 8.0)
            argmax(k)
            item_sync(k)
            k.host(10)
    k.host(30)
    return k.doc(name="copies_casts")


def case_pageable_memcpy():
    """A loop that moves each batch to the GPU with `batch.to('cuda')` from pageable memory:
    `Memcpy HtoD (Pageable -> Device)` of 192 MB per step, the cudaMemcpyAsync call as long
    as the copy (the host stages it), then ~12 ms of compute."""
    k = KTrace(7001)
    k.host(40)
    for s in range(10):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            for _ in range(2):
                with k.op("aten::to", pre=3.0, dims=[[96, 1024, 1024], [], [], [], []]):
                    with k.op("aten::_to_copy", pre=2.0):
                        with k.op("aten::empty_strided", pre=0.5, post=0.3):
                            pass
                        with k.op("aten::copy_", pre=2.0):
                            k.memcpy("HtoD (Pageable -> Device)", 100663296, 11.5, blocking=True)
            with k.ann("## forward ##"):
                for _ in range(16):
                    linear(k, 300.0)
                    eltwise(k, "aten::gelu", K_SILU, 30.0)
            with k.ann("## backward ##"):
                for _ in range(16):
                    with k.op("aten::mm", pre=2.0):
                        k.launch(K_GEMM_H100, 300.0, grid=(132, 1, 1), block=(384, 1, 1), regs=168, smem=213504)
                    with k.op("aten::mm", pre=2.0):
                        k.launch(K_GEMM_H100, 300.0, grid=(132, 1, 1), block=(384, 1, 1), regs=168, smem=213504)
            with k.op("aten::_fused_adamw_", pre=5.0):
                k.launch(K_SGD, 200.0, grid=(320, 1, 1), block=(512, 1, 1))
            k.host(20)
    k.host(30)
    return k.doc(name="pageable_memcpy")


def case_compute_bound_op():
    """Attention written by hand: Q@K^T (bmm), a scale, then `aten::softmax` over a
    (16, 32, 2048, 2048) fp32 score tensor: the softmax kernel owns ~65% of GPU time while
    the GPU is >95% busy."""
    k = KTrace(8001)
    k.host(40)
    for s in range(12):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            for _ in range(6):
                layer_norm(k, 12.0)
                linear(k, 120.0)
                with k.op("aten::matmul", pre=2.0):
                    with k.op("aten::bmm", pre=2.0):
                        k.launch(K_BMM, 180.0, grid=(512, 1, 1), block=(384, 1, 1), regs=168, smem=213504)
                eltwise(k, "aten::mul", K_SCALE, 60.0)
                with k.op("aten::softmax", pre=2.0, dims=[[16, 32, 2048, 2048], [], []]):
                    with k.op("aten::_softmax", pre=2.0):
                        k.launch(K_SOFTMAX, 1900.0, grid=(1048576, 1, 1), block=(1024, 1, 1), regs=40, smem=0)
                with k.op("aten::matmul", pre=2.0):
                    with k.op("aten::bmm", pre=2.0):
                        k.launch(K_BMM, 180.0, grid=(512, 1, 1), block=(384, 1, 1), regs=168, smem=213504)
                linear(k, 90.0)
                eltwise(k, "aten::add", K_ADD_BF16, 10.0)
            argmax(k)
            item_sync(k)
            k.host(10)
    k.host(30)
    return k.doc(name="compute_bound_op")


NCCL_ARGS = {"Collective name": "allreduce", "In msg nelems": 50331648, "Out msg nelems": 50331648, "Group size": 8,
             "dtype": "BFloat16", "In split size": "[]", "Out split size": "[]", "Process Group Name": "0",
             "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]"}


def case_communication():
    """Rank 0 of 8 (DDP without overlap: gradients all-reduced after backward in 25 MB
    buckets): NCCL `ncclDevKernel_AllReduce_Sum_bf16_RING_LL` kernels on their own stream
    hold ~60% of the wall, with almost no compute beside them."""
    k = KTrace(9001)
    k.host(40)
    for s in range(6):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            with k.ann("DistributedDataParallel.forward"):
                for _ in range(10):
                    linear(k, 150.0)
                    eltwise(k, "aten::gelu", K_SILU, 12.0)
            with k.ann("## backward ##"):
                for _ in range(10):
                    with k.op("aten::mm", pre=2.0):
                        k.launch(K_GEMM_H100, 150.0, grid=(132, 1, 1), block=(384, 1, 1), regs=168, smem=213504)
                    with k.op("aten::mm", pre=2.0):
                        k.launch(K_GEMM_H100, 150.0, grid=(132, 1, 1), block=(384, 1, 1), regs=168, smem=213504)
            # DDP's reducer: buckets all-reduced once backward is done, on the NCCL stream,
            # which waits for the compute stream
            k.stream_end[20] = max(k.stream_end.get(20, 0), k.stream_end.get(7, 0))
            for b in range(4):
                with k.ann("nccl:all_reduce", pre=3.0):
                    with k.op("record_param_comms", pre=2.0):
                        k.runtime_only("cudaEventRecord", 2.0, 135)
                        k.runtime_only("cudaStreamWaitEvent", 2.0, 147)
                        k.launch(K_NCCL_AR, 1700.0, stream=20, api_us=8.0, grid=(24, 1, 1), block=(544, 1, 1), regs=96,
                                 smem=87568, extra=NCCL_ARGS, api="cudaLaunchKernelExC")
            # the optimizer waits for the gradients
            k.stream_end[7] = max(k.stream_end[7], k.stream_end[20])
            with k.ann("Optimizer.step#AdamW.step"):
                with k.op("aten::_fused_adamw_", pre=5.0):
                    k.launch(K_SGD, 120.0, grid=(320, 1, 1), block=(512, 1, 1))
            item_sync(k)                         # loss.item() for the log line
            k.host(20)
    k.host(30)
    dist = {"backend": "nccl", "rank": 0, "world_size": 8, "pg_count": 1,
            "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 8,
                           "ranks": list(range(8))}], "nccl_version": "2.21.5"}
    return k.doc(distributed=dist, name="communication")


def case_phases():
    """Generation with one `prefill` range (one dense block: large GEMMs, 2048 tokens) then
    `decode_step` x24 (many small blocks of ~2-4 us kernels, each shorter than its launch:
    launch-bound), no ProfilerStep: for the trace questions."""
    k = KTrace(10001)
    k.host(40)
    with k.ann("prefill", pre=3.0):
        embedding(k)
        for _ in range(8):
            decoder_layer(k, scale=12.0)
        linear(k, 600.0)
        argmax(k)
        item_sync(k)
    for s in range(24):
        with k.ann("decode_step", pre=3.0):
            embedding(k)
            for _ in range(8):
                decoder_layer(k, scale=0.04)
            linear(k, 8.0)
            argmax(k)
            item_sync(k)
            k.host(15)
    k.host(30)
    return k.doc(name="phases")


def sum_op(k, nested):
    """`x.sum()` as torch 2.x records it: nested=1 -> aten::sum alone; 2 -> aten::sum whose
    only child is aten::sum (the dispatcher's redispatch); 3 -> a chain of three."""
    if nested == 0:
        k.launch(K_SUM, 4.0, grid=(1, 1, 1), block=(512, 1, 1))
        return
    with k.op("aten::sum", pre=1.5, post=0.5):
        sum_op(k, nested - 1)


def case_same_name_merge():
    """torch's EventList._remove_dup_nodes: an op whose parent has the same name and no
    other child is dropped (its children go to the parent). Per step: x.sum() recorded as
    aten::sum -> aten::sum (1 call after the merge), a chain of three (1), a plain aten::sum
    (1), an aten::sum with two aten::sum children (3: not an only child), an aten::sum whose
    aten::sum child shares the parent with a runtime call (2: runtime calls are children),
    and aten::div -> aten::div (1). Expected per step: aten::sum 1+1+1+3+2 = 8 (raw 2+3+1+3+2
    = 11), aten::div 1 (raw 2)."""
    k = KTrace(11001)
    k.host(30)
    for s in range(10):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            linear(k, 40.0)
            sum_op(k, 2)
            k.host(5)
            sum_op(k, 3)
            k.host(5)
            sum_op(k, 1)
            k.host(5)
            with k.op("aten::sum", pre=1.5):
                sum_op(k, 1)
                sum_op(k, 1)
            k.host(5)
            with k.op("aten::sum", pre=1.5):
                sum_op(k, 1)
                k.memset(4096)
            k.host(5)
            with k.op("aten::div", pre=1.5):
                with k.op("aten::div", pre=1.5):
                    k.launch(K_SCALE, 3.0)
            item_sync(k)
            k.host(8)
    k.host(30)
    return k.doc(name="same_name_merge")


def case_schema2021_pageable():
    """The 2021 Kineto schema (torch 1.8/1.9, as tb_plugin's samples): cat Operator / Runtime /
    Kernel / Memcpy, string tids, `external id`, flows `async`; ProfilerStep#1..#8 are
    Operator events. Each step copies 96 MB from pageable memory (blocking), then computes."""
    k = KTrace(12001, device=dict(A100, name="Tesla V100-SXM2-32GB", computeMajor=7, numSms=80), schema2021=True)
    k.host(40)
    for s in range(8):
        with k.op("ProfilerStep#%d" % (s + 1), pre=2.0):
            with k.op("aten::to", pre=3.0):
                with k.op("aten::copy_", pre=2.0):
                    k.memcpy("HtoD (Pageable -> Device)", 100663296, 10.0, blocking=True)
            for _ in range(20):
                linear(k, 180.0, K_GEMM_A100)
                eltwise(k, "aten::relu", K_RELU, 15.0)
            k.host(20)
    k.host(30)
    return k.doc(name="schema2021_pageable")


# ---------------------------------------------------------------- issue 41: the host's own work, new categories

K_GELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
          "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, "
          "at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)"
          "::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)")
K_GELU_BWD = ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, "
              "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, "
              "c10::BFloat16)#1}, at::detail::Array<char*, 3> >(int, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, "
              "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, "
              "c10::BFloat16)#1}, at::detail::Array<char*, 3>)")
K_LN_BWD = ("void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>(c10::BFloat16 const*, "
            "c10::BFloat16 const*, float const*, float const*, c10::BFloat16 const*, c10::BFloat16*, int)")
K_GEMM_H100_BIG = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64_warpgroupsize2x1x1_execute_segment_k_off_"
                   "kernel__5x_cublas")
K_GEMM_A100_F16 = "ampere_fp16_s16816gemm_fp16_256x128_ldg8_f2f_stages_64x3_tn"
K_GEMV = ("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float, "
          "false, true, true, false, 7, false, cublasGemvParamsEx<int, __nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*> >"
          "(cublasGemvParamsEx<int, __nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*>)")
K_INDEX_SELECT_LARGE = ("void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>"
                        "(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16 const, "
                        "unsigned int>, at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned int, long)")
K_INDEX_COPY = ("void at::native::index_elementwise_kernel<128, 4, at::native::gpu_index_kernel<at::native::index_copy_kernel_impl"
                "<c10::BFloat16>(at::TensorIterator&, long, long, long)::{lambda(char*, char*, long)#1}>(at::TensorIteratorBase&, "
                "c10::ArrayRef<long>, c10::ArrayRef<long>, at::native::index_copy_kernel_impl<c10::BFloat16>(at::TensorIterator&, long, "
                "long, long)::{lambda(char*, char*, long)#1} const&)::{lambda(int)#1}>(long, at::native::gpu_index_kernel<at::native::"
                "index_copy_kernel_impl<c10::BFloat16>(at::TensorIterator&, long, long, long)::{lambda(char*, char*, long)#1}>"
                "(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>, at::native::index_copy_kernel_impl<c10::BFloat16>"
                "(at::TensorIterator&, long, long, long)::{lambda(char*, char*, long)#1} const&)::{lambda(int)#1})")
K_EFF_ATTN = ("fmha_cutlassF_bf16_aligned_64x128_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, "
              "cutlass::arch::Sm80, true, 64, 128, 128, true, true>::Params)")
K_EFF_ATTN_F16 = ("fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::half_t, cutlass::arch::Sm80, "
                  "true, 64, 64, 64, true, true>::Params)")
K_FLASH_FWD = ("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
               "cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, "
               "false, true, true, false, false>(pytorch_flash::Flash_fwd_params)")
K_FLASH_FWD_F16 = ("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
                   "cutlass::half_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::half_t> >, false, false, false, "
                   "false, true, true, false, false>(pytorch_flash::Flash_fwd_params)")
K_VLLM_FA_SPLITKV = ("void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t, "
                     "Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, true, false, false, false, true, true, false, false>"
                     "(Flash_fwd_params)")
K_VLLM_FA_COMBINE = ("void flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t, "
                     "Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, 4, 2, true>(Flash_fwd_params)")
K_VLLM_RMS = "void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, float, int, int)"
K_VLLM_ROPE = ("void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*, "
               "c10::BFloat16 const*, int, long, long, int, int, int)")
K_VLLM_CACHE = ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(__nv_bfloat16 const*, "
                "__nv_bfloat16 const*, __nv_bfloat16*, __nv_bfloat16*, long const*, int, int, int, int, int, int, float const*, float const*)")
K_VLLM_SILU = ("void vllm::act_and_mul_kernel<c10::BFloat16, &(c10::BFloat16 vllm::silu_kernel<c10::BFloat16>(c10::BFloat16 const&)), "
               "false>(c10::BFloat16*, c10::BFloat16 const*, int)")
K_CONV_FWD_NHWC = ("sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x32_stage4_warpsize2x2x1_g1_"
                   "tensor16x8x16_kernel")
K_CONV_FWD_H100 = ("sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_g1_"
                   "execute_segment_k_off_kernel__5x_cudnn")
K_BN_INF = ("void cudnn::bn_fw_inf_1C11_singleread_NHWC<__half, float, 128, 1, 2, 1, 0>(cudnnTensorStruct, __half const*, "
            "cudnnTensorStruct, __half*, float const*, float const*, float const*, float const*, float, float, int)")
K_RELU_F16 = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar"
              "(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const"
              "::{lambda()#8}::operator()() const::{lambda(c10::Half)#1}, at::detail::Array<char*, 2> >(int, at::native::(anonymous "
              "namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)"
              "::{lambda()#1}::operator()() const::{lambda()#8}::operator()() const::{lambda(c10::Half)#1}, at::detail::Array<char*, 2>)")
K_ADD_F16 = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::Half>, at::detail::Array<char*, 3> >"
             "(int, at::native::CUDAFunctor_add<c10::Half>, at::detail::Array<char*, 3>)")
K_CAST_F32_F16 = K_CAST
K_GN_MOMENTS = "void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<c10::Half, float>(long, float, c10::Half const*, float*, float*)"
K_GN_APPLY = ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<at::native::(anonymous namespace)::"
              "GroupNorm1dForward<c10::Half>(at::Tensor const&, at::Tensor const&, at::Tensor const&, at::Tensor const&, "
              "at::Tensor const&, long, long, at::Tensor&)::{lambda(c10::Half, float, float, c10::Half, c10::Half)#1}>"
              "(at::TensorIteratorBase&, at::native::(anonymous namespace)::GroupNorm1dForward<c10::Half>(at::Tensor const&, "
              "at::Tensor const&, at::Tensor const&, at::Tensor const&, at::Tensor const&, long, long, at::Tensor&)::{lambda(c10::Half, "
              "float, float, c10::Half, c10::Half)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl<...>::{lambda(int)#1})")
K_SILU_F16 = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)"
              "::{lambda()#1}::operator()() const::{lambda()#3}::operator()() const::{lambda(c10::Half)#1}, at::detail::Array<char*, 2> >"
              "(int, at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const"
              "::{lambda()#3}::operator()() const::{lambda(c10::Half)#1}, at::detail::Array<char*, 2>)")
K_LN_F16 = ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::Half, float>(int, float, c10::Half const*, "
            "c10::Half const*, c10::Half const*, float*, float*, c10::Half*)")
K_GELU_F16 = ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
              "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#3}::operator()() const::{lambda(c10::Half)#1}, "
              "at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)"
              "::{lambda()#2}::operator()() const::{lambda()#3}::operator()() const::{lambda(c10::Half)#1}, at::detail::Array<char*, 2>)")
K_MUL_F16 = ("void at::native::vectorized_elementwise_kernel<4, at::native::binary_internal::MulFunctor<c10::Half>, "
             "at::detail::Array<char*, 3> >(int, at::native::binary_internal::MulFunctor<c10::Half>, at::detail::Array<char*, 3>)")
K_SOFTMAX_F16 = ("void (anonymous namespace)::softmax_warp_forward<c10::Half, c10::Half, float, 8, false, false>(c10::Half*, "
                 "c10::Half const*, int, int, int, bool const*, int, bool)")
K_TOPK = ("void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(at::cuda::detail::TensorInfo<float const, unsigned int>, "
          "unsigned int, unsigned int, bool, unsigned int, unsigned int, at::cuda::detail::TensorInfo<float, unsigned int>, unsigned int, "
          "at::cuda::detail::TensorInfo<long, unsigned int>, unsigned int, unsigned int*)")
K_LOG_SOFTMAX = ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)"
                 "::LogSoftMaxForwardEpilogue>(float*, float const*, int)")
K_ADAM = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<4>, "
          "at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, float*, double, double, "
          "double, double, double, bool, float const*, float const*>(at::native::(anonymous namespace)::TensorListMetadata<4>, "
          "at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, float*, double, double, "
          "double, double, double, bool, float const*, float const*)")
K_TRITON_RMS = "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0"
K_TRITON_ROPE = "triton_poi_fused_add_cat_clone_mul_neg_slice_1"
K_TRITON_ADD_RMS = "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_2"
K_TRITON_SILU = "triton_poi_fused_mul_silu_3"
K_CUSTOM_RMS = "void custom_ops::fused_add_rms_norm_kernel<__nv_bfloat16, 128>(__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16 const*, float, int)"

GB = 1e9


def us_bytes(nbytes, gbps):
    """Time in us to move nbytes at gbps GB/s."""
    return nbytes / (gbps * GB) * 1e6


def us_flops(flop, tflops):
    return flop / (tflops * 1e12) * 1e6


def tolist_sync(k, nbytes=64, py=False):
    """`tensor.tolist()` / `.cpu()` of a CUDA tensor: aten::to -> aten::_to_copy -> aten::copy_,
    a DtoH copy to pageable memory (cudaMemcpyAsync), then cudaStreamSynchronize: the host
    waits for the GPU to drain."""
    def body():
        with k.op("aten::to", pre=2.0, dims=[[nbytes // 8], [], [], [], []]):
            with k.op("aten::_to_copy", pre=1.5):
                with k.op("aten::empty_strided", pre=0.6, post=0.3):
                    pass
                with k.op("aten::copy_", pre=1.2):
                    k.memcpy("DtoH (Device -> Pageable)", nbytes, 0.02, api_us=7.0)
                    k.sync()
    if py:
        with k.py("<built-in method tolist of Tensor object at 0x7f2c3b5e1d50>"):
            body()
    else:
        body()


def mm(k, kname, gpu_us, dims=None, types=None, malloc_us=None, api="cudaLaunchKernel", grid=(132, 1, 1)):
    """aten::linear (no bias) -> aten::t + aten::matmul -> aten::mm, as torch records F.linear on
    a 2-D or 3-D input; malloc_us: the output's block comes from cudaMalloc (the caching
    allocator had nothing cached)."""
    with k.op("aten::linear", pre=2.0, dims=dims, types=types):
        with k.op("aten::t", pre=0.8, post=0.4):
            with k.op("aten::transpose", pre=0.6, post=0.3):
                with k.op("aten::as_strided", pre=0.3, post=0.2):
                    pass
        with k.op("aten::matmul", pre=1.0):
            with k.op("aten::mm", pre=1.2, dims=gemm_dims(dims), types=types):
                if malloc_us:
                    k.runtime_only("cudaMalloc", malloc_us, cbid=20, rel=0.35)
                k.launch(kname, gpu_us, grid=grid, block=(384, 1, 1), regs=168, smem=213504, api=api)


def addmm(k, kname, gpu_us, dims=None, types=["c10::Half"] * 3, grid=(132, 1, 1)):
    """nn.Linear with a bias on a 3-D input: aten::linear -> aten::addmm (torch flattens the
    batch dims)."""
    with k.op("aten::linear", pre=2.5, dims=dims, types=types if dims else None):
        with k.op("aten::t", pre=0.8, post=0.4):
            with k.op("aten::transpose", pre=0.6, post=0.3):
                with k.op("aten::as_strided", pre=0.3, post=0.2):
                    pass
        with k.op("aten::view", pre=0.6, post=0.3):
            pass
        with k.op("aten::addmm", pre=1.5, dims=gemm_dims(dims, bias=True), types=types + ["Scalar", "Scalar"] if dims else None):
            k.launch(kname, gpu_us, grid=grid, block=(256, 1, 1), regs=232, smem=98304)
        with k.op("aten::view", pre=0.6, post=0.3):
            pass


def case_allocator_churn():
    """A fine-tuning loop (H100, 12 layers, 16k tokens a step) that calls
    `torch.cuda.empty_cache()` after every optimizer step, a common "fix" for fragmentation
    OOMs: loss.item() ends the step, then empty_cache gives every cached segment back
    (~70 cudaFree, each waiting for the device) and the next step gets them again from the
    driver (cudaMalloc under the ops that allocate their outputs), every step."""
    k = KTrace(13001)
    k.host(40)
    T, H, F = 16384, 2048, 8192
    act = T * F * 2
    for s in range(8):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            with k.ann("## forward ##"):
                for _ in range(12):
                    layer_norm(k, us_bytes(T * H * 2 * 2, 2600))
                    mm(k, K_GEMM_H100_BIG, us_flops(2 * T * H * F, 620), dims=[[8, 2048, H], [F, H]], malloc_us=260.0)
                    with k.op("aten::gelu", pre=1.5):
                        k.runtime_only("cudaMalloc", 240.0, cbid=20, rel=0.35)
                        k.launch(K_GELU, us_bytes(2 * act, 2600))
                    mm(k, K_GEMM_H100_BIG, us_flops(2 * T * H * F, 620), dims=[[8, 2048, F], [H, F]], malloc_us=90.0)
                    eltwise(k, "aten::add", K_ADD_BF16, us_bytes(3 * T * H * 2, 2600))
            with k.op("aten::cross_entropy_loss", pre=3.0):
                k.launch(K_LOG_SOFTMAX, 300.0)
            with k.ann("## backward ##"):
                for _ in range(12):
                    with k.op("autograd::engine::evaluate_function: MmBackward0", pre=3.0):
                        with k.op("MmBackward0", pre=2.0):
                            for _ in range(2):
                                with k.op("aten::mm", pre=1.5):
                                    k.runtime_only("cudaMalloc", 200.0, cbid=20, rel=0.35)
                                    k.launch(K_GEMM_H100_BIG, us_flops(2 * T * H * F, 620))
                    with k.op("autograd::engine::evaluate_function: GeluBackward0", pre=3.0):
                        with k.op("GeluBackward0", pre=2.0):
                            with k.op("aten::gelu_backward", pre=1.5):
                                k.runtime_only("cudaMalloc", 240.0, cbid=20, rel=0.35)
                                k.launch(K_GELU_BWD, us_bytes(3 * act, 2600))
                    with k.op("autograd::engine::evaluate_function: MmBackward0", pre=3.0):
                        with k.op("MmBackward0", pre=2.0):
                            for _ in range(2):
                                with k.op("aten::mm", pre=1.5):
                                    k.launch(K_GEMM_H100_BIG, us_flops(2 * T * H * F, 620))
                    with k.op("autograd::engine::evaluate_function: NativeLayerNormBackward0", pre=3.0):
                        with k.op("aten::native_layer_norm_backward", pre=2.0):
                            k.launch(K_LN_BWD, us_bytes(4 * T * H * 2, 2600))
            with k.ann("Optimizer.step#AdamW.step", pre=3.0):
                with k.op("aten::_fused_adamw_", pre=5.0):
                    for _ in range(6):
                        k.launch(K_ADAM, 380.0, grid=(320, 1, 1), block=(512, 1, 1))
            item_sync(k)                              # loss.item() for the log line
            k.host(15)
            # torch.cuda.empty_cache(): every cached segment back to the driver; cudaFree
            # synchronizes the device, so each waits ~150-400 us here
            for _ in range(70):
                k.runtime_only("cudaFree", 230.0, cbid=22, rel=0.4)
                k.adv(k.j(1.5, 0.3))
            k.host(20)
    k.host(30)
    return k.doc(name="allocator_churn")


def case_tokenization():
    """A Python serving loop streaming 16 sequences (HF model on an H100, with_stack): each
    decode step launches the model (~4.5 ms of GPU work), takes the next tokens with
    `next_tokens.tolist()` (the one sync), then detokenizes each sequence's new text with the
    HF fast tokenizer on the host (transformers' tokenization_utils_base.py decode ->
    tokenization_utils_fast.py _decode -> the Rust `tokenizers.Tokenizer.decode`, ~120 us
    each, 16 a step) while the GPU waits for the next step."""
    k = KTrace(14001)
    k.python = True
    k.host(40)
    with k.py("server.py(301): <module>"):
        with k.py("server.py(188): generate_stream"):
            for s in range(32):
                with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
                    with k.py("torch/nn/modules/module.py(1747): _call_impl"):
                        with k.py("transformers/models/llama/modeling_llama.py(1163): forward"):
                            embedding(k)
                            for _ in range(16):
                                with k.py("transformers/models/llama/modeling_llama.py(727): forward"):
                                    decoder_layer(k, scale=1.0, m=16)
                            fused_norm(k, 4.0)
                            linear(k, roof_us(16, 128256, 4096), dims=[[16, 1, 4096], [128256, 4096]])
                    with k.py("server.py(203): generate_stream"):
                        argmax(k)
                        tolist_sync(k, 128, py=True)
                    with k.py("server.py(211): stream_new_text"):
                        for _ in range(16):
                            with k.py("transformers/tokenization_utils_base.py(3851): decode"):
                                with k.py("<built-in function isinstance>"):
                                    k.adv(k.j(0.4, 0.2))
                                with k.py("transformers/tokenization_utils_fast.py(649): _decode"):
                                    with k.py("<built-in function isinstance>"):
                                        k.adv(k.j(0.3, 0.2))
                                    with k.py("<method 'decode' of 'tokenizers.Tokenizer' objects>"):
                                        k.adv(k.j(95.0 + 0.8 * s, 0.15))
                                    with k.py("transformers/tokenization_utils_base.py(3892): clean_up_tokenization"):
                                        for _ in range(6):
                                            with k.py("<method 'replace' of 'str' objects>"):
                                                k.adv(k.j(0.6, 0.2))
                            with k.py("<method 'put' of '_queue.SimpleQueue' objects>"):
                                k.adv(k.j(1.5, 0.2))
                    k.host(6)
    k.host(30)
    return k.doc(name="tokenization")


def compiled_step(k, layers=16, scale=1.0):
    """One decode step of a torch.compile'd decoder (steady state): the guard check, then the
    compiled graph's Triton kernels (cuLaunchKernel, driver API) around cuBLAS mm's and SDPA."""
    with k.ann("TorchDynamo Cache Lookup", pre=2.0):
        k.adv(k.j(14.0, 0.2))
    with k.ann("Torch-Compiled Region: 0/1", pre=1.5):
        with k.ann("## Call CompiledFxGraph f5yxl2axeuvyqu4x3ffw2kifzm5bxvpzbb5gxnr5buy3cshxsvsp ##", pre=3.0):
            k.launch(K_EMBED, 3.0)
            for _ in range(layers):
                k.launch(K_TRITON_RMS, 5.0 * scale, api="cuLaunchKernel", api_us=3.5)
                with k.op("aten::mm", pre=1.0):
                    k.launch(K_GEMM_SMALL_H100, 24.0 * scale, api_us=4.0)
                k.launch(K_TRITON_ROPE, 4.0 * scale, api="cuLaunchKernel", api_us=3.5)
                with k.op("aten::_scaled_dot_product_flash_attention", pre=1.5):
                    with k.op("aten::_flash_attention_forward", pre=1.0):
                        k.launch(K_FLASH, 12.0 * scale)
                with k.op("aten::mm", pre=1.0):
                    k.launch(K_GEMM_SMALL_H100, 10.0 * scale, api_us=4.0)
                k.launch(K_TRITON_ADD_RMS, 5.0 * scale, api="cuLaunchKernel", api_us=3.5)
                with k.op("aten::mm", pre=1.0):
                    k.launch(K_GEMM_SMALL_H100, 40.0 * scale, api_us=4.0)
                k.launch(K_TRITON_SILU, 4.0 * scale, api="cuLaunchKernel", api_us=3.5)
                with k.op("aten::mm", pre=1.0):
                    k.launch(K_GEMM_SMALL_H100, 22.0 * scale, api_us=4.0)
            k.launch(K_TRITON_RMS, 5.0 * scale, api="cuLaunchKernel", api_us=3.5)
            with k.op("aten::mm", pre=1.0):
                k.launch(K_GEMM_SMALL_H100, 60.0 * scale, api_us=4.0)


FAKE_OPS = ("aten::view", "aten::mm", "aten::t", "aten::add", "aten::mul", "aten::_to_copy", "aten::pow", "aten::mean",
            "aten::rsqrt", "aten::cat", "aten::neg", "aten::slice", "aten::silu", "aten::empty_strided", "aten::clone",
            "aten::expand", "aten::transpose", "aten::_scaled_dot_product_flash_attention", "aten::embedding", "aten::argmax")


def fake_tensor_ops(k, n, us):
    """Tracing on FakeTensors: aten ops dispatched with no kernel (Dynamo's example values,
    AOT autograd's functionalization), each with its Python dispatch around it."""
    for i in range(n):
        k.adv(k.j(us * 0.6, 0.4))
        with k.op(FAKE_OPS[k.rng.randrange(len(FAKE_OPS))], pre=1.0, post=0.5):
            k.adv(k.j(us * 0.4, 0.5))


def recompile(k):
    """Dynamo recompiles the model for a new batch size (guard failure on the batch dim):
    the dynamo_timed ranges torch 2.4 records, FakeTensor tracing, Inductor lowering and code
    generation, the Triton kernels' modules loaded (cuModuleLoadData, driver API), one
    reduction's configs benchmarked on the GPU; ~300 ms in all."""
    with k.ann("TorchDynamo Cache Lookup", pre=2.0):
        k.adv(k.j(18.0, 0.2))
    with k.ann("_compile.compile_inner (dynamo_timed)", pre=3.0):
        k.adv(k.j(9000.0, 0.1))                              # bytecode analysis, guards
        fake_tensor_ops(k, 380, 45.0)                        # InstructionTranslator: example values
        with k.ann("OutputGraph.call_user_compiler (dynamo_timed)", pre=5.0):
            with k.ann("create_aot_dispatcher_function (dynamo_timed)", pre=5.0):
                k.adv(k.j(4000.0, 0.1))
                fake_tensor_ops(k, 900, 38.0)                # functionalization + partitioning
                with k.ann("compile_fx.<locals>.fw_compiler_base (dynamo_timed)", pre=5.0):
                    with k.ann("compile_fx_inner (dynamo_timed)", pre=5.0):
                        k.adv(k.j(3000.0, 0.1))
                        with k.ann("GraphLowering.run (dynamo_timed)", pre=5.0):
                            k.adv(k.j(42000.0, 0.05))
                        with k.ann("GraphLowering.compile_to_module (dynamo_timed)", pre=5.0):
                            with k.ann("code_gen (dynamo_timed)", pre=5.0):
                                k.adv(k.j(31000.0, 0.05))
                                with k.ann("PyCodeCache.load_by_key_path (dynamo_timed)", pre=5.0):
                                    k.adv(k.j(6000.0, 0.1))
                                    with k.ann("async_compile.wait (dynamo_timed)", pre=5.0):
                                        k.adv(k.j(68000.0, 0.05))     # Triton compiles in the workers
                                        for _ in range(9):
                                            k.runtime_only("cuModuleLoadData", 1400.0, cbid=0, rel=0.3, cat="cuda_driver")
                                            k.runtime_only("cuModuleGetFunction", 6.0, cbid=0, cat="cuda_driver")
                                            k.runtime_only("cuFuncGetAttribute", 2.0, cbid=0, cat="cuda_driver")
                                            k.adv(k.j(900.0, 0.3))
                        with k.ann("CachingAutotuner.benchmark_all_configs (dynamo_timed)", pre=5.0):
                            for _ in range(4):
                                for _ in range(10):
                                    k.launch(K_TRITON_RMS, 6.0, api="cuLaunchKernel", api_us=3.5)
                                k.sync(api="cudaDeviceSynchronize")
                                k.adv(k.j(600.0, 0.2))
                        k.adv(k.j(8000.0, 0.1))
                k.adv(k.j(3000.0, 0.1))
            k.adv(k.j(2000.0, 0.1))
        k.adv(k.j(6000.0, 0.1))                              # guards installed, bytecode rewritten


def case_recompile():
    """A torch.compile'd decoder served with a varying batch (H100, 30 steps of ~3 ms): at
    step 12 the batch grows from 8 to 12, the guard on the batch dimension fails and Dynamo
    recompiles in the middle of the run (~0.3 s of dynamo / AOT / Inductor ranges, FakeTensor
    tracing, cuModuleLoadData) right after the previous step's `.tolist()` sync."""
    k = KTrace(15001)
    k.host(40)
    for s in range(30):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            if s == 11:
                recompile(k)
            compiled_step(k, scale=1.0 if s < 11 else 1.25)
            argmax(k)
            tolist_sync(k, 96)
            k.host(60)
    k.host(30)
    return k.doc(name="recompile")


def case_gc_pause():
    """Megatron-style GPT training on an A100 (with_stack), 50 steps of ~30 ms, with
    `--manual-gc --manual-gc-interval`: in one step the loop calls gc.collect() (45 ms over
    a large Python heap: `<built-in function collect>`) after the loss sync, while the GPU
    waits; the other 49 steps are alike."""
    k = KTrace(16001, device=A100)
    k.python = True
    k.host(40)
    T, H, F = 4096, 2048, 8192
    with k.py("pretrain_gpt.py(294): <module>"):
        with k.py("megatron/training/training.py(1322): train"):
            for s in range(50):
                with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
                    with k.py("megatron/training/training.py(755): train_step"):
                        with k.py("megatron/core/pipeline_parallel/schedules.py(390): forward_backward_no_pipelining"):
                            with k.py("megatron/core/pipeline_parallel/schedules.py(218): forward_step"):
                                for _ in range(8):
                                    layer_norm(k, us_bytes(2 * T * H * 2, 1500))
                                    linear(k, us_flops(2 * T * H * F, 250), K_GEMM_A100, grid=(108, 1, 1))
                                    eltwise(k, "aten::gelu", K_GELU, us_bytes(2 * T * F * 2, 1500))
                                    linear(k, us_flops(2 * T * H * F, 250), K_GEMM_A100, grid=(108, 1, 1))
                                    eltwise(k, "aten::add", K_ADD_BF16, us_bytes(3 * T * H * 2, 1500))
                            with k.py("megatron/core/pipeline_parallel/schedules.py(355): backward_step"):
                                for _ in range(8):
                                    for _ in range(2):
                                        with k.op("autograd::engine::evaluate_function: MmBackward0", pre=3.0):
                                            with k.op("MmBackward0", pre=2.0):
                                                for _ in range(2):
                                                    with k.op("aten::mm", pre=1.5):
                                                        k.launch(K_GEMM_A100_NN, us_flops(2 * T * H * F, 250), grid=(108, 1, 1))
                                    with k.op("autograd::engine::evaluate_function: GeluBackward0", pre=3.0):
                                        with k.op("aten::gelu_backward", pre=2.0):
                                            k.launch(K_GELU_BWD, us_bytes(3 * T * F * 2, 1500))
                        with k.py("megatron/core/optimizer/optimizer.py(438): step"):
                            with k.op("aten::_fused_adamw_", pre=5.0):
                                for _ in range(4):
                                    k.launch(K_ADAM, 190.0, grid=(320, 1, 1), block=(512, 1, 1))
                    with k.py("megatron/training/training.py(1380): train"):
                        item_sync(k)                                   # the loss for the log line
                        k.adv(k.j(25.0, 0.2))
                        if s == 31:                                    # iteration % manual_gc_interval == 0
                            with k.py("<built-in function collect>"):
                                k.adv(k.j(45000.0, 0.02))
                    k.host(8)
    k.host(30)
    return k.doc(name="gc_pause")


def case_launch_blocking():
    """BERT-large inference (A100, fp16, 32 x 256 tokens, 24 layers) run with
    CUDA_LAUNCH_BLOCKING=1 left set from a debugging session: every cudaLaunchKernel (and
    copy) returns only when its kernel is done, so the host cannot queue ahead and the GPU
    idles for each op's dispatch; the launches of aten::addmm look as long as their kernels."""
    k = KTrace(17001, device=A100)
    k.launch_blocking = True
    k.host(40)
    T, H, F = 32 * 256, 1024, 4096
    hd = [[32, 256, H], [H, H], [H]]
    for s in range(10):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            with k.op("aten::embedding", pre=3.0):
                with k.op("aten::index_select", pre=1.5):
                    k.launch(K_EMBED, 14.0, grid=(256, 1, 1), block=(128, 1, 1))
            with k.op("aten::layer_norm", pre=2.0):
                with k.op("aten::native_layer_norm", pre=1.5):
                    k.launch(K_LN_F16, 18.0)
            for _ in range(24):
                for _ in range(3):                        # query, key, value
                    k.host(9)
                    addmm(k, K_GEMM_A100_F16, us_flops(2 * T * H * H, 200), dims=hd, grid=(108, 1, 1))
                k.host(14)
                with k.op("aten::scaled_dot_product_attention", pre=3.0):
                    with k.op("aten::_scaled_dot_product_efficient_attention", pre=2.0):
                        with k.op("aten::_efficient_attention_forward", pre=2.0):
                            k.launch(K_EFF_ATTN_F16, 62.0, grid=(4, 16, 32), block=(32, 4, 1))
                k.host(9)
                addmm(k, K_GEMM_A100_F16, us_flops(2 * T * H * H, 200), dims=hd, grid=(108, 1, 1))
                with k.op("aten::dropout", pre=2.0, post=0.5):
                    pass
                eltwise(k, "aten::add", K_ADD_F16, us_bytes(3 * T * H * 2, 1400))
                with k.op("aten::layer_norm", pre=2.0):
                    with k.op("aten::native_layer_norm", pre=1.5):
                        k.launch(K_LN_F16, us_bytes(2 * T * H * 2, 1200))
                k.host(9)
                addmm(k, K_GEMM_A100_F16, us_flops(2 * T * H * F, 200), dims=[[32, 256, H], [F, H], [F]], grid=(108, 1, 1))
                eltwise(k, "aten::gelu", K_GELU_F16, us_bytes(2 * T * F * 2, 1400))
                k.host(9)
                addmm(k, K_GEMM_A100_F16, us_flops(2 * T * H * F, 200), dims=[[32, 256, F], [H, F], [H]], grid=(108, 1, 1))
                with k.op("aten::dropout", pre=2.0, post=0.5):
                    pass
                eltwise(k, "aten::add", K_ADD_F16, us_bytes(3 * T * H * 2, 1400))
                with k.op("aten::layer_norm", pre=2.0):
                    with k.op("aten::native_layer_norm", pre=1.5):
                        k.launch(K_LN_F16, us_bytes(2 * T * H * 2, 1200))
            tolist_sync(k, 32 * 2 * 2)                      # logits.cpu() of the [CLS] head
            k.host(40)
    k.host(30)
    return k.doc(name="launch_blocking")


def case_copy_critical_path():
    """ResNet-50 inference throughput on an H100 (batch 256, channels_last fp16): each step
    copies the next batch, 256 x 3 x 256 x 256 fp32 = 201 MB from pinned memory, with
    `x.to('cuda', non_blocking=True)` on the compute stream right before the forward, then
    casts it to fp16: the copy runs alone on the GPU's critical path (~4 ms a step at
    ~52 GB/s) before the ~30 ms of convolutions; nothing waits on the host."""
    k = KTrace(18001)
    k.host(40)
    nb = 256 * 3 * 256 * 256 * 4
    convs = [(64, 600.0)] * 9 + [(128, 560.0)] * 12 + [(256, 520.0)] * 18 + [(512, 480.0)] * 9
    for s in range(12):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            with k.op("aten::to", pre=3.0, dims=[[256, 3, 256, 256], [], [], [], [], []]):
                with k.op("aten::_to_copy", pre=2.0):
                    with k.op("aten::empty_strided", pre=0.6, post=0.3):
                        pass
                    with k.op("aten::copy_", pre=2.0):
                        k.memcpy("HtoD (Pinned -> Device)", nb, 52.0, api_us=9.0)
            with k.op("aten::to", pre=2.0, dims=[[256, 3, 256, 256], [], [], [], []]):
                with k.op("aten::_to_copy", pre=1.5):
                    with k.op("aten::copy_", pre=1.0):
                        k.launch(K_CAST, us_bytes(nb * 1.5, 2700))
            with k.ann("## forward ##"):
                for i, (ch, us) in enumerate(convs):
                    with k.op("aten::conv2d", pre=3.0):
                        with k.op("aten::convolution", pre=1.5):
                            with k.op("aten::_convolution", pre=1.5):
                                with k.op("aten::cudnn_convolution", pre=3.0):
                                    k.launch(K_CONV_FWD_H100, us, grid=(512, 2, 1), block=(128, 1, 1), regs=168, smem=98304)
                    with k.op("aten::batch_norm", pre=2.0):
                        with k.op("aten::cudnn_batch_norm", pre=2.0):
                            k.launch(K_BN_INF, 62.0)
                    eltwise(k, "aten::relu_", K_RELU_F16, 40.0)
                    if i % 3 == 2:
                        eltwise(k, "aten::add_", K_ADD_F16, 55.0)
                with k.op("aten::adaptive_avg_pool2d", pre=2.0):
                    k.launch(K_SUM, 30.0)
                addmm(k, K_GEMM_H100, 40.0, dims=[[256, 2048], [1000, 2048], [1000]])                     # fc
            with k.op("aten::argmax", pre=2.0):
                k.launch(K_ARGMAX, 6.0)
            tolist_sync(k, 256 * 8)                     # predictions.cpu()
            k.host(30)
    k.host(30)
    return k.doc(name="copy_critical_path")


def rms_hf(k, numel, gbps=2600):
    """HF LlamaRMSNorm in eager mode: to(float32), pow, mean, add, rsqrt, mul, to(bf16), mul."""
    for nm, f in (("aten::to", 3), ("aten::pow", 4), ("aten::mean", 2), ("aten::add", 0.01), ("aten::rsqrt", 0.01),
                  ("aten::mul", 6), ("aten::to", 3), ("aten::mul", 3)):
        with k.op(nm, pre=2.0):
            k.launch(K_MUL if nm != "aten::mean" else K_SUM, max(2.5, us_bytes(numel * f, gbps)))


def case_kv_gather():
    """HF beam search (8 beams, Llama-2-7B on an H100, a static KV cache of 8192 positions)
    on a long prompt: after every beam step `_reorder_cache` gathers the whole cache for the
    surviving beams, `key_cache[l].index_select(0, beam_idx)` for the keys and the values of
    each of the 32 layers: 64 copies of 537 MB a step, more GPU time than the model itself."""
    k = KTrace(19001)
    k.host(40)
    B, H, L, D = 8, 32, 8192, 128
    kv = B * H * L * D * 2
    wdims = [[B, 1, 4096], [4096, 4096]]
    for s in range(16):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            embedding(k)
            for _ in range(32):
                rms_hf(k, B * 4096 * 2)
                for _ in range(3):
                    mm(k, K_GEMV, us_bytes(4096 * 4096 * 2, 2600), dims=wdims)
                for nm in ("aten::mul", "aten::slice", "aten::neg", "aten::cat", "aten::mul", "aten::add") * 2:
                    eltwise(k, nm, K_MUL, 2.6)
                for _ in range(2):
                    with k.op("aten::index_copy_", pre=2.0):
                        k.launch(K_INDEX_COPY, 3.0)
                with k.op("aten::scaled_dot_product_attention", pre=3.0):
                    with k.op("aten::_scaled_dot_product_efficient_attention", pre=2.0):
                        with k.op("aten::_efficient_attention_forward", pre=2.0):
                            k.launch(K_EFF_ATTN, us_bytes(2 * kv, 2700), grid=(1, 32, 8), block=(32, 4, 1))
                mm(k, K_GEMV, us_bytes(4096 * 4096 * 2, 2600), dims=wdims)
                eltwise(k, "aten::add", K_ADD_BF16, 2.5)
                rms_hf(k, B * 4096 * 2)
                mm(k, K_GEMV, us_bytes(11008 * 4096 * 2, 2600), dims=[[B, 1, 4096], [11008, 4096]])
                mm(k, K_GEMV, us_bytes(11008 * 4096 * 2, 2600), dims=[[B, 1, 4096], [11008, 4096]])
                eltwise(k, "aten::silu", K_SILU, 2.6)
                eltwise(k, "aten::mul", K_MUL, 2.6)
                mm(k, K_GEMV, us_bytes(11008 * 4096 * 2, 2600), dims=[[B, 1, 11008], [4096, 11008]])
                eltwise(k, "aten::add", K_ADD_BF16, 2.5)
            rms_hf(k, B * 4096 * 2)
            mm(k, K_GEMV, us_bytes(32000 * 4096 * 2, 2600), dims=[[B, 1, 4096], [32000, 4096]])
            with k.op("aten::log_softmax", pre=2.0):
                with k.op("aten::_log_softmax", pre=1.5):
                    k.launch(K_LOG_SOFTMAX, 8.0)
            eltwise(k, "aten::add", K_ADD_F32, 3.0)
            with k.op("aten::topk", pre=2.0):
                k.launch(K_TOPK, 14.0)
            for nm in ("aten::div", "aten::remainder", "aten::gather"):
                eltwise(k, nm, K_MUL, 2.5)
            tolist_sync(k, 16 * 8)                     # beam scorer: next tokens and indices to the host
            k.host(350)                                # BeamSearchScorer.process (Python)
            # _reorder_cache: every layer's keys and values gathered for the surviving beams
            for _ in range(32):
                for _ in range(2):
                    with k.op("aten::index_select", pre=2.5, dims=[[B, H, L, D], [], [B]],
                              types=["c10::BFloat16", "Scalar", "long int"]):
                        k.launch(K_INDEX_SELECT_LARGE, us_bytes(2 * kv, 2800), grid=(16384, 1, 1), block=(512, 1, 1))
            k.host(20)
    k.host(30)
    return k.doc(name="kv_gather")


def case_prefill_flash():
    """One 128k-token prefill of a Llama-3-8B (GQA, 32 layers) on an H100 in eager mode with
    SDPA: causal flash attention over 131072 tokens is ~380 ms a layer against ~80 ms of
    GEMMs: aten::_flash_attention_forward holds ~79% of a GPU that never waits."""
    k = KTrace(20001)
    k.host(40)
    S, H, KV, F = 131072, 4096, 1024, 14336
    act = S * H * 2
    bf = ["c10::BFloat16", "c10::BFloat16"]
    with k.ann("ProfilerStep#1", pre=2.0):
        with k.op("aten::embedding", pre=3.0):
            with k.op("aten::index_select", pre=1.5):
                k.launch(K_EMBED, us_bytes(2 * act, 2800))
        for _ in range(32):
            rms_hf(k, S * H * 2, gbps=2800)
            mm(k, K_GEMM_H100_BIG, us_flops(2 * S * H * H, 700), dims=[[1, S, H], [H, H]], types=bf)
            mm(k, K_GEMM_H100_BIG, us_flops(2 * S * H * KV, 650), dims=[[1, S, H], [KV, H]], types=bf)
            mm(k, K_GEMM_H100_BIG, us_flops(2 * S * H * KV, 650), dims=[[1, S, H], [KV, H]], types=bf)
            for nm in ("aten::mul", "aten::slice", "aten::neg", "aten::cat", "aten::mul", "aten::add") * 2:
                eltwise(k, nm, K_MUL, us_bytes(2 * act * 0.6, 2800))
            with k.op("aten::scaled_dot_product_attention", pre=3.0,
                      dims=[[1, 32, S, 128], [1, 32, S, 128], [1, 32, S, 128], [], [], [], [], []]):
                with k.op("aten::_scaled_dot_product_flash_attention", pre=2.0,
                          dims=[[1, 32, S, 128], [1, 32, S, 128], [1, 32, S, 128], [], [], [], []]):
                    with k.op("aten::_flash_attention_forward", pre=2.0,
                              dims=[[1, S, 32, 128], [1, S, 32, 128], [1, S, 32, 128], [], [], [], [], [], [], [], []],
                              types=["c10::BFloat16"] * 3 + ["", "", "Int", "Int", "Double", "Bool", "Bool", ""],
                              concrete=["", "", "", "", "", str(S), str(S), "0.", "True", "False", ""]):
                        k.launch(K_FLASH_FWD, us_flops(2 * S * S * H, 600), grid=(1024, 1, 32), block=(128, 1, 1),
                                 regs=255, smem=98304)
            mm(k, K_GEMM_H100_BIG, us_flops(2 * S * H * H, 700), dims=[[1, S, H], [H, H]], types=bf)
            eltwise(k, "aten::add", K_ADD_BF16, us_bytes(3 * act, 2800))
            rms_hf(k, S * H * 2, gbps=2800)
            mm(k, K_GEMM_H100_BIG, us_flops(2 * S * H * F, 700), dims=[[1, S, H], [F, H]], types=bf)
            mm(k, K_GEMM_H100_BIG, us_flops(2 * S * H * F, 700), dims=[[1, S, H], [F, H]], types=bf)
            eltwise(k, "aten::silu", K_SILU, us_bytes(2 * S * F * 2, 2800))
            eltwise(k, "aten::mul", K_MUL, us_bytes(3 * S * F * 2, 2800))
            mm(k, K_GEMM_H100_BIG, us_flops(2 * S * H * F, 700), dims=[[1, S, F], [H, F]], types=bf)
            eltwise(k, "aten::add", K_ADD_BF16, us_bytes(3 * act, 2800))
        rms_hf(k, H * 2)
        mm(k, K_GEMM_H100, 420.0, dims=[[1, 1, H], [128256, H]], types=bf)
        argmax(k)
        tolist_sync(k, 8)
        k.host(20)
    k.host(30)
    return k.doc(name="prefill_flash")


def gemm_us(bsz, n, kk, gbps=2600, tflops=600):
    """A decode GEMM [bsz, kk] x [kk, n] (bf16): the weights' bytes at gbps or the FLOPs at
    tflops, whichever takes longer, and never under ~4 us (a kernel's own floor)."""
    return max(4.0, us_bytes(n * kk * 2, gbps), us_flops(2 * bsz * n * kk, tflops))


def vllm_layer(k, bsz, h, kv, f, gbps=2600, gemv=K_GEMV, ctx_us=8.0):
    """One decoder layer of vLLM in eager mode (enforce_eager): fused add+RMSNorm, fused QKV
    GEMM, rotary, cache write, flash-attention decode (split-KV), O-proj, fused add+RMSNorm,
    gate_up GEMM, silu_and_mul, down GEMM; the GEMMs' times from their weights' bytes."""
    bf = ["c10::BFloat16", "c10::BFloat16"]
    with k.op("_C::fused_add_rms_norm", pre=3.0):
        k.launch(K_VLLM_RMS, 3.0, grid=(bsz, 1, 1), block=(1024, 1, 1))
    mm(k, gemv, gemm_us(bsz, h + 2 * kv, h, gbps), dims=[[bsz, h], [h + 2 * kv, h]], types=bf)
    with k.op("_C::rotary_embedding", pre=3.0):
        k.launch(K_VLLM_ROPE, 2.6)
    with k.op("_C_cache_ops::reshape_and_cache_flash", pre=3.0):
        k.launch(K_VLLM_CACHE, 2.4)
    with k.op("_vllm_fa2_C::varlen_fwd", pre=4.0):
        k.launch(K_VLLM_FA_SPLITKV, ctx_us, grid=(1, 32, 16), block=(128, 1, 1), regs=255, smem=49152)
        k.launch(K_VLLM_FA_COMBINE, 2.2)
    mm(k, gemv, gemm_us(bsz, h, h, gbps), dims=[[bsz, h], [h, h]], types=bf)
    with k.op("_C::fused_add_rms_norm", pre=3.0):
        k.launch(K_VLLM_RMS, 3.0, grid=(bsz, 1, 1), block=(1024, 1, 1))
    mm(k, gemv, gemm_us(bsz, 2 * f, h, gbps), dims=[[bsz, h], [2 * f, h]], types=bf)
    with k.op("_C::silu_and_mul", pre=3.0):
        k.launch(K_VLLM_SILU, 2.6)
    mm(k, gemv, gemm_us(bsz, h, f, gbps), dims=[[bsz, f], [h, f]], types=bf)


def vllm_inputs(k, n=4):
    """prepare_model_input: the step's small tensors (input ids, positions, slot mapping, block
    tables) copied from pinned host memory (async_tensor_h2d)."""
    for _ in range(n):
        with k.op("aten::to", pre=2.0):
            with k.op("aten::_to_copy", pre=1.5):
                with k.op("aten::copy_", pre=1.0):
                    k.memcpy("HtoD (Pinned -> Device)", 2048, 2.0, api_us=5.0)


def case_batch1_decode():
    """vLLM in eager mode serving one request (batch 1) of Llama-2-7B on an H100, 24 decode
    steps: the fused QKV GEMM is aten::mm on [1, 4096] x [4096, 12288]; batch-1 GEMMs are
    GEMVs that stream the weights, so aten::mm holds ~85% of a busy GPU (memory-bound)."""
    k = KTrace(21001)
    k.host(40)
    for s in range(24):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            k.host(120)                                   # scheduler + prepare_model_input (Python)
            vllm_inputs(k)
            with k.op("aten::embedding", pre=3.0):
                with k.op("aten::index_select", pre=1.5):
                    k.launch(K_EMBED, 2.5)
            for _ in range(32):
                vllm_layer(k, 1, 4096, 4096, 11008)
            with k.op("_C::fused_add_rms_norm", pre=3.0):
                k.launch(K_VLLM_RMS, 3.0)
            mm(k, K_GEMV, us_bytes(32000 * 4096 * 2, 2600), dims=[[1, 4096], [32000, 4096]],
               types=["c10::BFloat16", "c10::BFloat16"])
            argmax(k)
            tolist_sync(k, 8)
            k.host(90)                                    # process outputs
    k.host(30)
    return k.doc(name="batch1_decode")


def case_host_work():
    """Batch-8 decode of a 1B Llama-style model (H100, 16 layers) whose RMSNorm is an in-house
    CUDA extension (`custom_ops::fused_add_rms_norm`) that calls cudaGetDeviceProperties on
    every call to pick its block size (CUDA 12 names it cudaGetDeviceProperties_v2, ~180 us):
    32 such calls a step, while the GPU has ~60 us of work per layer."""
    k = KTrace(22001)
    k.host(40)
    h, kv, f = 2048, 512, 8192
    for s in range(24):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            embedding(k)
            for _ in range(16):
                for part in range(2):
                    with k.op("custom_ops::fused_add_rms_norm", pre=3.0):
                        k.runtime_only("cudaGetDeviceProperties_v2", 180.0, cbid=440, rel=0.2)
                        k.launch(K_CUSTOM_RMS, 2.5, grid=(8, 1, 1), block=(256, 1, 1))
                    if part == 0:
                        mm(k, K_GEMV, us_bytes((h + 2 * kv) * h * 2, 2600), dims=[[8, 1, h], [h + 2 * kv, h]])
                        for nm in ("aten::mul", "aten::cat", "aten::mul", "aten::add"):
                            eltwise(k, nm, K_MUL, 2.4)
                        sdpa(k, 7.0)
                        mm(k, K_GEMV, us_bytes(h * h * 2, 2600), dims=[[8, 1, h], [h, h]])
                    else:
                        mm(k, K_GEMV, us_bytes(2 * f * h * 2, 2600), dims=[[8, 1, h], [2 * f, h]])
                        eltwise(k, "aten::silu", K_SILU, 2.6)
                        eltwise(k, "aten::mul", K_MUL, 2.6)
                        mm(k, K_GEMV, us_bytes(f * h * 2, 2600), dims=[[8, 1, f], [h, f]])
            layer_norm(k, 3.0)
            mm(k, K_GEMV, us_bytes(128256 * h * 2, 2600), dims=[[8, 1, h], [128256, h]])
            argmax(k)
            tolist_sync(k, 64)
            k.host(25)
    k.host(30)
    return k.doc(name="host_work")


def case_sync_then_host():
    """vLLM-style serving (the V0 engine's loop, with_stack) of a 0.5B model with 256 running
    sequences on an H100: the forward is ~2.5 ms of GPU work, the sampler's `.tolist()` waits
    ~1 ms for it, then the host spends ~5 ms in Python: processing the outputs of 256
    sequences and scheduling the next step (vllm/core/scheduler.py) before its first copy.
    The sync only hid the ~1 ms it waited; the Python after it is the host's own work."""
    k = KTrace(23001)
    k.python = True
    k.host(40)
    h, kv, f = 896, 128, 4864
    with k.py("vllm/entrypoints/llm.py(1233): _run_engine"):
        for s in range(24):
            with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
                with k.py("vllm/engine/llm_engine.py(1375): step"):
                    with k.py("vllm/core/scheduler.py(1220): schedule"):
                        with k.py("vllm/core/scheduler.py(1089): _schedule_default"):
                            k.adv(k.j(1300.0, 0.08))
                            with k.py("vllm/core/scheduler.py(1016): _schedule_running"):
                                for _ in range(256):
                                    with k.py("vllm/core/block_manager.py(318): can_append_slots"):
                                        k.adv(k.j(1.6, 0.2))
                                    k.adv(k.j(1.2, 0.2))
                        k.adv(k.j(250.0, 0.1))
                    with k.py("vllm/worker/model_runner.py(1640): execute_model"):
                        with k.py("vllm/worker/model_runner.py(1280): prepare_model_input"):
                            k.adv(k.j(420.0, 0.1))
                            vllm_inputs(k, 5)
                        with k.py("vllm/model_executor/models/qwen2.py(470): forward"):
                            with k.op("aten::embedding", pre=3.0):
                                with k.op("aten::index_select", pre=1.5):
                                    k.launch(K_EMBED, 3.0)
                            for _ in range(24):
                                vllm_layer(k, 256, h, kv, f, gemv=K_GEMM_SMALL_H100, ctx_us=36.0)
                            with k.op("_C::fused_add_rms_norm", pre=3.0):
                                k.launch(K_VLLM_RMS, 3.0)
                            mm(k, K_GEMM_SMALL_H100, gemm_us(256, 151936, h), dims=[[256, h], [151936, h]])
                        with k.py("vllm/model_executor/layers/sampler.py(301): forward"):
                            argmax(k)
                            tolist_sync(k, 256 * 8, py=True)
                    with k.py("vllm/engine/llm_engine.py(1048): _process_model_outputs"):
                        k.adv(k.j(700.0, 0.1))
                        for _ in range(256):
                            with k.py("vllm/sequence.py(583): append_token_id"):
                                k.adv(k.j(2.8, 0.2))
                            k.adv(k.j(1.5, 0.2))
                k.host(8)
    k.host(30)
    return k.doc(name="sync_then_host")


def case_step_outlier_untraced():
    """The healthy decode loop made larger (2048 tokens a step, ~12 ms a step), 60 steps, Python tracing
    off: in one step the host stops for ~30 ms between the token sync and the next step with
    nothing traced (an automatic gen-2 garbage collection, or the process descheduled): one
    step of ~42 ms against a ~12 ms median; the other 59 are alike."""
    def pause(k, s):
        if s == 36:
            k.host(30000, 0.02)
    return decode_loop(24001, 60, scale=5.0, name="step_outlier_untraced", per_step=pause, m=2048)


def case_healthy_unet():
    """Stable Diffusion 1.5's UNet sampling on an A100 (batch 8 with classifier-free guidance:
    16 x 4 x 64 x 64 fp16 latents), 30 denoising steps: aten::cudnn_convolution ~27% of the
    GPU time, aten::addmm ~23%, flash attention ~18%, aten::mm ~12%, norms and pointwise the
    rest; no sync in the loop, the host runs ahead until the launch queue is full (1024
    kernels): busy GPU, no op over 50%, nothing waits. Truly healthy."""
    k = KTrace(25001, device=A100)
    k.max_queue = 1024
    k.host(40)
    for s in range(30):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            with k.op("aten::cat", pre=2.0):                     # CFG: the latents twice
                k.launch(K_MUL_F16, 6.0)
            with k.op("aten::mul", pre=2.0):
                k.launch(K_MUL_F16, 5.0)
            addmm(k, K_GEMM_A100_F16, 8.0, dims=[[16, 320], [1280, 320], [1280]])   # time embedding
            eltwise(k, "aten::silu", K_SILU_F16, 3.0)
            addmm(k, K_GEMM_A100_F16, 8.0, dims=[[16, 1280], [1280, 1280], [1280]])
            for blk in range(22):                                # resnet blocks
                ch = (320, 640, 1280, 1280)[min(3, blk // 6)]
                scale = {320: 1.0, 640: 0.55, 1280: 0.35}[ch]
                for half in range(2):
                    with k.op("aten::group_norm", pre=2.5):
                        with k.op("aten::native_group_norm", pre=2.0):
                            k.launch(K_GN_MOMENTS, 22.0 * scale)
                            k.launch(K_GN_APPLY, 30.0 * scale)
                    eltwise(k, "aten::silu", K_SILU_F16, 26.0 * scale)
                    with k.op("aten::conv2d", pre=3.0):
                        with k.op("aten::convolution", pre=1.5):
                            with k.op("aten::_convolution", pre=1.5):
                                with k.op("aten::cudnn_convolution", pre=3.0):
                                    k.launch(K_CONV_FWD_NHWC, 330.0 * scale * (1.2 if ch >= 1280 else 1.0), grid=(640, 1, 1),
                                             block=(128, 1, 1), regs=168, smem=81920)
                    if half == 0:
                        addmm(k, K_GEMM_A100_F16, 6.0, dims=[[16, 1280], [ch, 1280], [ch]])
                        eltwise(k, "aten::add", K_ADD_F16, 30.0 * scale)
                eltwise(k, "aten::add", K_ADD_F16, 30.0 * scale)
            for blk in range(16):                                # transformer blocks
                ch = (320, 640, 1280)[min(2, blk // 6)]
                tok = {320: 4096, 640: 1024, 1280: 256}[ch]
                scale = {320: 1.0, 640: 0.3, 1280: 0.12}[ch]
                with k.op("aten::group_norm", pre=2.5):
                    with k.op("aten::native_group_norm", pre=2.0):
                        k.launch(K_GN_MOMENTS, 22.0 * scale + 3)
                        k.launch(K_GN_APPLY, 30.0 * scale + 3)
                mm(k, K_GEMM_A100_F16, 60.0 * scale + 6, dims=[[16, tok, ch], [ch, ch]])               # proj_in
                for attn in range(2):
                    layer_norm(k, 25.0 * scale + 3)
                    for _ in range(3):                                                              # q, k, v
                        mm(k, K_GEMM_A100_F16, (60.0 if attn == 0 else 20.0) * scale + 6, dims=[[16, tok, ch], [ch, ch]])
                    with k.op("aten::scaled_dot_product_attention", pre=3.0):
                        with k.op("aten::_scaled_dot_product_flash_attention", pre=2.0):
                            with k.op("aten::_flash_attention_forward", pre=2.0):
                                k.launch(K_FLASH_FWD_F16, (620.0 if attn == 0 else 60.0) * scale + 8, grid=(32, 8, 16),
                                         block=(128, 1, 1), regs=255, smem=49152)
                    addmm(k, K_GEMM_A100_F16, 60.0 * scale + 6, dims=[[16, tok, ch], [ch, ch], [ch]])
                    eltwise(k, "aten::add", K_ADD_F16, 30.0 * scale + 3)
                layer_norm(k, 25.0 * scale + 3)
                addmm(k, K_GEMM_A100_F16, 480.0 * scale + 10, dims=[[16, tok, ch], [8 * ch, ch], [8 * ch]])  # GEGLU proj
                with k.op("aten::chunk", pre=2.0, post=0.5):
                    pass
                eltwise(k, "aten::gelu", K_GELU_F16, 60.0 * scale + 3)
                eltwise(k, "aten::mul", K_MUL_F16, 60.0 * scale + 3)
                addmm(k, K_GEMM_A100_F16, 240.0 * scale + 8, dims=[[16, tok, 4 * ch], [ch, 4 * ch], [ch]])
                eltwise(k, "aten::add", K_ADD_F16, 30.0 * scale + 3)
                mm(k, K_GEMM_A100_F16, 60.0 * scale + 6, dims=[[16, tok, ch], [ch, ch]])               # proj_out
                eltwise(k, "aten::add", K_ADD_F16, 30.0 * scale + 3)
            with k.op("aten::chunk", pre=2.0, post=0.5):                 # CFG combine + scheduler step
                pass
            for nm in ("aten::sub", "aten::mul", "aten::add", "aten::mul", "aten::add"):
                eltwise(k, nm, K_MUL_F16, 4.0)
            k.host(30)
    k.host(30)
    return k.doc(name="healthy_unet")


def case_compiled_steady():
    """A torch.compile'd (default mode, no CUDA graphs) 1B decoder at batch 1 on an H100,
    profiled with with_stack in the steady state: no recompile, the guards pass. Per step
    the Python around the compiled graph (Dynamo's eval_frame _fn, AOT autograd's
    runtime_wrapper, Inductor's output_code __call__ / utils run) then the generated module's
    `call` launching ~100 Triton kernels through triton_heuristics.py run, and cuBLAS mm's
    through extern_kernels; the kernels are short (~8 us): the GPU waits on the Python of
    the launch path, ~1.4 ms of host for ~0.9 ms of GPU a step. The cause is Python in the
    launch path (CUDA graphs: mode="reduce-overhead"); nothing compiles."""
    k = KTrace(26001)
    k.python = True
    k.host(40)
    gen = "/tmp/torchinductor_root/q7/cq7xw4nyfzpdm3zmx5kd2bqfyk3v6wqjmqh2z3ohyjdbnl6ip5ua.py"

    def triton(kname, us, line):
        with k.py("%s(%d): call" % (gen, line)):
            k.adv(k.j(2.5, 0.3))
        with k.py("torch/_inductor/runtime/triton_heuristics.py(1010): run"):
            k.adv(k.j(5.0, 0.3))
            k.launch(kname, us, api="cuLaunchKernel", api_us=3.5)

    def extern_mm(us, line):
        with k.py("%s(%d): call" % (gen, line)):
            k.adv(k.j(2.0, 0.3))
        with k.op("aten::mm", pre=1.5):
            k.launch(K_GEMV, us, api_us=4.5)

    with k.py("generate.py(201): <module>"):
        for s in range(30):
            with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
                with k.py("generate.py(88): decode_one_token"):
                    with k.py("torch/_dynamo/eval_frame.py(632): _fn"):
                        k.adv(k.j(22.0, 0.2))
                        with k.ann("TorchDynamo Cache Lookup", pre=1.0):
                            k.adv(k.j(12.0, 0.2))
                        with k.ann("Torch-Compiled Region: 0/0", pre=1.0):
                            with k.py("torch/_functorch/_aot_autograd/runtime_wrappers.py(328): runtime_wrapper"):
                                k.adv(k.j(28.0, 0.2))
                                with k.py("torch/_inductor/output_code.py(460): __call__"):
                                    k.adv(k.j(7.0, 0.2))
                                    with k.py("torch/_inductor/utils.py(2208): run"):
                                        k.adv(k.j(4.0, 0.2))
                                        with k.ann("## Call CompiledFxGraph fq7xw4nyfzpdm3zmx5kd2bqfyk3v6wqjmqh2z3ohyjdbnl6ip5ua ##", pre=2.0):
                                            line = 900
                                            for _ in range(16):
                                                triton(K_TRITON_RMS, 3.0, line)
                                                extern_mm(9.0, line + 4)
                                                triton(K_TRITON_ROPE, 2.6, line + 9)
                                                with k.op("aten::_scaled_dot_product_flash_attention", pre=1.5):
                                                    with k.op("aten::_flash_attention_forward", pre=1.0):
                                                        k.launch(K_FLASH, 6.0)
                                                extern_mm(4.0, line + 15)
                                                triton(K_TRITON_ADD_RMS, 3.0, line + 19)
                                                extern_mm(16.0, line + 23)
                                                triton(K_TRITON_SILU, 2.6, line + 27)
                                                extern_mm(8.0, line + 31)
                                                line += 36
                                            extern_mm(50.0, line)
                                k.adv(k.j(6.0, 0.2))
                    argmax(k)
                    with k.py("<built-in method item of Tensor object at 0x7f3b2a1c8e50>"):
                        item_sync(k)
                k.host(6)
    k.host(30)
    return k.doc(name="compiled_steady")


def cpu_mlp(seed, gflops, name):
    """CPU inference of a 6-layer MLP block (batch 32, hidden 1024, 4096 inner), fp32, the host
    only (no GPU: a CPU serving replica): each layer's two aten::linear -> aten::addmm calls
    of 2 x 32 x 1024 x 4096 = 268M FLOPs run at `gflops` (one core with MKL: ~60; a 32-core
    host: ~900), with a GELU and a layer norm between them."""
    k = KTrace(seed)
    k.host(40)
    flops = 2 * 32 * 1024 * 4096
    for s in range(20):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            for _ in range(6):
                with k.op("aten::layer_norm", pre=3.0, dims=[[32, 1024], [], [1024], [1024], [], []]):
                    k.adv(k.j(25.0, 0.1))
                with k.op("aten::linear", pre=3.0, dims=[[32, 1024], [4096, 1024], [4096]]):
                    with k.op("aten::addmm", pre=2.0, dims=[[4096], [32, 1024], [1024, 4096], [], []]):
                        k.adv(k.j(flops / gflops / 1e3, 0.03))
                with k.op("aten::gelu", pre=2.0, dims=[[32, 4096], []]):
                    k.adv(k.j(40.0, 0.1))
                with k.op("aten::linear", pre=3.0, dims=[[32, 4096], [1024, 4096], [1024]]):
                    with k.op("aten::addmm", pre=2.0, dims=[[1024], [32, 4096], [4096, 1024], [], []]):
                        k.adv(k.j(flops / gflops / 1e3, 0.03))
            k.host(15)
    k.host(30)
    return k.doc(name=name, cpu_only=True)


def case_cpu_threads():
    return cpu_mlp(4101, 60.0, "cpu_threads")


def case_cpu_many_threads():
    return cpu_mlp(4102, 900.0, "cpu_many_threads")


# ---------------------------------------------------------------- issue 48: blind spots, by mechanism

K_COPY_BF16 = ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda"
               "(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1}>"
               "(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() "
               "const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1}>(int, "
               "at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}"
               "::operator()() const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, "
               "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}"
               "::operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1})")
K_ROLL = ("void at::native::(anonymous namespace)::roll_cuda_kernel<c10::BFloat16>(c10::BFloat16 const*, c10::BFloat16*, long, "
          "long, long, long, long, long)")
K_CAT_BF16 = ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::OpaqueType<2u>, "
              "unsigned int, 4, 128, 1>(at::native::(anonymous namespace)::OpaqueType<2u>*, at::native::(anonymous namespace)::"
              "CatArrInputTensorMetadata<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, 128, 1>, "
              "at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)")
K_NCHW2NHWC = "void nchwToNhwcKernel<__half, __half, float, true, false>(int, int, int, int, __half const*, __half*, float, float)"
K_NHWC2NCHW = "void nhwcToNchwKernel<__half, __half, float, true, false>(int, int, int, int, __half const*, __half*, float, float)"
K_CONV_VOLTA = "volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_f2f_exp_small_nhwc_tn_v1"
K_BN_INF_NCHW = ("void cudnn::bn_fw_inf_1C11_kernel_NCHW<__half, float, true, 1>(__half, __half, cudnnTensorStruct, __half const*, "
                 "cudnnTensorStruct, __half*, cudnnTensorStruct, float const*, float const*, float const*, float const*, float)")
K_POW_BF16 = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::pow_tensor_scalar_kernel_impl"
              "<c10::BFloat16, c10::BFloat16>(at::TensorIteratorBase&, c10::BFloat16)::{lambda(c10::BFloat16)#3}, "
              "at::detail::Array<char*, 2> >(int, at::native::(anonymous namespace)::pow_tensor_scalar_kernel_impl<c10::BFloat16, "
              "c10::BFloat16>(at::TensorIteratorBase&, c10::BFloat16)::{lambda(c10::BFloat16)#3}, at::detail::Array<char*, 2>)")
K_TANH_BF16 = ("void at::native::vectorized_elementwise_kernel<4, at::native::tanh_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}"
               "::operator()() const::{lambda()#10}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, "
               "at::native::tanh_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#10}::operator()() "
               "const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)")
K_RSQRT_BF16 = ("void at::native::vectorized_elementwise_kernel<4, at::native::rsqrt_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}"
                "::operator()() const::{lambda()#10}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, "
                "at::native::rsqrt_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#10}::operator()() "
                "const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)")
K_MEAN_BF16 = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::MeanOps<float, float, float, "
               "float>, unsigned int, c10::BFloat16, 4> >(at::native::ReduceOp<c10::BFloat16, at::native::MeanOps<float, float, float, "
               "float>, unsigned int, c10::BFloat16, 4>)")
K_ADDS_BF16 = ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, "
               "c10::BFloat16, at::native::binary_internal::CUDAFunctor_add<float> >, at::detail::Array<char*, 2> >(int, "
               "at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::CUDAFunctor_add"
               "<float> >, at::detail::Array<char*, 2>)")
K_DIV_BF16 = ("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, "
              "c10::BFloat16, at::native::binary_internal::DivFunctor<float> >, at::detail::Array<char*, 3> >(int, "
              "at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::DivFunctor<float> >, "
              "at::detail::Array<char*, 3>)")
# single-tensor AdamW's per-parameter kernels (fp32 master weights), torch 2.x names
K_LERP_F32 = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::lerp_scalar_kernel"
              "(at::TensorIteratorBase&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#6}::operator()() const"
              "::{lambda(float, float)#1}, at::detail::Array<char*, 3> >(int, at::native::(anonymous namespace)::lerp_scalar_kernel"
              "(at::TensorIteratorBase&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#6}::operator()() const"
              "::{lambda(float, float)#1}, at::detail::Array<char*, 3>)")
K_ADDCMUL_F32 = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::addcmul_cuda_kernel"
                 "(at::TensorIteratorBase&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#6}::operator()() const"
                 "::{lambda(float, float, float)#1}, at::detail::Array<char*, 4> >(int, at::native::(anonymous namespace)::"
                 "addcmul_cuda_kernel(at::TensorIteratorBase&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#6}"
                 "::operator()() const::{lambda(float, float, float)#1}, at::detail::Array<char*, 4>)")
K_ADDCDIV_F32 = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::addcdiv_cuda_kernel"
                 "(at::TensorIteratorBase&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#6}::operator()() const"
                 "::{lambda(float, float, float)#1}, at::detail::Array<char*, 4> >(int, at::native::(anonymous namespace)::"
                 "addcdiv_cuda_kernel(at::TensorIteratorBase&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#6}"
                 "::operator()() const::{lambda(float, float, float)#1}, at::detail::Array<char*, 4>)")
K_SQRT_F32 = ("void at::native::vectorized_elementwise_kernel<4, at::native::sqrt_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}"
              "::operator()() const::{lambda()#8}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, "
              "at::native::sqrt_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#8}::operator()() "
              "const::{lambda(float)#1}, at::detail::Array<char*, 2>)")
K_DIV_F32 = ("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
             "at::native::binary_internal::DivFunctor<float> >, at::detail::Array<char*, 3> >(int, at::native::BinaryFunctor<float, "
             "float, float, at::native::binary_internal::DivFunctor<float> >, at::detail::Array<char*, 3>)")
K_FILL_2021 = ("void at::native::vectorized_elementwise_kernel<4, at::native::fill_kernel_cuda(at::TensorIterator&, c10::Scalar)::"
               "{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda()#1}, at::detail::Array<char*, 1> >(int, "
               "at::native::fill_kernel_cuda(at::TensorIterator&, c10::Scalar)::{lambda()#1}::operator()() const::{lambda()#4}"
               "::operator()() const::{lambda()#1}, at::detail::Array<char*, 1>)")
K_APEX_ADAM = ("void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float, float, float, float, float, float, "
               "adamMode_t, float>(long, int volatile*, TensorListMetadata<4>, AdamFunctor<float>, float, float, float, float, float, "
               "float, adamMode_t, float)")
K_GEMM_V100_F16 = "volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_tn"
K_GEMM_V100_F16_NN = "volta_fp16_s884gemm_fp16_256x128_ldg8_f2f_nn"
K_SOFTMAX_V100 = ("void (anonymous namespace)::softmax_warp_forward<c10::Half, c10::Half, float, 7, false>(c10::Half*, c10::Half const*, "
                  "int, int, int)")
K_LN_V100 = ("void (anonymous namespace)::RowwiseMomentsCUDAKernel<c10::Half>(long, c10::Half, c10::Half const*, c10::Half*, "
             "c10::Half*)")
K_LN_APPLY_V100 = ("void (anonymous namespace)::LayerNormForwardCUDAKernel<c10::Half>(long, c10::Half const*, c10::Half const*, "
                   "c10::Half const*, c10::Half const*, c10::Half const*, c10::Half*)")
K_GELU_V100 = ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIterator&)::{lambda()#1}"
               "::operator()() const::{lambda()#3}::operator()() const::{lambda(c10::Half)#1}, at::detail::Array<char*, 2> >(int, "
               "at::native::GeluCUDAKernelImpl(at::TensorIterator&)::{lambda()#1}::operator()() const::{lambda()#3}::operator()() "
               "const::{lambda(c10::Half)#1}, at::detail::Array<char*, 2>)")
V100 = {"id": 0, "name": "Tesla V100-SXM2-32GB", "totalGlobalMem": 34089730048, "computeMajor": 7, "computeMinor": 0,
        "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
        "sharedMemPerBlock": 49152, "numSms": 80, "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 98304,
        "sharedMemPerMultiprocessor": 98304}
L4 = {"id": 0, "name": "NVIDIA L4", "totalGlobalMem": 23580639232, "computeMajor": 8, "computeMinor": 9, "maxThreadsPerBlock": 1024,
      "maxThreadsPerMultiprocessor": 1536, "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 58,
      "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 101376, "sharedMemPerMultiprocessor": 102400}
BF16x3 = ["c10::BFloat16"] * 3
F16x3 = ["c10::Half"] * 3
F32x3 = ["float"] * 3


def bf16_linear(k, m, n, kk, frac=0.7, roof=H100_ROOF, kname=K_GEMM_H100, bias=True, types=BF16x3, grid=(132, 1, 1)):
    """nn.Linear on [m, kk] x [kk, n] with its shapes recorded, at `frac` of its roof."""
    us = roof_us(m, n, kk, frac=frac, roof=roof, es=4 if types[0] == "float" else 2)
    if bias:
        addmm(k, kname, us, dims=[[m, kk], [n, kk], [n]], types=types, grid=grid)
    else:
        mm(k, kname, us, dims=[[m, kk], [n, kk]], types=types[:2], grid=grid)


def case_dm_window_shift():
    """Swin-B inference (H100, bf16, batch 64 at 224x224, record_shapes): the shifted windows
    are data movement between the GEMMs: torch.roll for the cyclic shift, window_partition /
    window_reverse as view + permute + .contiguous() (a full copy each), patch merging as
    torch.cat of four strided slices. The copies hold ~40% of a busy GPU, spread over
    aten::roll, aten::contiguous and aten::cat (none near half): memory traffic pretending to
    be model work, and no single operator over 50%."""
    k = KTrace(48101)
    k.host(40)
    stages = ((56 * 56, 128, 2), (28 * 28, 256, 2), (14 * 14, 512, 6), (7 * 7, 1024, 2))
    for s in range(6):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            for tokens, ch, depth in stages:
                m = 64 * tokens
                act = m * ch * 2                                   # bytes of one activation (bf16)
                for blk in range(depth):
                    layer_norm(k, us_bytes(2 * act, 2600) + 2.0)
                    if blk % 2:
                        with k.op("aten::roll", pre=2.0, dims=[[64, 56, 56, ch], [], []]):
                            k.launch(K_ROLL, us_bytes(2 * act, 1300) + 2.0)           # strided gather: ~40% of HBM
                    with k.op("aten::contiguous", pre=2.0):                            # window_partition
                        with k.op("aten::clone", pre=1.5):
                            with k.op("aten::copy_", pre=1.2):
                                k.launch(K_COPY_BF16, us_bytes(2 * act, 1100) + 2.0)
                    bf16_linear(k, m, 3 * ch, ch)                                      # qkv
                    sdpa(k, us_flops(4 * m * 49 * ch, 250) + 4.0)                      # 7x7 windows
                    bf16_linear(k, m, ch, ch)                                          # proj
                    with k.op("aten::contiguous", pre=2.0):                            # window_reverse
                        with k.op("aten::clone", pre=1.5):
                            with k.op("aten::copy_", pre=1.2):
                                k.launch(K_COPY_BF16, us_bytes(2 * act, 1100) + 2.0)
                    if blk % 2:
                        with k.op("aten::roll", pre=2.0, dims=[[64, 56, 56, ch], [], []]):
                            k.launch(K_ROLL, us_bytes(2 * act, 1300) + 2.0)
                    eltwise(k, "aten::add", K_ADD_BF16, us_bytes(3 * act, 2600) + 2.0)
                    layer_norm(k, us_bytes(2 * act, 2600) + 2.0)
                    bf16_linear(k, m, 4 * ch, ch)                                      # fc1
                    eltwise(k, "aten::gelu", K_GELU, us_bytes(8 * act, 2600) + 2.0)
                    bf16_linear(k, m, ch, 4 * ch)                                      # fc2
                    eltwise(k, "aten::add", K_ADD_BF16, us_bytes(3 * act, 2600) + 2.0)
                if ch < 1024:                                                          # patch merging
                    with k.op("aten::cat", pre=2.0, dims=[[], []]):
                        k.launch(K_CAT_BF16, us_bytes(2 * act, 1200) + 2.0)
                    layer_norm(k, us_bytes(2 * act, 2600) + 2.0)
                    bf16_linear(k, m // 4, 2 * ch, 4 * ch, bias=False)
            argmax(k)
            tolist_sync(k, 64 * 8)
            k.host(60)
    k.host(30)
    return k.doc(name="dm_window_shift")


def case_layout_conv_nchw():
    """ResNet-50 inference with AMP on a V100, 2021 Kineto schema (torch 1.9), the model left in
    NCHW (channels_first): Volta's tensor-core convolutions want NHWC, so cuDNN transposes
    every call's input (nchwToNhwcKernel) and output (nhwcToNchwKernel) inside
    aten::cudnn_convolution: layout conversion ~30% of a busy GPU, hidden under the math op's
    name (the fix: model.to(memory_format=torch.channels_last))."""
    k = KTrace(48102, device=V100, schema2021=True)
    k.host(40)
    for s in range(6):
        with k.op("ProfilerStep#%d" % (s + 1), pre=2.0):
            for layer in range(53):
                scale = (1.0, 0.8, 0.6, 0.45)[min(3, layer // 14)]
                with k.op("aten::conv2d", pre=3.0):
                    with k.op("aten::convolution", pre=1.5):
                        with k.op("aten::_convolution", pre=1.5):
                            with k.op("aten::cudnn_convolution", pre=4.0):
                                k.launch(K_NCHW2NHWC, 60.0 * scale, grid=(784, 1, 1), block=(256, 1, 1))
                                k.launch(K_CONV_VOLTA, 190.0 * scale, grid=(98, 2, 1), block=(256, 1, 1), regs=128, smem=65536)
                                k.launch(K_NHWC2NCHW, 60.0 * scale, grid=(784, 1, 1), block=(256, 1, 1))
                with k.op("aten::batch_norm", pre=2.0):
                    with k.op("aten::_batch_norm_impl_index", pre=1.5):
                        with k.op("aten::cudnn_batch_norm", pre=3.0):
                            k.launch(K_BN_INF_NCHW, 25.0 * scale, grid=(256, 1, 1), block=(512, 1, 1))
                if layer % 3 != 2:
                    with k.op("aten::relu_", pre=2.0):
                        k.launch(K_RELU_F16, 18.0 * scale)
            linear(k, 30.0, K_GEMM_V100_F16)
            with k.op("aten::to", pre=2.0):
                with k.op("aten::copy_", pre=1.5):
                    k.memcpy("DtoH (Device -> Pageable)", 256 * 1000 * 2, 8.0, blocking=True)
            k.host(80)
    k.host(30)
    return k.doc(name="layout_conv_nchw")


def gelu_tanh(k, numel, gbps=1600):
    """GELU (tanh approximation) written out in eager PyTorch, as GPT-2 / NeoX ports do:
    0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3))): seven kernels, one pass each."""
    b = numel * 2
    for nm, kname, passes in (("aten::pow", K_POW_BF16, 2), ("aten::mul", K_MUL, 2), ("aten::add", K_ADD_BF16, 3),
                              ("aten::mul", K_MUL, 2), ("aten::tanh", K_TANH_BF16, 2), ("aten::add", K_ADDS_BF16, 2),
                              ("aten::mul", K_MUL, 3)):
        with k.op(nm, pre=2.0):
            k.launch(kname, us_bytes(passes * b, gbps) + 2.5)


def rms_eager(k, numel, gbps=1600):
    """RMSNorm in eager bf16 (no upcast): pow, mean, add eps, rsqrt, mul, mul weight."""
    b = numel * 2
    for nm, kname, passes in (("aten::pow", K_POW_BF16, 2), ("aten::mean", K_MEAN_BF16, 1), ("aten::add", K_ADDS_BF16, 0.01),
                              ("aten::rsqrt", K_RSQRT_BF16, 0.01), ("aten::mul", K_MUL, 3), ("aten::mul", K_MUL, 3)):
        with k.op(nm, pre=2.0):
            k.launch(kname, us_bytes(passes * b, gbps) + 2.5)


def case_eltwise_chain():
    """A GPT-NeoX-style decoder (A100, bf16, 8 x 2048 tokens, hidden 2048) trained in eager mode
    with its RMSNorm and tanh-GELU written out as PyTorch ops, shapes recorded on the GEMMs:
    per layer two 6-kernel norms and a 7-kernel GELU, back to back on the stream between the
    GEMMs. Elementwise kernels hold about half the GPU time, split over aten::mul, aten::add,
    aten::pow, aten::tanh, aten::mean, aten::rsqrt (none over a quarter), while the GEMMs run
    near their roof: the waste is the passes a fused kernel would not make."""
    k = KTrace(48103, device=A100)
    k.host(40)
    m, h, f = 8 * 2048, 2048, 8192
    for s in range(6):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            for _ in range(12):
                rms_eager(k, m * h)
                bf16_linear(k, m, 3 * h, h, roof=A100_ROOF, kname=K_GEMM_A100, grid=(108, 1, 1))
                sdpa(k, us_flops(4 * 8 * 2048 * 2048 * h * 0.5, 180), K_FLASH_FWD)
                bf16_linear(k, m, h, h, roof=A100_ROOF, kname=K_GEMM_A100, grid=(108, 1, 1))
                eltwise(k, "aten::add", K_ADD_BF16, us_bytes(3 * m * h * 2, 1600) + 2.5)
                rms_eager(k, m * h)
                bf16_linear(k, m, f, h, roof=A100_ROOF, kname=K_GEMM_A100, grid=(108, 1, 1))
                gelu_tanh(k, m * f)
                bf16_linear(k, m, h, f, roof=A100_ROOF, kname=K_GEMM_A100, grid=(108, 1, 1))
                eltwise(k, "aten::add", K_ADD_BF16, us_bytes(3 * m * h * 2, 1600) + 2.5)
            argmax(k)
            item_sync(k)
            k.host(40)
    k.host(30)
    return k.doc(name="eltwise_chain")


def case_eltwise_chain_nsys():
    """The same kind of model profiled with Nsight Systems (`nsys profile -t cuda,nvtx`, an L4,
    fp16 inference of a ViT-style encoder whose LayerNorm and GELU are written out in eager
    PyTorch) and exported to SQLite: no aten ops, only the kernels' names, the runtime calls
    and torch.cuda.nvtx ranges per block. Elementwise kernels (vectorized_elementwise_kernel /
    reduce_kernel) hold about half of a busy GPU, in chains of 5-7 between the GEMMs."""
    k = KTrace(48104, device=L4)
    k.host(40)
    m, h, f = 32 * 197, 1024, 4096
    for s in range(6):
        with k.ann("iteration", pre=2.0):
            for blk in range(24):
                with k.ann("encoder_block", pre=1.0):
                    for part in range(2):
                        for kname, passes in ((K_MEAN_BF16, 1), (K_ADD_BF16, 3), (K_POW_BF16, 2), (K_MEAN_BF16, 1),
                                              (K_RSQRT_BF16, 0.01), (K_MUL, 3), (K_MUL, 3)):
                            k.launch(kname, us_bytes(passes * m * h * 2, 240) + 2.5)
                        if part == 0:
                            k.launch(K_GEMM_A100_F16, roof_us(m, 3 * h, h, 0.7, (121e12, 300e9)), grid=(58, 1, 1))
                            k.launch(K_FLASH_FWD_F16, us_flops(4 * 32 * 197 * 197 * h, 60), grid=(2, 16, 32))
                            k.launch(K_GEMM_A100_F16, roof_us(m, h, h, 0.7, (121e12, 300e9)), grid=(58, 1, 1))
                        else:
                            k.launch(K_GEMM_A100_F16, roof_us(m, f, h, 0.7, (121e12, 300e9)), grid=(58, 1, 1))
                            for kname, passes in ((K_POW_BF16, 2), (K_MUL, 2), (K_ADD_BF16, 3), (K_MUL, 2), (K_TANH_BF16, 2),
                                                  (K_ADDS_BF16, 2), (K_MUL, 3)):
                                k.launch(kname, us_bytes(passes * m * f * 2, 240) + 2.5)
                            k.launch(K_GEMM_A100_F16, roof_us(m, h, f, 0.7, (121e12, 300e9)), grid=(58, 1, 1))
            k.memcpy("DtoH (Device -> Pageable)", 32 * 1000 * 2, 6.0, blocking=True, api="cudaMemcpy")
            k.host(50)
    k.host(30)
    return Nsys(k, bandwidth=300_000_000_000)


def adam_single_tensor(k, sizes, pre=1.5):
    """torch.optim.AdamW(foreach=False): `_single_tensor_adamw`, per parameter: weight decay
    (mul_), lerp_ (exp_avg), mul_ + addcmul_ (exp_avg_sq), sqrt, div_, add_ (denom), addcdiv_
    (param): 8 kernels a parameter, each on one small tensor."""
    for numel in sizes:
        for nm, kname, passes in (("aten::mul_", K_SCALE, 2), ("aten::lerp_", K_LERP_F32, 3), ("aten::mul_", K_SCALE, 2),
                                  ("aten::addcmul_", K_ADDCMUL_F32, 3), ("aten::sqrt", K_SQRT_F32, 2),
                                  ("aten::div_", K_DIV_F32, 2), ("aten::add_", K_ADD_F32, 2), ("aten::addcdiv_", K_ADDCDIV_F32, 4)):
            with k.op(nm, pre=pre, post=0.6):
                k.launch(kname, us_bytes(passes * numel * 4, 2000) + 2.6, api_us=3.2, lat_us=3.0,
                         grid=(max(1, numel // 2048), 1, 1), block=(512, 1, 1))


def case_adam_per_param():
    """Fine-tuning a ViT-L-style model (H100, bf16 autocast, fp32 master weights) with
    torch.optim.AdamW(foreach=False) on 290 parameter tensors: the optimizer step is ~2300
    per-parameter kernels of 2.6-5 us. The host launches them while the GPU still runs the
    backward (the host is ahead by tens of ms), so the GPU then executes them back to back:
    a busy GPU, a phase of thousands of tiny kernels that one multi-tensor kernel per op
    (foreach=True, or fused=True) would replace. No idle: not launch_bound."""
    k = KTrace(48105)
    k.host(40)
    rng = random.Random(48105)
    sizes = []
    for _ in range(24):
        sizes += [1024 * 3072, 3072, 1024 * 1024, 1024, 1024, 1024, 1024 * 4096, 4096, 4096 * 1024, 1024, 1024, 1024]
    sizes += [rng.choice((1024, 2048)) for _ in range(2)]
    m = 64 * 197
    for s in range(3):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            with k.ann("## forward ##"):
                for _ in range(24):
                    layer_norm(k, 12.0)
                    bf16_linear(k, m, 3072, 1024)
                    sdpa(k, 260.0, K_FLASH_FWD)
                    bf16_linear(k, m, 1024, 1024)
                    layer_norm(k, 12.0)
                    bf16_linear(k, m, 4096, 1024)
                    eltwise(k, "aten::gelu", K_GELU, 30.0)
                    bf16_linear(k, m, 1024, 4096)
            with k.ann("## backward ##"):
                for _ in range(24):
                    for n, kk in ((1024, 4096), (4096, 1024), (1024, 1024), (3072, 1024)):
                        for _g in range(2):
                            with k.op("aten::mm", pre=2.0, dims=[[m, n], [n, kk]], types=BF16x3[:2]):
                                k.launch(K_GEMM_H100, roof_us(m, kk, n, 0.7), grid=(132, 1, 1), block=(384, 1, 1))
                    with k.op("aten::_flash_attention_backward", pre=2.0):
                        k.launch(K_FLASH_FWD, 650.0)
                    eltwise(k, "aten::gelu_backward", K_GELU_BWD, 45.0)
            with k.ann("Optimizer.step#AdamW.step", pre=3.0):
                adam_single_tensor(k, sizes)
            item_sync(k)
            k.host(30)
    k.host(30)
    return k.doc(name="adam_per_param")


def case_zero_grad_fills():
    """Fine-tuning an 80-layer narrow encoder (1283 parameter tensors) on a V100 with torch 1.9
    (2021 Kineto schema) and apex FusedAdam; `optimizer.zero_grad()` at torch 1.9's default
    (set_to_none=False) fills every gradient with zeros: 1283 aten::zero_ -> aten::fill_
    kernels of 2-4 us a step. zero_grad runs right after the optimizer step, while the GPU
    still works through the step's backward (the host is ahead), so the fills run back to back
    on a busy GPU: a zero_grad phase of tiny kernels that set_to_none=True removes outright."""
    k = KTrace(48106, device=V100, schema2021=True)
    k.host(40)
    sizes = []
    for _ in range(80):
        sizes += [512 * 512] * 4 + [512] * 4 + [512, 512, 512, 512] + [512 * 2048, 2048, 2048 * 512, 512]
    sizes += [30522 * 512, 512, 512]
    m = 16 * 128
    for s in range(3):
        with k.op("ProfilerStep#%d" % (s + 1), pre=2.0):
            for _ in range(80):
                linear(k, 28.0, K_GEMM_V100_F16, grid=(80, 1, 1))
                with k.op("aten::softmax", pre=2.0):
                    k.launch(K_SOFTMAX_V100, 14.0)
                linear(k, 12.0, K_GEMM_V100_F16, grid=(80, 1, 1))
                with k.op("aten::layer_norm", pre=2.0):
                    k.launch(K_LN_APPLY_V100, 9.0)
                linear(k, 38.0, K_GEMM_V100_F16, grid=(80, 1, 1))
                with k.op("aten::gelu", pre=2.0):
                    k.launch(K_GELU_V100, 10.0)
                linear(k, 38.0, K_GEMM_V100_F16, grid=(80, 1, 1))
            for _ in range(80):
                for _g in range(8):
                    with k.op("aten::mm", pre=2.0):
                        k.launch(K_GEMM_V100_F16_NN, 30.0, grid=(80, 1, 1))
                for kn in (K_GELU_V100, K_LN_APPLY_V100, K_SOFTMAX_V100):
                    with k.op("aten::mul", pre=2.0):
                        k.launch(kn, 12.0)
            with k.op("Optimizer.step#FusedAdam.step", pre=3.0):
                for _ in range(8):                        # apex's multi_tensor_applier: no aten op around it
                    k.host(6)
                    k.launch(K_APEX_ADAM, 160.0, grid=(320, 1, 1), block=(512, 1, 1))
            with k.op("Optimizer.zero_grad#FusedAdam.zero_grad", pre=3.0):
                for numel in sizes:
                    with k.op("aten::zero_", pre=1.2, post=0.5):
                        with k.op("aten::fill_", pre=1.0, post=0.4):
                            k.launch(K_FILL_2021, us_bytes(numel * 2, 700) + 2.2, api_us=3.0, lat_us=3.0,
                                     grid=(max(1, numel // 4096), 1, 1), block=(512, 1, 1))
            item_sync(k)
            k.host(30)
    k.host(30)
    return k.doc(name="zero_grad_fills")


K_SGEMM_A100_TN = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas"
K_SGEMM_A100_NN = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas"
K_SGEMM_A100_NT = "sm80_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas"
K_SGEMM_H100 = "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x16_warpgroupsize1x1x1_ffma_execute_segment_k_off_kernel__5x_cublas"
K_SGEMM_H100_NN = "sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x16_warpgroupsize1x1x1_ffma_execute_segment_k_off_kernel__5x_cublas"
K_ALIGN1_TN = "cutlass_80_tensorop_f16_s16816gemm_f16_64x64_64x5_tn_align1"
K_ALIGN1_NN = "cutlass_80_tensorop_f16_s16816gemm_f16_64x64_64x5_nn_align1"
K_ALIGN1_NT = "cutlass_80_tensorop_f16_s16816gemm_f16_64x64_64x5_nt_align1"
K_RELU_F32 = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, "
              "c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const"
              "::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, at::native::(anonymous namespace)::launch_clamp_scalar"
              "(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const"
              "::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)")
K_THRESHOLD_BWD = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::threshold_kernel_impl<float>"
                   "(at::TensorIteratorBase&, float, float)::{lambda(float, float)#1}, at::detail::Array<char*, 3> >(int, "
                   "at::native::(anonymous namespace)::threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)"
                   "::{lambda(float, float)#1}, at::detail::Array<char*, 3>)")
K_EMBBAG = ("void at::native::(anonymous namespace)::embedding_bag_kernel_sum_mean<float, long>(long const*, long const*, float const*, "
            "float*, long*, long, long, long, long, long, float const*, long)")
K_LOG_SOFTMAX_F32 = ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous "
                     "namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)")
K_BMM_SGEMM_H100 = "sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x128x16_warpgroupsize1x1x1_ffma_execute_segment_k_off_kernel__5x_cublas"
K_SOFTMAX_F32 = K_SOFTMAX
K_LN_F32 = ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*, float const*, "
            "float const*, float*, float*, float*)")
K_GELU_F32 = ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
              "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, "
              "at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)"
              "::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)")
A100_FP32 = (19.5e12, 2.039e12)
H100_FP32 = (66.9e12, 3.35e12)


def case_fp32_gemm_a100():
    """A DLRM-style recommendation model trained in fp32 on an A100 with PyTorch's default
    (since 1.12) torch.backends.cuda.matmul.allow_tf32 = False: its MLP GEMMs (shapes
    recorded, float) run on CUDA cores (cuBLAS `..._ffma_...` kernels) at ~87% of the FP32
    peak, i.e. ~11% of the TF32 tensor-core roof the same math could use (8x). "Little is
    left in that kernel" is wrong: the experiment is TF32 (allow_tf32 / set_float32_matmul_
    precision("high")) or bf16 autocast."""
    k = KTrace(48201, device=A100)
    k.host(40)
    b = 8192
    dims = ((512, 2048), (2048, 4096), (4096, 4096), (4096, 1024), (1024, 256))
    for s in range(4):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            with k.op("aten::embedding_bag", pre=3.0):
                with k.op("aten::_embedding_bag", pre=2.0):
                    k.launch(K_EMBBAG, 380.0, grid=(4096, 1, 1))
            with k.ann("## forward ##"):
                for kk, n in dims:
                    addmm(k, K_SGEMM_A100_TN, roof_us(b, n, kk, 0.87, A100_FP32, 4), dims=[[b, kk], [n, kk], [n]],
                          types=F32x3, grid=(n // 128, b // 128, 1))
                    with k.op("aten::relu", pre=2.0):
                        k.launch(K_RELU_F32, us_bytes(2 * b * n * 4, 1700) + 2.0)
            with k.ann("## backward ##"):
                for kk, n in reversed(dims):
                    with k.op("aten::threshold_backward", pre=2.0):
                        k.launch(K_THRESHOLD_BWD, us_bytes(3 * b * n * 4, 1700) + 2.0)
                    with k.op("aten::mm", pre=2.0, dims=[[b, n], [n, kk]], types=F32x3[:2]):
                        k.launch(K_SGEMM_A100_NN, roof_us(b, kk, n, 0.87, A100_FP32, 4), grid=(kk // 128, b // 128, 1))
                    with k.op("aten::mm", pre=2.0, dims=[[n, b], [b, kk]], types=F32x3[:2]):
                        k.launch(K_SGEMM_A100_NT, roof_us(n, kk, b, 0.87, A100_FP32, 4), grid=(kk // 128, n // 128, 1))
            with k.ann("Optimizer.step#SGD.step"):
                with k.op("aten::_fused_sgd_", pre=5.0):
                    for _ in range(3):
                        k.launch(K_SGD, 160.0, grid=(320, 1, 1), block=(512, 1, 1))
            item_sync(k)
            k.host(30)
    k.host(30)
    return k.doc(name="fp32_gemm_a100")


def case_fp32_bert_h100():
    """BERT-base fine-tuning in fp32 (no autocast, allow_tf32 left False) on an H100, batch 32 x
    512 tokens: the linear layers (aten::addmm, shapes recorded) and attention as two
    aten::bmm (math path) run on CUDA cores (`sm90_xmma_gemm_f32f32_f32f32_f32_..._ffma_...`)
    at ~85% of the FP32 peak: ~12% of the TF32 roof the same math could use."""
    k = KTrace(48202)
    k.host(40)
    m, h, f, bh, sq, d = 32 * 512, 768, 3072, 32 * 12, 512, 64
    for s in range(3):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            for _ in range(12):
                addmm(k, K_SGEMM_H100, roof_us(m, 3 * h, h, 0.85, H100_FP32, 4), dims=[[m, h], [3 * h, h], [3 * h]],
                      types=F32x3)
                with k.op("aten::bmm", pre=2.0, dims=[[bh, sq, d], [bh, d, sq]], types=F32x3[:2]):
                    k.launch(K_BMM_SGEMM_H100, roof_us(sq, sq, d, 0.8, H100_FP32, 4) * bh, grid=(4, 8, bh))
                with k.op("aten::_softmax", pre=2.0):
                    k.launch(K_SOFTMAX_F32, us_bytes(2 * bh * sq * sq * 4, 2600) + 2.0)
                with k.op("aten::bmm", pre=2.0, dims=[[bh, sq, sq], [bh, sq, d]], types=F32x3[:2]):
                    k.launch(K_BMM_SGEMM_H100, roof_us(sq, d, sq, 0.8, H100_FP32, 4) * bh, grid=(1, 8, bh))
                addmm(k, K_SGEMM_H100, roof_us(m, h, h, 0.85, H100_FP32, 4), dims=[[m, h], [h, h], [h]], types=F32x3)
                with k.op("aten::native_layer_norm", pre=2.0):
                    k.launch(K_LN_F32, us_bytes(3 * m * h * 4, 2600) + 2.0)
                addmm(k, K_SGEMM_H100, roof_us(m, f, h, 0.85, H100_FP32, 4), dims=[[m, h], [f, h], [f]], types=F32x3)
                with k.op("aten::gelu", pre=2.0):
                    k.launch(K_GELU_F32, us_bytes(2 * m * f * 4, 2600) + 2.0)
                addmm(k, K_SGEMM_H100, roof_us(m, h, f, 0.85, H100_FP32, 4), dims=[[m, f], [h, f], [h]], types=F32x3)
                with k.op("aten::native_layer_norm", pre=2.0):
                    k.launch(K_LN_F32, us_bytes(3 * m * h * 4, 2600) + 2.0)
            for _ in range(12):
                for n, kk in ((h, f), (f, h), (h, h), (3 * h, h)):
                    for _g in range(2):
                        with k.op("aten::mm", pre=2.0, dims=[[m, n], [n, kk]], types=F32x3[:2]):
                            k.launch(K_SGEMM_H100_NN, roof_us(m, kk, n, 0.85, H100_FP32, 4))
                with k.op("aten::native_layer_norm_backward", pre=2.0):
                    k.launch(K_LN_BWD, us_bytes(4 * m * h * 4, 2600) + 2.0)
            item_sync(k)
            k.host(30)
    k.host(30)
    return k.doc(name="fp32_bert_h100")


def case_vocab_unaligned():
    """nanoGPT's GPT-2 (124M) trained with fp16 autocast on an A100, 8 x 1024 tokens a step,
    vocab 50257: the tied lm_head GEMMs (aten::mm [8192, 768] x [768, 50257] and its two
    backward GEMMs, shapes recorded) have N = 50257, odd, so cuBLAS falls back to alignment-1
    CUTLASS kernels (`..._align1`): long kernels (~10 ms) over a grid of ~100k blocks (~930
    a SM) at ~20% of the fp16 tensor-core roof, while the other GEMMs run at ~65%. Not
    latency-bound (long kernels, a huge grid) and no CUDA-graph question: the shape is the
    cause (pad the vocab to a multiple of 64: 50304)."""
    k = KTrace(48203, device=A100)
    k.host(40)
    m, h, v = 8 * 1024, 768, 50257
    gemm = ((3 * h, h), (h, h), (4 * h, h), (h, 4 * h))
    for s in range(3):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            with k.op("aten::embedding", pre=3.0):
                with k.op("aten::index_select", pre=1.5):
                    k.launch(K_EMBED, 30.0)
            for _ in range(12):
                layer_norm(k, us_bytes(2 * m * h * 2, 1600) + 2.0)
                addmm(k, K_GEMM_A100_F16, roof_us(m, 3 * h, h, 0.65, A100_ROOF), dims=[[m, h], [3 * h, h], [3 * h]], types=F16x3)
                with k.op("aten::_scaled_dot_product_flash_attention", pre=2.0):
                    with k.op("aten::_flash_attention_forward", pre=2.0):
                        k.launch(K_FLASH_FWD_F16, 185.0, grid=(8, 12, 8))
                addmm(k, K_GEMM_A100_F16, roof_us(m, h, h, 0.65, A100_ROOF), dims=[[m, h], [h, h], [h]], types=F16x3)
                eltwise(k, "aten::add", K_ADD_F16, us_bytes(3 * m * h * 2, 1600) + 2.0)
                layer_norm(k, us_bytes(2 * m * h * 2, 1600) + 2.0)
                addmm(k, K_GEMM_A100_F16, roof_us(m, 4 * h, h, 0.65, A100_ROOF), dims=[[m, h], [4 * h, h], [4 * h]], types=F16x3)
                eltwise(k, "aten::gelu", K_GELU_F16, us_bytes(2 * m * 4 * h * 2, 1600) + 2.0)
                addmm(k, K_GEMM_A100_F16, roof_us(m, h, 4 * h, 0.65, A100_ROOF), dims=[[m, 4 * h], [h, 4 * h], [h]], types=F16x3)
                eltwise(k, "aten::add", K_ADD_F16, us_bytes(3 * m * h * 2, 1600) + 2.0)
            layer_norm(k, us_bytes(2 * m * h * 2, 1600) + 2.0)
            mm(k, K_ALIGN1_TN, roof_us(m, v, h, 0.2, A100_ROOF), dims=[[m, h], [v, h]], types=F16x3[:2], grid=(786, 128, 1))
            with k.op("aten::log_softmax", pre=2.0):
                with k.op("aten::_log_softmax", pre=1.5):
                    k.launch(K_LOG_SOFTMAX_F32, us_bytes(m * v * (2 + 4), 1600))
            with k.op("aten::nll_loss_forward", pre=2.0):
                k.launch(K_SUM, 12.0)
            # backward: the lm_head's two GEMMs (same odd N), then the blocks
            with k.op("aten::mm", pre=2.0, dims=[[m, v], [v, h]], types=F16x3[:2]):
                k.launch(K_ALIGN1_NN, roof_us(m, h, v, 0.2, A100_ROOF), grid=(12, 128, 1))
            with k.op("aten::mm", pre=2.0, dims=[[h, m], [m, v]], types=F16x3[:2]):
                k.launch(K_ALIGN1_NT, roof_us(h, v, m, 0.2, A100_ROOF), grid=(786, 12, 1))
            for _ in range(12):
                for n, kk in gemm:
                    for _g in range(2):
                        with k.op("aten::mm", pre=2.0, dims=[[m, n], [n, kk]], types=F16x3[:2]):
                            k.launch(K_GEMM_A100_F16, roof_us(m, kk, n, 0.65, A100_ROOF))
                with k.op("aten::_flash_attention_backward", pre=2.0):
                    k.launch(K_FLASH_FWD_F16, 420.0, grid=(8, 12, 8))
            with k.ann("Optimizer.step#AdamW.step"):
                with k.op("aten::_fused_adamw_", pre=5.0):
                    k.launch(K_ADAM, 900.0, grid=(320, 1, 1), block=(512, 1, 1))
            item_sync(k)
            k.host(40)
    k.host(30)
    return k.doc(name="vocab_unaligned")


def case_tiny_grid_batch():
    """An online ranking model (H100, bf16) scoring one request of 4 candidates at a time: ten
    aten::addmm [4, 1024] x [1024, 1024] (shapes recorded) a request, each a ~24 us kernel
    over 8 blocks on 132 SMs (0.06 a SM), the host just ahead of the GPU: the math runs at
    ~3% of its roof because each launch carries too little work. Kernel evidence says
    latency: the fix is more work per launch (batch requests), which a CUDA graph would not
    give (the GPU is not waiting for launches)."""
    k = KTrace(48204)
    k.host(40)
    for s in range(24):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            vllm_inputs(k, 1)
            for _ in range(10):
                addmm(k, K_GEMM_SMALL_H100, 24.0, dims=[[4, 1024], [1024, 1024], [1024]], types=BF16x3, grid=(8, 1, 1))
                with k.op("aten::relu_", pre=2.0):
                    k.launch(K_RELU, 2.6, grid=(1, 1, 1))
            with k.op("aten::sigmoid", pre=2.0):
                k.launch(K_SILU, 2.6, grid=(1, 1, 1))
            tolist_sync(k, 4 * 2)
            k.host(25)
    k.host(30)
    return k.doc(name="tiny_grid_batch")


# ---- blind spot 3: idle charged to what emptied the queue

K_BOX = ("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
         "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3> >(int, at::native::BinaryFunctor<float, "
         "float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3>)")
K_NONZERO_CUB = ("void cub::DeviceReduceSingleTileKernel<cub::DeviceReducePolicy<int, unsigned int, cub::Sum>::Policy600, "
                 "at_cuda_detail::cub::TransformInputIterator<bool, at::native::(anonymous namespace)::NonZeroOp<bool>, bool*, long>, "
                 "int*, int, cub::Sum, int>(at_cuda_detail::cub::TransformInputIterator<bool, at::native::(anonymous namespace)::"
                 "NonZeroOp<bool>, bool*, long>, int*, int, cub::Sum, int)")
K_SELECT_CUB = ("void cub::DeviceSelectSweepKernel<cub::DispatchSelectIf<cub::CountingInputIterator<long, long>, "
                "at_cuda_detail::cub::TransformInputIterator<bool, at::native::(anonymous namespace)::NonZeroOp<bool>, bool*, long>, "
                "long*, int*, cub::NullType, cub::NullType, int, false>::PtxSelectIfPolicyT>(...)")
K_MASKED = ("void at::native::index_elementwise_kernel<128, 4, at::native::gpu_index_kernel<at::native::index_kernel_impl"
            "<at::native::OpaqueType<4> >(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char*, "
            "long)#1}>(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>, at::native::index_kernel_impl"
            "<at::native::OpaqueType<4> >(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char*, "
            "long)#1} const&)::{lambda(int)#1}>(long, ...)")
K_NORM_F32 = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::NormTwoOps<float, float, float>, "
              "unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::NormTwoOps<float, float, float>, unsigned int, float, 4>)")
K_WHERE_F32 = ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::(anonymous namespace)::"
               "where_kernel_impl(at::TensorIterator&)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::"
               "{lambda(bool, float, float)#1}>(at::TensorIteratorBase&, ...)::{lambda(int)#1}>(int, ...)")
K_STENCIL = "cloverleaf::advec_mom_kernel(int, int, int, double*, double const*, double const*, double const*, double const*, int)"
K_STENCIL2 = "cloverleaf::pdv_kernel(int, int, int, double, double const*, double const*, double*, double const*, double const*, double*)"


def case_pageable_nonblocking():
    """A speech model's training step on an H100 that moves its per-step feature tensor with
    `feats.to("cuda", non_blocking=True)` from a NumPy array (pageable memory): for pageable
    memory the copy cannot be asynchronous, so cudaMemcpyAsync waits for the stream to reach
    the copy and stages it (~2.7 ms for 32 MB) while the GPU still works off the step's first
    half: the queue drains inside aten::to. After it, ~40 small ops (masking, scaling,
    concatenation) are launched into an empty queue and each kernel waits for its launch:
    the idle is the blocking copy's, not theirs (before it, the host was ~3 ms ahead)."""
    k = KTrace(48301)
    k.host(40)
    for s in range(8):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            for _ in range(6):
                bf16_linear(k, 8192, 4096, 1024, bias=False)
                eltwise(k, "aten::gelu", K_GELU, 20.0)
                bf16_linear(k, 8192, 1024, 4096, bias=False)
            with k.op("aten::to", pre=3.0, dims=[[64, 250, 64], [], [], [], [], []]):
                with k.op("aten::_to_copy", pre=2.0):
                    with k.op("aten::copy_", pre=1.5):
                        k.memcpy("HtoD (Pageable -> Device)", 4 * 1024 * 1024, 12.0, blocking=True)
            for i in range(160):
                nm = ("aten::mul", "aten::sub", "aten::add", "aten::div", "aten::masked_fill_")[i % 5]
                eltwise(k, nm, K_MUL, 2.8, pre=6.0)
            for _ in range(6):
                bf16_linear(k, 8192, 4096, 1024, bias=False)
                eltwise(k, "aten::gelu", K_GELU, 20.0)
                bf16_linear(k, 8192, 1024, 4096, bias=False)
            k.host(20)
    k.host(30)
    return k.doc(name="pageable_nonblocking")


def case_masked_select_2021():
    """A detection model (V100, torch 1.9, 2021 Kineto schema) whose loss selects the positive
    anchors with `pred[mask]` (aten::masked_select -> aten::nonzero: a data-dependent shape, so
    the host copies the count back and waits: cudaMemcpyAsync DtoH + cudaStreamSynchronize)
    while the GPU still runs the forward; then the loss's ~500 small box-math ops are launched
    into an empty queue, each kernel shorter than its launch. The sync emptied the queue:
    the idle of those cheap ops is the drain's (the host had been ~8 ms ahead)."""
    k = KTrace(48302, device=V100, schema2021=True)
    k.host(40)
    for s in range(6):
        with k.op("ProfilerStep#%d" % (s + 1), pre=2.0):
            for layer in range(40):
                with k.op("aten::cudnn_convolution", pre=4.0):
                    k.launch(K_CONV_VOLTA, 280.0, grid=(98, 2, 1), block=(256, 1, 1))
                with k.op("aten::cudnn_batch_norm", pre=3.0):
                    k.launch(K_BN_INF_NCHW, 40.0)
                with k.op("aten::relu_", pre=2.0):
                    k.launch(K_RELU_F16, 25.0)
            with k.op("aten::masked_select", pre=3.0):
                with k.op("aten::nonzero", pre=2.0):
                    k.launch(K_NONZERO_CUB, 6.0, grid=(1, 1, 1))
                    k.memcpy("DtoH (Device -> Pageable)", 8, 0.005, api_us=8.0)
                    k.sync()
                    k.launch(K_SELECT_CUB, 8.0)
                with k.op("aten::index", pre=2.0):
                    k.launch(K_MASKED, 6.0)
            for i in range(500):
                nm = ("aten::sub", "aten::mul", "aten::add", "aten::div", "aten::clamp", "aten::log", "aten::abs")[i % 7]
                with k.op(nm, pre=5.0, post=1.0):
                    k.launch(K_BOX, 2.6, grid=(4, 1, 1))
            for layer in range(40):
                with k.op("aten::cudnn_convolution_backward", pre=4.0):
                    k.launch(K_CONV_VOLTA, 160.0, grid=(98, 2, 1), block=(256, 1, 1))
                    k.launch(K_CONV_VOLTA, 160.0, grid=(98, 2, 1), block=(256, 1, 1))
            with k.op("Optimizer.step#SGD.step", pre=3.0):
                with k.op("aten::_foreach_add_", pre=4.0):
                    k.launch(K_SGD, 400.0, grid=(320, 1, 1))
            k.host(30)
    k.host(30)
    return k.doc(name="masked_select_2021")


def case_clip_grad_item():
    """GPT-2-medium fine-tuning on an A100 (with_stack) with
    clip_grad_norm_(..., error_if_nonfinite=True): the library tests the total norm with
    `if total_norm.isnan() or total_norm.isinf()`, an implicit bool -> aten::is_nonzero ->
    aten::item -> a DtoH copy and cudaStreamSynchronize, while the GPU still runs ~20 ms of
    backward. Then AdamW(foreach=False) launches ~1900 per-parameter kernels into an empty
    queue, each shorter than its launch. Without that sync the host would have queued them
    under the backward: the optimizer's idle is the hidden .item()'s."""
    k = KTrace(48303, device=A100)
    k.python = True
    k.host(40)
    sizes = [1024 * 3072, 3072, 1024 * 1024, 1024, 1024, 1024, 1024 * 4096, 4096, 4096 * 1024, 1024, 1024, 1024] * 20
    m = 8 * 1024
    with k.py("train.py(301): <module>"):
        for s in range(3):
            with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
                with k.py("train.py(240): train_step"):
                    for _ in range(20):
                        layer_norm(k, 10.0)
                        bf16_linear(k, m, 3072, 1024, roof=A100_ROOF, kname=K_GEMM_A100, grid=(108, 1, 1))
                        sdpa(k, 300.0, K_FLASH_FWD)
                        bf16_linear(k, m, 1024, 1024, roof=A100_ROOF, kname=K_GEMM_A100, grid=(108, 1, 1))
                        bf16_linear(k, m, 4096, 1024, roof=A100_ROOF, kname=K_GEMM_A100, grid=(108, 1, 1))
                        eltwise(k, "aten::gelu", K_GELU, 45.0)
                        bf16_linear(k, m, 1024, 4096, roof=A100_ROOF, kname=K_GEMM_A100, grid=(108, 1, 1))
                    for _ in range(20):
                        for n, kk in ((1024, 4096), (4096, 1024), (1024, 1024), (3072, 1024)):
                            for _g in range(2):
                                with k.op("aten::mm", pre=2.0, dims=[[m, n], [n, kk]], types=BF16x3[:2]):
                                    k.launch(K_GEMM_A100, roof_us(m, kk, n, 0.7, A100_ROOF), grid=(108, 1, 1))
                        with k.op("aten::_flash_attention_backward", pre=2.0):
                            k.launch(K_FLASH_FWD, 700.0)
                    with k.py("torch/nn/utils/clip_grad.py(81): clip_grad_norm_"):
                        with k.op("aten::_foreach_norm", pre=3.0):
                            for _ in range(4):
                                k.launch(K_NORM_F32, 60.0)
                        with k.op("aten::stack", pre=2.0):
                            k.launch(K_CAT_BF16, 3.0)
                        with k.op("aten::linalg_vector_norm", pre=2.0):
                            k.launch(K_NORM_F32, 3.0)
                        with k.op("aten::logical_or", pre=2.0):
                            k.launch(K_MUL, 2.5)
                        with k.op("aten::is_nonzero", pre=2.0):
                            with k.op("aten::item", pre=1.5):
                                with k.op("aten::_local_scalar_dense", pre=1.5):
                                    k.memcpy("DtoH (Device -> Pageable)", 1, 0.005, api_us=8.0)
                                    k.sync()
                        with k.op("aten::_foreach_mul_", pre=3.0):
                            for _ in range(4):
                                k.launch(K_SCALE, 50.0)
                    with k.ann("Optimizer.step#AdamW.step", pre=3.0):
                        with k.py("torch/optim/adamw.py(480): _single_tensor_adamw"):
                            adam_single_tensor(k, sizes, pre=14.0)      # Python between the ops
                with k.py("train.py(262): log"):
                    item_sync(k)
                k.host(30)
    k.host(30)
    return k.doc(name="clip_grad_item")


def case_nvtx_host_range_nsys():
    """A C++ CUDA hydrodynamics code (CloverLeaf-style) profiled with Nsight Systems on an A100
    (SQLite export: runtime calls, kernels, NVTX ranges, no Python, no operators): each
    timestep launches its stencil kernels (~3 ms of GPU work), calls cudaDeviceSynchronize,
    then spends ~2 ms in an NVTX range `write_field_summary` of host-only work (reductions on
    the CPU, file output) with no GPU work under it. The GPU idles during that range: the
    range is named host work, not the sync's: the sync waited ~2.5 ms, but the host's own
    work after it is the cause."""
    k = KTrace(48304, device=A100)
    k.host(40)
    for s in range(20):
        with k.ann("timestep", pre=2.0):
            with k.ann("hydro_cycle", pre=1.0):
                for _ in range(12):
                    k.launch(K_STENCIL, 150.0, grid=(3840, 1, 1), block=(128, 1, 1))
                    k.launch(K_STENCIL2, 95.0, grid=(3840, 1, 1), block=(128, 1, 1))
            k.sync(api="cudaDeviceSynchronize")
            with k.ann("write_field_summary", pre=3.0):
                k.host(2000, 0.05)
            k.host(15)
    k.host(30)
    return Nsys(k, bandwidth=2_039_000_000_000)


def lamb_step(k, sizes):
    """A hand-written LAMB step in Python (foreach-less): per parameter 10 ops, each one small
    kernel launched from Python, ~30 us of host an op, most of it inside the op (dispatch,
    TensorIterator setup, scalar wrapping); the GPU waits between them."""
    for numel in sizes:
        for nm, kname in (("aten::mul_", K_SCALE), ("aten::add_", K_ADD_F32), ("aten::addcmul_", K_ADDCMUL_F32),
                          ("aten::sqrt", K_SQRT_F32), ("aten::div", K_DIV_F32), ("aten::norm", K_NORM_F32),
                          ("aten::maximum", K_ADD_F32), ("aten::where", K_WHERE_F32), ("aten::clamp_", K_RELU_F32),
                          ("aten::sub_", K_ADDCDIV_F32)):
            with k.op(nm, pre=3.0, post=20.0):                   # the op's own dispatch and checks (TensorIterator, scalars)
                k.launch(kname, us_bytes(2 * numel * 4, 2000) + 2.4, api_us=4.5, lat_us=3.0, grid=(max(1, numel // 4096), 1, 1))


def case_lamb_phase_spread():
    """A BERT-large-style encoder (24 layers, hidden 1024) trained on an H100 with gradient
    accumulation (4 micro-batches of 4096 tokens, bf16; its Python module code, hooks and
    autograd keep the host about as slow as the GPU, so no backlog builds) and a hand-written
    LAMB optimizer in Python (per parameter: mul_, add_, addcmul_, sqrt, div, norm, maximum,
    where, clamp_, sub_): ~1900 small kernels a step inside Optimizer.step#Lamb.step, each
    shorter than its launch. The optimizer phase leaves the GPU idle ~35% of the wall, split
    over ten op names, each near 3.5%, under the 5% gate: the phase is the culprit, its ops
    the members."""
    k = KTrace(48305)
    k.host(40)
    sizes = [1024 * 3072, 3072, 1024 * 1024, 1024, 1024 * 4096, 4096, 4096 * 1024, 1024] * 24
    m = 4096
    for s in range(2):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            for _mb in range(4):
                with k.ann("## forward ##"):
                    for _ in range(24):
                        k.host(125)                              # the module's Python (hooks, checks)
                        bf16_linear(k, m, 3 * 1024, 1024)
                        sdpa(k, 60.0, K_FLASH_FWD)
                        bf16_linear(k, m, 1024, 1024)
                        layer_norm(k, 10.0)
                        bf16_linear(k, m, 4096, 1024)
                        eltwise(k, "aten::gelu", K_GELU, 14.0)
                        bf16_linear(k, m, 1024, 4096)
                        layer_norm(k, 10.0)
                with k.ann("## backward ##"):
                    for _ in range(24):
                        k.host(360)                              # autograd's Python hooks
                        for n, kk in ((1024, 4096), (4096, 1024), (1024, 1024), (3072, 1024)):
                            for _g in range(2):
                                with k.op("aten::mm", pre=2.0, dims=[[m, n], [n, kk]], types=BF16x3[:2]):
                                    k.launch(K_GEMM_H100, roof_us(m, kk, n, 0.7))
                        with k.op("aten::_flash_attention_backward", pre=2.0):
                            k.launch(K_FLASH_FWD, 150.0)
            with k.ann("Optimizer.step#Lamb.step", pre=3.0):
                lamb_step(k, sizes)
            k.host(30)
    k.host(30)
    return k.doc(name="lamb_phase_spread")


# ---- blind spot 4: advice from the trace

K_NCCL_AG = "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
K_NCCL_RS = "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
K_NCCL_AR_F32 = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
K_XLA_GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas"
K_XLA_FUSION = "loop_add_multiply_fusion_7"
K_XLA_REDUCE = "input_reduce_fusion_3"
K_TRT_CONV = "sm89_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_stage3_warpsize2x2x1_g1_tensor16x8x16_kernel"
K_TRT_POOL = "trt_pooling_kernel<__half, 4, 1>"
K_RESIZE = "void preprocess::resize_normalize_kernel<unsigned char, __half>(unsigned char const*, __half*, int, int, int, int, float3, float3)"
K_TOPK_MOE = ("void at::native::sbtopk::gatherTopK<c10::BFloat16, unsigned int, 2, false>(at::cuda::detail::TensorInfo<c10::BFloat16 const, "
              "unsigned int>, unsigned int, unsigned int, bool, unsigned int, unsigned int, at::cuda::detail::TensorInfo<c10::BFloat16, "
              "unsigned int>, unsigned int, at::cuda::detail::TensorInfo<long, unsigned int>, unsigned int)")
K_INDEX_ADD = ("void at::native::(anonymous namespace)::indexFuncLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true, "
               "at::native::(anonymous namespace)::ReduceAdd>(...)")


def comm_args(name, nelems_in, nelems_out, group, dtype="BFloat16"):
    return {"Collective name": name, "In msg nelems": nelems_in, "Out msg nelems": nelems_out, "Group size": group, "dtype": dtype,
            "In split size": "[]", "Out split size": "[]", "Process Group Name": "0", "Process Group Description": "default_pg",
            "Process Group Ranks": str(list(range(group)))}


def collective(k, kname, us, args, opname, stream=20, wait_compute=True):
    """A c10d collective as torch 2.x records it: nccl:<op> -> record_param_comms (with the
    collective's sizes) -> the NCCL kernel on the communication stream, which waits for the
    compute stream's work queued so far when wait_compute."""
    if wait_compute:
        k.stream_end[stream] = max(k.stream_end.get(stream, 0), k.stream_end.get(7, 0))
    with k.ann(opname, pre=3.0):
        with k.op("record_param_comms", pre=2.0):
            k.runtime_only("cudaEventRecord", 2.0, 135)
            k.runtime_only("cudaStreamWaitEvent", 2.0, 147)
            return k.launch(kname, us, stream=stream, api_us=8.0, grid=(24, 1, 1), block=(544, 1, 1), regs=96, smem=87568,
                            extra=args, api="cudaLaunchKernelExC")


def dist_info(rank, world):
    return {"backend": "nccl", "rank": rank, "world_size": world, "pg_count": 1,
            "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": world,
                           "ranks": list(range(world))}], "nccl_version": "2.21.5"}


def case_fsdp_allgather_link():
    """Rank 0 of a 16-GPU FSDP (FULL_SHARD) job over two H100 nodes connected by 400 Gb/s per
    GPU (~45 GB/s of all-gather bus bandwidth across nodes): each of 16 layers all-gathers its
    436 MB of bf16 parameters (~10 ms at ~42 GB/s) while its compute takes ~3.5 ms. FSDP
    already prefetches the next layer's all-gather on its own stream: the collectives are
    overlapped as far as they can be and still stall the compute: link-bound (bytes over time
    near the link), which no bucketing or overlap can fix; the experiment is fewer bytes
    across the slow link (hybrid sharding within a node, a larger batch per step)."""
    k = KTrace(48401)
    k.host(40)
    per_layer = 218_000_000                      # parameters of one layer (bf16)
    ag_us = us_bytes(per_layer * 2 * 15 / 16, 42)
    m = 4 * 2048
    args = comm_args("_allgather_base", per_layer // 16, per_layer, 16)
    for s in range(3):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            with k.ann("FullyShardedDataParallel.forward"):
                collective(k, K_NCCL_AG, ag_us, args, "nccl:_all_gather_base", wait_compute=False)
                for layer in range(16):
                    nxt = k.stream_end[20]
                    if layer < 15:                                   # prefetch the next layer's parameters
                        collective(k, K_NCCL_AG, ag_us, args, "nccl:_all_gather_base", wait_compute=False)
                    k.stream_end[7] = max(k.stream_end.get(7, 0), nxt)   # this layer waits for its own gather
                    with k.ann("FSDP::pre_forward"):
                        k.runtime_only("cudaStreamWaitEvent", 2.0, 147)
                    for n, kk in ((3 * 4096, 4096), (4096, 4096), (2 * 14336, 4096), (4096, 14336)):
                        bf16_linear(k, m, n, kk, bias=False)
                    sdpa(k, 420.0, K_FLASH_FWD)
            k.host(40)
            item_sync(k)
            k.host(30)
    k.host(30)
    return k.doc(distributed=dist_info(0, 16), name="fsdp_allgather_link")


def case_late_peer_ddp():
    """Rank 5 of 8 in a DDP job on A100s (NVLink): each step's backward all-reduces four 25 MB
    buckets (bf16), overlapped with the backward; the first three take ~0.35 ms each, but the
    last one waits for a peer whose data loading stalls, for 8-70 ms depending on the step:
    same-size collectives whose durations differ ~100x. No bucketing or overlap shortens a
    wait for a late peer: the experiment is on the slow rank (its input pipeline)."""
    k = KTrace(48402, device=A100)
    k.host(40)
    rng = random.Random(48402)
    args = comm_args("allreduce", 12_582_912, 12_582_912, 8)
    m = 8 * 1024
    waits = [rng.uniform(8000, 70000) for _ in range(10)]
    for s in range(10):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            with k.ann("DistributedDataParallel.forward"):
                for _ in range(12):
                    bf16_linear(k, m, 3072, 1024, roof=A100_ROOF, kname=K_GEMM_A100, grid=(108, 1, 1))
                    sdpa(k, 300.0, K_FLASH_FWD)
                    bf16_linear(k, m, 1024, 1024, roof=A100_ROOF, kname=K_GEMM_A100, grid=(108, 1, 1))
                    bf16_linear(k, m, 4096, 1024, roof=A100_ROOF, kname=K_GEMM_A100, grid=(108, 1, 1))
                    bf16_linear(k, m, 1024, 4096, roof=A100_ROOF, kname=K_GEMM_A100, grid=(108, 1, 1))
            with k.ann("## backward ##"):
                for layer in range(12):
                    for n, kk in ((1024, 4096), (4096, 1024), (1024, 1024), (3072, 1024)):
                        for _g in range(2):
                            with k.op("aten::mm", pre=2.0, dims=[[m, n], [n, kk]], types=BF16x3[:2]):
                                k.launch(K_GEMM_A100, roof_us(m, kk, n, 0.7, A100_ROOF), grid=(108, 1, 1))
                    if layer % 3 == 2:
                        last = layer == 11
                        collective(k, K_NCCL_AR, waits[s] if last else 350.0, args, "nccl:all_reduce")
            k.stream_end[7] = max(k.stream_end[7], k.stream_end[20])
            with k.ann("Optimizer.step#AdamW.step"):
                with k.op("aten::_fused_adamw_", pre=5.0):
                    k.launch(K_ADAM, 600.0, grid=(320, 1, 1), block=(512, 1, 1))
            item_sync(k)
            k.host(30)
    k.host(30)
    return k.doc(distributed=dist_info(5, 8), name="late_peer_ddp")


def case_late_peer_nsys():
    """A JAX data-parallel train step (jit, 8 x H100, NCCL) profiled with Nsight Systems (SQLite
    export: XLA's kernels, the runtime calls, NVTX ranges XLA writes per executable; no
    PyTorch): each step all-reduces the gradients in four same-size fp32 chunks; three take
    ~0.5 ms, the last one 60-120x that, waiting for a slower host on another rank. The
    advice: a late peer (find the slow rank), not overlap or bucketing."""
    k = KTrace(48403)
    k.host(40)
    rng = random.Random(48403)
    for s in range(10):
        with k.ann("XlaModule:#hlo_module=jit_train_step,program_id=17#", pre=2.0):
            for _ in range(24):
                k.launch(K_XLA_GEMM, 210.0, grid=(132, 1, 1), block=(384, 1, 1))
                k.launch(K_XLA_FUSION, 30.0)
                k.launch(K_XLA_GEMM, 190.0, grid=(132, 1, 1), block=(384, 1, 1))
                k.launch(K_XLA_REDUCE, 25.0)
            for c in range(4):
                k.stream_end[20] = max(k.stream_end.get(20, 0), k.stream_end.get(7, 0))
                us = rng.uniform(30000, 60000) if c == 3 else 500.0
                k.launch(K_NCCL_AR_F32, us, stream=20, api="cuLaunchKernel", api_us=6.0, grid=(32, 1, 1), block=(512, 1, 1))
            k.stream_end[7] = max(k.stream_end[7], k.stream_end[20])
            for _ in range(6):
                k.launch(K_XLA_FUSION, 120.0)
        k.sync(api="cudaStreamSynchronize")
        k.host(60)
    k.host(30)
    return Nsys(k, bandwidth=3_350_000_000_000)


def case_cpp_sync_nsys():
    """A C++ image-classification server (TensorRT-style engine) on an L4, profiled with Nsight
    Systems (SQLite export, no Python, no operators): per batch a pinned HtoD copy of the
    images, the engine's ~40 kernels (~4 ms), a DtoH copy of the scores, then
    cudaStreamSynchronize and ~1.5 ms of host work (encoding replies, taking the next batch)
    with nothing traced while the GPU idles. The sync is a runtime call in C++: the advice
    is about the C++ loop (double-buffer batches on two streams, events), never .item()."""
    k = KTrace(48404, device=L4)
    k.host(40)
    for s in range(30):
        k.memcpy("HtoD (Pinned -> Device)", 32 * 3 * 224 * 224, 24.0)
        k.launch(K_RESIZE, 60.0)
        for i in range(40):
            k.launch(K_TRT_CONV if i % 4 else K_TRT_POOL, 95.0 if i % 4 else 12.0, grid=(58, 4, 1))
        k.memcpy("DtoH (Device -> Pinned)", 32 * 1000 * 2, 12.0)
        k.sync(api="cudaStreamSynchronize")
        k.host(1500, 0.1)
    k.host(30)
    return Nsys(k, bandwidth=300_000_000_000)


def case_serve_response_cpu():
    """A Python image-classification service on an L4 (with_stack): per request, preprocess on
    the host (~1 ms: PIL decode and resize), `model(x)` (~5 ms of GPU work, fp16), then
    `logits.softmax(-1).topk(5)` and `.cpu()` of the result: the response itself, which the
    handler must read; then ~1.2 ms of Python formats and sends the reply. The sync is the
    step's final DtoH: the program must wait for that result, so "remove the .cpu()" is no
    experiment; overlapping the next request's preprocessing with this one's GPU work (a
    second thread or batching requests) is."""
    k = KTrace(48405, device=L4)
    k.python = True
    k.host(40)
    with k.py("server.py(55): <module>"):
        for s in range(24):
            with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
                with k.py("server.py(31): handle"):
                    with k.py("server.py(18): preprocess"):
                        with k.py("PIL/Image.py(2184): resize"):
                            k.adv(k.j(900.0, 0.1))
                        with k.op("aten::to", pre=2.0):
                            with k.op("aten::_to_copy", pre=1.5):
                                with k.op("aten::copy_", pre=1.0):
                                    k.memcpy("HtoD (Pinned -> Device)", 3 * 224 * 224 * 2, 20.0, api_us=5.0)
                    with k.py("torch/nn/modules/module.py(1736): _wrapped_call_impl"):
                        for layer in range(40):
                            with k.op("aten::cudnn_convolution", pre=4.0):
                                k.launch(K_TRT_CONV, 110.0, grid=(58, 4, 1))
                            with k.op("aten::relu_", pre=2.0):
                                k.launch(K_RELU_F16, 8.0)
                        linear(k, 20.0, K_GEMM_A100_F16)
                    with k.op("aten::softmax", pre=2.0):
                        k.launch(K_SOFTMAX_F16, 4.0)
                    with k.op("aten::topk", pre=2.0):
                        k.launch(K_TOPK, 6.0)
                    with k.py("server.py(40): <listcomp>"):
                        with k.py("<method 'cpu' of 'torch._C.TensorBase' objects>"):
                            tolist_sync(k, 5 * 8)
                    with k.py("server.py(44): send_reply"):
                        with k.py("json/__init__.py(231): dumps"):
                            k.adv(k.j(250.0, 0.1))
                        k.adv(k.j(900.0, 0.1))
                k.host(10)
    k.host(30)
    return k.doc(name="serve_response_cpu")


def case_moe_nonzero_loop():
    """A Mixtral-style MoE decode loop in eager mode (H100, batch 4, 16 layers), launch-bound:
    every kernel (2-8 us) is shorter than its launch. Each layer routes tokens with
    `torch.where(expert_mask)` -> aten::nonzero, a data-dependent shape: the host copies the
    count back and waits (cudaStreamSynchronize) inside every layer. CUDA graphs cannot
    capture a loop with a host sync and data-dependent shapes inside: the experiment is to
    remove the sync (static-capacity routing, a grouped GEMM) or compile the layer."""
    k = KTrace(48406)
    k.host(40)
    for s in range(12):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            embedding(k)
            for layer in range(16):
                with k.op("_C::fused_add_rms_norm", pre=3.0):
                    k.launch(K_VLLM_RMS, 2.8)
                mm(k, K_GEMV, 7.0, dims=[[4, 4096], [6144, 4096]], types=BF16x3[:2])
                sdpa(k, 6.0)
                mm(k, K_GEMV, 5.0, dims=[[4, 4096], [4096, 4096]], types=BF16x3[:2])
                with k.op("_C::fused_add_rms_norm", pre=3.0):
                    k.launch(K_VLLM_RMS, 2.8)
                mm(k, K_GEMV, 3.0, dims=[[4, 4096], [8, 4096]], types=BF16x3[:2])          # router
                with k.op("aten::topk", pre=2.0):
                    k.launch(K_TOPK_MOE, 3.0)
                with k.op("aten::nonzero", pre=2.5):
                    k.launch(K_NONZERO_CUB, 2.5, grid=(1, 1, 1))
                    k.memcpy("DtoH (Device -> Pageable)", 8, 0.005, api_us=6.0)
                    k.sync()
                    k.launch(K_SELECT_CUB, 3.0)
                for _e in range(2):
                    with k.op("aten::index_select", pre=2.0):
                        k.launch(K_EMBED, 2.6)
                    mm(k, K_GEMV, 8.0, dims=[[2, 4096], [28672, 4096]], types=BF16x3[:2])
                    silu_and_mul(k, 2.6)
                    mm(k, K_GEMV, 6.0, dims=[[2, 14336], [4096, 14336]], types=BF16x3[:2])
                    with k.op("aten::index_add_", pre=2.0):
                        k.launch(K_INDEX_ADD, 2.6)
            fused_norm(k, 2.8)
            mm(k, K_GEMV, 40.0, dims=[[4, 4096], [32000, 4096]], types=BF16x3[:2])
            argmax(k)
            item_sync(k)
            k.host(40)
    k.host(30)
    return k.doc(name="moe_nonzero_loop")


# ---- blind spot 5: time at stake belonging to its culprit

K_DWCONV = ("void at::native::(anonymous namespace)::conv_depthwise2d_forward_kernel<3, c10::Half, int>(at::GenericPackedTensorAccessor"
            "<c10::Half const, 4ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::Half, 4ul, at::DefaultPtrTraits, int>, "
            "at::GenericPackedTensorAccessor<c10::Half const, 4ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::Half "
            "const, 1ul, at::DefaultPtrTraits, int>, bool, int, int, int, int, int, int, int, int, int, int, int, int)")
K_HARDTANH = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::hardtanh_kernel"
              "(at::TensorIteratorBase&, c10::Scalar const&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#7}"
              "::operator()() const::{lambda(c10::Half)#1}, at::detail::Array<char*, 2> >(...)")
K_POOL = ("void at::native::(anonymous namespace)::adaptive_average_pool<c10::Half>(c10::Half*, c10::Half*, int, int, int, int, long, "
          "long, long)")


def case_launch_spread_cnn():
    """MobileNetV2 inference at batch 1 on an A100 (fp16, eager, no shapes): ~150 small ops a
    forward, every kernel (2-10 us) shorter than its launch and dispatch (15-35 us): the GPU
    idles ~60% of the wall, spread over cudnn_convolution, the depthwise convolutions,
    cudnn_batch_norm, hardtanh_ (ReLU6) and add, none near half of it. The suspect must name
    the group with each member's own idle; its at stake is their sum."""
    k = KTrace(48501, device=A100)
    k.host(40)
    for s in range(20):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            vllm_inputs(k, 1)
            for blk in range(17):
                for part in range(3):
                    with k.op("aten::conv2d", pre=3.0):
                        with k.op("aten::convolution", pre=2.0):
                            with k.op("aten::_convolution", pre=2.0):
                                if part == 1:
                                    with k.op("aten::_conv_depthwise2d", pre=3.0):
                                        k.launch(K_DWCONV, 6.0, grid=(64, 1, 1))
                                else:
                                    with k.op("aten::cudnn_convolution", pre=6.0, post=4.0):
                                        k.launch(K_CONV_FWD_NHWC, 8.0, grid=(32, 1, 1))
                    with k.op("aten::batch_norm", pre=2.0):
                        with k.op("aten::_batch_norm_impl_index", pre=2.0):
                            with k.op("aten::cudnn_batch_norm", pre=3.0, post=2.0):
                                k.launch(K_BN_INF, 3.0)
                    if part < 2:
                        with k.op("aten::hardtanh_", pre=2.0, post=1.5):
                            k.launch(K_HARDTANH, 2.5)
                if blk % 2:
                    with k.op("aten::add", pre=2.0, post=1.5):
                        k.launch(K_ADD_F16, 2.5)
            with k.op("aten::adaptive_avg_pool2d", pre=2.0):
                k.launch(K_POOL, 4.0)
            linear(k, 8.0, K_GEMM_A100_F16)
            tolist_sync(k, 1000 * 2)
            k.host(40)
    k.host(30)
    return k.doc(name="launch_spread_cnn")


def case_zero_grad_idle_2021():
    """ResNet-50 training at batch 8 on a V100 with torch 1.8 (2021 Kineto schema), 4
    DataLoader workers (data is ready), a host-bound step (every layer's Python, autograd and
    cuDNN dispatch take about as long as its kernels, so no backlog builds and the per-step
    loss.item() waits for almost nothing), zero_grad() at the default set_to_none=False at the
    start of each step: 161 aten::zero_ -> aten::fill_, each ~45 us of host for a ~2 us kernel,
    with nothing else queued: the zero_grad phase leaves the GPU idle ~7 ms a step. The idle
    is the fills' own (no drain before them to blame); the idiomatic fix is set_to_none=True."""
    k = KTrace(48502, device=V100, schema2021=True)
    k.host(40)
    for s in range(8):
        with k.op("ProfilerStep#%d" % (s + 1), pre=2.0):
            with k.op("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", pre=3.0):
                k.host(400)
            with k.op("aten::to", pre=3.0):
                with k.op("aten::copy_", pre=2.0):
                    k.memcpy("HtoD (Pinned -> Device)", 8 * 3 * 224 * 224 * 4, 22.0)
            with k.op("Optimizer.zero_grad#SGD.zero_grad", pre=3.0):
                for _ in range(161):
                    with k.op("aten::zero_", pre=8.0, post=6.0):
                        with k.op("aten::fill_", pre=6.0, post=12.0):
                            k.launch(K_FILL_2021, 2.2, api_us=9.0, grid=(16, 1, 1))
            for layer in range(53):
                k.host(95)                                      # the module's Python and autograd recording
                with k.op("aten::cudnn_convolution", pre=4.0):
                    k.launch(K_CONV_VOLTA, 70.0, grid=(98, 2, 1), block=(256, 1, 1))
                with k.op("aten::cudnn_batch_norm", pre=3.0):
                    k.launch(K_BN_INF_NCHW, 8.0)
                with k.op("aten::relu_", pre=2.0):
                    k.launch(K_RELU_F16, 5.0)
            for layer in range(53):
                k.host(150)                                     # autograd's engine between the nodes
                with k.op("aten::cudnn_convolution_backward", pre=4.0):
                    k.launch(K_CONV_VOLTA, 70.0, grid=(98, 2, 1), block=(256, 1, 1))
                    k.launch(K_CONV_VOLTA, 70.0, grid=(98, 2, 1), block=(256, 1, 1))
                with k.op("aten::cudnn_batch_norm_backward", pre=3.0):
                    k.launch(K_BN_INF_NCHW, 12.0)
            with k.op("Optimizer.step#SGD.step", pre=3.0):
                with k.op("aten::_foreach_add_", pre=4.0):
                    for _ in range(4):
                        k.launch(K_SGD, 80.0, grid=(320, 1, 1))
            with k.op("aten::item", pre=2.0):                   # loss.item() for the log line, every step
                with k.op("aten::_local_scalar_dense", pre=1.5):
                    k.memcpy("DtoH (Device -> Pageable)", 4, 0.005, api_us=8.0)
                    k.sync()
            k.host(30)
    k.host(30)
    return k.doc(name="zero_grad_idle_2021")


# ---- gradient reductions repeated within a step (suspects_comm.c "repeated")

K_NCCL_AR_HALF_2021 = "ncclKernel_AllReduce_RING_LL_Sum_half(ncclWorkElem)"


def case_ddp_accum_resnet_2021():
    """ResNet-50 on 8 V100s (torch 1.9, 2021 Kineto schema, fp16 AMP) with DDP and gradient
    accumulation over 2 micro-batches written without model.no_sync(): each micro-batch's
    backward all-reduces DDP's three gradient buckets (the last, smaller one exposed after the
    backward), so 6 all-reduces run per optimizer step where 3 would do; SGD runs once after
    the second micro-batch. At stake: half the reductions (bounded by their exposed time)."""
    k = KTrace(48701, device=V100, schema2021=True)
    k.host(40)
    buckets = ((25.0, 6500.0), (25.0, 6500.0), (9.5, 2600.0))     # MB, us over two nodes' 25 GbE ring
    for s in range(6):
        with k.op("ProfilerStep#%d" % (s + 1), pre=2.0):
            for _micro in range(2):
                with k.op("aten::to", pre=3.0):
                    with k.op("aten::copy_", pre=2.0):
                        k.memcpy("HtoD (Pinned -> Device)", 32 * 3 * 224 * 224 * 2, 22.0)
                for layer in range(53):
                    with k.op("aten::cudnn_convolution", pre=4.0):
                        k.launch(K_CONV_VOLTA, 120.0, grid=(98, 2, 1), block=(256, 1, 1))
                    with k.op("aten::cudnn_batch_norm", pre=3.0):
                        k.launch(K_BN_INF_NCHW, 14.0)
                    with k.op("aten::relu_", pre=2.0):
                        k.launch(K_RELU_F16, 9.0)
                b = 0
                for layer in range(53):
                    with k.op("aten::cudnn_convolution_backward", pre=4.0):
                        k.launch(K_CONV_VOLTA, 120.0, grid=(98, 2, 1), block=(256, 1, 1))
                        k.launch(K_CONV_VOLTA, 120.0, grid=(98, 2, 1), block=(256, 1, 1))
                    with k.op("aten::cudnn_batch_norm_backward", pre=3.0):
                        k.launch(K_BN_INF_NCHW, 20.0)
                    if layer in (26, 44, 52):
                        mb, us = buckets[b]
                        b += 1
                        k.stream_end[20] = max(k.stream_end.get(20, 0), k.stream_end.get(7, 0))
                        with k.op("nccl:all_reduce", pre=3.0):
                            k.launch(K_NCCL_AR_HALF_2021, us, stream=20, api_us=8.0, grid=(8, 1, 1), block=(256, 1, 1),
                                     extra={"In msg nelems": int(mb * 1e6 / 2), "Out msg nelems": int(mb * 1e6 / 2), "dtype": "Half"})
                k.stream_end[7] = max(k.stream_end[7], k.stream_end[20])
            with k.op("Optimizer.step#SGD.step", pre=3.0):
                with k.op("aten::_foreach_add_", pre=4.0):
                    for _ in range(4):
                        k.launch(K_SGD, 80.0, grid=(320, 1, 1))
            with k.op("aten::item", pre=2.0):
                with k.op("aten::_local_scalar_dense", pre=1.5):
                    k.memcpy("DtoH (Device -> Pageable)", 4, 0.005, api_us=8.0)
                    k.sync()
            k.host(30)
    k.host(30)
    return k.doc(name="ddp_accum_resnet_2021")


def case_fsdp_accum_llama_h100():
    """A Llama-style 1B model fine-tuned with FSDP (SHARD_GRAD_OP) on 8 H100s, 3 micro-batches
    of gradient accumulation without no_sync(): each micro-batch's backward reduce-scatters the
    gradients every 4 layers (4 reduce-scatters of 64 MB, mostly hidden under the backward),
    the forward's all-gathers run once per micro-batch too (FSDP needs those); the fused AdamW
    runs once per step. 12 reduce-scatters per step where 4 would do."""
    k = KTrace(48702)
    k.host(40)
    rs = comm_args("_reduce_scatter_base", 33_554_432, 33_554_432 // 8, 8)
    ag = comm_args("_allgather_base", 33_554_432 // 8, 33_554_432, 8)
    m = 4 * 2048
    for s in range(4):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            for _micro in range(3):
                with k.ann("FullyShardedDataParallel.forward"):
                    for layer in range(16):
                        if layer % 4 == 0:
                            collective(k, K_NCCL_AG, 700.0, ag, "nccl:_all_gather_base", wait_compute=False)
                        rms_fused(k, m, hidden=2048)
                        bf16_linear(k, m, 3 * 2048, 2048)
                        with k.op("aten::scaled_dot_product_attention", pre=3.0):
                            with k.op("aten::_scaled_dot_product_flash_attention", pre=2.0):
                                k.launch(K_FLASH_FWD, 260.0, grid=(16, 16, 4))
                        bf16_linear(k, m, 2048, 2048)
                        rms_fused(k, m, hidden=2048)
                        bf16_linear(k, m, 2 * 5632, 2048)
                        bf16_linear(k, m, 2048, 5632)
                with k.ann("## backward ##"):
                    for layer in range(16):
                        for n, kk in ((2048, 5632), (5632, 2048), (2048, 2048), (3 * 2048, 2048)):
                            for _g in range(2):
                                with k.op("aten::mm", pre=2.0, dims=[[m, n], [n, kk]], types=BF16x3[:2]):
                                    k.launch(K_GEMM_H100, roof_us(m, kk, n, 0.7))
                        with k.op("aten::_flash_attention_backward", pre=2.0):
                            k.launch(K_FLASH_FWD, 650.0, grid=(16, 16, 4))
                        if layer % 4 == 3:
                            collective(k, K_NCCL_RS, 4200.0, rs, "nccl:_reduce_scatter_base")
                k.stream_end[7] = max(k.stream_end[7], k.stream_end[20])
            with k.ann("Optimizer.step#AdamW.step"):
                with k.op("aten::_fused_adamw_", pre=5.0):
                    k.launch(K_ADAM, 300.0, grid=(320, 1, 1), block=(512, 1, 1))
            item_sync(k)
            k.host(30)
    k.host(30)
    return k.doc(distributed=dist_info(0, 8), name="fsdp_accum_llama_h100")


def case_ddp_accum_no_sync_ok():
    """Control: the same DDP accumulation done right (rank 0 of 8 H100s, GPT-style, bf16): the
    first three of four micro-batches run under model.no_sync(), so DDP's four bucket
    all-reduces run once per step, in the last micro-batch's backward, mostly hidden under it;
    AdamW once. Nothing repeats: the repeated-reduction mechanism must stay quiet."""
    k = KTrace(48703)
    k.host(40)
    args = comm_args("allreduce", 25_165_824, 25_165_824, 8)
    m = 4 * 2048
    for s in range(4):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            for micro in range(4):
                with k.ann("DistributedDataParallel.forward"):
                    for _ in range(16):
                        layer_norm(k, 12.0)
                        bf16_linear(k, m, 3 * 2048, 2048)
                        with k.op("aten::scaled_dot_product_attention", pre=3.0):
                            with k.op("aten::_scaled_dot_product_flash_attention", pre=2.0):
                                k.launch(K_FLASH_FWD, 520.0, grid=(16, 16, 4))
                        bf16_linear(k, m, 2048, 2048)
                        layer_norm(k, 12.0)
                        bf16_linear(k, m, 8192, 2048)
                        eltwise(k, "aten::gelu", K_GELU, 30.0)
                        bf16_linear(k, m, 2048, 8192)
                with k.ann("## backward ##"):
                    for layer in range(16):
                        for n, kk in ((2048, 8192), (8192, 2048), (2048, 2048), (3 * 2048, 2048)):
                            for _g in range(2):
                                with k.op("aten::mm", pre=2.0, dims=[[m, n], [n, kk]], types=BF16x3[:2]):
                                    k.launch(K_GEMM_H100, roof_us(m, kk, n, 0.7))
                        with k.op("aten::_flash_attention_backward", pre=2.0):
                            k.launch(K_FLASH_FWD, 1250.0, grid=(16, 16, 4))
                        if micro == 3 and layer % 4 == 3:
                            collective(k, K_NCCL_AR, 900.0, args, "nccl:all_reduce")
                k.stream_end[7] = max(k.stream_end[7], k.stream_end.get(20, 0))
            with k.ann("Optimizer.step#AdamW.step"):
                with k.op("aten::_fused_adamw_", pre=5.0):
                    k.launch(K_ADAM, 700.0, grid=(320, 1, 1), block=(512, 1, 1))
            k.host(30)
        if s == 3:
            item_sync(k)
    k.host(30)
    return k.doc(distributed=dist_info(0, 8), name="ddp_accum_no_sync_ok")


# ---- rows computed that nobody reads (suspects_unread.c)

def case_rerank_lastpos_v100_2021():
    """A pointwise reranker on a V100 (torch 1.9, 2021 Kineto schema, record_shapes, fp16):
    a GPT-2 medium-sized causal LM scores 16 (query, passage) pairs of 512 tokens by the
    next-token logits of "yes" / "no" at the last position: `logits = model(ids).logits`
    runs the lm_head (aten::matmul -> aten::mm, [16, 512, 1024] x [1024, 50257]) over every
    position, then `logits[:, -1:, :]` (two aten::slice) and a softmax over [16, 1, 50257]:
    511 of every 512 rows of the biggest GEMM are never read."""
    k = KTrace(48711, device=V100, schema2021=True)
    k.old_shapes = True
    f16 = ["c10::Half"] * 3 + ["Scalar", "Scalar"]
    b, s, d, v = 16, 512, 1024, 50257
    m = b * s

    def conv1d(n, kk):
        with k.op("aten::addmm", pre=2.5, dims=[[n], [m, kk], [kk, n], [], []], types=f16):
            k.launch(K_GEMM_V100_F16, roof_us(m, n, kk, 0.7, roof=V100_ROOF), grid=(80, 4, 1), block=(256, 1, 1))

    def ln():
        with k.op("aten::layer_norm", pre=1.5, dims=[[b, s, d], [], [d], [d], [], []]):
            with k.op("aten::native_layer_norm", pre=1.2, dims=[[b, s, d], [], [d], [d], []]):
                k.launch(K_LAYERNORM, us_bytes(m * d * 2 * 2, 800), grid=(m, 1, 1), block=(512, 1, 1))

    k.host(40)
    for st in range(6):
        with k.ann("ProfilerStep#%d" % (st + 1), pre=2.0):
            with k.op("aten::to", pre=2.0):
                with k.op("aten::copy_", pre=1.0):
                    k.memcpy("HtoD (Pinned -> Device)", m * 8, 12.0, api_us=5.0)
            embedding(k)
            for _ in range(24):
                ln()
                conv1d(3 * d, d)
                with k.op("aten::matmul", pre=1.5):
                    with k.op("aten::bmm", pre=1.2, dims=[[b * 16, s, 64], [b * 16, 64, s]], types=["c10::Half"] * 2):
                        k.launch(K_GEMM_V100_F16, us_bytes(b * 16 * s * s * 2, 800), grid=(80, 4, 1), block=(256, 1, 1))
                with k.op("aten::softmax", pre=2.0, dims=[[b, 16, s, s], [], []]):
                    with k.op("aten::_softmax", pre=1.2, dims=[[b, 16, s, s], [], []]):
                        k.launch(K_SOFTMAX_V100, us_bytes(b * 16 * s * s * 2 * 2, 800))
                with k.op("aten::matmul", pre=1.5):
                    with k.op("aten::bmm", pre=1.2, dims=[[b * 16, s, s], [b * 16, s, 64]], types=["c10::Half"] * 2):
                        k.launch(K_GEMM_V100_F16, us_bytes(b * 16 * s * s * 2, 800), grid=(80, 4, 1), block=(256, 1, 1))
                conv1d(d, d)
                ln()
                conv1d(4 * d, d)
                eltwise(k, "aten::gelu", K_GELU, us_bytes(m * 4 * d * 2 * 2, 800))
                conv1d(d, 4 * d)
            ln()
            with k.op("aten::matmul", pre=2.0, dims=[[b, s, d], [d, v]], types=["c10::Half"] * 2):     # lm_head
                with k.op("aten::mm", pre=1.5, dims=[[m, d], [d, v]], types=["c10::Half"] * 2):
                    k.launch(K_GEMM_V100_F16_NN, roof_us(m, v, d, 0.7, roof=V100_ROOF), grid=(80, 4, 1), block=(256, 1, 1))
            with k.op("aten::slice", pre=1.5, dims=[[b, s, v], [], [], [], []]):
                with k.op("aten::as_strided", pre=0.4, post=0.2):
                    pass
            with k.op("aten::slice", pre=1.5, dims=[[b, s, v], [], [], [], []]):
                with k.op("aten::as_strided", pre=0.4, post=0.2):
                    pass
            with k.op("aten::softmax", pre=2.0, dims=[[b, 1, v], [], []]):
                with k.op("aten::_softmax", pre=1.2, dims=[[b, 1, v], [], []]):
                    k.launch(K_SOFTMAX_V100, 6.0, grid=(16, 1, 1))
            tolist_sync(k, 128)
            k.host(60)
    k.host(30)
    return k.doc(name="rerank_lastpos_v100_2021")


def case_mcq_index_l4():
    """Multiple-choice evaluation of a Qwen2-1.5B-sized model on an L4 (fp16, current schema,
    record_shapes): the model flattens the hidden states (x.view(-1, d)) before the head, so
    the lm_head is one aten::linear [8 x 768 = 6144, 1536] x [151936, 1536], its logits cast to
    fp32 (aten::to over all 6144 rows), then `logits[last_idx]` (aten::index, one row a
    sequence) and a log_softmax over [8, 151936]: 767 of every 768 rows of the head and its cast
    are thrown away."""
    k = KTrace(48712, device=L4)
    b, s, d, v = 8, 768, 1536, 151936
    m = b * s
    f16 = ["c10::Half"] * 3
    k.host(40)
    for st in range(6):
        with k.ann("ProfilerStep#%d" % (st + 1), pre=2.0):
            with k.op("aten::to", pre=2.0):
                with k.op("aten::copy_", pre=1.0):
                    k.memcpy("HtoD (Pinned -> Device)", m * 8, 20.0, api_us=5.0)
            embedding(k)
            for _ in range(28):
                rms_fused(k, m, hidden=d)
                bf16_linear(k, m, 2048, d, roof=L4_ROOF, kname=K_GEMM_L4, types=f16, grid=(58, 1, 1))
                with k.op("aten::scaled_dot_product_attention", pre=2.0):
                    with k.op("aten::_scaled_dot_product_efficient_attention", pre=1.5):
                        k.launch(K_FLASH_FWD_F16, us_flops(4 * b * 12 * s * s * 128, 70) + 4, grid=(8, 12, 8))
                bf16_linear(k, m, d, d, bias=False, roof=L4_ROOF, kname=K_GEMM_L4, types=f16, grid=(58, 1, 1))
                rms_fused(k, m, hidden=d)
                bf16_linear(k, m, 2 * 8960, d, bias=False, roof=L4_ROOF, kname=K_GEMM_L4, types=f16, grid=(58, 1, 1))
                with k.op("aten::silu", pre=2.0):
                    k.launch(K_SILU, us_bytes(m * 8960 * 2 * 2, 250))
                with k.op("aten::mul", pre=2.0):
                    k.launch(K_MUL, us_bytes(m * 8960 * 3 * 2, 250))
                bf16_linear(k, m, d, 8960, bias=False, roof=L4_ROOF, kname=K_GEMM_L4, types=f16, grid=(58, 1, 1))
            rms_fused(k, m, hidden=d)
            with k.op("aten::view", pre=1.0, post=0.4, dims=[[b, s, d], []]):
                pass
            linear(k, roof_us(m, v, d, 0.7, roof=L4_ROOF), kname=K_GEMM_L4, grid=(58, 1, 1), dims=[[m, d], [v, d]])   # lm_head
            to_copy(k, [m, v], us_bytes(m * v * 6, 250))                                          # logits.float()
            with k.op("aten::index", pre=2.0, dims=[[m, v], [b]]):
                k.launch(K_INDEX_COPY, us_bytes(b * v * 8, 250), grid=(8, 1, 1))
            with k.op("aten::log_softmax", pre=2.0, dims=[[b, v], [], []], types=["float", "Scalar", ""]):
                with k.op("aten::_log_softmax", pre=1.5, dims=[[b, v], [], []]):
                    k.launch(K_LOG_SOFTMAX, 12.0, grid=(8, 1, 1))
            tolist_sync(k, 64)
            k.host(80)
    k.host(30)
    return k.doc(name="mcq_index_l4")


def case_generate_keep_last_h100():
    """Control: generation done right on an H100 (bf16, current schema, record_shapes): the
    prefill slices the hidden states to the last position before the lm_head
    (logits_to_keep=1: aten::slice of [4, 1024, 896], then the head over [4, 1, 896]) and each
    decode step runs on one token with a KV cache (the head over [4, 1, 896]); the logits'
    [:, -1, :] select keeps 1 of 1 row: nothing is thrown away."""
    k = KTrace(48713)
    b, s, d, v = 4, 1024, 896, 151936
    k.host(40)
    for st in range(8):
        t = s if st == 0 else 1
        m = b * t
        with k.ann("ProfilerStep#%d" % (st + 1), pre=2.0):
            embedding(k)
            for _ in range(24):
                rms_fused(k, m, hidden=d)
                bf16_linear(k, m, 1152, d)
                with k.op("aten::scaled_dot_product_attention", pre=2.0):
                    with k.op("aten::_scaled_dot_product_flash_attention", pre=1.5):
                        k.launch(K_FLASH_FWD, us_flops(4 * b * 14 * t * s * 64, 350) + 4, grid=(8, 14, 4))
                bf16_linear(k, m, d, d, bias=False)
                rms_fused(k, m, hidden=d)
                bf16_linear(k, m, 2 * 4864, d, bias=False)
                with k.op("aten::silu", pre=2.0):
                    k.launch(K_SILU, us_bytes(m * 4864 * 2 * 2, 2600) + 2)
                with k.op("aten::mul", pre=2.0):
                    k.launch(K_MUL, us_bytes(m * 4864 * 3 * 2, 2600) + 2)
                bf16_linear(k, m, d, 4864, bias=False)
            rms_fused(k, m, hidden=d)
            with k.op("aten::slice", pre=1.5, dims=[[b, t, d], [], [], [], []]):
                with k.op("aten::as_strided", pre=0.4, post=0.2):
                    pass
            linear(k, roof_us(b, v, d, 0.75) + 5, dims=[[b, 1, d], [v, d]])                    # lm_head, last position
            with k.op("aten::select", pre=1.5, dims=[[b, 1, v], [], []]):
                with k.op("aten::as_strided", pre=0.4, post=0.2):
                    pass
            with k.op("aten::argmax", pre=2.0, dims=[[b, v], [], []]):
                k.launch(K_ARGMAX, 8.0, grid=(4, 1, 1))
            tolist_sync(k, 32)
            k.host(40)
    k.host(30)
    return k.doc(name="generate_keep_last_h100")


# ---- autotuning run again step after step (suspects_tune.c)

K_TRY_V100 = [
    "volta_fp16_s884cudnn_fp16_128x128_ldg8_relu_f2f_exp_small_nhwc_tn_v1",
    "void cudnn::winograd::generateWinogradTilesKernel<0, __half, float>(cudnn::winograd::GenerateWinogradTilesParams<__half, float>)",
    "void fft2d_r2c_32x32<__half, false, 0u, false>(float2*, __half const*, int, int, int, int, int, int, int, int, int, ...)",
    "void cudnn::detail::implicit_convolve_sgemm<__half, __half, 128, 5, 5, 3, 3, 3, 1, false, false, true>(int, int, int, ...)",
    "void cudnn::cnn::conv2d_grouped_direct_kernel<false, true, false, false, 0, 0, int, __half, __half, __half, float, float, true>(...)",
    "volta_fp16_scudnn_fp16_128x64_relu_small_nn_v1",
]
K_TRY_L4 = [
    "sm89_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nchw_tilesize64x32x64_stage5_warpsize2x2x1_g1_tensor16x8x16_kernel",
    "sm89_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nchw_tilesize128x64x32_stage4_warpsize2x2x1_g1_tensor16x8x16_kernel",
    "void cudnn::cnn::conv2d_grouped_direct_kernel<false, true, false, false, 0, 0, int, __half, __half, __half, float, float, true>(...)",
    "void implicit_convolve_hhgemm<__half, 1024, 5, 5, 3, 3, 3, 1, false, true, true>(int, int, int, __half const*, int, __half*, ...)",
    "void cudnn::ops::nchwToNhwcKernel<__half, __half, float, false, true, (cudnnKernelDataType_t)0>(cudnn::ops::nchw2nhwc_params_t<float>, ...)",
]
K_CONV_L4 = "sm89_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nchw_tilesize128x128x32_stage4_warpsize2x2x1_g1_tensor16x8x16_kernel"


def case_cudnn_tune_seg_v100_2021():
    """A segmentation model (UNet-style encoder) trained on random crops on a V100 (torch 1.9,
    2021 Kineto schema, record_shapes, fp16) with torch.backends.cudnn.benchmark=True: the
    crop size changes every step, so each aten::cudnn_convolution meets a new input shape and
    cuDNN tries six algorithms again (each once, a cudaEventSynchronize to time them) before
    the chosen kernel runs: the search repeats every step and never pays off."""
    k = KTrace(48721, device=V100, schema2021=True)
    k.old_shapes = True
    k.host(40)
    chans = [(3, 64), (64, 64), (64, 128), (128, 128), (128, 256), (256, 256)]
    for st in range(6):
        hw = 256 + 32 * ((st * 3) % 7)
        with k.op("ProfilerStep#%d" % (st + 1), pre=2.0):
            with k.op("aten::to", pre=2.0):
                with k.op("aten::copy_", pre=1.0):
                    k.memcpy("HtoD (Pinned -> Device)", 16 * 3 * hw * hw * 2, 12.0, api_us=5.0)
            size = hw
            for li, (ci, co) in enumerate(chans):
                if li and li % 2 == 0:
                    size //= 2
                fl = 2 * 16 * size * size * ci * co * 9
                with k.op("aten::cudnn_convolution", pre=2.0, dims=[[16, ci, size, size], [co, ci, 3, 3], [], [], [], [], [], [], []]):
                    k.runtime_only("cudaMalloc", 40.0, cbid=20)
                    for kn in K_TRY_V100:
                        k.launch(kn, us_flops(fl, k.rng.uniform(25, 90)) + 6, grid=(80, 2, 1))
                        k.runtime_only("cudaEventRecord", 2.0, 135)
                    k.sync(api="cudaEventSynchronize")
                    k.runtime_only("cudaFree", 30.0, cbid=22)
                    k.launch(K_CONV_VOLTA, us_flops(fl, 95) + 5, grid=(80, 2, 1))
                with k.op("aten::cudnn_batch_norm", pre=2.0):
                    k.launch(K_BN_INF_NCHW, us_bytes(16 * co * size * size * 4, 800) + 2)
                with k.op("aten::relu_", pre=2.0):
                    k.launch(K_RELU_F16, us_bytes(16 * co * size * size * 4, 800) + 2)
            for li in range(6):
                with k.op("aten::cudnn_convolution_backward", pre=3.0):
                    k.launch(K_CONV_VOLTA, 900.0, grid=(80, 2, 1))
                    k.launch(K_CONV_VOLTA, 900.0, grid=(80, 2, 1))
            with k.op("Optimizer.step#SGD.step", pre=3.0):
                with k.op("aten::_foreach_add_", pre=4.0):
                    k.launch(K_SGD, 60.0, grid=(320, 1, 1))
            with k.op("aten::item", pre=2.0):
                with k.op("aten::_local_scalar_dense", pre=1.5):
                    k.memcpy("DtoH (Device -> Pageable)", 4, 0.005, api_us=8.0)
                    k.sync()
            k.host(40)
    k.host(30)
    return k.doc(name="cudnn_tune_seg_v100_2021")


def speech_conv_loop(seed, name, lengths):
    """A wav2vec-style feature encoder (seven aten::cudnn_convolution over [8, C, T]) on an L4
    (fp16, current schema, record_shapes) with cudnn.benchmark=True, one batch a step of the
    given padded lengths T: a new T means new shapes, and cuDNN tries five algorithms (a
    cudaDeviceSynchronize to time them) before the chosen kernel."""
    k = KTrace(seed, device=L4)
    k.host(40)
    layers = [(1, 512, 10, 5)] + [(512, 512, 3, 2)] * 4 + [(512, 512, 2, 2)] * 2
    seen = set()
    for st, t in enumerate(lengths):
        with k.ann("ProfilerStep#%d" % (st + 1), pre=2.0):
            with k.op("aten::to", pre=2.0):
                with k.op("aten::copy_", pre=1.0):
                    k.memcpy("HtoD (Pinned -> Device)", 8 * t * 2, 20.0, api_us=5.0)
            size = t
            for ci, co, kw, stride in layers:
                out = (size - kw) // stride + 1
                fl = 2 * 8 * out * ci * co * kw
                key = (ci, co, size)
                with k.op("aten::cudnn_convolution", pre=2.0, dims=[[8, ci, size], [co, ci, kw], [], [], [], [], [], [], []],
                          types=["c10::Half", "c10::Half"] + [""] * 7):
                    if key not in seen:
                        seen.add(key)
                        k.runtime_only("cudaMalloc", 50.0, cbid=20)
                        for kn in K_TRY_L4:
                            k.launch(kn, us_flops(fl, k.rng.uniform(20, 70)) + 6, grid=(58, 2, 1))
                        k.sync(api="cudaDeviceSynchronize")
                        k.runtime_only("cudaFree", 30.0, cbid=22)
                    k.launch(K_CONV_L4, us_flops(fl, 75) + 5, grid=(58, 2, 1))
                with k.op("aten::group_norm" if ci == 1 else "aten::gelu", pre=2.0):
                    k.launch(K_GELU, us_bytes(8 * co * out * 4, 250) + 2)
                size = out
            with k.op("aten::linear", pre=2.0, dims=[[8, size, 512], [768, 512], [768]]):
                with k.op("aten::addmm", pre=1.5):
                    k.launch(K_GEMM_L4, us_flops(2 * 8 * size * 512 * 768, 70) + 4, grid=(58, 1, 1))
            tolist_sync(k, 256)
            k.host(60)
    k.host(30)
    return k.doc(name=name)


def case_cudnn_tune_speech_l4():
    """ASR feature extraction with cudnn.benchmark=True and batches padded to their longest
    clip: every batch has a new length, so every step autotunes all seven convolutions."""
    return speech_conv_loop(48722, "cudnn_tune_speech_l4", [160000 + 4000 * ((i * 7) % 11) for i in range(8)])


def case_cudnn_tune_fixed_l4():
    """Control: the same encoder with clips padded to one fixed length: cuDNN tunes in the first
    step only and every later step reuses the choice (benchmark mode paying off)."""
    return speech_conv_loop(48723, "cudnn_tune_fixed_l4", [176000] * 8)


# ---- the healthy controls

def case_ddp_overlapped():
    """A well-overlapped DDP step, rank 0 of 8 H100s (GPT-style, bf16, fused LayerNorm and
    bias-GELU kernels, GEMM shapes recorded at ~70% of their roof): DDP's four gradient
    buckets are all-reduced on the NCCL stream while the backward continues; only the last
    bucket's ~0.5 ms is exposed. No op over half the GPU, nothing waits: healthy."""
    k = KTrace(48601)
    k.host(40)
    args = comm_args("allreduce", 25_165_824, 25_165_824, 8)
    m = 8 * 2048
    for s in range(4):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            with k.ann("DistributedDataParallel.forward"):
                for _ in range(16):
                    layer_norm(k, 20.0)
                    bf16_linear(k, m, 3 * 2048, 2048)
                    with k.op("aten::scaled_dot_product_attention", pre=3.0):
                        with k.op("aten::_scaled_dot_product_flash_attention", pre=2.0):
                            with k.op("aten::_flash_attention_forward", pre=2.0):
                                k.launch(K_FLASH_FWD, 520.0, grid=(16, 16, 8))
                    bf16_linear(k, m, 2048, 2048)
                    layer_norm(k, 20.0)
                    bf16_linear(k, m, 8192, 2048)
                    with k.op("fused_ops::bias_gelu", pre=3.0):
                        k.launch(K_GELU, 60.0)
                    bf16_linear(k, m, 2048, 8192)
            with k.ann("## backward ##"):
                for layer in range(16):
                    for n, kk in ((2048, 8192), (8192, 2048), (2048, 2048), (3 * 2048, 2048)):
                        for _g in range(2):
                            with k.op("aten::mm", pre=2.0, dims=[[m, n], [n, kk]], types=BF16x3[:2]):
                                k.launch(K_GEMM_H100, roof_us(m, kk, n, 0.7))
                    with k.op("aten::_flash_attention_backward", pre=2.0):
                        k.launch(K_FLASH_FWD, 1250.0, grid=(16, 16, 8))
                    with k.op("aten::native_layer_norm_backward", pre=2.0):
                        k.launch(K_LN_BWD, 40.0)
                    if layer % 4 == 3:
                        collective(k, K_NCCL_AR, 1800.0, args, "nccl:all_reduce")
            k.stream_end[7] = max(k.stream_end[7], k.stream_end[20])
            with k.ann("Optimizer.step#AdamW.step"):
                with k.op("aten::_fused_adamw_", pre=5.0):
                    k.launch(K_ADAM, 700.0, grid=(320, 1, 1), block=(512, 1, 1))
            k.host(30)
        if s == 3:
            item_sync(k)
    k.host(30)
    return k.doc(distributed=dist_info(0, 8), name="ddp_overlapped")


K_TRITON_RMS_IN = "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0"
K_TRITON_RMS_POST = "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_4"
K_TRITON_ROPE2 = "triton_poi_fused_cat_clone_mul_neg_slice_1"
K_TRITON_SILU2 = "triton_poi_fused_mul_silu_5"


def case_graph_decode_roof():
    """gpt-fast-style decode of Llama-3-8B at batch 1 on an H100: torch.compile
    (mode="reduce-overhead") captured the whole step in one CUDA graph, replayed once a token
    (one cudaGraphLaunch), its GEMVs streaming the weights at ~85% of HBM3's bandwidth and
    its norms, rotary and SiLU fused by Inductor; then `.item()` of the token. The GPU never
    waits and runs at its bandwidth roof: healthy."""
    k = KTrace(48602)
    k.host(40)
    gemv = lambda n, kk: us_bytes(n * kk * 2, 0.85 * 3350)        # noqa: E731
    body = []
    for layer in range(32):
        body += [(K_TRITON_RMS_IN, 3.0), (K_GEMV, gemv(6144, 4096)), (K_TRITON_ROPE2, 2.4), (K_FLASH, 9.0),
                 (K_GEMV, gemv(4096, 4096)), (K_TRITON_RMS_POST, 3.0), (K_GEMV, gemv(28672, 4096)), (K_TRITON_SILU2, 2.6),
                 (K_GEMV, gemv(4096, 14336))]
    body += [(K_TRITON_RMS_IN, 3.0), (K_GEMV, gemv(128256, 4096)), (K_ARGMAX, 6.0)]
    for s in range(12):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            with k.ann("CUDAGraphTree.replay"):
                k.graph_launch(body)
            item_sync(k)
            k.host(25)
    k.host(30)
    return k.doc(name="graph_decode_roof")


def case_gemm_near_peak():
    """Batched inference through a stack of FFN blocks on an A100 (bf16, 8192 tokens, hidden
    4096, shapes recorded): fc1 (aten::addmm, bias) and fc2 (aten::mm) at ~75% of the bf16
    tensor-core peak, a GELU and a residual add between them. The GEMMs are near their peak
    and split evenly between two ops; nothing waits: healthy."""
    k = KTrace(48603, device=A100)
    k.host(40)
    m, h, f = 8192, 4096, 16384
    for s in range(6):
        with k.ann("ProfilerStep#%d" % (s + 1), pre=2.0):
            for _ in range(12):
                bf16_linear(k, m, f, h, frac=0.75, roof=A100_ROOF, kname=K_GEMM_A100, grid=(108, 1, 1))
                eltwise(k, "aten::gelu", K_GELU, us_bytes(2 * m * f * 2, 1700))
                bf16_linear(k, m, h, f, frac=0.75, roof=A100_ROOF, kname=K_GEMM_A100_NN, bias=False, grid=(108, 1, 1))
                eltwise(k, "aten::add", K_ADD_BF16, us_bytes(3 * m * h * 2, 1700))
            argmax(k)
            tolist_sync(k, 8192 * 8)
            k.host(40)
    k.host(30)
    return k.doc(name="gemm_near_peak")


# ---------------------------------------------------------------- recomputed work (generation without a KV cache)

K_RMS_FUSED = ("void at::native::(anonymous namespace)::vectorized_rms_norm_kernel<c10::BFloat16, float>(long, float, "
               "c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16*)")
K_ROPE_FUSED = ("void rotary_kernel<c10::BFloat16, 128>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, long, int, int)")
K_CAT = ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::OpaqueType<2u>, "
         "unsigned int, 4, 64, 64>(at::native::(anonymous namespace)::OpaqueType<2u>*, "
         "at::native::(anonymous namespace)::CatArrInputTensorMetadata<at::native::(anonymous namespace)::OpaqueType<2u>, "
         "unsigned int, 64, 64>, at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)")
K_GEMM_A100_F16_SMALL = "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn"


def rms_fused(k, tokens, hidden=4096):
    """torch >= 2.8's fused RMSNorm (aten::_fused_rms_norm): one kernel over the tokens."""
    with k.op("aten::rms_norm", pre=2.0):
        with k.op("aten::_fused_rms_norm", pre=1.5):
            k.launch(K_RMS_FUSED, max(3.0, us_bytes(tokens * hidden * 2 * 2, 2400)), grid=(tokens, 1, 1), block=(512, 1, 1))


def llama_hf_layer(k, b, s, past=0):
    """One Llama-2-7B decoder layer in HF eager mode (bf16, record_shapes) over b x s new
    tokens attending to past + s positions: fused RMSNorm, q/k/v/o, a fused rotary kernel,
    SDPA (flash), gate/up/down, each GEMM at 80% of its H100 roof."""
    m = b * s
    rms_fused(k, m)
    for _ in range(3):                                                                   # q, k, v
        linear(k, roof_us(m, 4096, 4096), dims=[[b, s, 4096], [4096, 4096]])
    with k.op("flash_attn::rotary_emb", pre=3.0):
        k.launch(K_ROPE_FUSED, max(2.5, us_bytes(m * 8192 * 2 * 2, 2400)))
    if past:                                                                             # DynamicCache.update: torch.cat
        for _ in range(2):
            with k.op("aten::cat", pre=2.0):
                k.launch(K_CAT, max(2.5, us_bytes(b * (past + s) * 4096 * 2 * 2, 2400)))
    q, kv = [b, s, 32, 128], [b, past + s, 32, 128]                                       # the flash op's [B, S, H, D]
    with k.op("aten::scaled_dot_product_attention", pre=2.0):
        with k.op("aten::_scaled_dot_product_flash_attention", pre=1.5):
            with k.op("aten::_flash_attention_forward", pre=1.5, dims=[q, kv, kv], types=["c10::BFloat16"] * 3):
                k.launch(K_FLASH_FWD, max(6.0, us_flops(2 * b * 32 * s * (past + s) * 128, 450)),   # causal: half of 4*b*h*s*S*d
                         grid=(4, 32, 1), block=(128, 1, 1), regs=255, smem=49152)
    linear(k, roof_us(m, 4096, 4096), dims=[[b, s, 4096], [4096, 4096]])                 # o_proj
    rms_fused(k, m)
    for _ in range(2):                                                                   # gate, up
        linear(k, roof_us(m, 11008, 4096), dims=[[b, s, 4096], [11008, 4096]])
    silu_and_mul(k, max(3.0, us_bytes(m * 11008 * 2 * 3, 2400)))
    linear(k, roof_us(m, 4096, 11008), dims=[[b, s, 11008], [4096, 11008]])              # down


def llama_generate(seed, name, use_cache, b=2, prompt=200, steps=32, layers=12):
    """HF `model.generate(..., do_sample=False)` of a Llama-2-7B (12 of its layers traced) on
    an H100, bf16, record_shapes, one ProfilerStep per new token. use_cache=False: every step
    runs the whole sequence, b x (prompt + i) tokens, through every layer and the lm_head;
    use_cache=True: the first step is the prefill, then b tokens a step (the KV cache grows
    by torch.cat)."""
    k = KTrace(seed)
    k.host(40)
    for i in range(steps):
        s, past = (prompt + i, 0) if not use_cache else ((prompt, 0) if i == 0 else (1, prompt + i - 1))
        with k.ann("ProfilerStep#%d" % (i + 1), pre=2.0):
            k.host(25)                                                            # prepare_inputs_for_generation
            with k.op("aten::embedding", pre=3.0):
                with k.op("aten::index_select", pre=1.5):
                    k.launch(K_EMBED, max(2.5, us_bytes(b * s * 4096 * 2, 2400)))
            for _ in range(layers):
                llama_hf_layer(k, b, s, past)
            rms_fused(k, b * s)
            linear(k, roof_us(b * s, 32000, 4096), dims=[[b, s, 4096], [32000, 4096]])   # lm_head over every position
            argmax(k)
            with k.op("aten::cat", pre=2.0):                                            # input_ids grow by the new token
                k.launch(K_CAT, 2.5)
            item_sync(k)                                                                 # unfinished_sequences.max() == 0
            k.host(30)
    k.host(30)
    return k.doc(name=name)


def case_nocache_llama_h100():
    """HF generate with use_cache=False (Llama-2-7B, batch 2, a 200-token prompt, 32 new
    tokens, H100, current Kineto schema): every step recomputes the whole prefix."""
    return llama_generate(31001, "nocache_llama_h100", use_cache=False)


def case_cached_llama_h100():
    """The same generate with use_cache=True: a prefill step, then GEMMs of M = 2 (the batch)."""
    return llama_generate(31002, "cached_llama_h100", use_cache=True)


def case_nocache_gpt2_a100_2021():
    """A hand-written greedy loop over HF GPT-2 (124M) without past_key_values on an A100, fp16,
    torch 1.9 (2021 Kineto schema, record_shapes): `logits = model(input_ids).logits` each
    step, batch 32, a 64-token prompt, 32 new tokens; GPT-2's Conv1D is torch.addmm(bias,
    x.view(-1, 768), W[768, N]), its lm_head a Linear over every position."""
    k = KTrace(31003, device=A100, schema2021=True)
    k.old_shapes = True
    f16 = ["c10::Half"] * 3 + ["Scalar", "Scalar"]
    b, prompt, d = 32, 64, 768

    def conv1d(m, n, kk):
        with k.op("aten::addmm", pre=2.5, dims=[[n], [m, kk], [kk, n], [], []], types=f16):
            k.launch(K_GEMM_A100_F16_SMALL, roof_us(m, n, kk, roof=A100_ROOF), grid=(108, 1, 1), block=(256, 1, 1))

    def ln(m):
        with k.op("aten::layer_norm", pre=1.5):
            with k.op("aten::native_layer_norm", pre=1.2):
                k.launch(K_LAYERNORM, max(3.0, us_bytes(m * d * 2 * 2, 1600)), grid=(m, 1, 1), block=(512, 1, 1))

    def bmm(x, y, us):
        with k.op("aten::matmul", pre=1.5):
            with k.op("aten::bmm", pre=1.2, dims=[x, y], types=["c10::Half"] * 2):
                k.launch(K_GEMM_A100_F16_SMALL, us, grid=(108, 1, 1), block=(256, 1, 1))

    k.host(40)
    for i in range(32):
        s = prompt + i
        m = b * s
        with k.ann("ProfilerStep#%d" % (i + 1), pre=2.0):
            k.host(20)
            embedding(k)
            for _ in range(12):
                ln(m)
                conv1d(m, 3 * d, d)                                                   # c_attn
                att = b * 12 * s * s
                bmm([b * 12, s, 64], [b * 12, 64, s], max(4.0, us_bytes(att * 2, 1600)))
                with k.op("aten::softmax", pre=2.0):
                    with k.op("aten::_softmax", pre=1.2):
                        k.launch(K_SOFTMAX, max(3.0, us_bytes(att * 2 * 2, 1600)))
                bmm([b * 12, s, s], [b * 12, s, 64], max(4.0, us_bytes(att * 2, 1600)))
                conv1d(m, d, d)                                                       # attn c_proj
                ln(m)
                conv1d(m, 4 * d, d)                                                   # mlp c_fc
                eltwise(k, "aten::gelu", K_GELU, max(3.0, us_bytes(m * 4 * d * 2 * 2, 1600)))
                conv1d(m, d, 4 * d)                                                   # mlp c_proj
            ln(m)
            mm(k, K_GEMM_A100_F16_SMALL, roof_us(m, 50257, d, roof=A100_ROOF), dims=[[b, s, d], [50257, d]],
               types=["c10::Half", "c10::Half"])                                      # lm_head, every position
            argmax(k)
            item_sync(k)
            k.host(25)
    k.host(30)
    return k.doc(name="nocache_gpt2_a100_2021")


def case_nanogpt_generate_a100():
    """nanoGPT's `generate()` (no KV cache in the model at all: each step runs idx, cropped to
    block_size, through the whole model) for 8 samples in parallel of a 16-layer d=2048 model
    on an A100 (bf16 autocast, current schema, record_shapes): 8 x (64 + i) tokens through
    every Linear (bias: addmm) each step; the lm_head sees only the last position
    (`x[:, [-1], :]`), so its M stays at 8."""
    k = KTrace(31004, device=A100)
    b, prompt, d = 8, 64, 2048
    bf = ["c10::BFloat16"] * 3
    k.host(40)
    for i in range(24):
        s = prompt + i
        m = b * s
        with k.ann("ProfilerStep#%d" % (i + 1), pre=2.0):
            k.host(20)
            embedding(k)
            for _ in range(16):
                layer_norm(k, max(3.0, us_bytes(m * d * 2 * 2, 1600)))
                addmm(k, K_GEMM_A100, roof_us(m, 3 * d, d, roof=A100_ROOF), dims=[[b, s, d], [3 * d, d], [3 * d]], types=bf, grid=(108, 1, 1))
                sdpa(k, max(6.0, 0.0005 * b * s * s), kname=K_FLASH_FWD)
                addmm(k, K_GEMM_A100, roof_us(m, d, d, roof=A100_ROOF), dims=[[b, s, d], [d, d], [d]], types=bf, grid=(108, 1, 1))
                layer_norm(k, max(3.0, us_bytes(m * d * 2 * 2, 1600)))
                addmm(k, K_GEMM_A100, roof_us(m, 4 * d, d, roof=A100_ROOF), dims=[[b, s, d], [4 * d, d], [4 * d]], types=bf, grid=(108, 1, 1))
                eltwise(k, "aten::gelu", K_GELU, max(3.0, us_bytes(m * 4 * d * 2 * 2, 1600)))
                addmm(k, K_GEMM_A100, roof_us(m, d, 4 * d, roof=A100_ROOF), dims=[[b, s, 4 * d], [d, 4 * d], [d]], types=bf, grid=(108, 1, 1))
            layer_norm(k, max(3.0, us_bytes(m * d * 2 * 2, 1600)))
            linear(k, roof_us(b, 50304, d, roof=A100_ROOF), kname=K_GEMM_A100, dims=[[b, 1, d], [50304, d]])  # lm_head(x[:, [-1], :])
            with k.op("aten::softmax", pre=2.0):
                k.launch(K_SOFTMAX, 4.0)
            with k.op("aten::multinomial", pre=3.0):
                k.launch(K_ARGMAX, 6.0)
            with k.op("aten::cat", pre=2.0):
                k.launch(K_CAT, 2.5)
            k.host(30)
    k.host(30)
    return k.doc(name="nanogpt_generate_a100")



K_ADAMW_FUSED = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
                 "FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false> >(...)")


def case_group_by_length_train():
    """Control: DistilBERT fine-tuning (H100, bf16, record_shapes) with HF Trainer's
    group_by_length=True: each batch of 32 is padded to its own length, and over 48 steps
    the lengths 96..143 come once each, shuffled. Every Linear's M = 32 x L takes 48 lengths
    stepping by 32 with one call count each, as a prefix recomputed would, but this is a
    training loop (autograd nodes, backward GEMMs): nothing is recomputed, recomputed_work
    must not fire."""
    k = KTrace(31005)
    d, b, layers = 768, 32, 6
    bf = ["c10::BFloat16"] * 3
    lengths = list(range(96, 144))
    k.rng.shuffle(lengths)
    lin = [(3 * d, d), (d, d), (4 * d, d), (d, 4 * d)]          # (N, K): qkv, out, fc1, fc2
    k.host(40)
    for i, L in enumerate(lengths):
        m = b * L
        with k.ann("ProfilerStep#%d" % (i + 1), pre=2.0):
            k.host(30)
            with k.op("aten::to", pre=2.0):
                with k.op("aten::_to_copy", pre=1.5):
                    with k.op("aten::copy_", pre=1.0):
                        k.memcpy("HtoD (Pinned -> Device)", m * 8, 20.0, api_us=5.0)
            embedding(k)
            for _ in range(layers):
                layer_norm(k, max(3.0, us_bytes(m * d * 4, 2400)))
                for n, kk in lin[:2]:
                    addmm(k, K_GEMM_H100, roof_us(m, n, kk), dims=[[b, L, kk], [n, kk], [n]], types=bf)
                sdpa(k, max(6.0, us_flops(4 * b * 12 * L * L * 64, 450)), kname=K_FLASH_FWD)
                layer_norm(k, max(3.0, us_bytes(m * d * 4, 2400)))
                for n, kk in lin[2:]:
                    addmm(k, K_GEMM_H100, roof_us(m, n, kk), dims=[[b, L, kk], [n, kk], [n]], types=bf)
            with k.op("aten::cross_entropy_loss", pre=2.0):
                k.launch(K_SOFTMAX, 5.0)
            for _ in range(layers):                                  # backward: grad input and grad weight of each Linear
                for n, kk in reversed(lin):
                    with k.op("autograd::engine::evaluate_function: AddmmBackward0", pre=2.0):
                        with k.op("AddmmBackward0", pre=1.5):
                            with k.op("aten::mm", pre=1.2, dims=[[m, n], [n, kk]], types=bf[:2]):
                                k.launch(K_GEMM_H100, roof_us(m, kk, n), grid=(132, 1, 1), block=(384, 1, 1))
                            with k.op("aten::mm", pre=1.2, dims=[[n, m], [m, kk]], types=bf[:2]):
                                k.launch(K_GEMM_H100, roof_us(n, kk, m), grid=(132, 1, 1), block=(384, 1, 1))
            with k.op("Optimizer.step#AdamW.step", pre=3.0):
                with k.op("aten::_fused_adamw_", pre=2.0):
                    k.launch(K_ADAMW_FUSED, 180.0)
            item_sync(k)
            k.host(25)
    k.host(30)
    return k.doc(name="group_by_length_train")


# ---------------------------------------------------------------- recomputed work (a per-step constant rebuilt every layer)

K_ARANGE = ("void (anonymous namespace)::elementwise_kernel_with_index<int, at::native::arange_cuda_out(c10::Scalar const&, "
            "c10::Scalar const&, c10::Scalar const&, at::Tensor&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() "
            "const::{lambda(long)#1}>(int, at::native::arange_cuda_out(...)::{lambda(long)#1}, ...)")
K_MUL_F32 = ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, "
             "float, float, at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&, ...)::{lambda(int)#1}>(int, ...)")
K_CAT_F32 = ("void at::native::(anonymous namespace)::CatArrayBatchedCopy_aligned16_contig<at::native::(anonymous namespace)::"
             "OpaqueType<4u>, unsigned int, 2, 128, 1>(at::native::(anonymous namespace)::OpaqueType<4u>*, ...)")
K_COS_F32 = ("void at::native::vectorized_elementwise_kernel<4, at::native::cos_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}"
             "::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, ...)")
K_SIN_F32 = ("void at::native::vectorized_elementwise_kernel<4, at::native::sin_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}"
             "::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, ...)")
K_TRIL = ("void at::native::triu_tril_kernel<float, int, false, 4, true>(at::cuda::detail::TensorInfo<float, int>, "
          "at::cuda::detail::TensorInfo<float const, int>, long, long, long, int)")
K_EQ = ("void at::native::vectorized_elementwise_kernel<4, at::native::CompareEqFunctor<float>, at::detail::Array<char*, 2> >"
        "(int, at::native::CompareEqFunctor<float>, at::detail::Array<char*, 2>)")
K_MASKED_FILL = ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::(anonymous namespace)::"
                 "masked_fill_kernel(at::TensorIterator&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda(float, bool)#1}>"
                 "(at::TensorIteratorBase&, ...)::{lambda(int)#1}>(int, ...)")


def to_copy(k, dims, us, kname=K_CAST):
    """x.to(dtype): aten::to -> _to_copy -> empty_strided, copy_ (the cast kernel)."""
    with k.op("aten::to", pre=1.5, dims=[dims, [], [], [], []], types=["float", "ScalarType", "Scalar", "Scalar", ""]):
        with k.op("aten::_to_copy", pre=1.2, dims=[dims, [], [], [], [], [], []]):
            with k.op("aten::empty_strided", pre=0.6, post=0.3, dims=[[], [], [], [], [], []]):
                pass
            with k.op("aten::copy_", pre=1.0, dims=[dims, dims, []]):
                k.launch(kname, us)


def rope_tables(k, positions, dim=128, gbps=2600):
    """An eager rotary table built from scratch (Meta-style precompute): t = arange(P), freqs =
    outer(t, inv_freq) in fp32, emb = cat(freqs, freqs), then cos and sin cast to bf16: eight
    ops, six kernels, every tensor made from the scalar P."""
    p, h = positions, dim // 2
    with k.op("aten::arange", pre=2.5, dims=[[], [], [], [], []], types=["Scalar", "ScalarType", "", "Device", "Scalar"]):
        with k.op("aten::empty", pre=0.6, post=0.3, dims=[[], [], [], [], [], []]):
            pass
        with k.op("aten::arange", pre=1.0, dims=[[], [], [], [0]]):
            k.launch(K_ARANGE, max(2.0, us_bytes(p * 8, gbps)))
    with k.op("aten::type_as", pre=1.2, dims=[[p], [h]]):
        to_copy(k, [p], max(2.0, us_bytes(p * 12, gbps)))
    with k.op("aten::outer", pre=1.5, dims=[[p], [h]]):
        with k.op("aten::mul", pre=1.0, dims=[[p, 1], [h]]):
            k.launch(K_MUL_F32, max(2.5, us_bytes(p * h * 4, gbps)))
    with k.op("aten::cat", pre=2.0, dims=[[[p, h], [p, h]], []]):
        k.launch(K_CAT_F32, max(2.5, us_bytes(p * dim * 4 * 2, gbps)))
    for fn, kname in (("aten::cos", K_COS_F32), ("aten::sin", K_SIN_F32)):
        with k.op(fn, pre=1.5, dims=[[p, dim]], types=["float"]):
            k.launch(kname, max(2.5, us_bytes(p * dim * 4 * 2, gbps)))
        to_copy(k, [p, dim], max(2.5, us_bytes(p * dim * 6, gbps)))


def llama_rope_decode(seed, name, per_layer, b=1, prompt=512, steps=24, layers=12, positions=32768):
    """A hand-written Llama-3-8B port generating with a KV cache on an H100 (bf16, eager, CUDA
    graphs off, current Kineto schema, record_shapes; 12 of 32 layers traced): a prefill step,
    then one token a step. Its attention builds the rotary cos/sin tables for `positions`
    positions (max_seq_len x 2, Meta's precompute) with rope_tables: per_layer=True in every
    layer's forward, per_layer=False once a step before the layers (the control)."""
    k = KTrace(seed)
    k.host(40)
    for i in range(steps):
        s, past = (prompt, 0) if i == 0 else (1, prompt + i - 1)
        with k.ann("ProfilerStep#%d" % (i + 1), pre=2.0):
            k.host(25)
            with k.op("aten::embedding", pre=3.0):
                with k.op("aten::index_select", pre=1.5):
                    k.launch(K_EMBED, max(2.5, us_bytes(b * s * 4096 * 2, 2400)))
            if not per_layer:
                rope_tables(k, positions)
            for _ in range(layers):
                if per_layer:
                    rope_tables(k, positions)
                llama_hf_layer(k, b, s, past)
            rms_fused(k, b * s)
            linear(k, roof_us(b, 128256, 4096), dims=[[b, 1, 4096], [128256, 4096]])    # lm_head, the last position
            argmax(k)
            item_sync(k)
            k.host(30)
    k.host(30)
    return k.doc(name=name)


def case_rope_per_layer_llama_h100():
    """A Llama-3-8B port rebuilding its rotary cos/sin tables (32768 positions, fp32, then bf16)
    inside every attention forward: eight ops, the same shapes, 12 times a step."""
    return llama_rope_decode(32001, "rope_per_layer_llama_h100", per_layer=True)


def case_rope_once_llama_h100():
    """Control: the same port building the tables once a step, before the layers."""
    return llama_rope_decode(32002, "rope_once_llama_h100", per_layer=False)


def case_causal_mask_per_layer_2021():
    """A GPT-NeoX-style decoder of Pythia-160M's size (12 layers, d=768, 12 heads of 64, fp16,
    eager attention) scoring a corpus on an A100 (torch 1.9, 2021 Kineto schema with
    record_shapes), batch 1 x 2048 tokens: each attention builds its causal mask from scratch,
    mask = torch.ones(S, S).tril(); mask.masked_fill(mask == 0, -inf), a 16 MB fp32
    [2048, 2048] table, 12 times a step."""
    k = KTrace(32003, device=A100, schema2021=True)
    k.old_shapes = True
    b, S, d, hd = 1, 2048, 768, 12
    m = b * S
    f16 = ["c10::Half"] * 3 + ["Scalar", "Scalar"]
    sq = S * S * 4

    def addmm16(n, kk):
        with k.op("aten::addmm", pre=2.5, dims=[[n], [m, kk], [kk, n], [], []], types=f16):
            k.launch(K_GEMM_A100_F16_SMALL, roof_us(m, n, kk, roof=A100_ROOF), grid=(108, 1, 1), block=(256, 1, 1))

    def ln():
        with k.op("aten::layer_norm", pre=1.5):
            with k.op("aten::native_layer_norm", pre=1.2):
                k.launch(K_LAYERNORM, max(3.0, us_bytes(m * d * 2 * 2, 1600)), grid=(m, 1, 1), block=(512, 1, 1))

    k.host(40)
    for i in range(12):
        with k.ann("ProfilerStep#%d" % (i + 1), pre=2.0):
            k.host(30)
            with k.op("aten::to", pre=2.0):
                with k.op("aten::copy_", pre=1.0):
                    k.memcpy("HtoD (Pinned -> Device)", m * 8, 20.0, api_us=5.0)
            embedding(k)
            for _ in range(12):
                ln()
                addmm16(3 * d, d)                                                         # query_key_value
                with k.op("aten::ones", pre=2.5, dims=[[], [], [], [], []]):              # the causal mask, again
                    with k.op("aten::empty", pre=0.6, post=0.3, dims=[[], [], [], [], [], []]):
                        pass
                    with k.op("aten::fill_", pre=1.0, dims=[[S, S], []]):
                        k.launch(K_FILL, max(2.5, us_bytes(sq, 1600)))
                with k.op("aten::tril", pre=2.0, dims=[[S, S], []]):
                    k.launch(K_TRIL, max(2.5, us_bytes(2 * sq, 1600)))
                with k.op("aten::eq", pre=2.0, dims=[[S, S], []]):
                    k.launch(K_EQ, max(2.5, us_bytes(sq + sq // 4, 1600)))
                with k.op("aten::masked_fill", pre=2.0, dims=[[S, S], [S, S], []]):
                    with k.op("aten::clone", pre=1.0, dims=[[S, S], []]):
                        with k.op("aten::copy_", pre=1.0, dims=[[S, S], [S, S], []]):
                            k.launch(K_CAST, max(2.5, us_bytes(2 * sq, 1600)))
                    with k.op("aten::masked_fill_", pre=1.0, dims=[[S, S], [S, S], []]):
                        k.launch(K_MASKED_FILL, max(2.5, us_bytes(2 * sq + sq // 4, 1600)))
                att = b * hd * S * S
                with k.op("aten::matmul", pre=1.5):                                      # q @ k^T
                    with k.op("aten::bmm", pre=1.2, dims=[[b * hd, S, 64], [b * hd, 64, S]], types=["c10::Half"] * 2):
                        k.launch(K_GEMM_A100_F16_SMALL, us_flops(2 * att * 64, 250), grid=(108, 1, 1), block=(256, 1, 1))
                with k.op("aten::add", pre=2.0, dims=[[b, hd, S, S], [S, S], []]):         # + mask
                    k.launch(K_ADD_F32, us_bytes(att * 2 * 2 + sq, 1600))
                with k.op("aten::softmax", pre=2.0):
                    with k.op("aten::_softmax", pre=1.2):
                        k.launch(K_SOFTMAX, us_bytes(att * 2 * 2, 1600))
                with k.op("aten::matmul", pre=1.5):                                      # @ v
                    with k.op("aten::bmm", pre=1.2, dims=[[b * hd, S, S], [b * hd, S, 64]], types=["c10::Half"] * 2):
                        k.launch(K_GEMM_A100_F16_SMALL, us_flops(2 * att * 64, 250), grid=(108, 1, 1), block=(256, 1, 1))
                addmm16(d, d)                                                             # dense
                ln()
                addmm16(4 * d, d)                                                         # mlp
                eltwise(k, "aten::gelu", K_GELU, max(3.0, us_bytes(m * 4 * d * 2 * 2, 1600)))
                addmm16(d, 4 * d)
            ln()
            with k.op("aten::log_softmax", pre=2.0):
                k.launch(K_SOFTMAX, 40.0)
            item_sync(k)
            k.host(25)
    k.host(30)
    return k.doc(name="causal_mask_per_layer_2021")


# ---------------------------------------------------------------- work nobody uses (held-out round 2: suspects_discard.c)

L4_ROOF = (121e12, 300e9)          # dense fp16 FLOP/s, GDDR6 bytes/s (L4 spec sheet)
V100_ROOF = (125e12, 0.9e12)
K_DROPOUT_F16 = ("void at::native::(anonymous namespace)::fused_dropout_kernel_vec<c10::Half, float, unsigned int, 1, 4, bool>("
                 "at::cuda::detail::TensorInfo<c10::Half const, unsigned int>, at::cuda::detail::TensorInfo<c10::Half, unsigned int>, "
                 "at::cuda::detail::TensorInfo<bool, unsigned int>, unsigned int, float, at::PhiloxCudaState)")
K_DROPOUT_BF16 = K_DROPOUT_F16.replace("c10::Half", "c10::BFloat16")
K_GEMM_L4 = "sm89_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel"
K_GEMM_L4_NN = "sm89_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x64x32_stage4_warpsize2x2x1_tensor16x8x16_kernel"
K_DGEMM = "sm80_xmma_gemm_f64f64_f64f64_f64_tn_n_tilesize64x64x16_stage3_warpsize2x2x1_execute_kernel__5x_cublas"
K_DGEMM_NN = "sm80_xmma_gemm_f64f64_f64f64_f64_nn_n_tilesize64x64x16_stage3_warpsize2x2x1_execute_kernel__5x_cublas"
K_TANH_F64 = ("void at::native::vectorized_elementwise_kernel<4, at::native::tanh_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}"
              "::operator()() const::{lambda()#1}::operator()() const::{lambda(double)#1}, at::detail::Array<char*, 2> >(int, ...)")
K_TANH_BWD_F64 = ("void at::native::vectorized_elementwise_kernel<4, at::native::tanh_backward_kernel_cuda(at::TensorIteratorBase&)"
                  "::{lambda()#2}::operator()() const::{lambda()#1}::operator()() const::{lambda(double, double)#1}, at::detail::Array<char*, 3> >(int, ...)")
K_ADAM_F64 = K_ADAM.replace("float", "double")
K_BN_BWD_V100 = ("void cudnn::bn_bw_1C11_kernel_new<__half, float, float2, 512, true, 1>(float, float, float, float, cudnnTensorStruct, "
                 "__half const*, cudnnTensorStruct, __half const*, cudnnTensorStruct, __half*, float const*, float*, float*, float const*, float const*, float)")
K_CONV_DGRAD_V100 = "volta_fp16_s884cudnn_fp16_256x128_ldg8_dgrad_f2f_exp_small_nhwc2nchw_tt_v1"
K_CONV_WGRAD_V100 = "volta_fp16_s884cudnn_fp16_128x128_ldg8_wgrad_idx_f2f_exp_small_nhwc_nt_v1"
K_THRESH_BWD_F16 = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::threshold_kernel_impl<c10::Half>"
                    "(at::TensorIteratorBase&, c10::Half, c10::Half)::{lambda(c10::Half, c10::Half)#1}, at::detail::Array<char*, 3> >(int, ...)")
K_CUDNN_TRY = [
    "void cudnn::cnn::conv2d_grouped_direct_kernel<false, true, false, false, 0, 0, int, __half, __half, __half, float, float, true>(...)",
    "void implicit_convolve_hhgemm<__half, 1024, 5, 5, 3, 3, 3, 1, false, true, true>(int, int, int, __half const*, int, __half*, ...)",
    "void fft2d_r2c_32x32<__half, false, 1u, false>(float2*, __half const*, int, int, int, int, int, int, int, int, int, ...)",
    "void cudnn::winograd_nonfused::winogradForwardData4x4<float, __half>(cudnn::winograd_nonfused::WinogradDataParams<float, __half>)",
    "sm80_xmma_fprop_implicit_gemm_indexed_f16f16_f16f32_f32_nhwckrsc_nchw_tilesize64x64x64_stage4_warpsize2x2x1_g1_tensor16x8x16_kernel",
    "void cudnn::detail::implicit_convolve_sgemm<__half, __half, 128, 5, 5, 3, 3, 3, 1, false, false, true>(int, int, int, ...)",
    "sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nchw_tilesize128x64x32_stage5_warpsize2x2x1_g1_tensor16x8x16_kernel",
]
K_CONV_A100 = "sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nchw_tilesize128x128x32_stage4_warpsize2x2x1_g1_tensor16x8x16_kernel"



def case_dropout_infer_l4():
    """BERT-base cross-encoder reranking on an L4 (fp16, torch 2.3 current schema, record_shapes)
    whose serving code never called model.eval(): every nn.Dropout runs (aten::dropout ->
    aten::native_dropout, fused_dropout_kernel_vec: 3 per layer, one over the [32,12,384,384]
    attention probabilities) in a loop with no backward at all. The dropout kernels hold
    ~25% of a busy GPU; their output is random noise the scores should not have: the work
    must not run (model.eval() / torch.inference_mode())."""
    k = KTrace(61001, device=L4)
    k.host(40)
    b, s, d = 32, 384, 768
    m = b * s
    h16 = ["c10::Half"] * 3
    for st in range(6):
        with k.ann("ProfilerStep#%d" % (st + 1), pre=2.0):
            with k.op("aten::to", pre=2.0):
                with k.op("aten::copy_", pre=1.0):
                    k.memcpy("HtoD (Pinned -> Device)", m * 8 * 3, 25.0, api_us=5.0)
            embedding(k)
            for _ in range(12):
                for _qkv in range(3):
                    addmm(k, K_GEMM_L4, roof_us(m, d, d, 0.6, L4_ROOF), dims=[[b, s, d], [d, d], [d]], types=h16, grid=(58, 1, 1))
                att = b * 12 * s * s
                with k.op("aten::matmul", pre=1.5):
                    with k.op("aten::bmm", pre=1.2, dims=[[b * 12, s, 64], [b * 12, 64, s]], types=h16[:2]):
                        k.launch(K_GEMM_L4_NN, us_flops(2 * att * 64, 60) + 3, grid=(58, 1, 1))
                with k.op("aten::add", pre=2.0, dims=[[b, 12, s, s], [b, 1, 1, s]], types=h16[:2]):
                    k.launch(K_ADD_F16, us_bytes(att * 4, 250))
                with k.op("aten::softmax", pre=2.0):
                    with k.op("aten::_softmax", pre=1.2, dims=[[b, 12, s, s], [], []]):
                        k.launch(K_SOFTMAX_F16, us_bytes(att * 4, 250))
                with k.op("aten::dropout", pre=2.0, dims=[[b, 12, s, s], [], []], types=["c10::Half", "Scalar", "Scalar"]):
                    with k.op("aten::native_dropout", pre=1.5, dims=[[b, 12, s, s], [], []]):
                        k.launch(K_DROPOUT_F16, us_bytes(att * 5, 250))
                with k.op("aten::matmul", pre=1.5):
                    with k.op("aten::bmm", pre=1.2, dims=[[b * 12, s, s], [b * 12, s, 64]], types=h16[:2]):
                        k.launch(K_GEMM_L4_NN, us_flops(2 * att * 64, 60) + 3, grid=(58, 1, 1))
                addmm(k, K_GEMM_L4, roof_us(m, d, d, 0.6, L4_ROOF), dims=[[b, s, d], [d, d], [d]], types=h16, grid=(58, 1, 1))
                with k.op("aten::dropout", pre=2.0, dims=[[b, s, d], [], []], types=["c10::Half", "Scalar", "Scalar"]):
                    with k.op("aten::native_dropout", pre=1.5, dims=[[b, s, d], [], []]):
                        k.launch(K_DROPOUT_F16, us_bytes(m * d * 5, 250))
                with k.op("aten::add", pre=2.0):
                    k.launch(K_ADD_F16, us_bytes(m * d * 6, 250))
                with k.op("aten::layer_norm", pre=2.0):
                    k.launch(K_LN_F16, us_bytes(m * d * 4, 250))
                addmm(k, K_GEMM_L4, roof_us(m, 4 * d, d, 0.6, L4_ROOF), dims=[[b, s, d], [4 * d, d], [4 * d]], types=h16, grid=(58, 1, 1))
                with k.op("aten::gelu", pre=2.0):
                    k.launch(K_GELU_F16, us_bytes(m * 4 * d * 4, 250))
                addmm(k, K_GEMM_L4, roof_us(m, d, 4 * d, 0.6, L4_ROOF), dims=[[b, s, 4 * d], [d, 4 * d], [d]], types=h16, grid=(58, 1, 1))
                with k.op("aten::dropout", pre=2.0, dims=[[b, s, d], [], []], types=["c10::Half", "Scalar", "Scalar"]):
                    with k.op("aten::native_dropout", pre=1.5, dims=[[b, s, d], [], []]):
                        k.launch(K_DROPOUT_F16, us_bytes(m * d * 5, 250))
                with k.op("aten::add", pre=2.0):
                    k.launch(K_ADD_F16, us_bytes(m * d * 6, 250))
                with k.op("aten::layer_norm", pre=2.0):
                    k.launch(K_LN_F16, us_bytes(m * d * 4, 250))
            addmm(k, K_GEMM_L4, 8.0, dims=[[b, d], [1, d], [1]], types=h16, grid=(1, 1, 1))
            tolist_sync(k, b * 2)
            k.host(200)
    k.host(30)
    return k.doc(name="dropout_infer_l4")


def case_eval_backward_2021():
    """A ResNet-style validation loop on a V100 (torch 1.9, 2021 schema) that reuses the
    training step's body: loss.backward() runs (CudnnConvolutionBackward, NativeBatchNorm-
    Backward, ReluBackward0, AccumulateGrad) on every batch, but no optimizer step and no
    zero_grad follow: the gradients are computed, accumulated into .grad, never read. The
    backward is ~2/3 of a busy GPU (torch.no_grad() / inference_mode around validation)."""
    k = KTrace(61002, device=V100, schema2021=True)
    k.host(40)
    layers = [(64, 56), (128, 28), (256, 14), (512, 7)] * 4
    for st in range(6):
        with k.op("ProfilerStep#%d" % (st + 1), pre=2.0):
            with k.op("aten::to", pre=2.0):
                with k.op("aten::copy_", pre=1.0):
                    k.memcpy("HtoD (Pinned -> Device)", 64 * 3 * 224 * 224 * 2, 11.0, api_us=5.0)
            for c, hw in layers:
                act = 64 * c * hw * hw * 2
                with k.op("aten::conv2d", pre=2.0):
                    with k.op("aten::cudnn_convolution", pre=1.5):
                        k.launch(K_CONV_VOLTA, us_flops(2 * 64 * hw * hw * c * c * 9, 70) + 5, grid=(80, 4, 1))
                with k.op("aten::batch_norm", pre=2.0):
                    with k.op("aten::cudnn_batch_norm", pre=1.5):
                        k.launch(K_BN_INF_NCHW, us_bytes(act * 2, 700) + 3)
                with k.op("aten::relu_", pre=2.0):
                    k.launch(K_RELU_F16, us_bytes(act * 2, 700) + 3)
            with k.op("aten::cross_entropy_loss", pre=2.0):
                k.launch(K_LOG_SOFTMAX, 6.0)
            with k.op("aten::ones_like", pre=2.0):
                k.launch(K_FILL, 2.0)
            for c, hw in reversed(layers):
                act = 64 * c * hw * hw * 2
                with k.op("autograd::engine::evaluate_function: ReluBackward0", pre=2.0):
                    with k.op("ReluBackward0", pre=1.0):
                        with k.op("aten::threshold_backward", pre=1.0):
                            k.launch(K_THRESH_BWD_F16, us_bytes(act * 3, 700) + 3)
                with k.op("autograd::engine::evaluate_function: CudnnBatchNormBackward", pre=2.0):
                    with k.op("CudnnBatchNormBackward", pre=1.0):
                        with k.op("aten::cudnn_batch_norm_backward", pre=1.0):
                            k.launch(K_BN_BWD_V100, us_bytes(act * 3, 700) + 3)
                with k.op("autograd::engine::evaluate_function: CudnnConvolutionBackward", pre=2.0):
                    with k.op("CudnnConvolutionBackward", pre=1.0):
                        with k.op("aten::cudnn_convolution_backward", pre=1.0):
                            fl = 2 * 64 * hw * hw * c * c * 9
                            k.launch(K_CONV_DGRAD_V100, us_flops(fl, 60) + 5, grid=(80, 4, 1))
                            k.launch(K_CONV_WGRAD_V100, us_flops(fl, 55) + 5, grid=(80, 4, 1))
                with k.op("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", pre=2.0):
                    with k.op("torch::autograd::AccumulateGrad", pre=1.0):
                        with k.op("aten::add_", pre=1.0):
                            k.launch(K_ADD_F16, 3.0, grid=(40, 1, 1))
            with k.op("aten::argmax", pre=2.0):
                k.launch(K_ARGMAX, 5.0)
            with k.op("aten::item", pre=2.0):
                with k.op("aten::_local_scalar_dense", pre=1.5):
                    k.memcpy("DtoH (Device -> Pageable)", 8, 0.005, api_us=8.0)
                    k.sync()
            k.host(60)
    k.host(30)
    return k.doc(name="eval_backward_2021")


VIT_L = [(3 * 1024, 1024), (3 * 1024,), (1024, 1024), (1024,), (1024,), (1024,), (4096, 1024), (4096,), (1024, 4096), (1024,),
         (1024,), (1024,)]


def checkpoint_loop(seed, name, device=H100, schema2021=False, gemm=K_GEMM_H100):
    """GPT-2 medium (24 layers, d=1024) fine-tuned at batch 8 x 1024 on an 80 GB H100 with
    gradient checkpointing left on from a larger run (reentrant torch.utils.checkpoint per
    block): each block's forward ops run a second time inside CheckpointFunctionBackward,
    same shapes, before its backward GEMMs: ~1/4 of the GPU time recomputes what the
    forward already computed, and the activations it saves fit many times over."""
    k = KTrace(seed, device=device, schema2021=schema2021)
    roof = H100_ROOF if device is H100 else (125e12, 0.9e12)
    k.host(40)
    b, s, d = 8, 1024, 1024
    m = b * s

    def block_fwd():
        layer_norm(k, us_bytes(m * d * 4, 2400))
        bf16_linear(k, m, 3 * d, d, roof=roof, kname=gemm)
        sdpa(k, us_flops(4 * b * 16 * s * s * 64, 420) + 5, K_FLASH_FWD)
        bf16_linear(k, m, d, d, roof=roof, kname=gemm)
        layer_norm(k, us_bytes(m * d * 4, 2400))
        bf16_linear(k, m, 4 * d, d, roof=roof, kname=gemm)
        eltwise(k, "aten::gelu", K_GELU, us_bytes(m * 4 * d * 4, 2400))
        bf16_linear(k, m, d, 4 * d, roof=roof, kname=gemm)

    for st in range(5):
        with (k.op if schema2021 else k.ann)("ProfilerStep#%d" % (st + 1), pre=2.0):
            with k.op("aten::to", pre=2.0):
                with k.op("aten::copy_", pre=1.0):
                    k.memcpy("HtoD (Pinned -> Device)", m * 8, 20.0, api_us=5.0)
            embedding(k)
            for _ in range(24):
                with k.op("CheckpointFunction", pre=3.0):
                    block_fwd()
            with k.op("aten::cross_entropy_loss", pre=2.0):
                k.launch(K_LOG_SOFTMAX, 900.0)
            for _ in range(24):
                with k.op("autograd::engine::evaluate_function: CheckpointFunctionBackward", pre=3.0):
                    with k.op("CheckpointFunctionBackward", pre=2.0):
                        block_fwd()
                        for n, kk in ((d, 4 * d), (4 * d, d), (d, d), (3 * d, d)):
                            with k.op("autograd::engine::evaluate_function: AddmmBackward0", pre=2.0):
                                with k.op("AddmmBackward0", pre=1.5):
                                    with k.op("aten::mm", pre=1.2, dims=[[m, n], [n, kk]], types=BF16x3[:2]):
                                        k.launch(gemm, roof_us(m, kk, n, 0.7, roof))
                                    with k.op("aten::mm", pre=1.2, dims=[[n, m], [m, kk]], types=BF16x3[:2]):
                                        k.launch(gemm, roof_us(n, kk, m, 0.7, roof))
                        with k.op("aten::_flash_attention_backward", pre=2.0):
                            k.launch(K_FLASH_FWD, us_flops(10 * b * 16 * s * s * 64, 380) + 5, grid=(16, 16, 8))
            with k.ann("Optimizer.step#AdamW.step"):
                with k.op("aten::_fused_adamw_", pre=5.0):
                    k.launch(K_ADAM, 500.0, grid=(320, 1, 1))
            with k.ann("Optimizer.zero_grad#AdamW.zero_grad"):
                pass
            item_sync(k)
            k.host(40)
    k.host(30)
    return k.doc(name=name)



def case_checkpoint_roomy_h100():
    """GPT-2 medium fine-tuned on an 80 GB H100 with reentrant checkpointing on every block."""
    return checkpoint_loop(61008, "checkpoint_roomy_h100")


def case_checkpoint_v100_2021():
    """The same loop on a 32 GB V100 with torch 1.9 (2021 schema, fp16 s884 GEMMs): the
    reentrant checkpoint of every block recomputes its forward inside the backward."""
    return checkpoint_loop(61014, "checkpoint_v100_2021", device=V100, schema2021=True, gemm=K_GEMM_V100_F16)

def gpt2_loop(seed, name, backward=True, optimizer=True, dropout=True, eager=False):
    """GPT-2 small (12 layers, d=768, batch 16 x 1024) on an A100, bf16, current schema with
    record_shapes: forward with nn.Dropout(0.1) after attention and MLP when dropout, then
    (backward) the loss's backward (AddmmBackward0, NativeDropoutBackward0, flash backward)
    and (optimizer) a fused AdamW step and zero_grad. GEMMs at ~70% of their roof. eager:
    HF's eager attention (bmm, softmax, dropout over the [B, 12, S, S] probabilities, bmm)
    in place of SDPA."""
    k = KTrace(seed, device=A100)
    k.host(40)
    b, s, d = 16, 1024, 768
    m = b * s
    for st in range(5):
        with k.ann("ProfilerStep#%d" % (st + 1), pre=2.0):
            with k.op("aten::to", pre=2.0):
                with k.op("aten::copy_", pre=1.0):
                    k.memcpy("HtoD (Pinned -> Device)", m * 8 * 2, 20.0, api_us=5.0)
            embedding(k)
            for _ in range(12):
                layer_norm(k, us_bytes(m * d * 4, 1500))
                bf16_linear(k, m, 3 * d, d, roof=A100_ROOF, kname=K_GEMM_A100, grid=(108, 1, 1))
                if eager:                    # attn_implementation="eager": probs materialized, dropped out
                    att = b * 12 * s * s
                    with k.op("aten::matmul", pre=1.5):
                        with k.op("aten::bmm", pre=1.2, dims=[[b * 12, s, 64], [b * 12, 64, s]], types=BF16x3[:2]):
                            k.launch(K_GEMM_A100_NN, us_flops(2 * att * 64, 200) + 3, grid=(108, 1, 1))
                    with k.op("aten::softmax", pre=2.0):
                        with k.op("aten::_softmax", pre=1.2, dims=[[b, 12, s, s], [], []]):
                            k.launch(K_SOFTMAX, us_bytes(att * 4, 1500))
                    if dropout:
                        with k.op("aten::dropout", pre=2.0, dims=[[b, 12, s, s], [], []], types=["c10::BFloat16", "Scalar", "Scalar"]):
                            with k.op("aten::native_dropout", pre=1.5, dims=[[b, 12, s, s], [], []]):
                                k.launch(K_DROPOUT_BF16, us_bytes(att * 5, 1500))
                    with k.op("aten::matmul", pre=1.5):
                        with k.op("aten::bmm", pre=1.2, dims=[[b * 12, s, s], [b * 12, s, 64]], types=BF16x3[:2]):
                            k.launch(K_GEMM_A100_NN, us_flops(2 * att * 64, 200) + 3, grid=(108, 1, 1))
                else:
                    sdpa(k, us_flops(4 * b * 12 * s * s * 64, 180) + 5, K_FLASH_FWD)
                bf16_linear(k, m, d, d, roof=A100_ROOF, kname=K_GEMM_A100, grid=(108, 1, 1))
                if dropout:
                    with k.op("aten::dropout", pre=2.0, dims=[[b, s, d], [], []], types=["c10::BFloat16", "Scalar", "Scalar"]):
                        with k.op("aten::native_dropout", pre=1.5, dims=[[b, s, d], [], []]):
                            k.launch(K_DROPOUT_BF16, us_bytes(m * d * 5, 1500))
                layer_norm(k, us_bytes(m * d * 4, 1500))
                bf16_linear(k, m, 4 * d, d, roof=A100_ROOF, kname=K_GEMM_A100, grid=(108, 1, 1))
                eltwise(k, "aten::gelu", K_GELU, us_bytes(m * 4 * d * 4, 1500))
                bf16_linear(k, m, d, 4 * d, roof=A100_ROOF, kname=K_GEMM_A100, grid=(108, 1, 1))
                if dropout:
                    with k.op("aten::dropout", pre=2.0, dims=[[b, s, d], [], []], types=["c10::BFloat16", "Scalar", "Scalar"]):
                        with k.op("aten::native_dropout", pre=1.5, dims=[[b, s, d], [], []]):
                            k.launch(K_DROPOUT_BF16, us_bytes(m * d * 5, 1500))
            with k.op("aten::cross_entropy_loss", pre=2.0):
                k.launch(K_LOG_SOFTMAX, 400.0)
            for _ in range(12 if backward else 0):
                for n, kk in ((d, 4 * d), (4 * d, d), (d, d), (3 * d, d)):
                    with k.op("autograd::engine::evaluate_function: AddmmBackward0", pre=2.0):
                        with k.op("AddmmBackward0", pre=1.5):
                            with k.op("aten::mm", pre=1.2, dims=[[m, n], [n, kk]], types=BF16x3[:2]):
                                k.launch(K_GEMM_A100, roof_us(m, kk, n, 0.7, A100_ROOF), grid=(108, 1, 1))
                            with k.op("aten::mm", pre=1.2, dims=[[n, m], [m, kk]], types=BF16x3[:2]):
                                k.launch(K_GEMM_A100, roof_us(n, kk, m, 0.7, A100_ROOF), grid=(108, 1, 1))
                if dropout:
                    with k.op("autograd::engine::evaluate_function: NativeDropoutBackward0", pre=2.0):
                        with k.op("aten::native_dropout_backward", pre=1.5):
                            k.launch(K_MUL, us_bytes(m * d * 5, 1500))
                with k.op("aten::_flash_attention_backward", pre=2.0):
                    k.launch(K_FLASH_FWD, us_flops(10 * b * 12 * s * s * 64, 160) + 5, grid=(16, 12, 16))
            if optimizer:
                with k.ann("Optimizer.step#AdamW.step"):
                    with k.op("aten::_fused_adamw_", pre=5.0):
                        k.launch(K_ADAM, 300.0, grid=(320, 1, 1))
                with k.ann("Optimizer.zero_grad#AdamW.zero_grad"):
                    pass
            item_sync(k)
            k.host(40)
    k.host(30)
    return k.doc(name=name)


def case_gpt2_train_dropout_a100():
    """Control: GPT-2 small pre-training (dropout in training, backward, fused AdamW and
    zero_grad every step): the dropout and the backward are needed, nothing is thrown away."""
    return gpt2_loop(61010, "gpt2_train_dropout_a100")


def case_gpt2_eval_backward_a100():
    """GPT-2 small's validation loop reusing the training step without the optimizer: dropout
    off (model.eval()), loss.backward() still runs every batch, no optimizer step, no
    zero_grad: the backward's GPU time (~2/3 of the step) computes gradients nobody reads."""
    return gpt2_loop(61012, "gpt2_eval_backward_a100", dropout=False, optimizer=False)


def case_gpt2_generate_train_mode_a100():
    """GPT-2 small (HF, eager attention) scoring batches with the model left in train mode (no
    model.eval()): no backward, no optimizer, but the three dropouts of every layer (one over
    the attention probabilities) draw and apply their masks."""
    return gpt2_loop(61013, "gpt2_generate_train_mode_a100", backward=False, optimizer=False, eager=True)



# ---- fp64 math on a unit built for fp32 (dominant_op's advice names the precision) ----

K_DGEMM_TN = "sm80_xmma_gemm_f64f64_f64f64_f64_tn_n_tilesize64x64x16_stage3_warpsize2x2x1_execute_kernel__5x_cublas"
K_DGEMM_NN = "sm80_xmma_gemm_f64f64_f64f64_f64_nn_n_tilesize64x64x16_stage3_warpsize2x2x1_execute_kernel__5x_cublas"
K_DGEMM_V100 = "volta_dgemm_64x64_nn"
K_TANH_F64 = ("void at::native::vectorized_elementwise_kernel<4, at::native::tanh_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}"
              "::operator()() const::{lambda()#1}::operator()() const::{lambda(double)#1}, at::detail::Array<char*, 2> >(int, ...)")
K_TANH_BWD_F64 = ("void at::native::vectorized_elementwise_kernel<4, at::native::tanh_backward_kernel_cuda(at::TensorIteratorBase&)"
                  "::{lambda()#2}::operator()() const::{lambda()#1}::operator()() const::{lambda(double, double)#1}, "
                  "at::detail::Array<char*, 3> >(int, ...)")
K_EXP_F64 = K_TANH_F64.replace("tanh_kernel_cuda", "exp_kernel_cuda")


def case_fp64_pinn_l4():
    """A physics-informed MLP (8 x 512 tanh layers, 16384 collocation points) trained with
    torch.set_default_dtype(torch.float64) on an L4, whose fp64 rate is 1/64 of its fp32
    (~0.47 TFLOP/s): the dgemms hold ~95% of a busy GPU, each near the fp64 roof: it runs
    well on the wrong unit (float32 / TF32 runs the same math 30-60x faster)."""
    k = KTrace(61106, device=L4)
    k.host(40)
    n, w = 16384, 512
    f64 = ["double"] * 3
    fp64 = (0.47e12, 300e9)
    for st in range(5):
        with k.ann("ProfilerStep#%d" % (st + 1), pre=2.0):
            for _ in range(8):
                with k.op("aten::linear", pre=2.5, dims=[[n, w], [w, w], [w]], types=f64):
                    with k.op("aten::addmm", pre=1.5, dims=[[w], [n, w], [w, w], [], []], types=f64 + ["Scalar", "Scalar"]):
                        k.launch(K_DGEMM_TN, roof_us(n, w, w, 0.9, fp64, es=8), grid=(58, 1, 1))
                with k.op("aten::tanh", pre=2.0, dims=[[n, w]], types=["double"]):
                    k.launch(K_TANH_F64, us_bytes(n * w * 16, 280))
            with k.op("aten::mse_loss", pre=2.0):
                k.launch(K_SUM, 6.0)
            for _ in range(8):
                with k.op("autograd::engine::evaluate_function: TanhBackward0", pre=2.0):
                    with k.op("aten::tanh_backward", pre=1.0):
                        k.launch(K_TANH_BWD_F64, us_bytes(n * w * 24, 280))
                with k.op("autograd::engine::evaluate_function: AddmmBackward0", pre=2.0):
                    with k.op("aten::mm", pre=1.2, dims=[[n, w], [w, w]], types=f64[:2]):
                        k.launch(K_DGEMM_NN, roof_us(n, w, w, 0.9, fp64, es=8), grid=(58, 1, 1))
                    with k.op("aten::mm", pre=1.2, dims=[[w, n], [n, w]], types=f64[:2]):
                        k.launch(K_DGEMM_NN, roof_us(w, w, n, 0.9, fp64, es=8), grid=(58, 1, 1))
            with k.ann("Optimizer.step#Adam.step"):
                with k.op("aten::_fused_adam_", pre=5.0):
                    k.launch(K_ADAM.replace("float", "double"), 40.0)
            item_sync(k)
            k.host(40)
    k.host(30)
    return k.doc()


def case_fp64_kernel_regression_v100_2021():
    """Gaussian-process-style kernel regression scored in float64 on a V100 (torch 1.9, 2021
    schema): per batch an RBF kernel matrix (cdist, exp) against 8192 inducing points and two
    [4096, 8192] x [8192, 8192] dgemms: the matmuls hold ~90% of a busy GPU at the V100's fp64
    rate (7.8 TFLOP/s, 1/16 of its fp16 tensor rate): float32 with TF32 off-limits on Volta is
    still 2x, and the question is whether the model needs double precision at all."""
    k = KTrace(61107, device=V100, schema2021=True)
    k.host(40)
    b, m = 4096, 8192
    fp64 = (7.8e12, 900e9)
    for st in range(4):
        with k.ann("ProfilerStep#%d" % (st + 1), pre=2.0):
            with k.op("aten::cdist", pre=3.0, dims=[[b, 64], [m, 64]], types=["double", "double"]):
                k.launch(K_EXP_F64, us_bytes(b * m * 16, 800))
            with k.op("aten::exp", pre=2.0, dims=[[b, m]], types=["double"]):
                k.launch(K_EXP_F64, us_bytes(b * m * 16, 800))
            for _ in range(2):
                with k.op("aten::matmul", pre=2.0, dims=[[b, m], [m, m]], types=["double", "double"]):
                    with k.op("aten::mm", pre=1.0, dims=[[b, m], [m, m]], types=["double", "double"]):
                        k.launch(K_DGEMM_V100, roof_us(b, m, m, 0.92, fp64, es=8), grid=(128, 64, 1))
            item_sync(k)
            k.host(60)
    k.host(30)
    return k.doc()


# ---- constant state uploaded again every step (pageable_memcpy / copy_on_critical_path advice) ----

def case_weights_reupload_vit_a100():
    """A ViT-L/16 image-embedding service on an A100 (fp32 weights kept on the host, bf16
    autocast) that calls model.to('cuda') at the top of every request: ~290 aten::to ->
    aten::copy_ HtoD copies (Pageable -> Device) a step, the same sizes in the same order each
    step, 1.2 GB, longer than the forward. Upload once, before the loop."""
    k = KTrace(61203, device=A100)
    k.host(40)
    for st in range(5):
        with k.ann("ProfilerStep#%d" % (st + 1), pre=2.0):
            for _layer in range(24):
                for shp in VIT_L:
                    n = 1
                    for x in shp:
                        n *= x
                    with k.op("aten::to", pre=3.0, dims=[list(shp), [], [], [], []]):
                        with k.op("aten::_to_copy", pre=1.5):
                            with k.op("aten::empty_strided", pre=0.6, post=0.3):
                                pass
                            with k.op("aten::copy_", pre=1.2, dims=[list(shp), list(shp), []]):
                                k.memcpy("HtoD (Pageable -> Device)", n * 4, 11.0, blocking=True)
            with k.op("aten::to", pre=2.0):
                with k.op("aten::copy_", pre=1.0):
                    k.memcpy("HtoD (Pinned -> Device)", 64 * 3 * 224 * 224 * 2, 20.0, api_us=5.0)
            m = 64 * 197
            for _layer in range(24):
                layer_norm(k, us_bytes(m * 1024 * 4, 1500))
                bf16_linear(k, m, 3 * 1024, 1024, roof=A100_ROOF, kname=K_GEMM_A100, grid=(108, 1, 1))
                sdpa(k, us_flops(4 * 64 * 16 * 197 * 197 * 64, 150) + 5, K_FLASH_FWD)
                bf16_linear(k, m, 1024, 1024, roof=A100_ROOF, kname=K_GEMM_A100, grid=(108, 1, 1))
                layer_norm(k, us_bytes(m * 1024 * 4, 1500))
                bf16_linear(k, m, 4096, 1024, roof=A100_ROOF, kname=K_GEMM_A100, grid=(108, 1, 1))
                eltwise(k, "aten::gelu", K_GELU, us_bytes(m * 4096 * 4, 1500))
                bf16_linear(k, m, 1024, 4096, roof=A100_ROOF, kname=K_GEMM_A100, grid=(108, 1, 1))
            tolist_sync(k, 64 * 1024 * 2)
            k.host(100)
    k.host(30)
    return k.doc()


BERT_BASE = [(3 * 768, 768), (3 * 768,), (768, 768), (768,), (768,), (768,), (3072, 768), (3072,), (768, 3072), (768,),
             (768,), (768,)]


def case_weights_reupload_bert_v100_2021():
    """A BERT-base sentence classifier served on a V100 (torch 1.9, 2021 schema) whose handler
    rebuilds the model from a CPU state_dict and calls model.half().cuda() per request: 144
    pinned HtoD copies of the same sizes in the same order every step (the state dict was
    pinned, so they are async and sit on the compute stream between the kernels) before a
    short forward of 32 x 128 tokens. The weights should stay on the GPU."""
    k = KTrace(61204, device=V100, schema2021=True)
    k.host(40)
    for st in range(6):
        with k.ann("ProfilerStep#%d" % (st + 1), pre=2.0):
            for _layer in range(12):
                for shp in BERT_BASE:
                    n = 1
                    for x in shp:
                        n *= x
                    with k.op("aten::to", pre=2.5):
                        with k.op("aten::copy_", pre=1.0):
                            k.memcpy("HtoD (Pinned -> Device)", n * 2, us_bytes(n * 2, 11), api_us=4.0)
            m = 32 * 128
            for _layer in range(12):
                layer_norm(k, us_bytes(m * 768 * 2, 800))
                bf16_linear(k, m, 3 * 768, 768, roof=V100_ROOF, kname=K_GEMM_V100_F16, grid=(80, 1, 1), types=["c10::Half"] * 3)
                bf16_linear(k, m, 768, 768, roof=V100_ROOF, kname=K_GEMM_V100_F16, grid=(80, 1, 1), types=["c10::Half"] * 3)
                layer_norm(k, us_bytes(m * 768 * 2, 800))
                bf16_linear(k, m, 3072, 768, roof=V100_ROOF, kname=K_GEMM_V100_F16, grid=(80, 1, 1), types=["c10::Half"] * 3)
                eltwise(k, "aten::gelu", K_GELU, us_bytes(m * 3072 * 4, 800))
                bf16_linear(k, m, 768, 3072, roof=V100_ROOF, kname=K_GEMM_V100_F16, grid=(80, 1, 1), types=["c10::Half"] * 3)
            tolist_sync(k, 32 * 2 * 4)
            k.host(80)
    k.host(30)
    return k.doc()


# ---- attention computed eagerly (unfused_elementwise's advice: scaled_dot_product_attention) ----

K_SOFTMAX_BF16 = K_SOFTMAX.replace("float, float, float", "c10::BFloat16, c10::BFloat16, float")


def case_eager_attention_bert_h100():
    """A BERT-large cross-encoder reranking batches of 64 x 512 tokens on an H100 (bf16,
    shapes recorded) with attn_implementation="eager": per layer the [64, 16, 512, 512] scores
    are written by a bmm, then scaled (div), masked (add of the mask) and softmaxed, each a
    pass over 537 MB: the elementwise passes over the scores hold ~35% of a busy GPU, which
    F.scaled_dot_product_attention (flash) never writes to memory."""
    k = KTrace(61301, device=H100)
    b, s, d, h = 64, 512, 1024, 16
    m = b * s
    sc = b * h * s * s * 2
    bw = 2700

    def attn_pass(opname, kname, dims):
        with k.op(opname, pre=1.5, dims=dims, types=["c10::BFloat16"] * len(dims)):
            k.launch(kname, us_bytes(2 * sc, bw))

    k.host(40)
    for st in range(4):
        with k.ann("ProfilerStep#%d" % (st + 1), pre=2.0):
            for _ in range(24):
                bf16_linear(k, m, 3 * d, d, roof=H100_ROOF)
                with k.op("aten::matmul", pre=1.5):
                    with k.op("aten::bmm", pre=1.2, dims=[[b * h, s, 64], [b * h, 64, s]], types=["c10::BFloat16"] * 2):
                        k.launch(K_GEMM_H100, us_bytes(sc, bw), grid=(132, 1, 1))
                attn_pass("aten::div", K_DIV_BF16, [[b, h, s, s], []])
                attn_pass("aten::add", K_ADD_BF16, [[b, h, s, s], [b, 1, 1, s], []])
                with k.op("aten::softmax", pre=2.0, dims=[[b, h, s, s], [], []], types=["c10::BFloat16"]):
                    with k.op("aten::_softmax", pre=1.2, dims=[[b, h, s, s], [], []], types=["c10::BFloat16"]):
                        k.launch(K_SOFTMAX_BF16, us_bytes(2 * sc, bw))
                with k.op("aten::matmul", pre=1.5):
                    with k.op("aten::bmm", pre=1.2, dims=[[b * h, s, s], [b * h, s, 64]], types=["c10::BFloat16"] * 2):
                        k.launch(K_GEMM_H100, us_bytes(sc, bw), grid=(132, 1, 1))
                bf16_linear(k, m, d, d, roof=H100_ROOF)
                eltwise(k, "aten::add", K_ADD_BF16, us_bytes(m * d * 6, bw))
                layer_norm(k, us_bytes(m * d * 4, bw))
                bf16_linear(k, m, 4 * d, d, roof=H100_ROOF)
                eltwise(k, "aten::gelu", K_GELU, us_bytes(m * 4 * d * 4, bw))
                bf16_linear(k, m, d, 4 * d, roof=H100_ROOF)
                eltwise(k, "aten::add", K_ADD_BF16, us_bytes(m * d * 6, bw))
                layer_norm(k, us_bytes(m * d * 4, bw))
            tolist_sync(k, b * 4)
            k.host(60)
    k.host(30)
    return k.doc()


# ---- exposed collectives in a loop with no backward (inference: no DDP advice, no accumulation) ----

def case_tp_logits_allgather_h100():
    """Rank 0 of an 8-way tensor-parallel decode (a 27B model on 8 H100s, NVLink, 16 layers
    traced, batch 512) whose vocab-parallel lm_head all-gathers the full fp32 logits
    ([512, 256000] = 524 MB) to every rank every token, then every rank computes the same
    argmax: ~1.5 ms of AllGather a step on the compute stream, beside two ~20 us all-reduces
    per layer. Take each shard's local max (value, index) and gather those (8 x 512 pairs),
    or gather bf16 to rank 0 only."""
    k = KTrace(61401)
    k.host(40)
    m = 512
    ar = comm_args("allreduce", m * 4608, m * 4608, 8)
    ag = comm_args("allgather", m * 32000, m * 256000, 8, dtype="Float")
    for st in range(12):
        with k.ann("ProfilerStep#%d" % (st + 1), pre=2.0):
            embedding(k)
            for _ in range(16):
                fused_norm(k, 6.0)
                linear(k, roof_us(m, 4096 * 2 // 8 * 4, 4608, 0.75), dims=[[m, 1, 4608], [4096 * 2 // 8 * 4, 4608]])
                sdpa(k, 45.0)
                linear(k, roof_us(m, 4608, 4096 // 8 * 4, 0.75), dims=[[m, 1, 512 * 4], [4608, 512 * 4]])
                collective(k, K_NCCL_AR, 22.0, ar, "nccl:all_reduce", stream=7, wait_compute=False)
                fused_norm(k, 6.0)
                linear(k, roof_us(m, 2 * 36864 // 8, 4608, 0.75), dims=[[m, 1, 4608], [2 * 36864 // 8, 4608]])
                silu_and_mul(k, 8.0)
                linear(k, roof_us(m, 4608, 36864 // 8, 0.75), dims=[[m, 1, 36864 // 8], [4608, 36864 // 8]])
                collective(k, K_NCCL_AR, 22.0, ar, "nccl:all_reduce", stream=7, wait_compute=False)
            fused_norm(k, 6.0)
            linear(k, roof_us(m, 32000, 4608, 0.75), dims=[[m, 1, 4608], [32000, 4608]])
            with k.op("aten::to", pre=2.0, dims=[[m, 32000], [], [], [], []]):
                with k.op("aten::_to_copy", pre=1.0):
                    with k.op("aten::copy_", pre=1.0):
                        k.launch(K_CAST, us_bytes(m * 32000 * 6, 2600))
            collective(k, K_NCCL_AG, 1500.0, ag, "nccl:_all_gather_base", stream=7, wait_compute=False)
            with k.op("aten::cat", pre=2.0):
                k.launch(K_CAT_BF16, us_bytes(m * 256000 * 8, 2600))
            with k.op("aten::argmax", pre=2.0):
                k.launch(K_ARGMAX, us_bytes(m * 256000 * 4, 2600), grid=(512, 1, 1))
            tolist_sync(k, m * 8)
            k.host(30)
    k.host(30)
    return k.doc(distributed=dist_info(0, 8))


# ---- an explicit synchronize between a step's launches (instrumentation) ----

def case_sync_timing_a100_2021():
    """GPT-2 medium scoring (batch 8 x 256, fp16) on an A100 with torch 1.10 (2021 schema)
    whose authors time each block with forward hooks that call torch.cuda.synchronize() and
    time.perf_counter(): 24 cudaDeviceSynchronize a step (no op around them: the hooks are
    Python). Each block's ~20 eager ops then launch into an empty GPU: the host's ~300 us of
    launches per block no longer overlap the ~350 us of kernels. Drop the syncs (or time with
    torch.cuda.Event / the profiler itself)."""
    k = KTrace(61402, device=A100, schema2021=True)
    k.host(40)
    b, s_, d = 8, 256, 1024
    m = b * s_
    h16 = ["c10::Half"] * 3
    for st in range(8):
        with k.op("ProfilerStep#%d" % (st + 1), pre=2.0):
            with k.op("aten::to", pre=2.0):
                with k.op("aten::copy_", pre=1.0):
                    k.memcpy("HtoD (Pinned -> Device)", m * 8, 20.0, api_us=5.0)
            embedding(k)
            for _ in range(24):
                k.sync(api="cudaDeviceSynchronize")
                k.host(8)
                with k.op("aten::layer_norm", pre=18.0):
                    with k.op("aten::native_layer_norm", pre=8.0):
                        k.launch(K_LN_F16, us_bytes(m * d * 4, 1500))
                addmm(k, K_GEMM_A100_F16, roof_us(m, 3 * d, d, 0.6, A100_ROOF), grid=(108, 1, 1))
                for nm in ("aten::split", "aten::view", "aten::permute", "aten::view", "aten::permute", "aten::view", "aten::permute"):
                    with k.op(nm, pre=9.0, post=3.0):
                        pass
                with k.op("aten::matmul", pre=10.0):
                    with k.op("aten::bmm", pre=6.0):
                        k.launch(K_GEMM_A100_F16, 28.0, grid=(108, 1, 1))
                with k.op("aten::div", pre=10.0):
                    k.launch(K_ADD_F16, 10.0)
                with k.op("aten::where", pre=12.0):
                    k.launch(K_ADD_F16, 12.0)
                with k.op("aten::softmax", pre=10.0):
                    with k.op("aten::_softmax", pre=6.0):
                        k.launch(K_SOFTMAX_F16, 12.0)
                with k.op("aten::matmul", pre=10.0):
                    with k.op("aten::bmm", pre=6.0):
                        k.launch(K_GEMM_A100_F16, 28.0, grid=(108, 1, 1))
                with k.op("aten::permute", pre=9.0, post=3.0):
                    pass
                with k.op("aten::contiguous", pre=9.0):
                    k.launch(K_CAST, 8.0)
                addmm(k, K_GEMM_A100_F16, roof_us(m, d, d, 0.6, A100_ROOF), grid=(108, 1, 1))
                with k.op("aten::add", pre=10.0):
                    k.launch(K_ADD_F16, 8.0)
                with k.op("aten::layer_norm", pre=12.0):
                    with k.op("aten::native_layer_norm", pre=8.0):
                        k.launch(K_LN_F16, us_bytes(m * d * 4, 1500))
                addmm(k, K_GEMM_A100_F16, roof_us(m, 4 * d, d, 0.6, A100_ROOF), grid=(108, 1, 1))
                with k.op("aten::gelu", pre=12.0):
                    k.launch(K_GELU_F16, us_bytes(m * 4 * d * 4, 1500))
                addmm(k, K_GEMM_A100_F16, roof_us(m, d, 4 * d, 0.6, A100_ROOF), grid=(108, 1, 1))
                with k.op("aten::add", pre=10.0):
                    k.launch(K_ADD_F16, 8.0)
            k.sync(api="cudaDeviceSynchronize")
            with k.op("aten::log_softmax", pre=5.0):
                k.launch(K_LOG_SOFTMAX, 60.0)
            tolist_sync(k, b * 8)
            k.host(60)
    k.host(30)
    return k.doc(name="ho3_sync_timing_a100_2021")


# ---- a buffer reset every step (unfused_elementwise: a fill is not fused, it is questioned) ----

K_FILL_BF16 = K_FILL.replace("FillFunctor<float>", "FillFunctor<c10::BFloat16>")


def case_kv_zero_each_step_h100():
    """A custom Llama-3-8B decode engine on an H100 (bf16, record_shapes, 16 layers traced,
    batch 32, static KV cache of 4096 positions) whose step() starts with
    self.kv_cache.zero_() (meant once per request): 32 aten::zero_ -> fill_ of
    [32, 8, 4096, 128] bf16 (268 MB each, 8.6 GB a step at HBM speed) before the layers,
    ~half the GPU time, every token. The cache never needs zeroing: positions past the
    current length are masked out. Do it once per request, or not at all."""
    k = KTrace(61407)
    k.host(40)
    m = 32
    for st in range(12):
        with k.ann("ProfilerStep#%d" % (st + 1), pre=2.0):
            for _l in range(32):
                with k.op("aten::zero_", pre=2.0, dims=[[32, 8, 4096, 128]], types=["c10::BFloat16"]):
                    with k.op("aten::fill_", pre=1.0, dims=[[32, 8, 4096, 128], []], types=["c10::BFloat16", "Scalar"]):
                        k.launch(K_FILL_BF16, us_bytes(32 * 8 * 4096 * 128 * 2, 2900), grid=(132 * 16, 1, 1))
            embedding(k)
            for _ in range(16):
                decoder_layer(k, m=m)
            fused_norm(k, 4.0)
            linear(k, roof_us(m, 128256, 4096), dims=[[m, 1, 4096], [128256, 4096]])
            argmax(k)
            tolist_sync(k, m * 8)
            k.host(12)
    k.host(30)
    return k.doc(name="ho3_kv_zero_each_step_h100")


# ---- single-process data parallelism (nn.DataParallel): a rooted reduce in a training loop ----

K_NCCL_BCAST_2021 = "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclWorkElem)"
K_NCCL_REDUCE_2021 = "ncclKernel_Reduce_RING_LL_Sum_float(ncclWorkElem)"
K_TF32_GEMM = "sm80_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_stage3_warpsize2x2x1_tensor16x8x8_kernel"
K_ADAM_F32 = K_ADAM.replace("BFloat16", "float")


def case_dataparallel_a100():
    """BERT-large fine-tuning with torch.nn.DataParallel over 4 A100s (fp32 with TF32,
    torch 1.10, with_stack), profiled on GPU 0: every step replicate() broadcasts the 1.3 GB
    of parameters to the other GPUs (NCCL Broadcast kernels, torch/nn/parallel/comm.py
    broadcast_coalesced) and rebuilds 4 module replicas in Python (~25 ms, the GPU idle),
    scatters the batch, runs the replicas in threads, gathers the outputs, and in backward
    reduces every gradient onto GPU 0 (ReduceAddCoalesced: NCCL Reduce). The usual answer is
    DistributedDataParallel: one process per GPU, no replication, gradients all-reduced in
    buckets overlapped with the backward."""
    k = KTrace(61418, device=A100)
    k.python = True
    k.host(40)
    b, s_, d = 8, 384, 1024
    m = b * s_
    for st in range(5):
        with k.ann("ProfilerStep#%d" % (st + 1), pre=2.0):
            with k.py("train.py(140): train_step"):
                with k.py("torch/nn/parallel/data_parallel.py(166): forward"):
                    with k.py("torch/nn/parallel/data_parallel.py(180): replicate"):
                        with k.py("torch/nn/parallel/replicate.py(78): replicate"):
                            with k.py("torch/nn/parallel/replicate.py(61): _broadcast_coalesced_reshape"):
                                with k.py("torch/nn/parallel/comm.py(40): broadcast_coalesced"):
                                    for _ in range(8):
                                        k.launch(K_NCCL_BCAST_2021, 830.0, stream=7, grid=(8, 1, 1), block=(288, 1, 1))
                            for _mod in range(390):
                                with k.py("torch/nn/parallel/replicate.py(123): <listcomp>"):
                                    with k.py("torch/nn/modules/module.py(1720): _replicate_for_data_parallel"):
                                        k.adv(k.j(48.0, 0.15))
                    with k.py("torch/nn/parallel/data_parallel.py(178): scatter"):
                        for _ in range(3):
                            with k.op("aten::to", pre=3.0):
                                with k.op("aten::copy_", pre=1.0):
                                    k.memcpy("PtoP (Device -> Device)", m * 8 // 4, 100.0, api_us=6.0)
                    with k.py("torch/nn/parallel/parallel_apply.py(41): parallel_apply"):
                        embedding(k)
                        for _ in range(24):
                            layer_norm(k, us_bytes(m // 4 * d * 8, 1500))
                            for (n, kk) in ((3 * d, d), (d, d), (4 * d, d), (d, 4 * d)):
                                with k.op("aten::addmm", pre=14.0):
                                    k.launch(K_TF32_GEMM, roof_us(m // 4, n, kk, 0.5, (156e12, 2.039e12), es=4), grid=(108, 1, 1))
                            sdpa(k, 120.0, K_EFF_ATTN)
                            eltwise(k, "aten::gelu", K_GELU, us_bytes(m // 4 * 4 * d * 8, 1500), pre=14.0)
                    with k.py("torch/nn/parallel/data_parallel.py(187): gather"):
                        with k.op("aten::to", pre=3.0):
                            with k.op("aten::copy_", pre=1.0):
                                k.memcpy("PtoP (Device -> Device)", m * 2 * 4, 100.0, api_us=6.0)
                with k.op("aten::cross_entropy_loss", pre=2.0):
                    k.launch(K_LOG_SOFTMAX, 10.0)
                with k.py("torch/_tensor.py(396): backward"):
                    for _ in range(24):
                        for (n, kk) in ((3 * d, d), (d, d), (4 * d, d), (d, 4 * d)):
                            with k.op("aten::mm", pre=10.0):
                                k.launch(K_TF32_GEMM, 2 * roof_us(m // 4, n, kk, 0.5, (156e12, 2.039e12), es=4), grid=(108, 1, 1))
                    with k.op("autograd::engine::evaluate_function: BroadcastBackward", pre=3.0):
                        with k.op("BroadcastBackward", pre=2.0):
                            with k.py("torch/nn/parallel/comm.py(98): reduce_add_coalesced"):
                                for _ in range(8):
                                    k.launch(K_NCCL_REDUCE_2021, 900.0, stream=7, grid=(8, 1, 1), block=(288, 1, 1))
                with k.ann("Optimizer.step#AdamW.step"):
                    with k.op("aten::_fused_adamw_", pre=5.0):
                        k.launch(K_ADAM_F32, 1300.0, grid=(320, 1, 1))
                item_sync(k)
            k.host(40)
    k.host(30)
    return k.doc(name="ho3_dataparallel_a100")

CASES = {
    "data_loading": case_data_loading,
    "host_sync": case_host_sync,
    "python_overhead": case_python_overhead,
    "launch_bound": case_launch_bound,
    "graph_replay_python": case_graph_replay_python,
    "copies_casts": case_copies_casts,
    "pageable_memcpy": case_pageable_memcpy,
    "compute_bound_op": case_compute_bound_op,
    "communication": case_communication,
    "healthy": case_healthy,
    "nocache_llama_h100": case_nocache_llama_h100,
    "cached_llama_h100": case_cached_llama_h100,
    "nocache_gpt2_a100_2021": case_nocache_gpt2_a100_2021,
    "nanogpt_generate_a100": case_nanogpt_generate_a100,
    "group_by_length_train": case_group_by_length_train,
    "rope_per_layer_llama_h100": case_rope_per_layer_llama_h100,
    "rope_once_llama_h100": case_rope_once_llama_h100,
    "causal_mask_per_layer_2021": case_causal_mask_per_layer_2021,
    "startup": case_startup,
    "tail": case_tail,
    "phases": case_phases,
    "compare_37": case_compare_37,
    "compare_45_slow": case_compare_45_slow,
    "same_name_merge": case_same_name_merge,
    "schema2021_pageable": case_schema2021_pageable,
    # issue 41
    "allocator_churn": case_allocator_churn,
    "tokenization": case_tokenization,
    "recompile": case_recompile,
    "gc_pause": case_gc_pause,
    "launch_blocking": case_launch_blocking,
    "copy_critical_path": case_copy_critical_path,
    "kv_gather": case_kv_gather,
    "prefill_flash": case_prefill_flash,
    "batch1_decode": case_batch1_decode,
    "host_work": case_host_work,
    "sync_then_host": case_sync_then_host,
    "step_outlier_untraced": case_step_outlier_untraced,
    "healthy_unet": case_healthy_unet,
    "compiled_steady": case_compiled_steady,
    "cpu_threads": case_cpu_threads,
    "cpu_many_threads": case_cpu_many_threads,
    # issue 48: the five blind spots, by mechanism
    "dm_window_shift": case_dm_window_shift,
    "layout_conv_nchw": case_layout_conv_nchw,
    "eltwise_chain": case_eltwise_chain,
    "eltwise_chain_nsys": case_eltwise_chain_nsys,
    "adam_per_param": case_adam_per_param,
    "zero_grad_fills": case_zero_grad_fills,
    "fp32_gemm_a100": case_fp32_gemm_a100,
    "fp32_bert_h100": case_fp32_bert_h100,
    "vocab_unaligned": case_vocab_unaligned,
    "tiny_grid_batch": case_tiny_grid_batch,
    "pageable_nonblocking": case_pageable_nonblocking,
    "masked_select_2021": case_masked_select_2021,
    "clip_grad_item": case_clip_grad_item,
    "nvtx_host_range_nsys": case_nvtx_host_range_nsys,
    "lamb_phase_spread": case_lamb_phase_spread,
    "fsdp_allgather_link": case_fsdp_allgather_link,
    "late_peer_ddp": case_late_peer_ddp,
    "late_peer_nsys": case_late_peer_nsys,
    "cpp_sync_nsys": case_cpp_sync_nsys,
    "serve_response_cpu": case_serve_response_cpu,
    "moe_nonzero_loop": case_moe_nonzero_loop,
    "launch_spread_cnn": case_launch_spread_cnn,
    "zero_grad_idle_2021": case_zero_grad_idle_2021,
    "ddp_overlapped": case_ddp_overlapped,
    "graph_decode_roof": case_graph_decode_roof,
    "gemm_near_peak": case_gemm_near_peak,
    # work nobody uses (suspects_discard.c)
    "eval_backward_2021": case_eval_backward_2021,
    "gpt2_eval_backward_a100": case_gpt2_eval_backward_a100,
    "dropout_infer_l4": case_dropout_infer_l4,
    "gpt2_generate_train_mode_a100": case_gpt2_generate_train_mode_a100,
    "checkpoint_roomy_h100": case_checkpoint_roomy_h100,
    "checkpoint_v100_2021": case_checkpoint_v100_2021,
    # gradient reductions repeated within a step (suspects_comm.c)
    "ddp_accum_resnet_2021": case_ddp_accum_resnet_2021,
    "fsdp_accum_llama_h100": case_fsdp_accum_llama_h100,
    "ddp_accum_no_sync_ok": case_ddp_accum_no_sync_ok,
    # rows computed that nobody reads (suspects_unread.c)
    "rerank_lastpos_v100_2021": case_rerank_lastpos_v100_2021,
    "mcq_index_l4": case_mcq_index_l4,
    "generate_keep_last_h100": case_generate_keep_last_h100,
    # autotuning run again step after step (suspects_tune.c)
    "cudnn_tune_seg_v100_2021": case_cudnn_tune_seg_v100_2021,
    "cudnn_tune_speech_l4": case_cudnn_tune_speech_l4,
    "cudnn_tune_fixed_l4": case_cudnn_tune_fixed_l4,
    "gpt2_train_dropout_a100": case_gpt2_train_dropout_a100,
    "fp64_pinn_l4": case_fp64_pinn_l4,
    "fp64_kernel_regression_v100_2021": case_fp64_kernel_regression_v100_2021,
    "weights_reupload_vit_a100": case_weights_reupload_vit_a100,
    "weights_reupload_bert_v100_2021": case_weights_reupload_bert_v100_2021,
    "eager_attention_bert_h100": case_eager_attention_bert_h100,
    "tp_logits_allgather_h100": case_tp_logits_allgather_h100,
    "sync_timing_a100_2021": case_sync_timing_a100_2021,
    "kv_zero_each_step_h100": case_kv_zero_each_step_h100,
    "dataparallel_a100": case_dataparallel_a100,
}


# ---------------------------------------------------------------- Nsight Systems exports

NSYS_SCHEMA = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, registersPerThread INTEGER NOT NULL,
  gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL,
  blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL,
  dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL, gridId INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
  globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, srcKind INTEGER, dstKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  value INTEGER NOT NULL, bytes INTEGER NOT NULL, memKind INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
  category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, totalMemory INTEGER,
  smCount INTEGER, computeMajor INTEGER, computeMinor INTEGER, threadsPerWarp INTEGER, maxThreadsPerBlock INTEGER,
  maxWarpsPerSm INTEGER, memoryBandwidth INTEGER);
CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT);
"""
# the ABI version nsys keeps on runtime names (the CUDA release that introduced the call's current form)
NSYS_ABI = {"cudaLaunchKernel": "_v7000", "cudaGraphLaunch": "_v10000", "cudaLaunchKernelExC": "_v11060"}
NSYS_COPY_KIND = {"HtoD": 1, "DtoH": 2, "DtoD": 8, "HtoH": 9, "PtoP": 10}
NSYS_MEM_KIND = {"Pageable": 0, "Pinned": 1, "Device": 2}


class Nsys:
    """A scenario written as an Nsight Systems SQLite export (`nsys export --type sqlite`, the
    tables firstpass reads, tests/integration/nsys_schema.py): built with a KTrace (the same
    host/GPU simulation; NVTX ranges are its k.ann ranges, a C/C++ program has no aten ops),
    then its events become rows: kernels, runtime / driver calls (names with their ABI
    suffix, eventClass 0 / 1), memcpy, NVTX push/pop ranges (eventType 59), the GPU."""

    def __init__(self, k, bandwidth=None):
        self.k = k
        self.bandwidth = bandwidth

    def write(self, path):
        import sqlite3
        if os.path.exists(path):
            os.remove(path)
        k = self.k
        base = k.t0 - 1_000_000          # the session starts 1 ms before the first event
        ids = {}
        db = sqlite3.connect(path)
        db.executescript(NSYS_SCHEMA)

        def sid(v):
            if v not in ids:
                ids[v] = len(ids) + 1
                db.execute("INSERT INTO StringIds VALUES (?, ?)", (ids[v], v))
            return ids[v]

        def ns(us):
            return int(round(us * 1000)) - base

        gtid = (k.pid << 24) | k.tid
        grid_id = 0
        for e in sorted(k.ev, key=lambda e: (e["ts"], e.get("dur", 0))):
            if e.get("ph") != "X":
                continue
            cat, a = e["cat"], e.get("args") or {}
            st, en = ns(e["ts"]), ns(e["ts"] + e["dur"])
            if cat == "kernel":
                grid_id += 1
                g, b = a.get("grid", [1, 1, 1]), a.get("block", [1, 1, 1])
                short = e["name"].split("(")[0].split("<")[0].split()[-1]
                db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                           (st, en, 0, 1, a["stream"], a["correlation"], k.pid << 24, sid(e["name"]), sid(short), None,
                            a.get("registers per thread", 32), g[0], g[1], g[2], b[0], b[1], b[2], 0,
                            a.get("shared memory", 0), 0, grid_id))
            elif cat in ("cuda_runtime", "cuda_driver"):
                nm = e["name"] + ("" if cat == "cuda_driver" else NSYS_ABI.get(e["name"], "_v3020"))
                db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?,?,?,?)",
                           (st, en, 1 if cat == "cuda_driver" else 0, gtid, a["correlation"], sid(nm), 0, None))
            elif cat == "gpu_memcpy":
                kind = e["name"].split()[1]
                src, dst = e["name"].split("(")[1].rstrip(")").split(" -> ")
                db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                           (st, en, 0, 1, a["stream"], a["correlation"], k.pid << 24, a.get("bytes", 0),
                            NSYS_COPY_KIND[kind], NSYS_MEM_KIND[src], NSYS_MEM_KIND[dst]))
            elif cat == "gpu_memset":
                db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?,?,?,?,?,?,?,?,?,?)",
                           (st, en, 0, 1, a["stream"], a["correlation"], k.pid << 24, 0, a.get("bytes", 0), 2))
            elif cat == "user_annotation":
                db.execute("INSERT INTO NVTX_EVENTS VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                           (st, en, 59, None, 0, None, e["name"], gtid, None, None, 0))
        d = k.device
        db.execute("INSERT INTO TARGET_INFO_GPU VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                   (0, 0, d["name"], d["totalGlobalMem"], d["numSms"], d["computeMajor"], d["computeMinor"], 32,
                    d["maxThreadsPerBlock"], d["maxThreadsPerMultiprocessor"] // 32, self.bandwidth))
        db.execute("INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PRODUCT_NAME', 'NVIDIA Nsight Systems')")
        db.execute("INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PRODUCT_VERSION', '2024.5.1.113')")
        db.commit()
        db.close()


def write(outdir, name):
    doc = CASES[name]()
    if isinstance(doc, Nsys):
        path = os.path.join(outdir, name + ".sqlite")
        doc.write(path)
        return path
    path = os.path.join(outdir, name + ".json.gz")
    raw = json.dumps(doc, separators=(",", ":")).encode()
    with open(path, "wb") as f:
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=6) as g:
            g.write(raw)
    return path


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    outdir = argv[1]
    os.makedirs(outdir, exist_ok=True)
    names = argv[2:] or list(CASES)
    for n in names:
        if n not in CASES:
            sys.stderr.write("gen_cases: no case %r (have: %s)\n" % (n, ", ".join(CASES)))
            return 2
        p = write(outdir, n)
        print("%-22s %8d bytes  %s" % (n, os.path.getsize(p), p))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
