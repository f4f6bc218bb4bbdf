#!/usr/bin/python3
"""record_torch.py [OUTDIR] | --gloo OUTDIR SLOW_RANK STEPS: real traces from Debian's python3-torch (1.13, CPU only, the
legacy autograd profiler: export_chrome_trace writes a bare JSON array), for the categories
a CPU can produce. Writes, gzip'd (mtime 0), into OUTDIR (default tests/triage/torch/):

  python_overhead.json.gz   a token loop: `prefill` once, then `decode_step` x24, each a few
                            small aten ops around ~1 ms of pure-Python sampling (a top-k and
                            a repetition penalty written as Python loops over a list)
  gloo_rank0.json.gz        2-process torch.distributed job, gloo backend: each step a
  gloo_rank1.json.gz        little compute then all_reduce of 8 MB; rank 1 does ~25 ms more
                            compute per step on purpose (the straggler), so rank 0 waits in
                            the collective; all_reduce of 32 MB dominates both ranks. Both ranks are kept (jobs / straggler feature).
  gc_collect.json.gz        a CPU training loop, 24 steps, whose manual gc.collect() (Megatron's
                            --manual-gc-interval) runs in one step: ~0.3 s untraced
  tokenizer_loop.json.gz    a CPU generation loop for 16 sequences detokenizing incrementally
                            with a pure-Python tokenizer (tokenizer.py) inside record_function
                            ("detokenize"), 24 steps, with_stack=True
  threads_1.json.gz         an MLP forward (aten::addmm) with torch.set_num_threads(1)
  threads_all.json.gz       the same with torch.set_num_threads(os.cpu_count())
  outside_steps.json.gz     a CPU fine-tuning loop, 10 steps marked by its own ProfilerStep#N
                            ranges, then a torch.save checkpoint after the last step, inside the
                            profile: the checkpoint's time lies outside every step (issue 48)

and beside each trace NAME.key_averages.json: prof.key_averages() as torch computes it
(key, count, cpu_time_total_us, self_cpu_time_total_us), an oracle for the operator table.

The timings are real, so every run writes different numbers; the committed files are one
run (README.md: the expected answers were checked on them with oracle.py)."""
import gc
import gzip
import json
import os
import random
import socket
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import ProfilerActivity, profile, record_function

HERE = os.path.dirname(os.path.abspath(__file__))


def save(prof, outdir, name):
    tmp = tempfile.mkdtemp(prefix="fp-triage-rec-")
    path = os.path.join(tmp, "trace.json")
    prof.export_chrome_trace(path)
    with open(path, "rb") as f:
        raw = f.read()
    out = os.path.join(outdir, name + ".json.gz")
    with open(out, "wb") as f:
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=9) as g:
            g.write(raw)
    rows = [{"key": e.key, "count": e.count, "cpu_time_total_us": e.cpu_time_total,
             "self_cpu_time_total_us": e.self_cpu_time_total} for e in prof.key_averages()]
    rows.sort(key=lambda r: -r["self_cpu_time_total_us"])
    with open(os.path.join(outdir, name + ".key_averages.json"), "w") as f:
        json.dump({"torch": torch.__version__, "rows": rows}, f, indent=1)
        f.write("\n")
    os.remove(path)
    os.rmdir(tmp)
    return out


# ---------------------------------------------------------------- (a) Python overhead

def sample_top_k(logits, k, history, rng):
    """Sampling written in Python: the host work between the small ops."""
    vals = logits.tolist()
    for tok in history[-32:]:                       # repetition penalty, a loop per token
        for _ in range(300):
            vals[tok] = vals[tok] * 0.999
    order = sorted(range(len(vals)), key=lambda i: -vals[i])[:k]
    acc = 0.0
    weights = []
    for i in order:
        w = 1.0 / (1.0 + abs(vals[i]))
        for _ in range(400):                        # a softmax by hand, badly
            w = (w * 1.0001) % 7.0
        acc += w
        weights.append(acc)
    x = rng.random() * acc
    for i, w in zip(order, weights):
        if x <= w:
            return i
    return order[-1]


def record_python_overhead(outdir):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rng = random.Random(0)
    vocab, dim = 512, 64
    emb = torch.nn.Embedding(vocab, dim)
    layers = torch.nn.Sequential(torch.nn.Linear(dim, dim), torch.nn.GELU(), torch.nn.Linear(dim, dim))
    head = torch.nn.Linear(dim, vocab)
    prompt = torch.randint(0, vocab, (16,))
    history = prompt.tolist()
    with torch.no_grad():
        layers(emb(prompt))                         # first calls (lazy init) unprofiled
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            with record_function("prefill"):
                h = layers(emb(prompt))
                logits = head(h[-1])
                tok = sample_top_k(logits, 40, history, rng)
            for _ in range(24):
                with record_function("decode_step"):
                    h = layers(emb(torch.tensor([tok])))
                    logits = head(h[-1])
                    tok = sample_top_k(logits, 40, history, rng)
                    history.append(tok)
    return save(prof, outdir, "python_overhead")


# ---------------------------------------------------------------- (b) gloo collectives

def gloo_worker(rank, port, outdir, steps, slow=1):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=2)
    torch.manual_seed(rank)
    grad = torch.randn(1 << 23)                     # 32 MB of fp32 "gradients"
    w = torch.randn(128, 128)
    dist.all_reduce(grad)                           # warm the connections up, unprofiled
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            with record_function("train_step"):
                with record_function("forward_backward"):
                    x = torch.randn(64, 128)
                    for _ in range(4):
                        x = torch.tanh(x @ w)
                    if rank == slow:                # the straggler: ~25 ms more compute
                        with record_function("slow_rank_extra_work"):
                            y = torch.randn(128, 128)
                            for _ in range(40):
                                y = torch.tanh(y @ y) * 0.5
                dist.all_reduce(grad)
                grad.mul_(0.5)
    save(prof, outdir, "gloo_rank%d" % rank)
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def record_gloo(outdir, steps=6, slow=1):
    ctx = mp.get_context("spawn")
    port = free_port()
    ps = [ctx.Process(target=gloo_worker, args=(r, port, outdir, steps, slow)) for r in range(2)]
    for p in ps:
        p.start()
    for p in ps:
        p.join(300)
        if p.exitcode != 0:
            raise SystemExit("record_torch: a gloo rank failed (exit %s)" % p.exitcode)


# ---------------------------------------------------------------- (c) a garbage collection in one step

def record_steps(outdir, name, steps, body, with_stack=False):
    """Record `steps` steps of body(i) with ProfilerStep#N ranges (a schedule: one warm-up
    step, which the legacy profiler records too, then the active ones, once)."""
    out = {}

    def ready(p):
        out["path"] = save(p, outdir, name)
    sch = torch.profiler.schedule(wait=0, warmup=1, active=steps - 1, repeat=1)
    with profile(activities=[ProfilerActivity.CPU], schedule=sch, on_trace_ready=ready, with_stack=with_stack) as prof:
        for i in range(steps):
            body(i)
            prof.step()
    return out["path"]


def record_gc_collect(outdir, steps=24):
    """A CPU training loop (an MLP, SGD, 1 thread) with Megatron's manual GC
    (`--manual-gc --manual-gc-interval`): in one step the loop calls gc.collect() over a
    Python heap of ~300k live containers (metadata a data pipeline keeps), ~0.3 s. torch
    1.13 without Kineto writes no python_function events: the collection is the step's own
    (untraced) time."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    heap = [[i, str(i), {"k": i}] for i in range(300000)]   # noqa: F841 (kept alive: the collector walks it)
    gc.collect()
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.GELU(), torch.nn.Linear(256, 128))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 128), torch.randn(64, 128)

    def step(i):
        for _ in range(1):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
        loss.item()
        if i == 15:                                  # iteration % manual_gc_interval == 0
            gc.collect()
    return record_steps(outdir, "gc_collect", steps, step)


# ---------------------------------------------------------------- (d) a tokenizer in the token loop

def record_tokenizer(outdir, steps=24):
    """A CPU generation loop for 16 sequences that streams text: each step runs the model,
    takes the next tokens, then detokenizes each sequence with a pure-Python SentencePiece-
    style tokenizer (tokenizer.py: LlamaTokenizer.decode of the sequence's token cache, as
    transformers' TextStreamer does, and sends the new suffix). The loop annotates
    its phases with record_function (forward / detokenize). Recorded with with_stack=True;
    torch 1.13 without Kineto keeps the stacks for key_averages(group_by_stack_n) only and
    writes no python_function events, so the tokenizer reaches the trace through the loop's
    own `detokenize` range."""
    sys.path.insert(0, HERE)
    from tokenizer import LlamaTokenizer
    torch.manual_seed(0)
    torch.set_num_threads(1)
    tok = LlamaTokenizer(vocab_size=1024, seed=0)
    vocab, dim, batch = 1024, 64, 16
    emb = torch.nn.Embedding(vocab, dim)
    body = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))
    head = torch.nn.Linear(dim, vocab)
    seqs = [list(range(1 + b, 300 + b)) for b in range(batch)]
    printed = [len(tok.decode(s)) for s in seqs]
    cur = torch.tensor([s[-1] for s in seqs])

    def step(i):
        nonlocal cur
        with torch.no_grad():
            with record_function("forward"):
                h = emb(cur)
                for _ in range(2):
                    h = h + body(h)
                nxt = head(h).argmax(-1)
        new = nxt.tolist()
        with record_function("detokenize"):
            for b, t in enumerate(new):
                seqs[b].append(t)
                text = tok.decode(seqs[b])              # the whole cache, as transformers' TextStreamer
                if not text.endswith("\ufffd"):
                    printed[b] = len(text)              # text[printed:] goes to the client
        cur = nxt
    return record_steps(outdir, "tokenizer_loop", steps, step, with_stack=True)


# ---------------------------------------------------------------- (e) one CPU thread against many

def record_threads(outdir, threads, name, steps=12):
    """An MLP's forward on the CPU (batch 64, 512 -> 1024 -> 512, fp32): aten::addmm holds
    the time; torch.set_num_threads(threads): 1 (one thread while the host has more cores)
    or os.cpu_count()."""
    torch.manual_seed(0)
    torch.set_num_threads(threads)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 512))
    x = torch.randn(64, 512)
    with torch.no_grad():
        model(x)

        def step(i):
            for _ in range(2):
                model(x)
        path = record_steps(outdir, name, steps, step)
    torch.set_num_threads(1)
    return path


# ---------------------------------------------------------------- (f) work outside the steps (issue 48)

def record_outside_steps(outdir, steps=10):
    """A CPU fine-tuning loop (an MLP, AdamW, 1 thread) whose steps are marked by the script's
    own record_function("ProfilerStep#N") ranges (the profiler runs without a schedule), and
    which then saves a checkpoint inside the profiled window but after the last step: a
    record_function("save_checkpoint") around torch.save of the model and optimizer state into
    memory, after the script's pure-Python bookkeeping of the state dict (renamed keys, JSON
    metadata rebuilt per tensor): several steps' worth of host time. The checkpoint's time lies outside every step:
    it has no per-step figure (issue 48 item 5)."""
    import io
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64),
                                torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x, y = torch.randn(16, 64), torch.randn(16, 64)
    for _ in range(2):                                   # warm-up, unprofiled
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(steps):
            with record_function("ProfilerStep#%d" % (i + 1)):
                opt.zero_grad()
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                opt.step()
                loss.item()
        with record_function("save_checkpoint"):
            state = {"model": {k.replace("module.", ""): v for k, v in model.state_dict().items()},
                     "optimizer": opt.state_dict(), "step": steps}
            meta = [{"name": k, "shape": list(v.shape), "sum": float(v.double().sum())} for k, v in state["model"].items()]
            for _ in range(20000):                       # the script's own bookkeeping (JSON-ready metadata)
                meta = [dict(m, tag=str(m["shape"])) for m in meta]
            buf = io.BytesIO()
            torch.save(state, buf)
    return save(prof, outdir, "outside_steps")


def main(argv):
    if len(argv) >= 2 and argv[1] == "--gloo":  # --gloo OUTDIR SLOW_RANK STEPS: the job only (tests/integration/test_jobs.py)
        record_gloo(argv[2], steps=int(argv[4]), slow=int(argv[3]))
        return 0
    outdir = argv[1] if len(argv) > 1 else os.path.join(HERE, "torch")
    os.makedirs(outdir, exist_ok=True)
    print(record_python_overhead(outdir))
    record_gloo(outdir)
    for r in range(2):
        print(os.path.join(outdir, "gloo_rank%d.json.gz" % r))
    print(record_gc_collect(outdir))
    print(record_tokenizer(outdir))
    print(record_threads(outdir, 1, "threads_1"))
    print(record_threads(outdir, os.cpu_count() or 1, "threads_all"))
    print(record_outside_steps(outdir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
