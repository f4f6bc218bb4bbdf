"""GET /sessions/{id}/efficiency (issue 45) and the kernel table's launch columns (issue 42
item 3), against numbers this test computes itself from the real traces and against
tb-profiler's published results for the ResNet50 samples (kineto's tb_plugin/test/
result_check_file.txt at 4b3b2ed2, the commit before tb_plugin was removed: span 1 of each
run is the first file by timestamp). Generated H100 prefill and decode traces use
tests/triage/gen_cases.py's KTrace."""
import gzip
import json
import os
import sys
import unittest

from fpserver import Server, TRACES, read_trace, events_of

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "triage"))
from gen_cases import KTrace, H100, K_GEMM_H100  # noqa: E402

NW0 = os.path.join(TRACES, "kineto_tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz")
NW4 = os.path.join(TRACES, "kineto_tb_plugin/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz")
CONTROL = os.path.join(TRACES, "hta/trace_diff/control/control.json.gz")
FILTER = os.path.join(TRACES, "hta/trace_filter/sampled_rank-0.json.gz")
CLOVER = os.path.join(TRACES, "pipit_nsys/perlmutter-cloverleaf-cuda.sqlite")

# tb-profiler's GPU Summary for span 1 (percent).
TB_GPU = {NW0: (55.51, 54.68, 49.13, 0.0), NW4: (70.27, 69.22, 48.91, 0.0)}
# tb-profiler's kernel table for resnet50_num_workers_0 span 1: mean blocks per SM and mean
# est. achieved occupancy (%), the ten kernels with the most time (name prefix: values).
TB_KERNELS_NW0 = [
    ("void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>", 42.25, 29.97),
    ("void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>", 9.78, 38.0),
    ("void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>", 4.34, 67.98),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>", 641.54, 92.32),
    ("void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, true>", 12.34, 50.0),
    ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>", 3.12, 64.06),
    ("void implicit_convolve_sgemm<float, float, 128, 6, 7, 3, 3, 5, 1, false, true, true>", 3.9, 42.09),
    ("volta_sgemm_64x64_nt", 10.24, 19.38),
    ("volta_scudnn_128x128_stridedB_splitK_small_nn_v1", 6.83, 25.0),
    ("volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1", 22.4, 25.0),
]


def op_gpu_us(doc, name, dims):
    """The GPU time of every call of op `name` with Input Dims `dims`: the union of the GPU
    activity of the runtime calls whose innermost host range (cpu_op or user_annotation) on
    their thread is that call, joined by correlation id."""
    evs = events_of(doc)
    cat = lambda e: (e.get("cat") or "")
    host = [e for e in evs if e.get("ph") == "X" and cat(e) in ("cpu_op", "Operator", "user_annotation")]
    rt = [e for e in evs if e.get("ph") == "X" and cat(e) in ("cuda_runtime", "Runtime", "cuda_driver")]
    gpu = {}
    for e in evs:
        if e.get("ph") == "X" and cat(e) in ("kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"):
            gpu.setdefault(e["args"].get("correlation"), []).append((e["ts"], e["ts"] + e["dur"]))
    by_thread = {}
    for h in host:
        by_thread.setdefault((h["pid"], h["tid"]), []).append(h)
    total, calls = 0.0, 0
    for key, hs in by_thread.items():
        hs.sort(key=lambda h: (h["ts"], -h["dur"]))
        mine = [h for h in hs if h["name"] == name and h["args"].get("Input Dims") == dims]
        for op in mine:
            calls += 1
            s, e = op["ts"], op["ts"] + op["dur"]
            inner = [h for h in hs if h is not op and s <= h["ts"] and h["ts"] + h["dur"] <= e]
            spans = []
            for r in rt:
                if (r["pid"], r["tid"]) != key or not (s <= r["ts"] and r["ts"] + r["dur"] <= e):
                    continue
                if any(h["ts"] <= r["ts"] and r["ts"] + r["dur"] <= h["ts"] + h["dur"] for h in inner):
                    continue  # a range inside the op holds it
                spans.extend(gpu.get(r["args"].get("correlation"), []))
            ue = float("-inf")
            for a, b in sorted(spans):
                total += b - a if a >= ue else max(0.0, b - ue)
                ue = max(ue, b)
    return total, calls


def row(eff, name, shape):
    for r in eff["operators"]:
        if r["name"] == name and r["shape"] == shape:
            return r
    raise AssertionError("no row %s %s" % (name, shape))


class EfficiencyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Server()
        cls.ids = {}
        for p in (NW0, NW4, CONTROL, FILTER, CLOVER):
            cls.ids[p] = cls.s.upload_ok(open(p, "rb").read())

    @classmethod
    def tearDownClass(cls):
        cls.s.stop()

    def eff(self, p):
        return self.s.json("/api/v1/sessions/%d/efficiency" % self.ids[p])

    def test_tb_profiler_gpu_summary(self):
        for p, (util, sme, occ, tc) in TB_GPU.items():
            with self.subTest(trace=os.path.basename(p)):
                s = self.eff(p)["session"]
                self.assertAlmostEqual(100 * s["gpu_utilization"], util, delta=0.1)
                self.assertAlmostEqual(100 * s["sm_efficiency"], sme, delta=0.1)
                self.assertAlmostEqual(100 * s["achieved_occupancy"], occ, delta=0.1)
                self.assertAlmostEqual(100 * s["tensor_core_fraction"], tc, delta=0.1)
                self.assertEqual(s["window"]["source"], "steps")

    def test_kernel_table_means_are_tb_profilers(self):
        ks = self.s.json("/api/v1/sessions/%d/kernels?limit=100" % self.ids[NW0])["kernels"]
        for prefix, bps, occ in TB_KERNELS_NW0:
            with self.subTest(kernel=prefix[:40]):
                k = next(k for k in ks if k["name"].startswith(prefix))
                self.assertAlmostEqual(k["blocks_per_sm"], bps, delta=0.006)
                self.assertAlmostEqual(100 * k["est_occupancy"], occ, delta=0.006)
                self.assertLessEqual(k["est_sm_efficiency"], 1.0)

    def test_resnet_addmm_by_hand(self):
        shape = [[1000], [32, 2048], [2048, 1000], [], []]
        us, calls = op_gpu_us(read_trace(NW0)[1], "aten::addmm", shape)
        r = row(self.eff(NW0), "aten::addmm", str(shape))
        flops, byts = 2.0 * 32 * 1000 * 2048, (1000 + 32 * 2048 + 2048 * 1000 + 32 * 1000) * 4.0
        self.assertEqual(r["calls"], calls)
        self.assertAlmostEqual(r["gpu_us"], us, places=6)
        self.assertEqual(r["flops"], calls * flops)
        self.assertEqual(r["bytes"], calls * byts)
        self.assertAlmostEqual(r["tflops"], calls * flops / us / 1e6, places=9)
        self.assertAlmostEqual(r["intensity"], flops / byts, places=9)
        # V100: fp32 SIMT (volta_sgemm), ridge 15.7 T / 900 G = 17.4 FLOP/byte > 15.3: memory
        self.assertEqual(r["precision_class"], "simt")
        self.assertEqual(r["peak_used"], "fp32")
        frac = calls * byts / (us * 1e-6) / 900e9
        self.assertAlmostEqual(r["peak_fraction"], frac, places=9)
        self.assertEqual(r["bound"], "latency" if frac < 0.1 else "memory")

    def test_a100_bmm_of_trace_diff_by_hand(self):
        eff = self.eff(CONTROL)
        self.assertEqual(eff["device"]["row"], "a100-sxm4-40gb")
        shape = [[1024, 647, 96], [1024, 96, 30]]
        us, calls = op_gpu_us(read_trace(CONTROL)[1], "aten::bmm", shape)
        r = row(eff, "aten::bmm", str(shape))
        flops, byts = 2.0 * 1024 * 647 * 30 * 96, 1024.0 * (647 * 96 + 96 * 30 + 647 * 30) * 4
        self.assertEqual(r["calls"], calls)
        self.assertAlmostEqual(r["gpu_us"], us, places=6)
        self.assertEqual(r["flops"], calls * flops)
        self.assertEqual(r["bytes"], calls * byts)
        # its kernels are sm80 TF32 tensor-core GEMMs: held to the TF32 peak, not FP32's
        self.assertEqual(r["precision_class"], "tensor")
        self.assertEqual(r["peak_used"], "tf32_tensor")
        ridge, inten = 156e12 / 1555e9, flops / byts
        t = us * 1e-6
        frac = (calls * flops / t / 156e12) if inten >= ridge else (calls * byts / t / 1555e9)
        self.assertAlmostEqual(r["peak_fraction"], frac, places=9)
        self.assertEqual(r["bound"], "compute" if inten >= ridge else "memory")

    def test_mm_of_trace_filter_has_no_peak(self):
        eff = self.eff(FILTER)
        self.assertIsNone(eff["device"])
        self.assertIn("deviceProperties", eff["device_reason"])
        doc = read_trace(FILTER)[1]
        mms = [r for r in eff["operators"] if r["name"] == "aten::mm" and r["flops"]]
        self.assertTrue(mms)
        r = mms[0]
        shape = json.loads(r["shape"])
        us, calls = op_gpu_us(doc, "aten::mm", shape)
        M, K, N = shape[0][0], shape[0][1], shape[1][1]
        self.assertEqual(r["flops"], calls * 2.0 * M * N * K)
        self.assertAlmostEqual(r["gpu_us"], us, places=6)
        self.assertAlmostEqual(r["tflops"], calls * 2.0 * M * N * K / us / 1e6, places=9)
        for k in ("bound", "peak_fraction", "peak_used"):
            self.assertIsNone(r[k], k)
        self.assertIsNone(eff["session"]["mfu"])

    def test_nsight_export_time_sm_fill_bandwidth(self):
        eff = self.eff(CLOVER)
        self.assertEqual(eff["device"]["bandwidth_source"], "nsys")
        self.assertEqual(eff["device"]["bandwidth"], 2039040000000.0)
        self.assertEqual(eff["operators"], [])  # no shapes: nothing modelled
        s = eff["session"]
        self.assertEqual(s["coverage"], 0.0)
        self.assertIsNone(s["mfu"])
        self.assertGreater(s["sm_efficiency"], 0)
        self.assertLessEqual(s["sm_efficiency"], s["gpu_utilization"])
        ks = self.s.json("/api/v1/sessions/%d/kernels?limit=5" % self.ids[CLOVER])["kernels"]
        self.assertTrue(all(k["blocks_per_sm"] is not None for k in ks if k["kind"] == "kernel"))

    def test_text_and_csv(self):
        sid = self.ids[NW0]
        st, h, b = self.s.get("/api/v1/sessions/%d/efficiency" % sid, headers={"Accept": "text/plain"})
        self.assertEqual(st, 200)
        self.assertTrue(b.startswith(b"device: Tesla V100-DGXS-32GB\n"), b[:80])
        self.assertIn(b"gpu_utilization: 0.555", b)
        st, h, b = self.s.get("/api/v1/sessions/%d/efficiency?format=csv" % sid)
        self.assertEqual(st, 200)
        self.assertTrue(b.startswith(b"name,shape,dtype,precision_class,calls,gpu_us,flops,bytes,tflops,gbps,intensity,bound,"))
        st, _, _ = self.s.get("/api/v1/sessions/999999/efficiency")
        self.assertEqual(st, 404)


def gen_llm(seed=7):
    """An H100 trace: 4 prefill layers (a 2048-token GEMM, causal flash attention) then 4
    batch-1 decode steps (a GEMV-shaped mm and a small add), every duration exact."""
    k = KTrace(seed, device=H100)
    bf = "c10::BFloat16"
    with k.ann("prefill"):
        for _ in range(4):
            with k.rng_("cpu_op", "aten::mm", args={"Input Dims": [[2048, 4096], [4096, 4096]], "Input type": [bf, bf]}):
                k.launch(K_GEMM_H100, 0, grid=(132, 1, 1), block=(384, 1, 1), regs=168, smem=213504, gpu_ns=90_000)
            q = [1, 32, 2048, 128]
            with k.rng_("cpu_op", "aten::_scaled_dot_product_flash_attention",
                        args={"Input Dims": [q, q, q, [], [], [], []], "Input type": [bf, bf, bf, "Scalar", "Scalar", "Scalar", ""],
                              "Concrete Inputs": ["", "", "", "0.0", "True", "False", ""]}):
                k.launch("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t> >(Flash_fwd_params)",
                         0, grid=(16, 32, 1), block=(128, 1, 1), gpu_ns=60_000)
    with k.ann("decode"):
        for _ in range(4):
            with k.rng_("cpu_op", "aten::mm", args={"Input Dims": [[1, 4096], [4096, 4096]], "Input type": [bf, bf]}):
                k.launch("void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, float, float, 128, 16, 4, 4, false, false>()",
                         0, grid=(1024, 1, 1), block=(128, 1, 1), gpu_ns=16_000)
            with k.rng_("cpu_op", "aten::add", args={"Input Dims": [[1, 4096], [1, 4096], []], "Input type": [bf, bf, "Scalar"]}):
                k.launch("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16> >()", 0,
                         gpu_ns=3_000)
    return k.doc(name="llm")


class GeneratedH100Test(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Server()
        cls.sid = cls.s.upload_ok(gzip.compress(json.dumps(gen_llm()).encode()))
        cls.eff = cls.s.json("/api/v1/sessions/%d/efficiency" % cls.sid)

    @classmethod
    def tearDownClass(cls):
        cls.s.stop()

    def test_device(self):
        self.assertEqual(self.eff["device"]["row"], "h100-sxm5-80gb")
        self.assertEqual(self.eff["device"]["peaks"]["bf16_tensor"], 989.5e12)

    def test_prefill_gemm_is_compute_bound(self):
        r = row(self.eff, "aten::mm", "[[2048, 4096], [4096, 4096]]")
        f = 2.0 * 2048 * 4096 * 4096
        self.assertEqual((r["calls"], r["gpu_us"], r["flops"]), (4, 360.0, 4 * f))
        self.assertEqual(r["bytes"], 4 * (2048 * 4096 + 4096 * 4096 + 2048 * 4096) * 2.0)
        self.assertAlmostEqual(r["tflops"], f / 90e-6 / 1e12, places=6)  # 763.6
        self.assertEqual((r["precision_class"], r["peak_used"], r["bound"]), ("tensor", "bf16_tensor", "compute"))
        self.assertAlmostEqual(r["peak_fraction"], f / 90e-6 / 989.5e12, places=9)  # 0.772

    def test_prefill_causal_attention(self):
        r = row(self.eff, "aten::_scaled_dot_product_flash_attention", str([[1, 32, 2048, 128]] * 3 + [[], [], [], []]))
        f = 2.0 * 32 * 2048 * 2048 * 256 / 2
        self.assertEqual(r["flops"], 4 * f)
        self.assertAlmostEqual(r["peak_fraction"], f / 60e-6 / 989.5e12, places=9)  # 0.579
        self.assertEqual(r["bound"], "compute")

    def test_decode_gemv_is_memory_bound(self):
        r = row(self.eff, "aten::mm", "[[1, 4096], [4096, 4096]]")
        b = (4096 + 4096 * 4096 + 4096) * 2.0
        self.assertEqual(r["bytes"], 4 * b)
        self.assertAlmostEqual(r["intensity"], 2.0 * 4096 * 4096 / b, places=9)  # ~1 FLOP/byte
        self.assertEqual(r["bound"], "memory")
        self.assertAlmostEqual(r["peak_fraction"], b / 16e-6 / 3350e9, places=9)  # 0.626
        self.assertAlmostEqual(r["gbps"], b / 16e-6 / 1e9, places=6)

    def test_decode_tiny_add_is_latency_bound(self):
        r = row(self.eff, "aten::add", "[[1, 4096], [1, 4096], []]")
        self.assertEqual(r["bound"], "latency")
        self.assertAlmostEqual(r["peak_fraction"], 3 * 4096 * 2.0 / 3e-6 / 3350e9, places=9)

    def test_phases_and_session(self):
        ph = {p["name"]: p for p in self.eff["phases"]}
        self.assertAlmostEqual(ph["prefill"]["gpu_us"], 4 * 150.0)
        self.assertAlmostEqual(ph["decode"]["gpu_us"], 4 * 19.0)
        f_pre = 4 * (2.0 * 2048 * 4096 * 4096 + 2.0 * 32 * 2048 * 2048 * 256 / 2)
        self.assertAlmostEqual(ph["prefill"]["mfu"], f_pre / 989.5e12 / 600e-6, places=9)
        s = self.eff["session"]
        self.assertAlmostEqual(s["coverage"], 1.0)
        self.assertAlmostEqual(s["tensor_core_fraction"], 4 * 150.0 / (4 * 150.0 + 4 * 19.0), places=9)


if __name__ == "__main__":
    unittest.main()
