"""manifests.py: reads deploy/kubernetes/ as `kubectl apply -k` would (issue 53).

Each directory there is a kustomization that lists plain resource files and uses no
transformer, so rendering it is reading those files in order: render() does exactly that and
refuses any other kustomization key, and check.py compares the result with `kubectl
kustomize` where kubectl is installed. check.py (static rules) and play.py (podman kube play)
both read the manifests through here. Python's yaml (python3-yaml) only."""
import json
import os
import subprocess

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KDIR = os.path.join(ROOT, "deploy", "kubernetes")
# the keys a kustomization here may have: resources and nothing that transforms them
PLAIN_KEYS = {"apiVersion", "kind", "resources"}
WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "Pod")


def sets():
    """The kustomization directories under deploy/kubernetes, sorted: [name]."""
    return sorted(d for d in os.listdir(KDIR) if os.path.isfile(os.path.join(KDIR, d, "kustomization.yaml")))


def kustomization(name):
    with open(os.path.join(KDIR, name, "kustomization.yaml")) as f:
        return yaml.safe_load(f)


def render(name):
    """The objects `kubectl kustomize deploy/kubernetes/NAME` gives: its resources' documents
    in order. ValueError when the kustomization would transform them."""
    k = kustomization(name)
    extra = set(k) - PLAIN_KEYS
    if extra:
        raise ValueError("%s/kustomization.yaml has %s: only plain resources are rendered here" % (name, sorted(extra)))
    docs = []
    for r in k.get("resources", []):
        with open(os.path.join(KDIR, name, r)) as f:
            docs += [d for d in yaml.safe_load_all(f) if d]
    return docs


def kubectl_render(name):
    """`kubectl kustomize` of the set, or None without kubectl."""
    try:
        out = subprocess.run(["kubectl", "kustomize", os.path.join(KDIR, name)], capture_output=True, text=True, timeout=120)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return None
    if out.returncode:
        raise ValueError("kubectl kustomize %s: %s" % (name, out.stderr.strip()))
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def canonical(docs):
    """docs as a sorted list of JSON texts: equal for the same objects in any order."""
    return sorted(json.dumps(d, sort_keys=True) for d in docs)


def pod_template(obj):
    """The pod (metadata, spec) a workload runs, or None."""
    if obj.get("kind") == "Pod":
        return obj
    if obj.get("kind") in WORKLOADS:
        t = obj["spec"].get("jobTemplate", {}).get("spec", obj["spec"]).get("template")
        return t
    return None


def containers(spec):
    """(kind, container) for each init container and container of a pod spec."""
    return [("initContainer", c) for c in spec.get("initContainers", [])] + [("container", c) for c in spec.get("containers", [])]


def image_name(image):
    """'registry/x/firstpass-server:0.1.0' -> ('firstpass-server', '0.1.0')."""
    last = image.rsplit("/", 1)[-1]
    name, _, tag = last.partition(":")
    return name, tag


def env_value(container, name):
    """A literal env value of the container, or None (absent, or valueFrom)."""
    for e in container.get("env", []):
        if e["name"] == name:
            return e.get("value")
    return None


def env_names(container):
    return [e["name"] for e in container.get("env", [])]
