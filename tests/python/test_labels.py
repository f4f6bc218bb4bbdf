"""Labels: the server's rules, FIRSTPASS_LABELS, the automatic ones (torch, CUDA/ROCm, GPU,
host) and torchrun's rank, world_size and job, in a stored session and under a real
torch.distributed process group."""
import json
import os
import socket
import subprocess
import sys
import types
import unittest
from unittest import mock

from fptest import PKG_SRC, Server, StubProfiler, captured

import torch  # the program under profile has it imported: auto_labels reads it from sys.modules

import firstpass
from firstpass import labels

LEGACY = b'[{"name":"aten::mm","ph":"X","ts":1,"dur":2,"pid":1,"tid":1}]'


def fake_torch(cuda=None, hip=None, gpu=None, dist=None):
    """A stand-in for the torch module with the attributes auto_labels reads."""
    t = types.SimpleNamespace(__version__="9.9.9")
    t.version = types.SimpleNamespace(cuda=cuda, hip=hip)
    t.cuda = types.SimpleNamespace(is_initialized=lambda: gpu is not None, current_device=lambda: 0,
                                   get_device_name=lambda i: gpu)
    t.distributed = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: dist is not None,
                                          get_rank=lambda: dist[0], get_world_size=lambda: dist[1])
    return t


class Rules(unittest.TestCase):
    def test_normalize(self):
        self.assertEqual(labels.normalize({" model ": " llama ", "n": 3}), {"model": "llama", "n": "3"})
        self.assertEqual(labels.normalize(["a:1", "url:http://h:80", "a:2"]), {"a": "2", "url": "http://h:80"})
        self.assertEqual(labels.normalize(None), {})
        for bad in ({"": "v"}, {" ": "v"}, {"a:b": "v"}, {"k": "a\0b"}, {"k": "\ud800"}, ["nocolon"], [3]):
            with self.subTest(bad=bad):
                self.assertRaises(ValueError, labels.normalize, bad)
        self.assertRaises(TypeError, labels.normalize, "k:v")
        self.assertEqual(len(labels.normalize({str(i): "v" for i in range(64)})), 64)
        self.assertRaises(ValueError, labels.normalize, {str(i): "v" for i in range(65)})

    def test_parse_spec_like_the_collector(self):
        self.assertEqual(labels.parse_spec("a:1, b : x:y "), {"a": "1", "b": "x:y"})
        self.assertEqual(labels.parse_spec(""), {})
        for bad in ("a", "a:1,", ":v", "a:1,,b:2"):
            with self.subTest(bad=bad):
                self.assertRaises(ValueError, labels.parse_spec, bad)

    def test_auto_labels(self):
        env = {"RANK": "3", "WORLD_SIZE": "8", "TORCHELASTIC_RUN_ID": "run-42"}
        got = labels.auto_labels(env, fake_torch(cuda="12.4", gpu="NVIDIA H100 80GB HBM3"))
        self.assertEqual(got, {"host": socket.gethostname(), "torch": "9.9.9", "cuda": "12.4",
                               "gpu": "NVIDIA H100 80GB HBM3", "rank": "3", "world_size": "8", "job": "run-42"})
        rocm = labels.auto_labels({}, fake_torch(hip="6.2.41133", gpu="AMD Instinct MI250X"))
        self.assertEqual((rocm["rocm"], rocm["gpu"]), ("6.2.41133", "AMD Instinct MI250X"))
        self.assertNotIn("cuda", rocm)
        # CUDA not initialised: no GPU name (reading it would initialise CUDA)
        self.assertNotIn("gpu", labels.auto_labels({}, fake_torch(cuda="12.4")))
        # torch.distributed wins over the environment; torchrun's default run id is no job
        d = labels.auto_labels({"RANK": "5", "WORLD_SIZE": "9", "TORCHELASTIC_RUN_ID": "none"},
                               fake_torch(dist=(1, 2)))
        self.assertEqual((d["rank"], d["world_size"]), ("1", "2"))
        self.assertNotIn("job", d)
        self.assertNotIn("rank", labels.auto_labels({"RANK": "x"}, fake_torch()))

    def test_a_probe_that_fails_is_left_out(self):
        t = fake_torch(cuda="12.4")

        def boom():
            raise RuntimeError("CUDA driver too old")
        t.cuda.is_initialized = boom
        got = labels.auto_labels({}, t)
        self.assertEqual(got["cuda"], "12.4")
        self.assertNotIn("gpu", got)


class Torchrun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server()
        cls.client = firstpass.Client(cls.srv.base)

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def stored_labels(self, env, **kw):
        h = firstpass.trace_handler(server=self.srv.base, **kw)
        base = {"FIRSTPASS_LABELS": "", "RANK": "", "WORLD_SIZE": "", "TORCHELASTIC_RUN_ID": "", "FIRSTPASS_QUIET": "1"}
        base.update(env)
        with mock.patch.dict(os.environ, base), captured():
            h(StubProfiler(LEGACY))
        self.assertEqual(h.last["outcome"], "uploaded", h.last)
        return self.client.session(h.last["session_id"])["labels"]

    def test_fake_torchrun_environment(self):
        env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "3", "TORCHELASTIC_RUN_ID": "3f2a-job"}
        got = self.stored_labels(env, name="rank3")
        self.assertEqual({k: got.get(k) for k in ("rank", "world_size", "job", "torch", "host")},
                         {"rank": "3", "world_size": "4", "job": "3f2a-job", "torch": torch.__version__,
                          "host": socket.gethostname()})
        # a job given in labels= wins; the ranks of one job are found by its label
        self.assertEqual(self.stored_labels(env, labels={"job": "nightly-7"})["job"], "nightly-7")
        ranks = sorted(s["labels"]["rank"] for s in self.client.sessions(labels={"job": "3f2a-job"}))
        self.assertEqual(ranks, ["3"])
        self.assertNotIn("job", self.stored_labels({"TORCHELASTIC_RUN_ID": "none"}))

    def test_real_process_group(self):
        """torch.distributed initialised (gloo, one process): rank and world_size come from it,
        not from a stale environment."""
        code = ("import json, sys, torch, torch.distributed as d, firstpass.labels as l\n"
                "d.init_process_group('gloo', init_method='file://' + sys.argv[1], rank=0, world_size=1)\n"
                "print(json.dumps(l.auto_labels()))\n"
                "d.destroy_process_group()\n")
        env = dict(os.environ, PYTHONPATH=PKG_SRC, RANK="6", WORLD_SIZE="9", TORCHELASTIC_RUN_ID="")
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            r = subprocess.run([sys.executable, "-c", code, os.path.join(tmp, "rdzv")], env=env,
                               capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout.strip().splitlines()[-1])
        self.assertEqual((got["rank"], got["world_size"]), ("0", "1"))


if __name__ == "__main__":
    unittest.main()
