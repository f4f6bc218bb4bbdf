"""GET /sessions/{id}/efficiency (issues 45, 49) and the kernel table's launch columns (issue 42
item 3), against numbers this test computes itself from the real traces and against
tb-profiler's published results for the ResNet50 samples (kineto's tb_plugin/test/
result_check_file.txt at 4b3b2ed2, the commit before tb_plugin was removed: span 1 of each
run is the first file by timestamp). Generated traces (H100 prefill and decode, and one per
wrong number of issue 49) use tests/triage/gen_cases.py's KTrace; every expected figure is
written out here from the call's shapes and its kernel's exact duration."""
import csv
import gzip
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

from fpserver import SERVER, Server, TRACES, read_trace, events_of

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "triage"))
from gen_cases import KTrace, H100, A100, K_GEMM_H100  # noqa: E402

NW0 = os.path.join(TRACES, "kineto_tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz")
NW4 = os.path.join(TRACES, "kineto_tb_plugin/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz")
CONTROL = os.path.join(TRACES, "hta/trace_diff/control/control.json.gz")
FILTER = os.path.join(TRACES, "hta/trace_filter/sampled_rank-0.json.gz")
CLOVER = os.path.join(TRACES, "pipit_nsys/perlmutter-cloverleaf-cuda.sqlite")
AMD = os.path.join(TRACES, "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz")

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
        for p in (NW0, NW4, CONTROL, FILTER, CLOVER, AMD):
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
        self.assertGreater(frac, 0.1)  # 29%: not far below the roof, so memory-bound whatever the kernels
        self.assertEqual(r["bound"], "memory")
        self.assertEqual(r["status"], "judged")

    def test_resnet_convolutions_by_hand(self):
        """Issue 49 item 2: three ResNet50 layers (2021 schema: no Concrete Inputs, so no
        stride or padding), their FLOPs written out by hand."""
        doc = read_trace(NW0)[1]
        eff = self.eff(NW0)
        ops = [e for e in events_of(doc) if e.get("cat") == "Operator"]
        # conv1, 7x7 stride 2 on [32, 3, 224, 224]: its output [32, 64, 112, 112] is the grad_output
        # of the autograd node with the same sequence number
        x1 = [[32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], [], [], []]
        fwd = [e for e in ops if e["name"] == "aten::cudnn_convolution" and e["args"]["Input Dims"] == x1]
        seqs = {e["args"]["Sequence number"] for e in fwd}
        gys = {str(e["args"]["Input Dims"]) for e in ops if e["name"] == "CudnnConvolutionBackward" and e["args"]["Sequence number"] in seqs}
        self.assertEqual(gys, {str([[32, 64, 112, 112]])})
        self.assertEqual((224 + 2 * 3 - 1 * (7 - 1) - 1) // 2 + 1, 112)  # the same size from stride 2, padding 3
        r = row(eff, "aten::cudnn_convolution", str(x1))
        us, calls = op_gpu_us(doc, "aten::cudnn_convolution", x1)
        f1 = 2.0 * 32 * 64 * 112 * 112 * 3 * 7 * 7
        self.assertEqual((r["calls"], r["flops"]), (len(fwd), len(fwd) * f1))
        self.assertEqual(r["calls"], calls)
        self.assertAlmostEqual(r["gpu_us"], us, places=6)
        self.assertEqual(r["bytes"], calls * (32 * 3 * 224 * 224 + 64 * 3 * 49 + 32 * 64 * 112 * 112) * 4.0)
        self.assertEqual(r["family"], "convolution")
        # layer4's last 1x1 conv (512 -> 2048), its input gradient: grad_output [32, 2048, 7, 7], weight [2048, 512, 1, 1]
        d2 = [[], [32, 2048, 7, 7], [2048, 512, 1, 1], [], [], [], [], [], [], []]
        r = row(eff, "aten::cudnn_convolution_backward_input", str(d2))
        n2 = sum(1 for e in ops if e["name"] == "aten::cudnn_convolution_backward_input" and e["args"]["Input Dims"] == d2)
        self.assertEqual((r["calls"], r["flops"]), (n2, n2 * 2.0 * 32 * 2048 * 7 * 7 * 512 * 1 * 1))
        # layer4's 3x3 conv (512 -> 512, 7x7), its weight gradient: the weight's shape [512, 512, 3, 3] is its parent's
        d3 = [[], [32, 512, 7, 7], [32, 512, 7, 7], [], [], [], [], [], [], []]
        r = row(eff, "aten::cudnn_convolution_backward_weight", str(d3))
        n3 = sum(1 for e in ops if e["name"] == "aten::cudnn_convolution_backward_weight" and e["args"]["Input Dims"] == d3)
        self.assertEqual(r["context_shape"], str([[32, 512, 7, 7], [32, 512, 7, 7], [512, 512, 3, 3], [], [], [], [], [], [], [], []]))
        self.assertEqual((r["calls"], r["flops"]), (n3, n3 * 2.0 * 32 * 512 * 7 * 7 * 512 * 3 * 3))

    def test_resnet_relu_bytes_counted_once(self):
        """Issue 49 wrong number 2: ReLU's clamp_min [[x], [], [x]] writes its out tensor:
        2 x numel x 4 bytes a call, within the V100's bandwidth."""
        eff = self.eff(NW0)
        rows = [r for r in eff["operators"] if r["name"] == "aten::clamp_min"]
        self.assertGreater(len(rows), 5)
        for r in rows:
            x = json.loads(r["shape"])[0]
            numel = 1
            for d in x:
                numel *= d
            self.assertEqual(r["bytes"], r["calls"] * 2.0 * numel * 4, r["shape"])
        big = [r for r in rows if json.loads(r["shape"])[0][1] * json.loads(r["shape"])[0][2] >= 64 * 112]
        self.assertTrue(big and all(r["status"] == "judged" and r["peak_fraction"] <= 1 for r in big))

    def test_resnet_phases_and_coverage(self):
        """Issue 49: no phase reads over 100%; the modelled share of the GPU time is in the reply
        (0.17 before the convolutions were modelled), the rest by reason; copies are not
        counted as modelled."""
        for p in (NW0, NW4):
            with self.subTest(trace=os.path.basename(p)):
                eff = self.eff(p)
                s = eff["session"]
                self.assertGreater(s["coverage"], 0.6)
                self.assertAlmostEqual(s["coverage"], s["modelled_us"] / s["gpu_us"], places=9)
                self.assertGreater(s["copies_us"], 0)
                self.assertTrue(s["unmodelled"] and all(u["reason"] and u["gpu_us"] > 0 for u in s["unmodelled"]))
                for ph in eff["phases"] + [s]:
                    for k in ("mfu", "mbu", "best_peak_fraction", "coverage"):
                        if ph.get(k) is not None:
                            self.assertLessEqual(ph[k], 1.0, (ph.get("name"), k))
                # the conventional MFU: one peak (fp32, the model's dtype on a V100) over the steps' window
                self.assertEqual(s["mfu_peak"], {"dtype": "fp32", "unit": "fp32", "flops_per_s": 15.7e12})
                self.assertEqual(s["mfu_window"]["calls"], "inside the step ranges")
                step = next(ph for ph in eff["phases"] if ph["name"] == "ProfilerStep*")
                self.assertLess(s["mfu"], step["mfu"])  # the window (wall) is longer than the steps' GPU time
                # every row says why it has no verdict; copies are not judged
                for r in eff["operators"]:
                    self.assertTrue(r["bound"] or r["bound_reason"], r["name"])
                    if r["name"] == "aten::copy_":
                        self.assertEqual(r["status"], "not_judged")

    def test_device_peaks_are_named_right(self):
        """Issue 49 item 6: Volta has no BF16 (its tensor roof is FP16's); AMD's FP32 matrix peak
        is not TF32."""
        dev = self.eff(NW0)["device"]
        self.assertEqual((dev["peaks"]["bf16_tensor"], dev["peaks"]["fp16_tensor"], dev["peaks"]["tf32_tensor"]), (None, 125e12, None))
        self.assertEqual(dev["table"], "built_in")
        self.assertIn("V100 datasheet", dev["source"])
        amd = self.eff(AMD)["device"]
        self.assertEqual(amd["row"], "mi250-gcd")
        self.assertEqual((amd["peaks"]["tf32_tensor"], amd["peaks"]["fp32_matrix"]), (None, 45.25e12))

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
        # coverage before the figures it qualifies, the unknown time by reason in full
        self.assertLess(b.index(b"coverage: "), b.index(b"mfu: "))
        self.assertIn(b"unmodelled: ", b)
        self.assertIn(b"the operator is not modelled (no FLOP formula for it)", b)
        st, h, b = self.s.get("/api/v1/sessions/%d/efficiency?format=csv" % sid)
        self.assertEqual(st, 200)
        self.assertTrue(b.startswith(b"name,shape,dtype,precision_class,calls,gpu_us,flops,bytes,tflops,gbps,intensity,bound,"))
        # issue 49: a row without a verdict says why, in CSV too
        rows = list(csv.DictReader(io.StringIO(b.decode())))
        unknown = [r for r in rows if not r["bound"]]
        self.assertTrue(unknown)
        for r in unknown:
            self.assertTrue(r["bound_reason"], r["name"])
        self.assertIn("copies and memsets only", next(r for r in rows if r["name"] == "aten::copy_")["bound_reason"])
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
                # 4096 elements, 4 a thread, 128 threads a block: 8 blocks on 132 SMs
                k.launch("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16> >()", 0,
                         grid=(8, 1, 1), block=(128, 1, 1), gpu_ns=3_000)
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
        # far below both roofs, with the kernel evidence a latency verdict needs: 3 us kernels on 8 of 132 SMs
        r = row(self.eff, "aten::add", "[[1, 4096], [1, 4096], []]")
        self.assertEqual(r["bound"], "latency")
        self.assertAlmostEqual(r["peak_fraction"], 3 * 4096 * 2.0 / 3e-6 / 3350e9, places=9)
        self.assertAlmostEqual(r["kernel_us_mean"], 3.0, places=6)
        self.assertAlmostEqual(r["blocks_per_sm"], round(8 / 132, 6), places=9)

    def test_mfu_is_the_conventional_one(self):
        """Issue 49 wrong number 5: MFU divides by one peak, the model dtype's (bf16 on the
        tensor cores: 989.5 TFLOP/s), not each call's own: the decode phase's GEMVs on CUDA
        cores read 0.x%, not a share of the FP32 peak."""
        s = self.eff["session"]
        self.assertEqual(s["mfu_peak"], {"dtype": "bf16", "unit": "bf16_tensor", "flops_per_s": 989.5e12})
        ph = {p["name"]: p for p in self.eff["phases"]}
        f_dec = 4 * (2.0 * 4096 * 4096 + 4096)
        self.assertAlmostEqual(ph["decode"]["mfu"], f_dec / (ph["decode"]["gpu_us"] * 1e-6) / 989.5e12, places=12)
        self.assertLess(ph["decode"]["mfu"], 0.005)
        # the session's over its window (no steps: the whole trace) and its one device
        self.assertEqual((s["mfu_window"]["devices"], s["mfu_window"]["calls"]), (1, "every call"))
        self.assertAlmostEqual(s["mfu"], s["flops"] / (s["mfu_window"]["seconds"] * 989.5e12), places=12)
        # and the time above the roof of each phase: its judged calls' time less their time at the best roofs
        for p in self.eff["phases"]:
            self.assertAlmostEqual(p["above_roof_us"], p["judged_us"] - p["best_roof_us"], places=6)

    def test_phases_and_session(self):
        ph = {p["name"]: p for p in self.eff["phases"]}
        self.assertAlmostEqual(ph["prefill"]["gpu_us"], 4 * 150.0)
        self.assertAlmostEqual(ph["decode"]["gpu_us"], 4 * 19.0)
        f_pre = 4 * (2.0 * 2048 * 4096 * 4096 + 2.0 * 32 * 2048 * 2048 * 256 / 2)
        self.assertAlmostEqual(ph["prefill"]["mfu"], f_pre / 989.5e12 / 600e-6, places=9)
        s = self.eff["session"]
        self.assertAlmostEqual(s["coverage"], 1.0)
        self.assertAlmostEqual(s["tensor_core_fraction"], 4 * 150.0 / (4 * 150.0 + 4 * 19.0), places=9)



# ---- issue 49's wrong numbers and issue 50's findings 5 and 14, on generated traces ----

BF = "c10::BFloat16"
K_FFMA_A100 = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__51a_cublas"
K_NVJET = "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT"
K_ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16> >()"
K_FLASH_TRAITS = ("pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, "
                  "pytorch_flash::Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >")
K_FLASH_CAUSAL = "void pytorch_flash::flash_fwd_kernel<%s, false, true, false, false, true, true, false>(pytorch_flash::Flash_fwd_params)" % K_FLASH_TRAITS
K_FLASH_SILENT = "void pytorch_flash::flash_fwd_kernel<%s >(pytorch_flash::Flash_fwd_params)" % K_FLASH_TRAITS
K_DEPTHWISE = "void at::native::(anonymous namespace)::conv_depthwise2d_forward_kernel<3, c10::BFloat16, int>(at::GenericPackedTensorAccessor)"
K_CONV = "volta_scudnn_128x64_relu_interior_nn_v1"


def call(k, name, dims, types, kname, ns, grid=(132, 1, 1), block=(128, 1, 1), concrete=None, args=None):
    """One op call launching one kernel of exactly ns nanoseconds."""
    a = {"Input Dims": dims, "Input type": types}
    if concrete is not None:
        a["Concrete Inputs"] = concrete
    a.update(args or {})
    with k.rng_("cpu_op", name, args=a):
        k.launch(kname, 0, grid=grid, block=block, gpu_ns=ns)


def gen_a100_fp32():
    """An fp32 GEMM with TF32 off (cuBLAS's FFMA kernel: CUDA cores), three calls, and a
    device-to-device copy_."""
    k = KTrace(11, device=A100)
    for ns in (8_000_000, 8_600_000, 8_100_000):
        call(k, "aten::mm", [[4096, 4096], [4096, 4096]], ["float", "float"], K_FFMA_A100, ns, grid=(32, 32, 1), block=(256, 1, 1))
    with k.rng_("cpu_op", "aten::copy_", args={"Input Dims": [[4096, 4096], [4096, 4096], []], "Input type": ["float", "float", "Scalar"]}):
        k.memcpy("DtoD (Device -> Device)", 4096 * 4096 * 4, 1000.0)
    return k.doc(name="a100_fp32")


def gen_h100_mix():
    """In one phase: a bandwidth-bound add and one that reads over 100% of the bandwidth;
    causal flash attention said by its kernel, and one nothing says; a cuBLASLt nvjet GEMM;
    a GEMM far below its roof on long, full kernels; a tiny mul on a tiny grid."""
    k = KTrace(12, device=H100)
    with k.ann("step"):
        call(k, "aten::add", [[4194304], [4194304], []], [BF, BF, "Scalar"], K_ADD, 10_000, grid=(4096, 1, 1))
        call(k, "aten::add", [[8388608], [8388608], []], [BF, BF, "Scalar"], K_ADD, 5_000, grid=(8192, 1, 1))
        q = [1, 32, 2048, 128]
        call(k, "aten::_scaled_dot_product_flash_attention", [q, q, q, [], [], [], []], [BF, BF, BF, "Scalar", "Scalar", "Scalar", ""],
             K_FLASH_CAUSAL, 60_000, grid=(16, 32, 1))
        q = [1, 32, 1024, 128]
        call(k, "aten::_scaled_dot_product_flash_attention", [q, q, q, [], [], [], []], [BF, BF, BF, "Scalar", "Scalar", "Scalar", ""],
             K_FLASH_SILENT, 30_000, grid=(8, 32, 1))
        call(k, "aten::mm", [[2048, 4096], [4096, 4096]], [BF, BF], K_NVJET, 90_000)
        call(k, "aten::mm", [[8192, 8192], [8192, 8192]], [BF, BF], K_GEMM_H100, 400_000_000, grid=(132 * 248, 1, 1))
        call(k, "aten::mul", [[4096], [4096]], [BF, BF], K_ADD, 3_000, grid=(8, 1, 1))
    return k.doc(name="h100_mix")


def gen_mm_rows():
    """aten::mm owns the GPU in three shapes: its largest row (GEMV-shaped) is memory-bound,
    its rows together compute-bound."""
    k = KTrace(13, device=H100)
    for _ in range(6):
        call(k, "aten::mm", [[1, 4096], [4096, 4096]], [BF, BF], K_GEMM_H100, 15_000)
    call(k, "aten::mm", [[2048, 4096], [4096, 4096]], [BF, BF], K_GEMM_H100, 85_000)
    call(k, "aten::mm", [[2048, 4096], [4096, 2048]], [BF, BF], K_GEMM_H100, 45_000)
    call(k, "aten::add", [[4096], [4096], []], [BF, BF, "Scalar"], K_ADD, 10_000, grid=(8, 1, 1))
    return k.doc(name="mm_rows")


def gen_depthwise():
    """A memory-bound depthwise convolution owns the GPU."""
    k = KTrace(14, device=H100)
    for _ in range(3):
        call(k, "aten::cudnn_convolution", [[32, 256, 56, 56], [256, 1, 3, 3], [], [], [], [], [], [], []],
             [BF, BF, "ScalarList", "ScalarList", "ScalarList", "Int", "Bool", "Bool", "Bool"], K_DEPTHWISE, 38_400,
             grid=(50176, 1, 1), concrete=["", "", "[1, 1]", "[1, 1]", "[1, 1]", "256", "False", "False", "True"])
    call(k, "aten::add", [[4096], [4096], []], [BF, BF, "Scalar"], K_ADD, 10_000, grid=(8, 1, 1))
    return k.doc(name="depthwise")


def gen_conv_inference():
    """Inference convolutions without Concrete Inputs nor backward: one under an aten::conv2d
    carrying torch's flops arg (with_flops=True), one followed by the relu_ that reads its output."""
    k = KTrace(15, device=A100)
    x, w = [8, 64, 56, 56], [128, 64, 3, 3]
    f = 2.0 * 8 * 128 * 28 * 28 * 64 * 9  # stride 2, padding 1: 28 x 28
    with k.rng_("cpu_op", "aten::conv2d", args={"Input Dims": [x, w, [], [], [], [], []], "Input type": ["float"] * 2 + [""] * 5,
                                                "flops": int(f)}):
        call(k, "aten::cudnn_convolution", [x, w, [], [], [], [], [], [], []], ["float", "float"] + ["GenericList"] * 3 + ["Int"] + ["Bool"] * 3,
             K_CONV, 100_000)
    x2, w2 = [8, 64, 56, 56], [64, 64, 1, 1]
    call(k, "aten::cudnn_convolution", [x2, w2, [], [], [], [], [], [], []], ["float", "float"] + ["GenericList"] * 3 + ["Int"] + ["Bool"] * 3,
         K_CONV, 50_000)
    call(k, "aten::relu_", [[8, 64, 56, 56]], ["float"], K_ADD, 20_000)
    return k.doc(name="conv_inference")


def gen_hostile():
    """Issue 50 findings 5 and 14: a kernel of 2e-293 us under an aten::mm; deviceProperties
    numbers past int; a convolution padded by 2^63 - 1; a grid of 2^40 per dimension."""
    k = KTrace(16, device=dict(H100, numSms=1e300, computeMajor=1e300, totalGlobalMem=1e300, maxThreadsPerBlock=1e300))
    call(k, "aten::mm", [[1024, 1024], [1024, 1024]], ["float", "float"], K_GEMM_H100, 10_000)
    call(k, "aten::conv2d", [[32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], []],
         ["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Int"], K_CONV, 10_000,
         grid=(1 << 40, 1 << 40, 1 << 40), concrete=["", "", "", "[2, 2]", "[9223372036854775807, 9223372036854775807]", "[1, 1]", "1"])
    doc = k.doc(name="hostile")
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and e["name"] == K_GEMM_H100:
            e["dur"] = 2e-293
    return doc


def up(srv, doc):
    return srv.upload_ok(gzip.compress(json.dumps(doc).encode()))


class Issue49Test(unittest.TestCase):
    """Each test fails on the server before issue 49 (and issue 50's findings 5 and 14)."""

    @classmethod
    def setUpClass(cls):
        cls.s = Server()
        cls.docs = {}
        for name, gen in (("a100", gen_a100_fp32), ("mix", gen_h100_mix), ("mm", gen_mm_rows), ("dw", gen_depthwise),
                          ("conv", gen_conv_inference), ("hostile", gen_hostile)):
            sid = up(cls.s, gen())
            cls.docs[name] = (sid, cls.s.json("/api/v1/sessions/%d/efficiency" % sid))

    @classmethod
    def tearDownClass(cls):
        cls.s.stop()

    def eff(self, name):
        return self.docs[name][1]

    def test_fp32_gemm_on_cuda_cores_against_fp32(self):
        """Wrong number 1: FFMA kernels are CUDA-core work, held to the FP32 peak; the best roof is TF32's."""
        r = row(self.eff("a100"), "aten::mm", "[[4096, 4096], [4096, 4096]]")
        f, b, t = 2.0 * 4096 ** 3, 3 * 4096 * 4096 * 4.0, 24_700e-6
        self.assertEqual((r["precision_class"], r["unit"], r["peak_used"], r["bound"]), ("simt", "simt", "fp32", "compute"))
        self.assertAlmostEqual(r["peak_fraction"], 3 * f / t / 19.5e12, places=9)  # 0.856
        # the roofs (spec48): at the unit it ran on, and at the best one for fp32 on an A100 (TF32)
        self.assertAlmostEqual(r["roof_us"], 3 * max(f / 19.5e12, b / 2039e9) * 1e6, places=6)
        self.assertEqual(r["best_unit"], "tf32_tensor")
        best = 3 * max(f / 156e12, b / 2039e9) * 1e6
        self.assertAlmostEqual(r["best_roof_us"], best, places=6)
        self.assertAlmostEqual(r["above_roof_us"], t * 1e6 - best, places=6)
        self.assertAlmostEqual(r["best_peak_fraction"], best / (t * 1e6), places=9)
        self.assertAlmostEqual(r["kernel_us_mean"], t * 1e6 / 3, places=6)
        self.assertAlmostEqual(r["blocks_per_sm"], round(1024 / 108, 6), places=9)
        # item 5: per call, not only per shape
        self.assertEqual((r["gpu_us_min"], r["gpu_us_median"], r["gpu_us_max"]), (8000.0, 8100.0, 8600.0))

    def test_copies_are_not_coverage(self):
        """Wrong number 6: a zero-FLOP copy is not modelled work; coverage is the GEMM's share."""
        eff = self.eff("a100")
        s, mm = eff["session"], row(eff, "aten::mm", "[[4096, 4096], [4096, 4096]]")
        cp = row(eff, "aten::copy_", "[[4096, 4096], [4096, 4096], []]")
        self.assertEqual((cp["status"], cp["bound"]), ("not_judged", None))
        self.assertAlmostEqual(s["modelled_us"], mm["gpu_us"], places=6)
        self.assertAlmostEqual(s["coverage"], mm["gpu_us"] / s["gpu_us"], places=9)
        self.assertAlmostEqual(s["copies_us"], cp["gpu_us"], places=6)

    def test_impossible_calls_leave_phase_mbu(self):
        """Wrong number 3 and the >100% note: the add at 300% of the bandwidth is declared
        impossible (L2 residency or coarse timestamps) and counts in no MBU."""
        eff = self.eff("mix")
        bad = row(eff, "aten::add", "[[8388608], [8388608], []]")
        self.assertEqual((bad["status"], bad["bound"], bad["peak_fraction"]), ("impossible", None, None))
        self.assertIn("L2", bad["bound_reason"])
        self.assertIn("timestamps", bad["bound_reason"])
        good = row(eff, "aten::add", "[[4194304], [4194304], []]")
        self.assertAlmostEqual(good["peak_fraction"], 3 * 4194304 * 2.0 / 10e-6 / 3350e9, places=9)
        step = next(p for p in eff["phases"] if p["name"] == "step")
        judged = [r for r in eff["operators"] if r["status"] in ("judged", "in_doubt")]
        byts = sum(r["bytes"] for r in judged)
        self.assertAlmostEqual(step["mbu"], byts / (step["gpu_us"] * 1e-6) / 3350e9, places=9)
        self.assertLessEqual(step["mbu"], 1.0)
        s = eff["session"]
        self.assertAlmostEqual(s["mfu"], sum(r["flops"] for r in judged) / (s["mfu_window"]["seconds"] * 989.5e12), places=12)

    def test_causal_attention_from_the_kernel(self):
        """Wrong number 4: the flash kernel's Is_causal halves the count; where nothing says,
        the count is an upper bound and no verdict rests on it."""
        eff = self.eff("mix")
        q = [1, 32, 2048, 128]
        r = row(eff, "aten::_scaled_dot_product_flash_attention", str([q, q, q, [], [], [], []]))
        f = 2.0 * 32 * 2048 * 2048 * 256 / 2
        self.assertEqual((r["flops"], r["flops_upper_bound"], r["bound"]), (f, False, "compute"))
        self.assertAlmostEqual(r["peak_fraction"], f / 60e-6 / 989.5e12, places=9)
        q = [1, 32, 1024, 128]
        r = row(eff, "aten::_scaled_dot_product_flash_attention", str([q, q, q, [], [], [], []]))
        self.assertEqual((r["flops"], r["flops_upper_bound"], r["status"], r["bound"]), (2.0 * 32 * 1024 * 1024 * 256, True, "upper_bound", None))
        self.assertIsNone(r["above_roof_us"])
        self.assertIn("upper bound", r["bound_reason"])

    def test_nvjet_is_tensor_core_work(self):
        r = row(self.eff("mix"), "aten::mm", "[[2048, 4096], [4096, 4096]]")
        self.assertEqual((r["precision_class"], r["unit"], r["peak_used"], r["best_unit"]), ("tensor", "tensor", "bf16_tensor", "bf16_tensor"))

    def test_latency_needs_kernel_evidence(self):
        """Wrong number 6: far below the roofs on 400 ms kernels of 248 blocks per SM is a FLOP
        model or a peak in doubt, not latency; a 3 us kernel on 8 of 132 SMs is latency."""
        eff = self.eff("mix")
        r = row(eff, "aten::mm", "[[8192, 8192], [8192, 8192]]")
        self.assertEqual((r["status"], r["bound"]), ("in_doubt", None))
        self.assertIn("in doubt", r["bound_reason"])
        self.assertAlmostEqual(r["blocks_per_sm"], 248.0, places=6)
        self.assertAlmostEqual(r["kernel_us_mean"], 400_000.0, places=3)
        r = row(eff, "aten::mul", "[[4096], [4096]]")
        self.assertEqual((r["status"], r["bound"]), ("judged", "latency"))

    def test_dominant_operator_verdict_from_all_its_rows(self):
        """Wrong number 6: aten::mm's largest row is a memory-bound GEMV, its rows together
        are compute-bound; the suspect list quotes the op, not its largest row."""
        sid, eff = self.docs["mm"]
        n = next(x for x in eff["by_name"] if x["name"] == "aten::mm")
        comp = (6 * 2.0 * 4096 * 4096 + 2.0 * 2048 * 4096 * 4096 + 2.0 * 2048 * 4096 * 2048) / 989.5e12
        mem = (6 * (4096 + 4096 * 4096 + 4096) + (2048 * 4096 + 4096 * 4096 + 2048 * 4096) + (2048 * 4096 + 4096 * 2048 + 2048 * 2048)) * 2.0 / 3350e9
        t = (6 * 15 + 85 + 45) * 1e-6
        self.assertGreater(comp, mem)
        self.assertEqual((n["rows"], n["bound"]), (3, "compute"))
        self.assertAlmostEqual(n["peak_fraction"], comp / t, places=9)
        self.assertEqual(eff["operators"][0]["bound"], "memory")  # its largest row alone
        sus = self.s.json("/api/v1/sessions/%d/suspects" % sid)["suspects"]
        dom = next(x for x in sus if x["category"] == "dominant_op")
        self.assertEqual((dom["culprit"], dom["evidence"]["bound"]), ("aten::mm", "compute"))

    def test_memory_advice_fits_a_convolution(self):
        """Wrong number 6: a memory-bound convolution is not told about KV caches."""
        sid, eff = self.docs["dw"]
        r = eff["operators"][0]
        f, b = 2.0 * 32 * 256 * 56 * 56 * 9, (2 * 32 * 256 * 56 * 56 + 256 * 9) * 2.0
        self.assertEqual((r["name"], r["family"], r["bound"], r["flops"], r["bytes"]), ("aten::cudnn_convolution", "convolution", "memory", 3 * f, 3 * b))
        sus = self.s.json("/api/v1/sessions/%d/suspects" % sid)["suspects"]
        dom = next(x for x in sus if x["category"] == "dominant_op")
        self.assertEqual(dom["culprit"], "aten::cudnn_convolution")
        self.assertNotIn("KV cache", dom["next_experiment"])
        self.assertNotIn("batching", dom["next_experiment"])
        self.assertIn("channels_last", dom["next_experiment"])

    def test_convolutions_without_concrete_inputs(self):
        """Item 2: torch's flops arg gives a forward's count; else the op that reads its output."""
        eff = self.eff("conv")
        a = row(eff, "aten::cudnn_convolution", str([[8, 64, 56, 56], [128, 64, 3, 3], [], [], [], [], [], [], []]))
        self.assertEqual(a["flops"], 2.0 * 8 * 128 * 28 * 28 * 64 * 9)
        self.assertEqual(a["bytes"], (8 * 64 * 56 * 56 + 128 * 64 * 9 + 8 * 128 * 28 * 28) * 4.0)
        b = row(eff, "aten::cudnn_convolution", str([[8, 64, 56, 56], [64, 64, 1, 1], [], [], [], [], [], [], []]))
        self.assertEqual(b["flops"], 2.0 * 8 * 64 * 56 * 56 * 64)
        self.assertEqual(b["bytes"], (8 * 64 * 56 * 56 * 2 + 64 * 64) * 4.0)

    def test_hostile_figures_stay_finite_and_defined(self):
        """Issue 50 finding 5: no device reaches 1e296 TFLOP/s: the row is impossible, its rates
        null. Finding 14: numbers past int and a padding of 2^63 - 1 are unknown (the ASan and
        UBSan server used to abort: make test-asan runs this too)."""
        sid, eff = self.docs["hostile"]
        r = row(eff, "aten::mm", "[[1024, 1024], [1024, 1024]]")
        self.assertEqual((r["status"], r["tflops"], r["gbps"], r["bound"]), ("impossible", None, None, None))
        self.assertIn("faster than any GPU", r["bound_reason"])
        c = row(eff, "aten::conv2d", str([[32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], []]))
        self.assertIsNone(c["flops"])
        self.assertIsNone(eff["device"])  # 1e300 SMs: no row fits
        s = eff["session"]
        self.assertTrue(s["mfu"] is None or 0 <= s["mfu"] <= 1)
        ks = self.s.json("/api/v1/sessions/%d/kernels" % sid)["kernels"]  # 200: the kernel table reads the same numbers
        self.assertTrue(ks and all(k.get("theoretical_occupancy") is None for k in ks))


class DevicesFileTest(unittest.TestCase):
    """Item 4: --devices FILE adds rows before the built-in table; the reply names the table."""

    def test_devices_file_row_wins(self):
        d = tempfile.mkdtemp(prefix="fp-devices-")
        path = os.path.join(d, "devices.json")
        with open(path, "w") as f:
            json.dump({"devices": [{"match": "nvidia h100 80gb*", "id": "h100-lab", "label": "Lab H100 (power capped)",
                                    "source": "measured in our lab", "sms": 132,
                                    "peaks_tflops": {"fp32": 50, "tf32_tensor": 400, "bf16_tensor": 800, "fp16_tensor": 800, "fp8_tensor": 1600},
                                    "bandwidth_gbps": 3000}]}, f)
        s = Server("--devices", path)
        try:
            sid = up(s, gen_llm())
            eff = s.json("/api/v1/sessions/%d/efficiency" % sid)
            dev = eff["device"]
            self.assertEqual((dev["row"], dev["table"], dev["source"], dev["peaks"]["bf16_tensor"], dev["bandwidth"]),
                             ("h100-lab", "devices_file", "measured in our lab", 800e12, 3000e9))
            r = row(eff, "aten::mm", "[[2048, 4096], [4096, 4096]]")
            self.assertAlmostEqual(r["peak_fraction"], 2.0 * 2048 * 4096 * 4096 / 90e-6 / 800e12, places=9)
        finally:
            s.stop()
        bad = os.path.join(d, "bad.json")
        with open(bad, "w") as f:
            f.write('{"devices": [{"match": "x", "id": "x", "peaks_tflops": {"fp32": -1}, "bandwidth_gbps": 1}]}')
        p = subprocess.run([SERVER, "--devices", bad, "--port", "1", "--db", os.path.join(d, "db.sqlite")], capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 2)
        self.assertIn("peaks_tflops.fp32", p.stderr)


if __name__ == "__main__":
    unittest.main()
