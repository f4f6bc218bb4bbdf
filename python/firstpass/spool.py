"""spool.py: the collector's spool directory and file layout, so that
`firstpass-upload --spool DIR` sends what this package could not (collector/upload.c).

The rules, as collector/upload.c has them:
  directory  $FIRSTPASS_SPOOL, else $XDG_STATE_HOME/firstpass/spool when XDG_STATE_HOME is an
             absolute path, else $HOME/.local/state/firstpass/spool when HOME is an absolute
             path to a directory the user owns, else /tmp/firstpass-spool-$UID; created with its
             missing parents, each with mode 0700 (before the umask, as mkdir(2) does)
  checked    before each use (check_dir): a real directory (not a symlink), no permission
             bits for others, and either owned by the user with no group bits (0700), or a
             group's as a Kubernetes fsGroup volume makes it (issue 53): setgid, group rwx,
             its group one of the process's groups, owned by the user or root (2770); else
             refused with the reason and the fix. Why: a name in /tmp can be made first by
             another local user, who would then read the traces spooled there and plant files
             that firstpass-upload sends with the user's token (issue 43); a group directory
             trusts its group's members. Only the last component is checked: its parents are
             the user's (home) or sticky (/tmp, where no one else may rename it)
  file       session-<host>-<pid>-<start_ns>-<part>.json.gz: a gzip'd session document that
             carries its own name and labels (firstpass-upload sends spooled files without a
             query string)
  writing    .<file>.tmp, mode 0600, written whole, fsync'ed, then renamed: the file appears
             whole or not at all; firstpass-upload skips dot files
"""
import errno
import os
import re
import stat


def spool_dir(override=None, environ=None):
    """Returns the spool directory path (not created): override when given, else the
    collector's rule above from environ (default os.environ)."""
    if override:
        return str(override)
    env = os.environ if environ is None else environ
    s = env.get("FIRSTPASS_SPOOL")
    if s:
        return s
    x = env.get("XDG_STATE_HOME")
    if x and x.startswith("/"):
        return x + "/firstpass/spool"
    h = env.get("HOME")
    if h and h.startswith("/") and _owned_dir(h):
        return h.rstrip("/") + "/.local/state/firstpass/spool"
    return "/tmp/firstpass-spool-%d" % os.getuid()


def _owned_dir(path):
    """True when path (symlinks followed: a home may be one) is a directory owned by the
    effective user."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()


class UnsafeSpool(OSError):
    """The spool directory is not the user's own (check_dir); str() and strerror say why."""

    def __init__(self, message):
        super().__init__(errno.EPERM, message)


def _group_dir_ok(st):
    """A directory of a group this process is in that only that group (and its owner: this
    user or root) can reach: setgid, group rwx, nothing for others (a Kubernetes fsGroup
    volume's 2770)."""
    m = stat.S_IMODE(st.st_mode)
    return bool(m & stat.S_ISGID) and m & 0o070 == 0o070 and not m & 0o007 and \
        (st.st_gid == os.getegid() or st.st_gid in os.getgroups()) and st.st_uid in (os.geteuid(), 0)


def check_dir(path):
    """Checks that path is a spool directory only the user (or a group of the user's, as
    above) can reach: lstat (a symlink is refused, not followed), a directory, the rule of
    the module's docstring. Returns None. Raises UnsafeSpool naming what is wrong and the fix,
    OSError when it cannot be lstat'ed (ENOENT when it does not exist)."""
    st = os.lstat(path)
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeSpool("%s is a symbolic link, not a directory of yours: refused" % path)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeSpool("%s is not a directory" % path)
    if _group_dir_ok(st) or (st.st_uid == os.geteuid() and not mode & 0o077):
        return
    if mode & 0o007:
        raise UnsafeSpool("%s has mode %04o: any user may read what is spooled there or plant files in it; "
                          "refused (chmod 700 it; for a volume shared with a group, chmod 2770 it)" % (path, mode))
    if st.st_uid != os.geteuid() and not (st.st_uid == 0 and mode & 0o070):
        raise UnsafeSpool("%s belongs to uid %d, not to you (uid %d): another user may read what is "
                          "spooled there or plant files in it; refused (remove it, or set FIRSTPASS_SPOOL)"
                          % (path, st.st_uid, os.geteuid()))
    if st.st_gid != os.getegid() and st.st_gid not in os.getgroups():
        raise UnsafeSpool("%s has mode %04o and group %d, which this process is not in: its members may read what "
                          "is spooled there or plant files in it; refused (chmod 700 it, or run in that group: "
                          "Kubernetes securityContext.fsGroup)" % (path, mode, st.st_gid))
    raise UnsafeSpool("%s has mode %04o: a directory shared with a group must be setgid with group rwx and nothing "
                      "for others; refused (chmod 700 it, or chmod 2770 it)" % (path, mode))


def prepare(path):
    """make_dirs(path), then check_dir(path). Returns None; raises OSError (UnsafeSpool when
    the directory is not the user's own)."""
    make_dirs(path)
    check_dir(path)


def make_dirs(path):
    """mkdir -p path, each created component with mode 0700, as collector/upload.c's mkdirs.
    Returns None; raises OSError when a component cannot be created."""
    parts = path.split("/")
    for i in range(1, len(parts) + 1):
        p = "/".join(parts[:i])
        if not p:
            continue
        try:
            os.mkdir(p, 0o700)
        except OSError as e:
            if e.errno != errno.EEXIST:
                raise


def file_name(host, pid, start_ns, part):
    """session-<host>-<pid>-<start_ns>-<part>.json.gz; characters of host outside
    [A-Za-z0-9._-] become '_' (the collector takes gethostname() as is; a '/' would name a
    directory here)."""
    h = re.sub(r"[^A-Za-z0-9._-]", "_", host or "") or "host"
    return "session-%s-%d-%d-%d.json.gz" % (h, int(pid), int(start_ns), int(part))


def key(name):
    """The Idempotency-Key of a spooled file's name, as collector/upload.c's fp_spool_key:
    the agent's watch-<file_id>.json.gz gives its file_id, else the name without .json.gz /
    .json when it is [A-Za-z0-9._-]{1,64}, else "h" and 16 hex digits of its FNV-1a hash. The
    handler's upload sends the key of the name it would spool under, so that
    `firstpass-upload --spool` later sends the same key and the server stores it once."""
    base = os.path.basename(name)
    stem = base[:-8] if base.endswith(".json.gz") and len(base) > 8 else base[:-5] if base.endswith(".json") and len(base) > 5 else base
    if re.fullmatch(r"watch-[0-9a-f]{16}", stem):
        return stem[6:]
    if 0 < len(stem) <= 64 and re.fullmatch(r"[A-Za-z0-9._-]+", stem):
        return stem
    h = 1469598103934665603
    for b in stem.encode("utf-8", "surrogateescape"):
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return "h%016x" % h


def write(directory, name, data):
    """Writes data (bytes) as directory/name atomically: directory/.name.tmp (0600), fsync,
    rename. Returns the final path. Raises OSError; the tmp file is removed then."""
    tmp = os.path.join(directory, "." + name + ".tmp")
    final = os.path.join(directory, name)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, final)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return final
