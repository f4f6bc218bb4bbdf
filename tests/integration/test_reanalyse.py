"""test_reanalyse.py: stored sessions analysed again by today's analysis (issue 52).

  * exact: sessions stored by this server, re-analysed (POST /reanalyse), answer every read
    of tests/replies/snapshot.py's list, /suspects, /steps, /efficiency, /memory and the
    download byte for byte as before: a re-analysis is an upload of the stored events in
    their upload order, through the same importer (nsys exports included);
  * upgrade: a database written by the server of an earlier commit (oldserver.py builds it
    from git history) opened by today's server: --reanalyse brings every session to today's
    version, and every figure equals a fresh upload's of the same trace (up to the order of
    floating-point sums and of tied rows, which sessions stored before the upload order was
    kept cannot replay), with names, labels, the baseline, report edits and ids kept;
  * failure: a session whose stored events cannot be read keeps its old analysis and says why;
  * races: a session re-analysed while it is read, downloaded or deleted: reads are never
    blocked for the length of a re-analysis and never see a half-written one; a delete wins;
  * kill: a server killed during a re-analysis leaves the old analysis readable and its
    claim until the lease runs out; the next run finishes it;
  * background: --reanalyse-on-start works through the older sessions while uploads (one
    slot only) are never refused because of it;
  * compare and regressions say when their sides come from different analysis versions.
Runs on SQLite and, under tests/pg/run.sh, on PostgreSQL (fpserver.new_db)."""
import gzip
import http.client
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "replies"))
import fpserver  # noqa: E402
import oldserver  # noqa: E402
import snapshot  # noqa: E402
from fpserver import PG, Server  # noqa: E402

T = fpserver.TRACES
RESNET = os.path.join(T, "kineto_tb_plugin", "samples", "resnet50_num_workers_0", "worker0.1623143089861.pt.trace.json.gz")
CONTROL = os.path.join(T, "hta", "trace_diff", "control", "control.json.gz")
NSYS = os.path.join(T, "pipit_nsys", "saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
SIMPLE = os.path.join(T, "hta", "critical_path", "simple_add", "benchmark_result_493459_1694039959_trace.json.gz")
# a selection of the 26 for the byte-for-byte check (every source and shape, kept short)
EXACT = [SIMPLE, NSYS, os.path.join(T, "pipit_nsys", "perlmutter-cloverleaf-cuda.sqlite"),
         os.path.join(T, "hta", "trace_filter", "sampled_rank-0.json.gz"),
         os.path.join(T, "hta", "nccl_parser_config", "nccl_data.json.gz"),
         os.path.join(T, "hta", "amd_trace", "mi250_minitoy_train_ROCm6_2_kineto.json.gz"),
         os.path.join(T, "hta", "cpu_only", "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"),
         os.path.join(T, "kineto_tb_plugin", "test", "gpu_metrics_input.json"), RESNET]
READS = snapshot.PER_SESSION + ["/suspects", "/steps", "/efficiency", "/memory", "/efficiency?format=csv", "/suspects?format=text",
                                "/steps?format=csv", "/busy?buckets=10"]
JSON_READS = ["", "/operators?limit=10000", "/operators?group_by=input_shape&limit=10000", "/kernels?limit=10000", "/phases", "/gpu",
              "/report", "/suspects", "/steps", "/efficiency", "/memory", "/timeline", "/busy?buckets=10"]
CURRENT = None  # this server's ANALYSIS_VERSION, read from a reply


def body(f):
    with open(f, "rb") as fh:
        return fh.read()


def sql(srv, statement):
    """Runs statement on the server's database (psql, or the SQLite file)."""
    if PG:
        subprocess.run([os.path.join(fpserver.PGBIN, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", srv.db, "-c", statement], check=True,
                       stdout=subprocess.DEVNULL)
        return
    c = sqlite3.connect(srv.db, timeout=30)
    try:
        c.execute(statement)
        c.commit()
    finally:
        c.close()


def rows(srv, query):
    if PG:
        out = subprocess.run([os.path.join(fpserver.PGBIN, "psql"), "-X", "-A", "-t", "-q", srv.db, "-c", query], check=True,
                             capture_output=True, text=True).stdout
        return [ln.split("|") for ln in out.splitlines() if ln]
    c = sqlite3.connect(srv.db, timeout=30)
    try:
        return [[str(x) for x in r] for r in c.execute(query).fetchall()]
    finally:
        c.close()


def reads(srv, sid, paths=READS):
    out = {}
    for p in paths:
        st, h, b = srv.get("/api/v1/sessions/%d%s" % (sid, p))
        if h.get("Content-Encoding") == "gzip":
            b = gzip.decompress(b)
        out[p] = (st, b)
    return out


def without_versions(b):
    """A reply with the analysis version fields taken out (they say what changed)."""
    try:
        v = json.loads(b)
    except ValueError:
        return b
    if isinstance(v, dict):
        for k in ("analysis_version", "reanalysis_failure", "current_analysis_version"):
            v.pop(k, None)
    return json.dumps(v, sort_keys=False)


def close(a, b, path="$"):
    """None when JSON values a and b are equal as figures: numbers to 1e-9 relative, objects
    by key (not order), lists in order or, failing that, as the same rows in another order
    (ties); else where they first differ."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None or isinstance(a, str):
        return None if a == b else "%s: %r != %r" % (path, a, b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return None if abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-9) else "%s: %r != %r" % (path, a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return "%s: keys %s" % (path, sorted(set(a) ^ set(b)))
        for k in a:
            d = close(a[k], b[k], "%s.%s" % (path, k))
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return "%s: %d rows != %d" % (path, len(a), len(b))
        first = next((close(x, y, "%s[%d]" % (path, i)) for i, (x, y) in enumerate(zip(a, b)) if close(x, y)), None)
        if not first:
            return None
        left = list(b)  # the same rows in another order: each of a matches one of b
        for i, x in enumerate(a):
            j = next((j for j, y in enumerate(left) if not close(x, y)), None)
            if j is None:
                return first
            left.pop(j)
        return None
    return "%s: %r != %r" % (path, type(a), type(b))


def version_of(srv, sid):
    global CURRENT
    s = srv.json("/api/v1/sessions/%d" % sid)
    CURRENT = s["current_analysis_version"]
    return s["analysis_version"]


def reanalyse(srv, sid, headers=None):
    st, _, b = srv.request("POST", "/api/v1/sessions/%d/reanalyse" % sid, b"", headers)
    return st, json.loads(b) if b else None


def wait_log(srv, needle, timeout=120):
    end = time.time() + timeout
    while time.time() < end:
        with open(srv.log.name) as f:
            if needle in f.read():
                return True
        time.sleep(0.05)
    return False


def events_sorted(download):
    """The uploaded events of a download in a canonical order, how many it synthesized
    (synth.h: their flow ids number the GPU events in the order they were fed), and its
    top-level keys."""
    doc = json.loads(download)
    synth = lambda e: isinstance(e.get("args"), dict) and e["args"].get("firstpass_synthesized")
    evs = sorted(json.dumps(e, sort_keys=True) for e in doc["traceEvents"] if not synth(e))
    return evs, sum(1 for e in doc["traceEvents"] if synth(e)), {k: v for k, v in doc.items() if k != "traceEvents"}


class Exact(unittest.TestCase):
    """Sessions of this server: a re-analysis gives every reply back byte for byte."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def test_every_reply_and_the_download_stay_byte_for_byte(self):
        for f in EXACT:
            with self.subTest(trace=os.path.relpath(f, T)):
                # labels out of key order: the report's workload line keeps their order
                sid = self.srv.upload_ok(body(f), "?name=exact&label=zz:1&label=aa:2")
                before = reads(self.srv, sid, READS + ["/trace"])
                st, r = reanalyse(self.srv, sid)
                self.assertEqual(st, 200, r)
                self.assertEqual((r["session_id"], r["analysis_version"], r["event_order"]), (sid, r["current_analysis_version"], "upload"))
                after = reads(self.srv, sid, READS + ["/trace"])
                for p in before:
                    self.assertEqual(after[p], before[p], p)

    def test_a_legacy_upload_stays_legacy(self):
        """A bare array of events (torch's legacy autograd export): the replay is an object,
        and the session's source says what it was."""
        _, doc = fpserver.read_trace(SIMPLE)
        sid = self.srv.upload_ok(json.dumps(fpserver.events_of(doc)).encode(), "?name=legacy")
        before = reads(self.srv, sid, READS + ["/trace"])
        self.assertEqual(json.loads(before[""][1])["source"], "legacy")
        self.assertEqual(reanalyse(self.srv, sid)[0], 200)
        self.assertEqual(reads(self.srv, sid, READS + ["/trace"]), before)

    def test_an_empty_session_keeps_its_order_record(self):
        """No events, no runs: the replay row is still written (with the name and labels)."""
        sid = self.srv.upload_ok(b'{"traceEvents":[],"schemaVersion":1}', "?name=empty&label=b:1&label=a:2")
        before = reads(self.srv, sid, READS + ["/trace"])
        st, r = reanalyse(self.srv, sid)
        self.assertEqual((st, r["events"], r["event_order"]), (200, 0, "upload"), r)
        self.assertEqual(reads(self.srv, sid, READS + ["/trace"]), before)

    def test_a_session_stored_without_the_upload_order_still_equals_its_upload(self):
        """The replay row deleted (what a session stored before schema 9 lacks): its events
        come a track at a time; the figures stay equal to the upload's."""
        sid = self.srv.upload_ok(body(CONTROL), "?name=ctl&label=team:a&label=case:1")
        before = reads(self.srv, sid, JSON_READS + ["/trace"])
        sql(self.srv, "DELETE FROM replay WHERE session_id = %d" % sid)
        st, r = reanalyse(self.srv, sid)
        self.assertEqual((st, r["event_order"]), (200, "by_track"), r)
        after = reads(self.srv, sid, JSON_READS + ["/trace"])
        for p in JSON_READS:
            self.assertEqual(after[p][0], 200, p)
            self.assertIsNone(close(json.loads(after[p][1]), json.loads(before[p][1])), p)
        # the same events and top-level keys, now a track at a time
        self.assertEqual(events_sorted(after["/trace"][1]), events_sorted(before["/trace"][1]))
        # and from now on it has an order of its own: a second re-analysis is exact
        st, r = reanalyse(self.srv, sid)
        self.assertEqual((st, r["event_order"]), (200, "upload"), r)
        self.assertEqual(reads(self.srv, sid, JSON_READS + ["/trace"]), after)

    def test_unknown_session_and_tokens(self):
        self.assertEqual(reanalyse(self.srv, 987654)[0], 404)
        self.assertEqual(self.srv.request("GET", "/api/v1/sessions/1/reanalyse")[0], 405)


class Tokens(unittest.TestCase):
    def test_a_reanalysis_is_a_write(self):
        d = tempfile.mkdtemp(prefix="fp-tok-")
        tf = os.path.join(d, "tokens")
        with open(tf, "w") as f:
            f.write("ci s3cret-token-value\n")
        os.chmod(tf, 0o600)
        srv = Server("--tokens-file", tf)
        try:
            auth = {"Authorization": "Bearer s3cret-token-value"}
            st, _, b = srv.request("POST", "/api/v1/sessions", body(SIMPLE), auth)
            sid = json.loads(b)["id"]
            self.assertEqual(reanalyse(srv, sid)[0], 401)
            self.assertEqual(reanalyse(srv, sid, {"Authorization": "Bearer wrong"})[0], 403)
            self.assertEqual(reanalyse(srv, sid, auth)[0], 200)
        finally:
            srv.stop()


class Upgrade(unittest.TestCase):
    """A database written by the server of OLD_COMMIT, opened and re-analysed by today's."""

    @classmethod
    def setUpClass(cls):
        cls.old_bin = oldserver.old_server()
        if not cls.old_bin:
            raise unittest.SkipTest(oldserver.why[0])
        old = Server(binary=cls.old_bin)
        cls.db = old.db
        cls.cases = [("resnet", RESNET, "?name=resnet&label=team:vision&label=model:resnet50"),
                     ("control", CONTROL, "?name=control&label=team:infra&label=gpu:a100"),
                     ("nsys", NSYS, "?name=saxpy&label=team:hpc")]
        try:
            cls.ids = {n: old.upload_ok(body(f), q) for n, f, q in cls.cases}
            st, _, b = old.request("PUT", "/api/v1/baselines/nightly", json.dumps({"session_id": cls.ids["control"]}).encode())
            assert st == 201, b
            st, _, b = old.request("PUT", "/api/v1/sessions/%d/report" % cls.ids["resnet"],
                                   json.dumps({"lines": {"next_experiment": "try channels_last"}}).encode())
            assert st == 200, b
            cls.created = {n: old.json("/api/v1/sessions/%d" % i)["created_at"] for n, i in cls.ids.items()}
            cls.old_downloads = {n: old.get("/api/v1/sessions/%d/trace" % i)[2] for n, i in cls.ids.items()}
        finally:
            old.stop()
        cls.fresh = Server()
        cls.fresh_ids = {n: cls.fresh.upload_ok(body(f), q) for n, f, q in cls.cases}
        st, _, b = cls.fresh.request("PUT", "/api/v1/sessions/%d/report" % cls.fresh_ids["resnet"],
                                     json.dumps({"lines": {"next_experiment": "try channels_last"}}).encode())
        assert st == 200, b

    @classmethod
    def tearDownClass(cls):
        cls.fresh.stop()

    def test_opened_then_reanalysed_equals_a_fresh_upload(self):
        srv = Server(db=self.db)
        try:
            for n, sid in self.ids.items():
                self.assertEqual(version_of(srv, sid), 0, n)  # stored before versions existed
                self.assertEqual(srv.get("/api/v1/sessions/%d/trace" % sid)[2], self.old_downloads[n], n)
            eff = srv.json("/api/v1/sessions/%d/efficiency" % self.ids["resnet"])
            self.assertIsNone(eff["device"])
            # compare says the two sides come from different analyses, and which to redo
            cmp = srv.json("/api/v1/compare?base=%d&head=%d" % (self.ids["control"], srv.upload_ok(body(SIMPLE))))
            av = cmp["analysis_versions"]
            self.assertEqual((av["base"], av["head"], av["differ"], av["reanalyse"]), (0, CURRENT, True, [self.ids["control"]]))
        finally:
            srv.stop()
        # the batch run, then the server again
        r = subprocess.run([fpserver.SERVER, "--db", self.db, "--reanalyse"], capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertEqual(r.stderr.count("msg=re-analysed "), len(self.ids), r.stderr[-3000:])
        srv = Server(db=self.db)
        try:
            for n, sid in self.ids.items():
                fid = self.fresh_ids[n]
                s, f = srv.json("/api/v1/sessions/%d" % sid), self.fresh.json("/api/v1/sessions/%d" % fid)
                self.assertEqual((s["analysis_version"], s["reanalysis_failure"]), (CURRENT, None), n)
                self.assertEqual((s["id"], s["name"], s["labels"], s["created_at"]), (sid, f["name"], f["labels"], self.created[n]), n)
                for p in JSON_READS:
                    if n == "nsys" and p == "/efficiency":
                        continue  # the export's measured bandwidth was not stored before schema 7: below
                    st, b = reads(srv, sid, [p])[p]
                    self.assertEqual(st, 200, (n, p))
                    got, want = json.loads(without_versions(b)), json.loads(without_versions(self.fresh.get("/api/v1/sessions/%d%s" % (fid, p))[2]))
                    for o in (got, want):
                        if isinstance(o, dict):
                            o.pop("id", None), o.pop("session_id", None), o.pop("created_at", None)
                    self.assertIsNone(close(got, want), (n, p))
                # the same events as stored (a track at a time now), the same top-level keys
                self.assertEqual(events_sorted(srv.get("/api/v1/sessions/%d/trace" % sid)[2]), events_sorted(self.old_downloads[n]), n)
            eff = srv.json("/api/v1/sessions/%d/efficiency" % self.ids["nsys"])
            self.assertEqual(eff["device"]["bandwidth_source"], "table")  # docs/operations.md
            self.assertIsNotNone(srv.json("/api/v1/sessions/%d/efficiency" % self.ids["resnet"])["device"])
            # the report edit, and the baseline the gate reads
            rep = srv.json("/api/v1/sessions/%d/report" % self.ids["resnet"])
            self.assertEqual((rep["lines"]["next_experiment"], rep["edited"]), ("try channels_last", ["next_experiment"]))
            self.assertEqual(srv.json("/api/v1/baselines/nightly")["session_id"], self.ids["control"])
            reg = srv.json("/api/v1/sessions/%d/regressions?baseline=nightly" % self.ids["control"])
            self.assertEqual((reg["regressed"], reg["analysis_versions"]["differ"]), (False, False))
        finally:
            srv.stop()


class Failure(unittest.TestCase):
    def test_a_failed_reanalysis_keeps_the_old_analysis_and_says_why(self):
        srv = Server()
        try:
            sid = srv.upload_ok(body(SIMPLE), "?name=broken")
            # one stored chunk made unreadable: the re-analysis cannot read the events back
            if PG:
                sql(srv, "UPDATE event_chunks SET data = '\\x00010203'::bytea WHERE session_id = %d AND seq = "
                         "(SELECT MIN(seq) FROM event_chunks WHERE session_id = %d AND track >= 0)" % (sid, sid))
            else:
                sql(srv, "UPDATE event_chunks SET data = X'00010203' WHERE session_id = %d AND seq = "
                         "(SELECT MIN(seq) FROM event_chunks WHERE session_id = %d AND track >= 0)" % (sid, sid))
            before = reads(srv, sid, JSON_READS)
            st, r = reanalyse(srv, sid)
            self.assertEqual(st, 500, r)
            self.assertIn("malformed", r["error"]["message"])
            self.assertIn("stays", r["error"]["message"])
            s = srv.json("/api/v1/sessions/%d" % sid)
            self.assertIn("malformed", s["reanalysis_failure"]["error"])
            self.assertEqual(s["reanalysis_failure"]["version"], s["current_analysis_version"])
            after = reads(srv, sid, JSON_READS)
            for p in JSON_READS:
                self.assertEqual(without_versions(after[p][1]), without_versions(before[p][1]), p)
        finally:
            srv.stop()


class Races(unittest.TestCase):
    def test_reads_and_downloads_during_reanalyses_see_one_analysis_or_the_other(self):
        srv = Server()
        sid = srv.upload_ok(body(RESNET), "?name=race")
        paths = ["/operators?limit=10000", "/gpu", "/report", "/suspects", "/timeline", "/efficiency", "/trace"]
        new = reads(srv, sid, paths)
        # the "old" analysis: figures changed in place (a version-0 session whose analysis
        # differs from today's); the server is restarted so that no reply of it is cached
        srv.stop()
        for stmt in ["UPDATE operator_rows SET calls = calls + 1000 WHERE session_id = %d" % sid,
                     "UPDATE analysis SET effic = NULL WHERE session_id = %d" % sid,
                     "UPDATE sessions SET analysis_version = 0 WHERE id = %d" % sid]:
            sql(srv, stmt)
        srv2 = Server(db=srv.db)
        self.addCleanup(srv2.stop)
        old = reads(srv2, sid, paths)
        self.assertNotEqual(old["/operators?limit=10000"], new["/operators?limit=10000"])
        stop, bad, counts, lat, cut = [False], [], {p: 0 for p in paths}, [], [0]

        def reader(p):
            while not stop[0]:
                t0 = time.time()
                try:
                    st, b = reads(srv2, sid, [p])[p]
                except http.client.IncompleteRead:  # a download cut short (download.c): allowed
                    self.assertEqual(p, "/trace")
                    cut[0] += 1
                    continue
                lat.append(time.time() - t0)
                counts[p] += 1
                if (st, b) not in (old[p], new[p]) and not (p == "/trace" and st == 200):
                    bad.append((p, st, b[:200]))
                if p == "/operators?limit=10000" and st == 200:  # rows and their totals of one analysis
                    o = json.loads(b)
                    if sum(r["calls"] for r in o["operators"]) != o["totals"]["calls"]:
                        bad.append((p, "rows and totals of two analyses"))
                if p == "/trace" and st == 200 and b != new[p][1]:
                    try:
                        json.loads(b)
                        bad.append((p, "a complete download that differs"))
                    except ValueError:
                        pass  # cut short by the re-analysis replacing the chunks: allowed

        threads = [threading.Thread(target=reader, args=(p,)) for p in paths]
        for t in threads:
            t.start()
        try:
            for i in range(3):
                if i:  # back to the "old" figures, for the next round
                    for stmt in ["UPDATE sessions SET analysis_version = 0 WHERE id = %d" % sid]:
                        sql(srv2, stmt)
                n0 = dict(counts)
                t0 = time.time()
                st, r = reanalyse(srv2, sid)
                took = time.time() - t0
                self.assertEqual(st, 200, r)
                # reads went on meanwhile: none waited for the re-analysis
                done = sum(counts[p] - n0[p] for p in paths if p != "/trace")
                self.assertGreaterEqual(done, 3 * (len(paths) - 1), (took, counts))
        finally:
            stop[0] = True
            for t in threads:
                t.join(60)
        self.assertEqual(bad, [])
        self.assertEqual(reads(srv2, sid, paths)["/report"], new["/report"])

    def test_a_delete_during_a_reanalysis_wins_and_leaves_nothing(self):
        srv = Server(quiet=False)
        self.addCleanup(srv.stop)
        sid = srv.upload_ok(body(RESNET), "?name=gone")
        out = {}
        t = threading.Thread(target=lambda: out.update(r=reanalyse(srv, sid)))
        t.start()
        self.assertTrue(wait_log(srv, "re-analysis started\" session=%d " % sid))
        t0 = time.time()
        st = srv.request("DELETE", "/api/v1/sessions/%d" % sid)[0]
        self.assertEqual(st, 204)
        self.assertLess(time.time() - t0, 10)
        t.join(300)
        self.assertIn(out["r"][0], (404, 200), out)  # 200 only if it committed before the delete
        self.assertEqual(srv.get("/api/v1/sessions/%d" % sid)[0], 404)
        for table in ["operator_rows", "kernel_rows", "phase_rows", "event_chunks", "timeline_buckets", "analysis", "strings",
                      "replay", "reanalysis", "labels"]:
            self.assertEqual(rows(srv, "SELECT count(*) FROM %s WHERE session_id = %d" % (table, sid)), [["0"]], table)


_BIG = {}


def big_trace(events=300000):
    """A generated LLM trace (bench/gen_trace.c) whose re-analysis takes about a second, so that
    a kill 0.3 s after it starts lands mid-way (ResNet's 75k events re-analyse in ~0.25 s: the
    kill came after the end on a fast run). Built once per process."""
    if events not in _BIG:
        d = tempfile.mkdtemp(prefix="fp-big-")
        gen, out = os.path.join(d, "gen_trace"), os.path.join(d, "llm.json.gz")
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-o", gen, os.path.join(fpserver.ROOT, "bench", "gen_trace.c")], check=True)
        subprocess.run([gen, "-n", str(events), "-z", "-o", out], check=True)
        _BIG[events] = out
    return _BIG[events]


class Kill(unittest.TestCase):
    def test_a_server_killed_mid_way_leaves_the_old_analysis_and_the_next_run_finishes(self):
        a = Server("--reanalyse-lease", "3", quiet=False)
        sid = a.upload_ok(body(big_trace()), "?name=killed")
        want = reads(a, sid, JSON_READS)
        a.stop()
        sql(a, "UPDATE sessions SET analysis_version = 0 WHERE id = %d" % sid)
        a = Server("--reanalyse-lease", "3", db=a.db, quiet=False)
        def doomed():
            try:
                reanalyse(a, sid)
            except OSError:  # its server is killed under it
                pass

        threading.Thread(target=doomed, daemon=True).start()
        self.assertTrue(wait_log(a, "re-analysis started\" session=%d " % sid))
        time.sleep(0.3)
        a.proc.send_signal(signal.SIGKILL)
        a.proc.wait(30)
        fpserver._live.discard(a.proc)
        a.log.close()
        b = Server("--reanalyse-lease", "3", db=a.db)
        try:
            self.assertEqual(version_of(b, sid), 0)  # the old analysis, whole and readable
            got = reads(b, sid, JSON_READS)
            for p in JSON_READS:
                self.assertEqual(without_versions(got[p][1]), without_versions(want[p][1]), p)
            # the dead server's claim holds until its lease runs out
            st, r = reanalyse(b, sid)
            if st == 409:
                self.assertIn("being re-analysed by", r["error"]["message"])
                time.sleep(4)
                st, r = reanalyse(b, sid)
            self.assertEqual(st, 200, r)
            self.assertEqual(version_of(b, sid), CURRENT)
            got = reads(b, sid, JSON_READS)
            for p in JSON_READS:
                self.assertEqual(without_versions(got[p][1]), without_versions(want[p][1]), p)
        finally:
            b.stop()


class Background(unittest.TestCase):
    def test_the_worker_finishes_the_older_sessions_and_uploads_are_never_refused(self):
        srv = Server()
        ids = [srv.upload_ok(body(f), "?name=bg%d" % i) for i, f in enumerate([RESNET, CONTROL, SIMPLE, NSYS])]
        srv.stop()
        sql(srv, "UPDATE sessions SET analysis_version = 0")
        srv = Server("--reanalyse-on-start", "--max-uploads", "1", db=srv.db, quiet=False)
        try:
            # uploads while the worker runs: the one slot is theirs whenever they come
            self.assertTrue(wait_log(srv, "re-analysis started"))
            statuses = []
            for _ in range(20):
                statuses.append(srv.upload(body(SIMPLE), "?name=live")[0])
                time.sleep(0.2)
            self.assertEqual(set(statuses), {201})
            # and some of them came while a re-analysis held the slot (else this proved nothing)
            with open(srv.log.name) as f:
                running, overlapped = False, 0
                for ln in f:
                    if "re-analysis started" in ln:
                        running = True
                    elif "re-analysis given up" in ln and "an upload needed the slot" in ln:
                        # an upload came while a re-analysis held the slot: the worker yields
                        # at once, before the upload's request line is written
                        running = False
                        overlapped += 1
                    elif "msg=re-analysed " in ln or "re-analysis given up" in ln:
                        running = False
                    elif running and 'method=POST path="/api/v1/sessions"' in ln:
                        overlapped += 1
            self.assertGreater(overlapped, 0)
            end = time.time() + 300
            while time.time() < end and any(version_of(srv, i) != CURRENT for i in ids):
                time.sleep(0.5)
            self.assertEqual([version_of(srv, i) for i in ids], [CURRENT] * len(ids))
            with open(srv.log.name) as f:
                log = f.read()
            for i in ids:  # each once
                self.assertEqual(log.count("msg=re-analysed session=%d " % i), 1, log[-3000:])
        finally:
            srv.stop()

    def test_batch_older_than(self):
        srv = Server()
        a, b = srv.upload_ok(body(SIMPLE)), srv.upload_ok(body(SIMPLE))
        srv.stop()
        sql(srv, "UPDATE sessions SET analysis_version = 0 WHERE id = %d" % a)
        r = subprocess.run([fpserver.SERVER, "--db", srv.db, "--reanalyse", "--older-than", "1"], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertIn("msg=re-analysed session=%d " % a, r.stderr)
        self.assertNotIn("msg=re-analysed session=%d " % b, r.stderr)
        r = subprocess.run([fpserver.SERVER, "--db", srv.db, "--reanalyse", "--older-than", "1"], capture_output=True, text=True, timeout=300)
        self.assertEqual((r.returncode, r.stderr.count("msg=re-analysed ")), (0, 0), r.stderr[-2000:])


if __name__ == "__main__":
    unittest.main()
