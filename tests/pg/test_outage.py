"""test_outage.py: the server when PostgreSQL is down, and when it comes back.

Run by tests/pg/run.sh (it needs the PostgreSQL binaries; it starts a cluster of its own, so
that stopping it does not disturb the other tests):
  * start-up against a database that does not answer: one "database unreachable, retrying"
    line a try for FIRSTPASS_DB_WAIT_S, then exit 1 with the reason;
  * start-up while the database is still starting: the server waits, then serves;
  * the database stops under a running server: /healthz says 503 database_unreachable with
    backend postgresql, reads and uploads fail with 503 database_unreachable (never a hang,
    never a 500), and once the database is back the same server answers 200 again with no
    restart;
  * the database restarts under a running server whose pool holds connections (all dead,
    unnoticed): the FIRST request after it, and every one after, is served (db.c reconnects
    and runs a read or a BEGIN again). Before, that first request was a 500 database_error
    (and as many more as there were pooled connections);
  * every connection of the server killed while a download waits for its client between
    two fetches: the download holds none (issue 43: a fetch of 4 chunks a pooled connection),
    so its next fetch reconnects and the client gets the whole trace, the same bytes as a
    download read in one go;
  * an upload's connection killed between BEGIN and COMMIT (held there by a trigger that
    sleeps): 503 database_unreachable, no row of the session in any table, and the next
    upload is stored."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
import fpserver  # noqa: E402
from test_replicas import psql, SIMPLE  # noqa: E402

NCCL = os.path.join(fpserver.TRACES, "hta", "nccl_parser_config", "nccl_data.json.gz")

CLUSTER = os.path.join(HERE, "cluster.sh")


def terminate(conn, where, seconds):
    """Terminates the server's backends that match where, polling for up to seconds; "t"
    once one was, "" if none came."""
    killed = ""
    for _ in range(int(seconds * 10)):
        killed = psql(conn, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'firstpass-server' AND "
                      + where)
        if killed:
            break
        time.sleep(0.1)
    return killed


def health(srv):
    st, _, b = srv.get("/healthz")
    return st, b.decode().strip()


class Outage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if subprocess.run([CLUSTER, "available"], capture_output=True).returncode:
            raise unittest.SkipTest("PostgreSQL is not installed")
        cls.dir = tempfile.mkdtemp(prefix="fp-pgout-")
        os.chmod(cls.dir, 0o755)
        cls.dir = os.path.join(cls.dir, "pg")
        cls.conn = subprocess.run([CLUSTER, "start", cls.dir], check=True, capture_output=True, text=True).stdout.strip()

    @classmethod
    def tearDownClass(cls):
        subprocess.run([CLUSTER, "stop", cls.dir])

    def test_1_unreachable_at_start_retries_then_exits(self):
        env = dict(os.environ, FIRSTPASS_DB_WAIT_S="2")
        t0 = time.time()
        p = subprocess.run([fpserver.SERVER, "--port", str(fpserver.free_port()), "--db", "host=/nonexistent-socket-dir dbname=x user=y"],
                           env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 1, p.stderr)
        # three tries over two seconds: a line for each of the two that are retried
        self.assertEqual(p.stderr.count("database unreachable, retrying"), 2, p.stderr)
        self.assertIn("cannot open the database", p.stderr)
        self.assertIn("backend=postgresql", p.stderr)
        self.assertGreaterEqual(time.time() - t0, 2.0)

    def test_2_waits_for_a_database_that_comes_up(self):
        subprocess.run([CLUSTER, "halt", self.dir], check=True)
        threading.Timer(2.0, lambda: subprocess.run([CLUSTER, "resume", self.dir], check=True)).start()
        srv = fpserver.Server(db=self.conn, quiet=False)  # Server waits 5 s for /healthz
        try:
            self.assertEqual(health(srv)[0], 200)
            log = open(srv.log.name).read()
            self.assertIn("database unreachable, retrying", log)
            self.assertIn("database reachable", log)
        finally:
            srv.stop()

    def test_3_goes_away_and_comes_back_under_a_running_server(self):
        srv = fpserver.Server(db=self.conn)
        try:
            sid = srv.upload_ok(open(SIMPLE, "rb").read(), "?name=before")
            self.assertEqual(health(srv), (200, '{"status":"ok","database":{"backend":"postgresql","reachable":true}}'))
            subprocess.run([CLUSTER, "halt", self.dir], check=True)
            st, body = health(srv)
            self.assertEqual(st, 503, body)
            self.assertEqual(json.loads(body), {"error": {"code": "database_unreachable",
                                                          "message": "the postgresql database does not answer"}})
            t0 = time.time()
            st, _, b = srv.get("/api/v1/sessions/%d/operators?limit=3" % sid)
            self.assertEqual(st, 503, b)
            self.assertIn(b"database_unreachable", b)
            st, _, b = srv.upload(open(SIMPLE, "rb").read(), "?name=during")
            self.assertEqual(st, 503, b)
            self.assertEqual(b["error"]["code"], "database_unreachable", b)
            self.assertLess(time.time() - t0, 20)
            subprocess.run([CLUSTER, "resume", self.dir], check=True)
            for _ in range(50):
                if health(srv)[0] == 200:
                    break
                time.sleep(0.1)
            self.assertEqual(health(srv)[0], 200)
            self.assertEqual(srv.get("/api/v1/sessions/%d/operators?limit=3" % sid)[0], 200)
            self.assertEqual(srv.upload(open(SIMPLE, "rb").read(), "?name=after")[0], 201)
        finally:
            srv.stop()

    def test_4_first_request_after_a_restart_is_served(self):
        srv = fpserver.Server(db=self.conn, quiet=False)
        try:
            sid = srv.upload_ok(open(SIMPLE, "rb").read(), "?name=before-restart")
            # several connections in the pool: reads at once, each holds one
            out = []
            ts = [threading.Thread(target=lambda: out.append(srv.get("/api/v1/sessions/%d/trace" % sid)[0])) for _ in range(6)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            self.assertEqual(out, [200] * 6)
            # a restart: every pooled connection's backend is gone, and the server is not told
            subprocess.run([CLUSTER, "halt", self.dir], check=True)
            subprocess.run([CLUSTER, "resume", self.dir], check=True)
            st, _, b = srv.get("/api/v1/sessions/%d/operators?limit=3" % sid)
            self.assertEqual(st, 200, b)  # the first request after the restart
            # the next ones take the other dead connections: a read of every kind, a download
            # (a cursor in a transaction), writes (their BEGIN is run again), then a delete
            for path in ["/api/v1/sessions/%d" % sid, "/api/v1/sessions?limit=5", "/api/v1/sessions/%d/report" % sid,
                         "/api/v1/sessions/%d/trace" % sid, "/api/v1/sessions/%d/timeline" % sid]:
                st, _, b = srv.get(path)
                self.assertEqual(st, 200, (path, b[:300]))
            sid2 = srv.upload_ok(open(SIMPLE, "rb").read(), "?name=after-restart")
            st, _, b = srv.request("DELETE", "/api/v1/sessions/%d" % sid2)
            self.assertEqual(st, 204, b)
            self.assertEqual(health(srv)[0], 200)
            log = open(srv.log.name).read()
            self.assertIn("database reconnected", log)
            self.assertNotIn(" 500 ", log)
        finally:
            srv.stop()

    def test_5_a_download_survives_its_connections_being_lost(self):
        """A download takes a pooled connection for each fetch of 4 chunks and holds none
        while it waits for its client. Before issue 43 it was a cursor in a transaction on one
        connection, and that connection lost between two FETCHes cut the download short.
        Now the server's every connection is killed while the client is not reading: the next
        fetch runs on a reconnected one and the download is whole."""
        srv = fpserver.Server(db=self.conn)
        try:
            sid = srv.upload_ok(open(NCCL, "rb").read(), "?name=cut")
            chunks = int(psql(self.conn, "SELECT count(*) FROM event_chunks WHERE session_id = %d" % sid))
            self.assertGreater(chunks, 8, "the trace needs more than two fetches of 4 chunks")
            st, _, whole = srv.get("/api/v1/sessions/%d/trace" % sid)
            self.assertEqual(st, 200)
            s = socket.create_connection(("127.0.0.1", srv.port))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
            s.sendall(b"GET /api/v1/sessions/%d/trace HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % sid)
            got = s.recv(4096)
            self.assertIn(b" 200 ", got.split(b"\r\n")[0])
            time.sleep(1)  # not reading on: the server waits for the socket between two fetches
            self.assertEqual(psql(self.conn, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'firstpass-server'"
                                             " AND state LIKE '%in transaction%'"), "0", "a transaction is held while the client waits")
            self.assertIn("t", terminate(self.conn, "true", 5), "no connection of the server to cut")
            s.settimeout(60)
            while True:
                b = s.recv(1 << 16)
                if not b:
                    break
                got += b
            s.close()
            head, _, body = got.partition(b"\r\n\r\n")
            self.assertTrue(body.endswith(b"\r\n0\r\n\r\n"), "the download was cut short")
            doc, rest = b"", body  # undo the chunked encoding
            while True:
                size, _, rest = rest.partition(b"\r\n")
                n = int(size, 16)
                if not n:
                    break
                doc, rest = doc + rest[:n], rest[n + 2:]
            self.assertEqual(doc, whole, "the download differs from one read in one go")
            self.assertEqual(srv.get("/api/v1/sessions/%d" % sid)[0], 200)
        finally:
            srv.stop()

    def test_6_an_upload_whose_connection_is_lost_mid_commit_stores_nothing(self):
        """The commit is one transaction (store/commit.h): its connection lost between BEGIN
        and COMMIT must leave no part of the session (no sessions row, no strings, operator
        rows or chunks), answer the upload with a JSON error, and the next upload must be
        stored. A statement trigger that sleeps inside the commit's COPY of operator_rows
        holds the transaction open while the test terminates its backend."""
        srv = fpserver.Server(db=self.conn)
        before = {t: psql(self.conn, "SELECT count(*) FROM %s" % t) for t in ("sessions", "strings", "operator_rows", "event_chunks")}
        psql(self.conn, "CREATE FUNCTION fp_stall() RETURNS trigger AS $$ BEGIN PERFORM pg_sleep(30); RETURN NULL; END $$ LANGUAGE plpgsql;"
                        " CREATE TRIGGER fp_stall AFTER INSERT ON operator_rows FOR EACH STATEMENT EXECUTE FUNCTION fp_stall()")
        try:
            res = {}
            up = threading.Thread(target=lambda: res.update(r=srv.upload(open(SIMPLE, "rb").read(), "?name=stalled")))
            up.start()
            killed = terminate(self.conn, "wait_event = 'PgSleep'", 30)
            up.join(60)
            self.assertEqual(killed, "t", "no commit stalled in the trigger")
            st, _, body = res["r"]
            self.assertEqual((st, body["error"]["code"]), (503, "database_unreachable"), body)
            after = {t: psql(self.conn, "SELECT count(*) FROM %s" % t) for t in before}
            self.assertEqual(after, before, "rows of the lost commit were kept")
            psql(self.conn, "DROP TRIGGER fp_stall ON operator_rows; DROP FUNCTION fp_stall()")
            sid = srv.upload_ok(open(SIMPLE, "rb").read(), "?name=after")
            self.assertEqual(srv.get("/api/v1/sessions/%d/operators" % sid)[0], 200)
            self.assertTrue(srv.alive())
        finally:
            psql(self.conn, "DROP TRIGGER IF EXISTS fp_stall ON operator_rows; DROP FUNCTION IF EXISTS fp_stall()")
            srv.stop()


if __name__ == "__main__":
    res = unittest.main(verbosity=2, exit=False, warnings="ignore").result
    sys.exit(0 if res.wasSuccessful() else 1)
