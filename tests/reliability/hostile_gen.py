#!/usr/bin/env python3
"""hostile_gen.py KIND N OUT: writes one hostile upload (gzip unless the name says .json).

Small files that cost a server a lot when nothing bounds them (issue 22). Every body is
generated here, streamed through zlib, so the test needs no fixture files.
  tids N        N events, each on a thread of its own (pid 1, tid i)
  pids N        N events, each in a process of its own
  longkey MIB   a top-level key of MIB MiB ("k" repeated), then a valid traceEvents
  longstr MIB   a top-level string value of MIB MiB
  manykeys N    N small top-level keys before traceEvents
  tracks N      N threads with 2 events each (a trace for /timeline)
  longnames N   N distinct operator names of 1 MiB each, one event each
  bignames N    N events sharing one 1 MiB name
  distinct N    N events with distinct 200-byte names (each upload stores ~N x 0.5 KB)
  sharedtext N  N operators (distinct names) sharing one 1 MiB "Input Dims", and N kernels
                sharing one 1 MiB "grid": 2 MiB of distinct text named by 4N rows
  shapes N      N operators of one name, each with distinct "Input Dims" ([[i, 3], [3, 4]])
  samedims N    N operators of one name sharing one "Input Dims" (shapes' baseline)
  names N       N operators, each with a distinct name ("op0000001"), no shapes
  pairs N       N operators: 1,000 names x N/1,000 distinct "Input Dims", each pair once (few
                strings, N operator rows by name and shapes)
  repeat N      one small event N times (a gzip bomb of valid events, ~1000:1)
  steps N       N ranges named ProfilerStep#1 one after another on one thread: N steps of
                one name, which --max-distinct does not count (the step breakdown, issue 50)
  gpusteps N    the same, each step holding an operator that launches a kernel
  toplevel N    a step holding N disjoint top-level operators on one thread (the step
                breakdown's host ranges, 16 bytes each)
  form MIB      a multipart/form-data body (boundary fpXX, never gzip'd) whose one file part
                is MIB MiB of near-boundaries: "\r\n--fpX", the delimiter but its last byte
  preamble N    a multipart/form-data body (boundary fpXX) whose preamble, before its first
                boundary, is N bytes of '-', then one valid file part
  nsysstreams N an Nsight Systems SQLite export (not gzip'd) of N kernels, each on a GPU
                stream of its own (the columns server/ingest/nsys.c reads, as nsys 2024 writes them)
"""
import itertools
import sys
import zlib


def events(parts):
    yield b'{"traceEvents":['
    first = True
    for p in parts:
        if not first:
            yield b','
        first = False
        yield p
    yield b']}'


def ev(name, pid, tid, ts, dur=1, cat="cpu_op"):
    return ('{"ph":"X","cat":"%s","name":"%s","pid":%s,"tid":%s,"ts":%d,"dur":%d}'
            % (cat, name, pid, tid, ts, dur)).encode()


def gen(kind, n):
    if kind == "tids":
        return events(ev("aten::mm", 1, i, i) for i in range(n))
    if kind == "pids":
        return events(ev("aten::mm", i, 1, i) for i in range(n))
    if kind == "tracks":
        return events(ev("aten::mm", 1, i // 2, i) for i in range(2 * n))
    if kind in ("longkey", "longstr"):
        def body():
            yield b'{"'
            if kind == "longstr":
                yield b'k":"'
            for _ in range(n):
                yield b'k' * (1 << 20)
            yield b'":1,' if kind == "longkey" else b'",'
            yield b'"traceEvents":[' + ev("aten::mm", 1, 1, 1) + b']}'
        return body()
    if kind == "manykeys":
        def body():
            yield b'{'
            for i in range(n):
                yield b'"k%d":1,' % i
            yield b'"traceEvents":[' + ev("aten::mm", 1, 1, 1) + b']}'
        return body()
    if kind == "longnames":
        return events(ev("%06d" % i + "n" * (1 << 20), 1, 1, i) for i in range(n))
    if kind == "bignames":
        big = "n" * (1 << 20)
        return events(ev(big, 1, 1, i) for i in range(n))
    if kind == "distinct":
        import os
        salt = os.urandom(4).hex()
        return events(ev(salt + "%08d" % i + "d" * 188, 1, 1, i) for i in range(n))
    if kind == "sharedtext":
        dims = ("[" + ",".join(["1"] * (1 << 19)) + "]").encode()  # 1 MiB
        def body():
            for i in range(n):
                yield (b'{"ph":"X","cat":"cpu_op","name":"op%d","pid":1,"tid":1,"ts":%d,"dur":1,"args":{"Input Dims":' % (i, i)
                       + dims + b'}}')
                yield (b'{"ph":"X","cat":"kernel","name":"k%d","pid":0,"tid":7,"ts":%d,"dur":1,'
                       b'"args":{"device":0,"stream":7,"grid":' % (i, i) + dims + b'}}')
        return events(body())
    if kind == "pairs":
        def body():
            for i in range(n):
                yield (b'{"ph":"X","cat":"cpu_op","name":"op%03d","pid":1,"tid":1,"ts":%d,"dur":1,'
                       b'"args":{"Input Dims":[[%d, 3]]}}' % (i % 1000, 2 * i, i // 1000))
        return events(body())
    if kind in ("shapes", "samedims", "names"):
        def body():
            for i in range(n):
                if kind == "names":
                    yield b'{"ph":"X","cat":"cpu_op","name":"op%07d","pid":1,"tid":1,"ts":%d,"dur":1}' % (i, 2 * i)
                else:
                    yield (b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":%d,"dur":1,'
                           b'"args":{"Input Dims":[[%d, 3], [3, 4]]}}' % (2 * i, i if kind == "shapes" else 7))
        return events(body())
    if kind == "toplevel":
        step = ev("ProfilerStep#1", 1, 1, 0, 3 * n + 10, "user_annotation")
        return events(itertools.chain([step], (ev("aten::add", 1, 2, 3 * i + 1) for i in range(n))))
    if kind in ("steps", "gpusteps"):
        def body():
            for i in range(n):
                t = 20 * i
                yield ev("ProfilerStep#1", 1, 1, t, 18, "user_annotation")
                if kind == "steps":
                    continue
                yield ev("aten::mm", 1, 1, t + 1, 10)
                yield (b'{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":%d,"dur":5,'
                       b'"args":{"correlation":%d}}' % (t + 2, i + 1))
                yield (b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":%d,"dur":3,'
                       b'"args":{"correlation":%d,"device":0,"stream":7}}' % (t + 8, i + 1))
        return events(body())
    if kind in ("opnames", "cpunames"):
        # n distinct cpu_op names, one call each; opnames: each launches a kernel, the GPU
        # idling between them, so every name labels a host-wait gap (idle.c, suspects.c)
        def body():
            for i in range(n):
                t = 20 * i
                yield ev("op%d" % i, 1, 1, t, 10)
                if kind == "opnames":
                    yield (b'{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":%d,"dur":5,'
                           b'"args":{"correlation":%d}}' % (t + 2, i + 1))
                    yield (b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":%d,"dur":3,'
                           b'"args":{"correlation":%d,"device":0,"stream":7}}' % (t + 8, i + 1))
        return events(body())
    if kind == "repeat":
        one = ev("aten::mm", 1, 1, 1)
        return events(one for _ in range(n))
    raise SystemExit("unknown kind " + kind)


def nsys(n, out):
    """An Nsight Systems export of n kernels, each on a stream of its own (the documented
    schema, tests/integration/nsys_schema.py, shared with test_nsys.py)."""
    import os
    import sqlite3
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
    from nsys_schema import SCHEMA
    if os.path.exists(out):
        os.unlink(out)
    c = sqlite3.connect(out)
    c.executescript(SCHEMA + "INSERT INTO StringIds VALUES (1, 'k');")
    c.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL(start, end, deviceId, contextId, streamId, correlationId, demangledName,"
                  " shortName, registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory,"
                  " dynamicSharedMemory, localMemoryPerThread, gridId) VALUES (?,?,0,1,?,?,1,1,32,1,1,1,128,1,1,0,0,0,?)",
                  ((1000 * i, 1000 * i + 500, 7 + i, i + 1, i + 1) for i in range(n)))
    c.commit()
    c.close()


def form(mib, out):
    chunk = b"\r\n--fpX" * 1024
    with open(out, "wb") as f:
        f.write(b'--fpXX\r\nContent-Disposition: form-data; name="file"; filename="t.json"\r\n\r\n')
        for _ in range((mib << 20) // len(chunk)):
            f.write(chunk)
        f.write(b"\r\n--fpXX--\r\n")


def preamble(n, out):
    size = n
    trace = b'{"traceEvents":[' + ev("aten::mm", 1, 1, 1) + b']}'
    with open(out, "wb") as f:
        for _ in range(size // (1 << 20)):
            f.write(b"-" * (1 << 20))
        f.write(b"-" * (size % (1 << 20)))
        f.write(b'\r\n--fpXX\r\nContent-Disposition: form-data; name="file"; filename="t.json"\r\n\r\n' + trace +
                b"\r\n--fpXX--\r\n")


def main():
    kind, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if kind == "nsysstreams":
        return nsys(n, out)
    if kind == "form":
        return form(n, out)
    if kind == "preamble":
        return preamble(n, out)
    plain = out.endswith(".json")
    z = zlib.compressobj(6, zlib.DEFLATED, 31)
    with open(out, "wb") as f:
        for part in gen(kind, n):
            f.write(part if plain else z.compress(part))
        if not plain:
            f.write(z.flush())


if __name__ == "__main__":
    main()
