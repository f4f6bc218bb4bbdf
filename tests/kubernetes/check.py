#!/usr/bin/env python3
"""check.py: static checks of deploy/kubernetes/ (issue 53), for what `podman kube play`
cannot run or does not enforce (tests/kubernetes/play.py runs the pods it can).

  tests/kubernetes/check.py [--server build/firstpass-server]

Prints PASS/FAIL lines and "N passed, M failed"; exit 1 on a failure. Checked for every set
(sqlite, postgresql, serving, node-agent):
  - the kustomization lists plain files (no transformer), each tracked by git, and renders as
    `kubectl kustomize` does (compared when kubectl is installed);
  - app.kubernetes.io/{name,instance,component,part-of} on every object and pod template, the
    selectors within the template's labels, each Service selecting a workload of its set;
  - the Pod Security Standards' restricted level on every pod and container (runAsNonRoot,
    a numeric non-zero user, seccompProfile RuntimeDefault, allowPrivilegeEscalation false,
    capabilities drop ALL and add none, no host namespaces, the restricted volume types;
    hostPath only in node-agent, which docs/kubernetes.md says needs a privileged namespace),
    plus readOnlyRootFilesystem with an emptyDir on /tmp;
  - resources (cpu and memory requests, a memory limit), a liveness probe, a readiness probe
    for each container with a port, on another endpoint than liveness (the server: /livez and
    /readyz, a startup probe), enableServiceLinks false (a Service named firstpass would set
    FIRSTPASS_PORT=tcp://...), no service account token;
  - no secret on a command line or in a literal env value; PGPASSWORD from a Secret of the
    set; every FIRSTPASS_* variable of a server container one that --help lists;
  - what each set is for: sqlite one replica, strategy Recreate, the database on a
    ReadWriteOnce claim; postgresql N >= 2 replicas, rolling with none unavailable, a PDB,
    no claim; serving the agent beside the engine on a shared emptyDir it watches, its target
    on 127.0.0.1, its health file probed, the server a Service of the server sets; node-agent
    a DaemonSet reading a hostPath, its state on the node, --host the node's name."""
import argparse
import os
import re
import subprocess
import sys
from urllib.parse import urlparse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import manifests as M  # noqa: E402

LABELS = ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component", "app.kubernetes.io/part-of")
# the restricted level's volume types (https://kubernetes.io/docs/concepts/security/pod-security-standards/)
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}
HOSTPATH_SETS = {"node-agent"}
AGENT_ENV = {"FIRSTPASS_SERVER", "FIRSTPASS_TOKEN", "FIRSTPASS_STATE", "FIRSTPASS_SPOOL"}
PASSWORD_IN_URI = re.compile(r"://[^/@\s:]+:[^/@\s]+@")

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
        print("PASS " + what)
    else:
        failed += 1
        print("FAIL " + what)
    return ok


def server_env_names(binary):
    """The FIRSTPASS_* variables the server reads: those `firstpass-server --help` lists, and
    the PostgreSQL knobs store.c reads, documented in docs/scale.md's table. None without a
    binary."""
    if not binary or not os.access(binary, os.X_OK):
        return None
    out = subprocess.run([binary, "--help"], capture_output=True, text=True).stdout
    with open(os.path.join(M.ROOT, "docs", "scale.md")) as f:
        knobs = set(re.findall(r"^\| `(FIRSTPASS_[A-Z_]+)` \|", f.read(), re.M))
    return set(re.findall(r"\[(FIRSTPASS_[A-Z_]+)", out)) | knobs


def volume_type(v):
    return next(k for k in v if k != "name")


def check_files(name):
    k = M.kustomization(name)
    check(set(k) <= M.PLAIN_KEYS, "%s: kustomization.yaml lists plain resources only (keys %s)" % (name, sorted(k)))
    for r in k.get("resources", []):
        path = os.path.join("deploy", "kubernetes", name, r)
        tracked = subprocess.run(["git", "-C", M.ROOT, "ls-files", "--error-unmatch", path], capture_output=True).returncode == 0
        check(os.path.isfile(os.path.join(M.ROOT, path)) and tracked, "%s: resource %s exists and is tracked" % (name, r))
    theirs = M.kubectl_render(name)
    if theirs is None:
        print("SKIP %s: kubectl is not installed: its render not compared" % name)
    else:
        check(M.canonical(theirs) == M.canonical(M.render(name)), "%s: `kubectl kustomize` renders the same objects as the files" % name)


def check_labels(name, objs):
    for o in objs:
        what = "%s: %s/%s" % (name, o["kind"], o["metadata"]["name"])
        labels = o["metadata"].get("labels", {})
        check(all(labels.get(l) for l in LABELS), what + " has the app.kubernetes.io labels")
        t = M.pod_template(o)
        if t is not None and o["kind"] != "Pod":
            tl = t["metadata"].get("labels", {})
            check(all(tl.get(l) for l in LABELS), what + ": its pod template has the app.kubernetes.io labels")
            sel = o["spec"].get("selector", {}).get("matchLabels", {})
            check(sel and all(tl.get(k) == v for k, v in sel.items()), what + ": selector within the template's labels")
            if "app.kubernetes.io/version" in labels:
                tags = {M.image_name(c["image"])[1] for _, c in M.containers(t["spec"]) if M.image_name(c["image"])[0].startswith("firstpass-")}
                check(tags <= {labels["app.kubernetes.io/version"]}, what + ": app.kubernetes.io/version is its firstpass image's tag")
    templates = [M.pod_template(o)["metadata"].get("labels", {}) for o in objs if M.pod_template(o) is not None]
    for s in (o for o in objs if o["kind"] == "Service"):
        sel = s["spec"]["selector"]
        check(any(all(t.get(k) == v for k, v in sel.items()) for t in templates),
              "%s: Service %s selects a workload of its set" % (name, s["metadata"]["name"]))
    for p in (o for o in objs if o["kind"] == "PodDisruptionBudget"):
        sel = p["spec"]["selector"]["matchLabels"]
        check(any(all(t.get(k) == v for k, v in sel.items()) for t in templates),
              "%s: PodDisruptionBudget %s selects a workload of its set" % (name, p["metadata"]["name"]))


def check_pod(name, o, server_env, secrets):
    what = "%s: %s/%s" % (name, o["kind"], o["metadata"]["name"])
    spec = M.pod_template(o)["spec"]
    sc = spec.get("securityContext", {})
    check(sc.get("runAsNonRoot") is True, what + ": runAsNonRoot")
    check(isinstance(sc.get("runAsUser"), int) and sc["runAsUser"] > 0 and isinstance(sc.get("runAsGroup"), int),
          what + ": a numeric non-root runAsUser and runAsGroup")
    check(sc.get("seccompProfile", {}).get("type") == "RuntimeDefault", what + ": seccompProfile RuntimeDefault")
    check(not any(spec.get(k) for k in ("hostNetwork", "hostPID", "hostIPC")), what + ": no host namespaces")
    check(spec.get("enableServiceLinks") is False, what + ": enableServiceLinks false (no FIRSTPASS_PORT=tcp://... from a Service)")
    check(spec.get("automountServiceAccountToken") is False, what + ": no service account token (it talks to no API server)")
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    for v in vols.values():
        t = volume_type(v)
        ok = t in RESTRICTED_VOLUMES or (t == "hostPath" and name in HOSTPATH_SETS)
        check(ok, what + ": volume %s is %s%s" % (v["name"], t, "" if t in RESTRICTED_VOLUMES else " (allowed in this set only)"))
    mounted = set()
    for kind, c in M.containers(spec):
        cw = "%s %s %s" % (what, kind, c["name"])
        csc = c.get("securityContext", {})
        check(csc.get("allowPrivilegeEscalation") is False, cw + ": allowPrivilegeEscalation false")
        check(csc.get("readOnlyRootFilesystem") is True, cw + ": readOnlyRootFilesystem")
        caps = csc.get("capabilities", {})
        check(caps.get("drop") == ["ALL"] and not caps.get("add"), cw + ": capabilities drop ALL, add none")
        check(not csc.get("privileged") and csc.get("runAsUser", 1) > 0, cw + ": not privileged, not root")
        res = c.get("resources", {})
        check(res.get("requests", {}).get("cpu") and res.get("requests", {}).get("memory") and res.get("limits", {}).get("memory"),
              cw + ": cpu and memory requests, a memory limit")
        mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
        check(all(m["name"] in vols for m in mounts.values()), cw + ": every mount names a volume of the pod")
        mounted |= {m["name"] for m in mounts.values()}
        tmp = mounts.get("/tmp")
        check(tmp is not None and not tmp.get("readOnly") and volume_type(vols.get(tmp["name"], {"name": "", "?": 0})) == "emptyDir",
              cw + ": an emptyDir on /tmp (the root file system is read-only)")
        live, ready = c.get("livenessProbe"), c.get("readinessProbe")
        check(live is not None, cw + ": a liveness probe")
        if c.get("ports"):
            check(ready is not None, cw + ": a readiness probe (it has a port)")
        args = " ".join(c.get("command", []) + c.get("args", []))
        check(not re.search(r"--token\b|--db\b|password|PGPASSWORD", args, re.I) and not PASSWORD_IN_URI.search(args),
              cw + ": no secret on the command line")
        for e in c.get("env", []):
            v = e.get("value", "")
            check(not PASSWORD_IN_URI.search(v) and not (re.search(r"PASSWORD|TOKEN|SECRET", e["name"]) and "value" in e),
                  cw + ": env %s holds no secret" % e["name"])
            ref = e.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                check(ref["key"] in secrets.get(ref["name"], ()), cw + ": env %s from Secret %s key %s of the set" % (e["name"], ref["name"], ref["key"]))
        image = M.image_name(c["image"])[0]
        if image == "firstpass-server":
            check(live and live.get("httpGet", {}).get("path") == "/livez" and ready and ready.get("httpGet", {}).get("path") == "/readyz",
                  cw + ": liveness /livez (the process), readiness /readyz (the database): separate endpoints")
            check(c.get("startupProbe", {}).get("httpGet", {}).get("path") == "/livez", cw + ": a startup probe on /livez (a migration runs before it listens)")
            check(spec.get("terminationGracePeriodSeconds", 30) >= 60, cw + ": terminationGracePeriodSeconds >= 60 (uploads in flight finish)")
            check(M.env_value(c, "FIRSTPASS_PORT") is not None, cw + ": FIRSTPASS_PORT set in its env")
            if server_env is not None:
                names = [n for n in M.env_names(c) if n.startswith("FIRSTPASS_")]
                check(set(names) <= server_env, cw + ": its FIRSTPASS_* variables are ones --help lists: %s" % sorted(set(names) - server_env))
            check(not c.get("command") and not [a for a in c.get("args", []) if a.startswith("-")],
                  cw + ": configured by the environment (no flags)")
        if image == "firstpass-agent":
            names = {n for n in M.env_names(c) if n.startswith("FIRSTPASS_")}
            check(names <= AGENT_ENV, cw + ": its FIRSTPASS_* variables are the agent's: %s" % sorted(names - AGENT_ENV))
    check(set(vols) <= mounted, what + ": every volume is mounted: %s" % sorted(set(vols) - mounted))


def servers(objs):
    """(workload, container) of each firstpass-server container in objs."""
    out = []
    for o in objs:
        t = M.pod_template(o)
        if t is not None:
            out += [(o, c) for _, c in M.containers(t["spec"]) if M.image_name(c["image"])[0] == "firstpass-server"]
    return out


def agent_of(objs):
    for o in objs:
        t = M.pod_template(o)
        if t is not None:
            for _, c in M.containers(t["spec"]):
                if M.image_name(c["image"])[0] == "firstpass-agent":
                    return o, t["spec"], c
    return None, None, None


def flag(args, name):
    return args[args.index(name) + 1] if name in args else None


def check_sqlite(objs):
    sv = servers(objs)
    if not check(len(sv) == 1, "sqlite: one firstpass-server workload"):
        return
    o, c = sv[0]
    spec = o["spec"]
    check(o["kind"] == "Deployment" and spec.get("replicas") == 1, "sqlite: a Deployment of one replica (one server per SQLite file)")
    check(spec.get("strategy", {}).get("type") == "Recreate", "sqlite: strategy Recreate (the old pod lets go of the file first)")
    db = M.env_value(c, "FIRSTPASS_DB") or ""
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in o["spec"]["template"]["spec"]["volumes"]}
    claims = {p["metadata"]["name"]: p for p in objs if p["kind"] == "PersistentVolumeClaim"}
    vol = vols.get(mounts.get(os.path.dirname(db)), {})
    claim = claims.get(vol.get("persistentVolumeClaim", {}).get("claimName"), {})
    check(db.startswith("/") and claim and claim["spec"]["accessModes"] == ["ReadWriteOnce"],
          "sqlite: FIRSTPASS_DB (%s) on a ReadWriteOnce PersistentVolumeClaim of the set" % db)


def check_postgresql(objs):
    sv = servers(objs)
    if not check(len(sv) == 1, "postgresql: one firstpass-server workload"):
        return
    o, c = sv[0]
    spec = o["spec"]
    check(o["kind"] == "Deployment" and spec.get("replicas", 1) >= 2, "postgresql: a Deployment of N >= 2 replicas")
    ru = spec.get("strategy", {}).get("rollingUpdate", {})
    check(spec.get("strategy", {}).get("type") == "RollingUpdate" and ru.get("maxUnavailable") == 0,
          "postgresql: a rolling update that keeps every replica until its successor is ready")
    db = M.env_value(c, "FIRSTPASS_DB") or ""
    u = urlparse(db)
    check(u.scheme in ("postgresql", "postgres") and u.password is None, "postgresql: FIRSTPASS_DB a postgresql:// URI without a password")
    ref = next((e.get("valueFrom", {}).get("secretKeyRef") for e in c.get("env", []) if e["name"] == "PGPASSWORD"), None)
    check(ref is not None, "postgresql: PGPASSWORD from a Secret (libpq reads it)")
    check(not any(p["kind"] == "PersistentVolumeClaim" for p in objs), "postgresql: the replicas keep nothing on disk (no claim)")
    check(any(p["kind"] == "PodDisruptionBudget" for p in objs), "postgresql: a PodDisruptionBudget")


def check_agent(name, objs, server_services):
    o, spec, c = agent_of(objs)
    if not check(c is not None, "%s: a firstpass-agent container" % name):
        return None
    args = c.get("args", []) + c.get("command", [])
    watch = flag(args, "--watch") or ""
    health = flag(args, "--health-file") or ""
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    amounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    check(health.startswith("/tmp/") and health in " ".join(c.get("livenessProbe", {}).get("exec", {}).get("command", [])),
          "%s: --health-file on /tmp, read by the liveness probe" % name)
    srv = urlparse(M.env_value(c, "FIRSTPASS_SERVER") or "")
    check(srv.hostname in server_services, "%s: FIRSTPASS_SERVER (%s) is a Service of the server sets" % (name, srv.geturl()))
    return o, spec, c, args, watch, vols, amounts


def check_serving(objs, server_services):
    got = check_agent("serving", objs, server_services)
    if not got:
        return
    o, spec, c, args, watch, vols, amounts = got
    engines = [e for e in spec["containers"] if e is not c]
    shared = amounts.get(watch)
    check(shared and volume_type(vols[shared]) == "emptyDir" and
          any(m["name"] == shared for e in engines for m in e.get("volumeMounts", [])),
          "serving: the agent watches (%s) an emptyDir the engine mounts too" % watch)
    env_dirs = {e2.get("value") for e in engines for e2 in e.get("env", []) if e2["name"].endswith("_PROFILER_DIR")}
    check(env_dirs and all(d in {m["mountPath"] for e in engines for m in e.get("volumeMounts", []) if m["name"] == shared} for d in env_dirs),
          "serving: the engine's profiler directory is that volume")
    target = flag(args, "--target") or ""
    check(urlparse(target.split("=", 1)[-1].split(",")[0]).hostname == "127.0.0.1", "serving: --target reaches the engine on 127.0.0.1 (same pod)")
    state = amounts.get(os.path.dirname(M.env_value(c, "FIRSTPASS_STATE") or "/var/lib/firstpass/watch.state"))
    check(state is not None and state != shared, "serving: the agent's state on a volume of its own")


def check_node_agent(objs, server_services):
    got = check_agent("node-agent", objs, server_services)
    if not got:
        return
    o, spec, c, args, watch, vols, amounts = got
    check(o["kind"] == "DaemonSet", "node-agent: a DaemonSet")
    base = watch.split("*")[0].rstrip("/") or "/"
    tv = vols.get(amounts.get(base), {})
    check(volume_type(tv) == "hostPath" if tv else False, "node-agent: --watch %s is under a hostPath mount" % watch)
    sv = vols.get(amounts.get(os.path.dirname(M.env_value(c, "FIRSTPASS_STATE") or "")), {})
    check(sv and volume_type(sv) == "hostPath", "node-agent: FIRSTPASS_STATE on the node (a new pod sends nothing twice)")
    nodes = [e["name"] for e in c.get("env", []) if e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName"]
    check(nodes and flag(args, "--host") == "$(%s)" % nodes[0] and flag(args, "--agent") == "$(%s)" % nodes[0],
          "node-agent: --host and --agent are the node's name (stable file keys and registration)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default=os.path.join(M.ROOT, "build", "firstpass-server"))
    a = ap.parse_args()
    server_env = server_env_names(a.server)
    if server_env is None:
        print("SKIP the FIRSTPASS_* names against --help: no server binary at %s" % a.server)
    names = M.sets()
    check({"sqlite", "postgresql", "serving", "node-agent"} <= set(names), "deploy/kubernetes has the sets sqlite, postgresql, serving, node-agent: %s" % names)
    rendered = {}
    for n in names:
        check_files(n)
        try:
            rendered[n] = M.render(n)
        except ValueError as e:
            check(False, str(e))
    server_services = {o["metadata"]["name"] for n in ("sqlite", "postgresql") for o in rendered.get(n, []) if o["kind"] == "Service"}
    for n, objs in rendered.items():
        check_labels(n, objs)
        secrets = {o["metadata"]["name"]: set(o.get("stringData", {})) | set(o.get("data", {})) for o in objs if o["kind"] == "Secret"}
        for o in objs:
            if M.pod_template(o) is not None:
                check_pod(n, o, server_env, secrets)
    check_sqlite(rendered.get("sqlite", []))
    check_postgresql(rendered.get("postgresql", []))
    check_serving(rendered.get("serving", []), server_services)
    check_node_agent(rendered.get("node-agent", []), server_services)
    print("kubernetes manifests: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
