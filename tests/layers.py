#!/usr/bin/env python3
"""layers.py [CC]: fails when server/ breaks its layering (docs/architecture.md).

server/ is five folders, each a layer; a file may include headers of its own layer and of
the layers below it, never above:

    lib        nothing of the project (buffers, codecs, clocks, names)
    analysis   lib, api/                      pure computation over an upload's scratch DB
    store      lib, api/                      the only SQL on the main database
    ingest     lib, analysis, store, api/     the importer: bytes in, a committed session out
    http       all of the above               MHD, routes, replies, the process

analysis and store sit side by side: neither includes the other. api/ (the wire contract,
shared with the collector) includes nothing of server/.

Two checks:
  1. layers: every project header each .c pulls in, directly or through other headers (the
     compiler's -MM output, so a header that includes another counts), is in an allowed layer;
  2. no circles: in the graph "module A includes a header of module B" (a module is a
     .c/.h pair, e.g. http/routes), there is no cycle, so calls run one way.
Exit 0 when both hold; 1 and one line per violation otherwise. Run by `make test`."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORDER = {"api": 0, "lib": 0, "analysis": 1, "store": 1, "ingest": 2, "http": 3}
ALLOWED = {
    "api": {"api"},
    "lib": {"lib"},
    "analysis": {"lib", "analysis", "api"},
    "store": {"lib", "store", "api"},
    "ingest": {"lib", "analysis", "store", "ingest", "api"},
    "http": {"lib", "analysis", "store", "ingest", "http", "api"},
}


def layer_of(path):
    rel = os.path.relpath(path, ROOT)
    parts = rel.split(os.sep)
    if parts[0] == "api":
        return "api"
    if parts[0] == "server" and len(parts) == 3:
        return parts[1]
    if parts[0] == "server":
        return "?"  # a file straight in server/: not in any layer
    return None  # system or generated header


def sources():
    out = []
    for d in ["api"] + ["server/" + l for l in ORDER if l != "api"]:
        full = os.path.join(ROOT, d)
        for f in sorted(os.listdir(full)):
            if f.endswith((".c", ".h")):
                out.append(os.path.join(full, f))
    stray = [f for f in os.listdir(os.path.join(ROOT, "server")) if f.endswith((".c", ".h"))]
    return out, stray


def deps(cc, path, flags):
    r = subprocess.run([cc, "-MM", "-MG"] + flags + [path], capture_output=True, text=True, cwd=ROOT)
    if r.returncode:
        sys.exit("layers: %s -MM %s failed:\n%s" % (cc, path, r.stderr))
    text = r.stdout.replace("\\\n", " ")
    items = text.split(":", 1)[1].split()
    return [os.path.normpath(os.path.join(ROOT, i)) for i in items[1:]]


def direct(path):
    inc = []
    with open(path) as f:
        for line in f:
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if m:
                inc.append(m.group(1))
    return inc


def module(path):
    rel = os.path.relpath(path, ROOT)
    return os.path.splitext(rel)[0]


def resolve(name, here):
    for base in (os.path.join(ROOT, "server"), os.path.join(ROOT, "api"), os.path.dirname(here)):
        p = os.path.normpath(os.path.join(base, name))
        if os.path.exists(p):
            return p
    return None


def cycles(graph):
    found, state, stack = [], {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                found.append(stack[stack.index(m):] + [m])
            elif not state.get(m):
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if not state.get(n):
            visit(n)
    return found


def main():
    cc = sys.argv[1] if len(sys.argv) > 1 else "cc"
    flags = ["-std=c11", "-D_GNU_SOURCE", "-Iapi", "-Iserver", "-Ibuild/gen"]
    flags += subprocess.run(["pkg-config", "--cflags", "libmicrohttpd", "jansson", "sqlite3", "yajl"],
                            capture_output=True, text=True).stdout.split()
    files, stray = sources()
    bad = ["server/%s: not in a layer folder (lib, analysis, store, ingest, http)" % f for f in stray]
    graph = {}
    for f in files:
        me = layer_of(f)
        if f.endswith(".c"):
            for d in deps(cc, f, flags):
                l = layer_of(d)
                if l is None:
                    continue
                if l == "?" or l not in ALLOWED[me]:
                    bad.append("%s (%s) includes %s (%s)" % (os.path.relpath(f, ROOT), me, os.path.relpath(d, ROOT), l))
        for inc in direct(f):
            p = resolve(inc, f)
            if p and module(p) != module(f):
                graph.setdefault(module(f), set()).add(module(p))
    for c in cycles(graph):
        bad.append("include circle: " + " -> ".join(c))
    for b in sorted(set(bad)):
        print("layers: " + b)
    n = len(files)
    if bad:
        print("layers: %d violation(s) in %d files" % (len(set(bad)), n))
        return 1
    print("layers: %d files, every include runs down the layers, no include circle" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
