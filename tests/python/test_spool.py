"""The spool layout (collector/upload.c) and the session document (body.py), without a server."""
import gzip
import json
import os
import shutil
import stat
import tempfile
import unittest
from unittest import mock

import fptest  # noqa: F401 (import paths)
from firstpass import body, spool


class Layout(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fp-py-layout-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_directory_rule(self):
        uid = os.getuid()
        self.assertEqual(spool.spool_dir(None, {"FIRSTPASS_SPOOL": "rel/dir", "XDG_STATE_HOME": "/x"}), "rel/dir")
        self.assertEqual(spool.spool_dir(None, {"XDG_STATE_HOME": "/x/state"}), "/x/state/firstpass/spool")
        self.assertEqual(spool.spool_dir(None, {"XDG_STATE_HOME": "relative"}), "/tmp/firstpass-spool-%d" % uid)
        self.assertEqual(spool.spool_dir(None, {"FIRSTPASS_SPOOL": ""}), "/tmp/firstpass-spool-%d" % uid)
        self.assertEqual(spool.spool_dir("/given", {"FIRSTPASS_SPOOL": "/env"}), "/given")

    def test_make_dirs_0700_each(self):
        d = os.path.join(self.tmp, "a", "b", "c")
        old = os.umask(0)
        try:
            spool.make_dirs(d)
            spool.make_dirs(d)  # exists: fine
        finally:
            os.umask(old)
        for p in ("a", "a/b", "a/b/c"):
            self.assertEqual(stat.S_IMODE(os.stat(os.path.join(self.tmp, p)).st_mode), 0o700, p)
        f = os.path.join(self.tmp, "file")
        open(f, "w").close()
        self.assertRaises(OSError, spool.make_dirs, os.path.join(f, "x"))

    def test_file_name(self):
        self.assertEqual(spool.file_name("gpu-node-7.example", 123, 1700000000123456789, 0),
                         "session-gpu-node-7.example-123-1700000000123456789-0.json.gz")
        self.assertEqual(spool.file_name("a/b c", 1, 2, 3), "session-a_b_c-1-2-3.json.gz")
        self.assertEqual(spool.file_name("", 1, 2, 3), "session-host-1-2-3.json.gz")

    def test_write_is_atomic(self):
        p = spool.write(self.tmp, "session-x-1-2-0.json.gz", b"abc")
        self.assertEqual(p, os.path.join(self.tmp, "session-x-1-2-0.json.gz"))
        with open(p, "rb") as f:
            self.assertEqual(f.read(), b"abc")
        self.assertEqual(stat.S_IMODE(os.stat(p).st_mode), 0o600)
        self.assertEqual(os.listdir(self.tmp), ["session-x-1-2-0.json.gz"])
        # a failed write leaves neither the tmp file nor a final file
        with mock.patch.object(spool.os, "fsync", side_effect=OSError(5, "Input/output error")):
            self.assertRaises(OSError, spool.write, self.tmp, "session-y-1-2-0.json.gz", b"abc")
        self.assertEqual(os.listdir(self.tmp), ["session-x-1-2-0.json.gz"])


class Document(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fp-py-doc-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def doc(self, text, **meta):
        p = os.path.join(self.tmp, "t.json")
        with open(p, "wb") as f:
            f.write(text)
        m = body.meta_object("n", {"k": "v"}, **meta)
        return body.trace_format(p), json.loads(gzip.decompress(body.session_gz(p, m)))

    def test_legacy_array_is_wrapped(self):
        fmt, d = self.doc(b'\n [{"name":"a","ph":"X"}]\n', pid=7, trace_format="legacy")
        self.assertEqual(fmt, "legacy")
        self.assertEqual(d, {"firstpass": {"format": "firstpass-session", "version": 1, "name": "n",
                                           "labels": {"k": "v"}, "pid": 7, "trace_format": "legacy"},
                             "traceEvents": [{"name": "a", "ph": "X"}]})

    def test_kineto_object_gets_the_key(self):
        fmt, d = self.doc(b'  {\n "schemaVersion": 1, "traceEvents": []}')
        self.assertEqual(fmt, "kineto")
        self.assertEqual(d["schemaVersion"], 1)
        self.assertEqual(d["firstpass"]["labels"], {"k": "v"})
        self.assertEqual(list(d)[0], "firstpass")

    def test_empty_object_and_long_whitespace(self):
        _, d = self.doc(b"{" + b" " * (3 << 20) + b"}")
        self.assertEqual(list(d), ["firstpass"])
        _, d = self.doc(b"\n" * (3 << 20) + b"[]")
        self.assertEqual(d["traceEvents"], [])

    def test_not_a_trace(self):
        for text in (b"", b"   ", b"hello", b'"str"'):
            with self.subTest(text=text):
                self.assertRaises(ValueError, self.doc, text)


if __name__ == "__main__":
    unittest.main()
