"""labels.py: session labels: checked as the server checks them, parsed from
FIRSTPASS_LABELS, and filled in from the running program (torch, GPU, host, torchrun).

The server's rules (docs/api.md, server/http.c, api/session.c): a label is `key:value`, split at
the first ':', so a key holds no ':'; the key is not empty; key and value are trimmed of
spaces, tabs and newlines; both are UTF-8 without NUL; at most 64 labels on an upload."""
import os
import socket
import sys

MAX_LABELS = 64
_SPACE = " \t\r\n"


def _text(x, what):
    """str(x) trimmed, checked to be UTF-8 without NUL; raises ValueError naming `what`."""
    s = str(x).strip(_SPACE)
    if "\0" in s:
        raise ValueError("%s %r holds a NUL character" % (what, s))
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("%s %r is not valid UTF-8 text" % (what, s)) from None
    return s


def check_label(key, value):
    """Returns (key, value) as the server will store them (str, trimmed). Raises ValueError for
    an empty key, a key with ':', or text that is not UTF-8 or holds a NUL."""
    k = _text(key, "label key")
    if not k:
        raise ValueError("a label key must not be empty")
    if ":" in k:
        raise ValueError("label key %r holds ':' (the server splits key:value at the first ':')" % k)
    return k, _text(value, "label %r value" % k)


def normalize(labels):
    """labels: None, a mapping {key: value}, or an iterable of "key:value" strings.
    Returns a new dict {key: value} of checked labels in the given order (a later duplicate
    key wins). Raises TypeError for another type, ValueError for a bad label or more than
    MAX_LABELS of them."""
    if labels is None:
        return {}
    if isinstance(labels, str):
        raise TypeError("labels must be a dict or a list of 'key:value' strings, not one string "
                        "(for 'k:v,k2:v2' use firstpass.labels.parse_spec)")
    if hasattr(labels, "items"):
        pairs = list(labels.items())
    else:
        pairs = []
        for kv in labels:
            if not isinstance(kv, str) or ":" not in kv:
                raise ValueError("label %r is not a 'key:value' string" % (kv,))
            pairs.append(tuple(kv.split(":", 1)))
    out = {}
    for k, v in pairs:
        k, v = check_label(k, v)
        out[k] = v
    if len(out) > MAX_LABELS:
        raise ValueError("%d labels; the server takes at most %d" % (len(out), MAX_LABELS))
    return out


def parse_spec(spec):
    """Parses FIRSTPASS_LABELS' form "k:v,k2:v2" (the collector's, docs/collector.md): entries
    split at ',', each at its first ':', so values may hold ':' but not ','. None or "" gives {}.
    Returns a dict; raises ValueError for an entry without ':' or with an empty key, or an empty
    entry (a trailing ',')."""
    if not spec:
        return {}
    out = {}
    for entry in spec.split(","):
        if ":" not in entry:
            raise ValueError("label %r is not key:value" % entry)
        k, v = check_label(*entry.split(":", 1))
        out[k] = v
    return out


def to_query(labels):
    """[("label", "k:v"), ...] for a request's query string."""
    return [("label", "%s:%s" % (k, v)) for k, v in labels.items()]


def _int_env(env, name):
    v = env.get(name, "").strip()
    return v if v.isdigit() else None


def auto_labels(environ=None, torch_module=None):
    """Labels known about the running program, each only where known:
    host (socket.gethostname()); torch (torch.__version__); cuda (torch.version.cuda) or rocm
    (torch.version.hip); gpu (the name of the current device, read only when the program has
    already initialised CUDA: this never initialises it); rank and world_size (from
    torch.distributed when it is initialised, else the RANK and WORLD_SIZE that torchrun sets);
    job (TORCHELASTIC_RUN_ID, unless empty or torchrun's default "none", which every job shares).

    torch is the one the program imported (sys.modules), never imported here; torch_module and
    environ replace it and os.environ (tests). Returns a dict of str; never raises: a probe that
    fails leaves its label out."""
    env = os.environ if environ is None else environ
    torch = torch_module if torch_module is not None else sys.modules.get("torch")
    out = {}
    try:
        out["host"] = socket.gethostname()
    except OSError:
        pass
    if torch is not None:
        _torch_labels(torch, out)
    if "rank" not in out and _int_env(env, "RANK") is not None:
        out["rank"] = _int_env(env, "RANK")
    if "world_size" not in out and _int_env(env, "WORLD_SIZE") is not None:
        out["world_size"] = _int_env(env, "WORLD_SIZE")
    job = env.get("TORCHELASTIC_RUN_ID", "").strip()
    if job and job != "none":
        out["job"] = job
    clean = {}
    for k, v in out.items():
        try:
            k, v = check_label(k, v)
        except ValueError:
            continue
        if v:
            clean[k] = v
    return clean


def _torch_labels(torch, out):
    """Adds torch, cuda/rocm, gpu, rank and world_size to out from the torch module; each probe
    may fail on its own (old or odd builds) and is then skipped."""
    try:
        out["torch"] = str(torch.__version__)
    except Exception:
        pass
    try:
        if getattr(torch.version, "cuda", None):
            out["cuda"] = str(torch.version.cuda)
        if getattr(torch.version, "hip", None):
            out["rocm"] = str(torch.version.hip)
    except Exception:
        pass
    try:
        if torch.cuda.is_initialized():
            out["gpu"] = str(torch.cuda.get_device_name(torch.cuda.current_device()))
    except Exception:
        pass
    try:
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            out["rank"] = str(dist.get_rank())
            out["world_size"] = str(dist.get_world_size())
    except Exception:
        pass
