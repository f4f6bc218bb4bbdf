#!/usr/bin/env python3
"""play.py: runs the pods of deploy/kubernetes/ with `podman kube play` (issue 53), for
docker/ci.sh (.ci/run), on the images it built: firstpass-server:0.1.0,
firstpass-agent:0.1.0, firstpass-standin-engine:0.1.0 and firstpass-postgres:15.

  play.py --work DIR --trace FILE [--revision REV] [--only sqlite,serving,node-agent,postgresql] [--keep]

Run as root with docker/ci.sh's CONTAINERS_CONF and CONTAINERS_STORAGE_CONF. Prints PASS and
FAIL lines; exit 1 on a failure. What it runs, per set:
  sqlite      the server pod (read-only root, uid 10001, no capabilities, emptyDir /tmp, the
              PVCs): ready by its own probes, /livez names the image's revision, a real trace
              uploaded (201) and its report read; a second pod of the same Deployment on the
              same claim exits 1 naming the lock, and the first keeps serving.
  serving     the vLLM pod with the stand-in engine in the engine container's place (image and
              arguments only: its volumes, env and security context as written) and the agent
              sidecar: both ready by their probes (the agent's: its health file), its target
              registered, a trace dropped into the engine's directory becomes a session,
              "Profile now" (POST /api/v1/captures) ends uploaded as a job of two ranks.
  node-agent  the DaemonSet's pod on host directories in place of its hostPaths: a trace
              written into the node's directory becomes a session labelled with the node.
  postgresql  a PostgreSQL container (firstpass-postgres:15, the Secret's password) and the
              Deployment's replicas: all ready, no password in any process's arguments, an
              upload through one read alike through another; PostgreSQL stopped: /readyz 503,
              /livez 200 (liveness restarts nothing); started again: ready again.
What podman 4.3 does not do, done here as Kubernetes would (and said where): a Deployment's
pods are made from its template (a DaemonSet's: one node), named NAME-I; a Service is a
network alias on the pods it selects, and a pod is reached at its own address (kube play
would publish each containerPort on the host's same port); an emptyDir gets a name of its
pod's (kube play makes it a named volume that every pod naming one alike shares); $(VAR) in arguments is expanded and spec.nodeName is
given ("kube-play-node"); a Secret becomes a podman secret (kube play's own Secret support is
unusable in 4.3: it stores YAML and reads JSON); readiness, liveness and startup probes are
run by this script (no kubelet, and no systemd for podman's healthcheck timers). What it does
not check at all is in docs/kubernetes.md, "What is tested"."""
import argparse
import base64
import copy
import gzip
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import manifests as M  # noqa: E402

NODE = "kube-play-node"
IMAGES = {"vllm-openai": "firstpass-standin-engine:0.1.0"}  # the engine: a stand-in with vLLM's endpoints
STANDIN_TRACE = os.path.join(M.ROOT, "tests", "triage", "torch", "gloo_rank0.json.gz")

failed = 0


def ok(what):
    print("PASS kube: " + what, flush=True)


def ko(what):
    global failed
    failed += 1
    print("FAIL kube: " + what, flush=True)


def podman(*args, check=True, input=None, timeout=300):
    r = subprocess.run(["podman", *args], input=input, capture_output=True, timeout=timeout)
    if check and r.returncode:
        raise RuntimeError("podman %s: %s" % (" ".join(args), r.stderr.decode(errors="replace")[-2000:]))
    return r


def http(method, url, body=None, timeout=30):
    """(status, body bytes); status 0 when nothing answered."""
    req = urllib.request.Request(url, data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (OSError, urllib.error.URLError):
        return 0, b""


def wait(fn, seconds, step=1.0):
    """fn() until it is truthy or seconds pass: its last value."""
    end = time.time() + seconds
    while True:
        v = fn()
        if v or time.time() > end:
            return v
        time.sleep(step)


# ---- from manifests to what podman 4.3 plays ----

def expand(text, env):
    """Kubernetes' $(VAR) in a command or argument, from the container's env."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), text)


def adapt_container(c, pod_name, hostpaths):
    """c as podman plays it: fieldRefs and $(VAR) resolved, the engine swapped for the
    stand-in (its own command: the vLLM arguments mean nothing to it), GPU limits dropped."""
    env = {}
    for e in c.get("env", []):
        ref = e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        if ref in ("spec.nodeName", "metadata.name"):
            e.pop("valueFrom")
            e["value"] = NODE if ref == "spec.nodeName" else pod_name
        if "value" in e:
            env[e["name"]] = e["value"]
    for k in ("command", "args"):
        if k in c:
            c[k] = [expand(a, env) for a in c[k]]
    name = M.image_name(c["image"])[0]
    if name in IMAGES:
        c["image"] = IMAGES[name]
        c.pop("args", None)
        c.pop("command", None)
    c.get("resources", {}).get("limits", {}).pop("nvidia.com/gpu", None)
    # podman 4.3 publishes a containerPort on the host's same port (two server pods: "address
    # already in use"); the pods are reached at their own addresses instead, as in a cluster
    c.pop("ports", None)
    # run by this script, not by podman (it would make them healthchecks that nothing runs)
    for p in ("startupProbe", "livenessProbe", "readinessProbe"):
        c.pop(p, None)


def pods_of(obj, replicas=None, first=0):
    """The pods a workload makes: [pod document]. A DaemonSet: one (one node)."""
    t = M.pod_template(obj)
    n = replicas if replicas is not None else (obj["spec"].get("replicas", 1) if obj["kind"] in ("Deployment", "StatefulSet") else 1)
    out = []
    for i in range(first, first + n):
        name = "%s-%d" % (obj["metadata"]["name"], i)
        spec = copy.deepcopy(t["spec"])
        for k in ("nodeSelector", "tolerations"):
            spec.pop(k, None)
        # podman 4.3 makes an emptyDir a named volume of the volume's name: shared by every pod
        # that names one alike, and kept after them. A name of the pod's own makes it the pod's.
        own = {v["name"]: "%s-%s" % (name, v["name"]) for v in spec.get("volumes", []) if "emptyDir" in v}
        for v in spec.get("volumes", []):
            v["name"] = own.get(v["name"], v["name"])
        for _, c in M.containers(spec):
            for m in c.get("volumeMounts", []):
                m["name"] = own.get(m["name"], m["name"])
            adapt_container(c, name, {})
        out.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": dict(t["metadata"]["labels"])}, "spec": spec})
    return out


def aliases(pod, objs):
    """The Services of objs that select pod: its DNS names on the network."""
    labels = pod["metadata"]["labels"]
    return [s["metadata"]["name"] for s in objs if s["kind"] == "Service"
            and all(labels.get(k) == v for k, v in s["spec"]["selector"].items())]


class Cluster:
    """Pods played on one podman network, and the probes of their manifests."""

    def __init__(self, work, net):
        self.work, self.net = work, net
        self.probes = {}  # pod name -> [(container, probe kind, probe, ports)]
        podman("network", "create", net, check=False)

    def secrets(self, objs):
        for s in (o for o in objs if o["kind"] == "Secret"):
            data = {k: base64.b64encode(v.encode()).decode() for k, v in s.get("stringData", {}).items()}
            data.update(s.get("data", {}))
            path = os.path.join(self.work, "secret-%s.json" % s["metadata"]["name"])
            with open(path, "w") as f:
                json.dump(data, f)  # what kube play's secretKeyRef reads: key -> base64
            podman("secret", "rm", s["metadata"]["name"], check=False)
            podman("secret", "create", s["metadata"]["name"], path)

    def claims(self, objs):
        pvcs = [o for o in objs if o["kind"] == "PersistentVolumeClaim"]
        if pvcs:
            path = os.path.join(self.work, "pvcs.yaml")
            with open(path, "w") as f:
                yaml.safe_dump_all(pvcs, f)
            podman("kube", "play", path)

    def play(self, pod, objs, template_obj, hostpaths=None):
        """Plays one pod document (its Services as aliases), records its template's probes."""
        for v in pod["spec"].get("volumes", []):
            if "hostPath" in v:
                v["hostPath"]["path"] = (hostpaths or {})[v["hostPath"]["path"]]
        name = pod["metadata"]["name"]
        path = os.path.join(self.work, name + ".yaml")
        with open(path, "w") as f:
            yaml.safe_dump(pod, f)
        al = aliases(pod, objs)
        net = self.net + (":" + ",".join("alias=" + a for a in al) if al else "")
        r = podman("kube", "play", "--network", net, path, check=False)
        probes = []
        for _, c in M.containers(M.pod_template(template_obj)["spec"]):
            ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
            for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
                if kind in c:
                    probes.append((c["name"], kind, c[kind], ports))
        self.probes[name] = probes
        return r

    def ip(self, pod):
        infra = podman("pod", "inspect", pod, "--format", "{{.InfraContainerID}}").stdout.decode().strip()
        nets = json.loads(podman("inspect", infra, "--format", "{{json .NetworkSettings.Networks}}").stdout)
        return nets[self.net]["IPAddress"]

    def probe(self, pod, container, p, ports):
        """One probe as the kubelet runs it: True when it passes."""
        if "httpGet" in p:
            port = p["httpGet"]["port"]
            port = ports.get(port, port)
            st, _ = http("GET", "http://%s:%s%s" % (self.ip(pod), port, p["httpGet"]["path"]), timeout=p.get("timeoutSeconds", 1) + 4)
            return 200 <= st < 400
        if "exec" in p:
            return podman("exec", "%s-%s" % (pod, container), *p["exec"]["command"], check=False).returncode == 0
        if "tcpSocket" in p:
            try:
                socket.create_connection((self.ip(pod), ports.get(p["tcpSocket"]["port"], p["tcpSocket"]["port"])), 3).close()
                return True
            except OSError:
                return False
        raise ValueError("unknown probe %s" % p)

    def ready(self, pod, seconds=120):
        """Every startup, liveness and readiness probe of the pod passes (within seconds):
        [] or the ones that did not."""
        def failing():
            return [(c, k) for c, k, p, ports in self.probes[pod] if not self.probe(pod, c, p, ports)]
        left = wait(lambda: not failing(), seconds, 2)
        return [] if left else failing()

    def state(self, ctr):
        r = podman("inspect", ctr, "--format", "{{.State.Status}} {{.State.ExitCode}}", check=False)
        return r.stdout.decode().split() if r.returncode == 0 else ["gone", "-"]

    def logs(self, ctr):
        r = podman("logs", ctr, check=False)
        return (r.stdout + r.stderr).decode(errors="replace")


def workload(objs, kind=None, image=None):
    for o in objs:
        t = M.pod_template(o)
        if t is None or (kind and o["kind"] != kind):
            continue
        if image is None or any(M.image_name(c["image"])[0] == image for _, c in M.containers(t["spec"])):
            return o
    raise LookupError("no %s workload with image %s" % (kind, image))


def expected_revision(given):
    """The commit the images were built from: docker/ci.sh's (--revision), else HEAD's."""
    if given:
        return given
    r = subprocess.run(["git", "-C", M.ROOT, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


# ---- the sets ----

def run_sqlite(k, trace, revision):
    objs = M.render("sqlite")
    dep = workload(objs, "Deployment", "firstpass-server")
    k.claims(objs)
    pod = pods_of(dep)[0]
    k.play(pod, objs, dep)
    name = pod["metadata"]["name"]
    bad = k.ready(name)
    if bad:
        ko("sqlite: %s not ready: probes %s failing; %s" % (name, bad, k.logs(name + "-server")[-1500:]))
        return None
    ok("sqlite: %s ready (its startup, liveness /livez and readiness /readyz probes pass)" % name)
    ins = json.loads(podman("inspect", name + "-server").stdout)[0]
    hc = ins["HostConfig"]
    if hc.get("ReadonlyRootfs") and ins["Config"]["User"].split(":")[0] == "10001" and len(hc.get("CapDrop") or []) >= 10:
        ok("sqlite: runs as uid 10001 with a read-only root file system and every capability dropped")
    else:
        ko("sqlite: ReadonlyRootfs %s, User %s, CapDrop %s" % (hc.get("ReadonlyRootfs"), ins["Config"]["User"], hc.get("CapDrop")))
    base = "http://%s:8080" % k.ip(name)
    live = json.loads(http("GET", base + "/livez")[1] or b"{}")
    rev = expected_revision(revision)
    if live.get("version") == "0.1.0" and live.get("revision") and (rev is None or live["revision"].startswith(rev)):
        ok("sqlite: /livez names the build: %s" % live)
    else:
        ko("sqlite: /livez %s, expected revision %s" % (live, rev))
    with open(trace, "rb") as f:
        st, body = http("POST", base + "/api/v1/sessions?name=kube&label=ci:kube", f.read(), timeout=120)
    sid = json.loads(body).get("id") if st == 201 else None
    if sid and http("GET", base + "/api/v1/sessions/%d/report" % sid)[0] == 200:
        ok("sqlite: an upload with a read-only root file system: 201, session %d, its report 200" % sid)
    else:
        ko("sqlite: upload with a read-only root: %s %s" % (st, body[:300]))
    # a second server on the same claim: what a rolling update or a second replica does
    second = pods_of(dep, replicas=1, first=1)[0]
    second["spec"]["restartPolicy"] = "Never"  # one exit to look at (a cluster would restart it: CrashLoopBackOff)
    k.play(second, [], dep)
    ctr = second["metadata"]["name"] + "-server"
    st2 = wait(lambda: (lambda s: s if s[0] in ("exited", "stopped") else None)(k.state(ctr)), 60)
    log = k.logs(ctr)
    if st2 and st2[1] == "1" and "another firstpass-server serves this SQLite file" in log:
        ok("sqlite: a second pod on the same claim exits 1: %s" % re.search(r'error="([^"]{0,160})', log).group(1))
    else:
        ko("sqlite: the second pod on the same claim: state %s, log %s" % (k.state(ctr), log[-800:]))
    podman("pod", "rm", "-f", second["metadata"]["name"], check=False)
    if sid and http("GET", base + "/api/v1/sessions/%d" % sid)[0] == 200:
        ok("sqlite: the first pod still serves session %d" % sid)
    else:
        ko("sqlite: the first pod no longer serves session %s" % sid)
    return base


def run_serving(k, base):
    objs = M.render("serving")
    dep = workload(objs, "Deployment", "firstpass-agent")
    pod = pods_of(dep)[0]
    name = pod["metadata"]["name"]
    k.play(pod, objs, dep)
    bad = k.ready(name, 120)
    if bad:
        ko("serving: %s not ready: %s; agent: %s" % (name, bad, k.logs(name + "-agent")[-1500:]))
        return
    ok("serving: %s ready (engine /health; the agent's liveness probe reads its fresh --health-file)" % name)

    def target():
        st, b = http("GET", base + "/api/v1/targets")
        ts = json.loads(b).get("targets", []) if st == 200 else []
        return next((t for t in ts if t["name"].startswith(name) and t.get("online")), None)
    t = wait(target, 60)
    if not t:
        ko("serving: no target of %s registered: %s" % (name, k.logs(name + "-agent")[-1500:]))
        return
    ok("serving: the agent registered target %s (%s)" % (t["name"], t["engine"]))
    # a trace the engine's profiler writes: under a temporary name, then renamed (torch writes
    # in place; both are handled), as the engine's uid, in the shared emptyDir
    with open(STANDIN_TRACE, "rb") as f:
        data = f.read()
    fname = "dropped-rank-0.%d.pt.trace.json.gz" % int(time.time() * 1000)
    r = podman("exec", "-i", name + "-engine", "sh", "-c", "cat > /traces/.drop.tmp && mv /traces/.drop.tmp /traces/" + fname,
               input=data, check=False)
    if r.returncode:
        ko("serving: cannot write into the engine's /traces: %s" % r.stderr.decode()[-300:])
        return

    def landed():
        st, b = http("GET", base + "/api/v1/sessions?label=file:" + fname)
        s = json.loads(b).get("sessions", []) if st == 200 else []
        return s[0] if s else None
    s = wait(landed, 90)
    if s:
        ok("serving: a trace dropped into the engine's directory became session %d" % s["id"])
    else:
        ko("serving: the dropped trace %s is no session: %s" % (fname, k.logs(name + "-agent")[-1500:]))
    st, b = http("POST", base + "/api/v1/captures", json.dumps({"target": t["name"], "seconds": 2}).encode())
    cid = json.loads(b).get("id") if st in (200, 201, 202) else None
    if not cid:
        ko("serving: POST /api/v1/captures: %s %s" % (st, b[:300]))
        return

    def done():
        c = json.loads(http("GET", base + "/api/v1/captures/%d" % cid)[1] or b"{}")
        return c if c.get("status") in ("uploaded", "failed", "cancelled") else None
    c = wait(done, 180)
    ranks = len(json.loads(http("GET", base + "/api/v1/jobs/capture-%d" % cid)[1] or b"{}").get("ranks", []))
    if c and c["status"] == "uploaded" and ranks == 2:
        ok("serving: Profile now: capture %d uploaded, job capture-%d of 2 ranks" % (cid, cid))
    else:
        ko("serving: capture %d ended %s with %d ranks: %s" % (cid, c, ranks, k.logs(name + "-agent")[-1500:]))


def run_node_agent(k, base, work):
    objs = M.render("node-agent")
    ds = workload(objs, "DaemonSet", "firstpass-agent")
    node = os.path.join(work, "node")
    traces, state = os.path.join(node, "traces"), os.path.join(node, "agent")
    # the node's preparation (daemonset.yaml's comment)
    for d, mode in ((traces, 0o770), (os.path.join(traces, "engine-a"), 0o770), (state, 0o700)):
        os.makedirs(d, exist_ok=True)
        os.chown(d, 10001, 10001)
        os.chmod(d, mode)
    pod = pods_of(ds)[0]
    name = pod["metadata"]["name"]
    k.play(pod, objs, ds, {"/var/lib/firstpass/traces": traces, "/var/lib/firstpass/agent": state})
    bad = k.ready(name, 120)
    if bad:
        ko("node-agent: %s not ready: %s; %s" % (name, bad, k.logs(name + "-agent")[-1500:]))
        return
    ok("node-agent: %s ready (its liveness probe reads a fresh --health-file)" % name)
    fname = "rank0.%d.pt.trace.json.gz" % int(time.time() * 1000)
    tmp = os.path.join(traces, "engine-a", ".w.tmp")
    shutil.copyfile(STANDIN_TRACE, tmp)
    os.chmod(tmp, 0o644)
    os.rename(tmp, os.path.join(traces, "engine-a", fname))

    def landed():
        st, b = http("GET", base + "/api/v1/sessions?label=file:" + fname)
        s = json.loads(b).get("sessions", []) if st == 200 else []
        return s[0] if s else None
    s = wait(landed, 90)
    labels = json.loads(http("GET", base + "/api/v1/sessions/%d" % s["id"])[1]).get("labels", {}) if s else {}
    if s and labels.get("host") == NODE:
        ok("node-agent: a trace written into the node's directory became session %d, host:%s" % (s["id"], NODE))
    else:
        ko("node-agent: the node's trace %s: session %s labels %s; %s" % (fname, s, labels, k.logs(name + "-agent")[-1500:]))


def run_postgresql(k):
    objs = M.render("postgresql")
    dep = workload(objs, "Deployment", "firstpass-server")
    secret = next(o for o in objs if o["kind"] == "Secret")
    password = secret["stringData"]["PGPASSWORD"]
    k.secrets(objs)
    podman("rm", "-f", "fpk8s-postgresql", check=False)
    podman("run", "-d", "--name", "fpk8s-postgresql", "--network", k.net + ":alias=postgresql", "-e", "POSTGRES_USER=firstpass",
           "-e", "POSTGRES_DB=firstpass", "-e", "POSTGRES_PASSWORD=" + password, "firstpass-postgres:15")
    up = wait(lambda: podman("exec", "fpk8s-postgresql", "/usr/lib/postgresql/15/bin/pg_isready", "-h", "127.0.0.1", check=False).returncode == 0, 120)
    if not up:
        ko("postgresql: the database did not start: %s" % k.logs("fpk8s-postgresql")[-800:])
        return
    pods = pods_of(dep)
    for p in pods:
        k.play(p, objs, dep)
    names = [p["metadata"]["name"] for p in pods]
    bad = {n: k.ready(n, 150) for n in names}
    if any(bad.values()):
        ko("postgresql: replicas not ready: %s; %s" % (bad, k.logs(names[0] + "-server")[-1500:]))
        return
    ok("postgresql: %d replicas ready (%s)" % (len(names), ", ".join(names)))
    args = "".join(podman("top", n + "-server", "args", check=False).stdout.decode() for n in names)
    if password not in args and "firstpass-server" in args:
        ok("postgresql: no replica has the password in its arguments (PGPASSWORD from the Secret)")
    else:
        ko("postgresql: arguments: %s" % args[-500:])
    a, c = "http://%s:8080" % k.ip(names[0]), "http://%s:8080" % k.ip(names[-1])
    with open(STANDIN_TRACE, "rb") as f:
        st, body = http("POST", a + "/api/v1/sessions?name=kube-pg", gzip.decompress(f.read()), timeout=120)
    sid = json.loads(body).get("id") if st == 201 else None
    if sid and http("GET", a + "/api/v1/sessions/%d" % sid) == http("GET", c + "/api/v1/sessions/%d" % sid):
        ok("postgresql: uploaded through %s, read alike through %s" % (names[0], names[-1]))
    else:
        ko("postgresql: upload %s %s" % (st, body[:300]))
    # a database outage: readiness takes the replicas out, liveness keeps them
    podman("stop", "-t", "30", "fpk8s-postgresql")
    mid = names[len(names) // 2]
    m = "http://%s:8080" % k.ip(mid)
    down = wait(lambda: http("GET", m + "/readyz")[0] == 503, 30)
    live = http("GET", m + "/livez")[0]
    if down and live == 200:
        ok("postgresql: the database stopped: %s /readyz 503, /livez 200 (readiness drops it, liveness restarts nothing)" % mid)
    else:
        ko("postgresql: the database stopped: /readyz %s, /livez %s" % (http("GET", m + "/readyz")[0], live))
    podman("start", "fpk8s-postgresql")
    back = wait(lambda: all(http("GET", "http://%s:8080/readyz" % k.ip(n))[0] == 200 for n in names), 90)
    restarts = [podman("inspect", n + "-server", "--format", "{{.State.Status}}/{{.RestartCount}}").stdout.decode().strip() for n in names]
    if back and all(r == "running/0" for r in restarts):
        ok("postgresql: the database back: every replica ready again, none restarted (%s)" % " ".join(restarts))
    else:
        ko("postgresql: after the database came back: readyz %s, state/restarts %s"
           % ([http("GET", "http://%s:8080/readyz" % k.ip(n))[0] for n in names], restarts))


def cleanup(nets):
    podman("pod", "rm", "-af", "-t", "10", check=False)
    podman("rm", "-af", "-t", "10", check=False)
    podman("secret", "rm", "-a", check=False)
    podman("volume", "prune", "-f", check=False)
    for n in nets:
        podman("network", "rm", "-f", n, check=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--trace", required=True)
    ap.add_argument("--only", default="sqlite,serving,node-agent,postgresql")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--revision", help="the commit the images were built from (default: HEAD's)")
    a = ap.parse_args()
    only = a.only.split(",")
    work = os.path.join(a.work, "kube")
    os.makedirs(work, exist_ok=True)
    nets = ["fpk8s", "fpk8s-pg"]
    t0 = time.time()
    try:
        if {"sqlite", "serving", "node-agent"} & set(only):
            k = Cluster(work, nets[0])
            base = run_sqlite(k, a.trace, a.revision)
            if base and "serving" in only:
                run_serving(k, base)
            if base and "node-agent" in only:
                run_node_agent(k, base, work)
        if "postgresql" in only:
            # its Deployment's pods have the SQLite one's names (firstpass-I): the first sets go
            podman("pod", "rm", "-af", "-t", "10", check=False)
            run_postgresql(Cluster(work, nets[1]))
    except Exception as e:  # a podman failure is a failed check with its words, not a traceback only
        ko("%s: %s" % (type(e).__name__, e))
    finally:
        if not a.keep:
            cleanup(nets)
    print("kube: %s in %d s" % ("passed" if not failed else "FAILED", time.time() - t0), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
