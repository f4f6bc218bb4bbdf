"""spool.py: the collector's spool directory and file layout, so that
`firstpass-upload --spool DIR` sends what this package could not (collector/upload.c).

The rules, as collector/upload.c has them:
  directory  $FIRSTPASS_SPOOL, else $XDG_STATE_HOME/firstpass/spool when XDG_STATE_HOME is an
             absolute path, else /tmp/firstpass-spool-$UID; created with its missing parents,
             each with mode 0700 (before the umask, as mkdir(2) does)
  file       session-<host>-<pid>-<start_ns>-<part>.json.gz: a gzip'd session document that
             carries its own name and labels (firstpass-upload sends spooled files without a
             query string)
  writing    .<file>.tmp, mode 0600, written whole, fsync'ed, then renamed: the file appears
             whole or not at all; firstpass-upload skips dot files
"""
import errno
import os
import re


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
    return "/tmp/firstpass-spool-%d" % os.getuid()


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
