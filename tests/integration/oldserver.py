"""oldserver.py: firstpass-server as an earlier commit built it, for upgrade tests.

    python3 tests/integration/oldserver.py [COMMIT]   # builds it (once) and prints its path

old_server(commit) checks the commit out with `git worktree add --detach` into a temporary
folder, runs `make server` there, and keeps the binary in build/old-server/<commit>/ (later
runs reuse it; make clean removes it). Returns None, with the reason in old_server.why, when
the repository has no such commit (a shallow clone) or the build fails: the caller skips.

OLD_COMMIT is main on 2026-12-06, before the efficiency figures (schema version 6, PostgreSQL
4): a database written then has sessions with no efficiency document, no kernel means and no
analysis version, the "week-old database" of issue 52."""
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OLD_COMMIT = "0c52ad92373eea8c271c7630d6dd4b8621eeeb65"
why = [""]


def old_server(commit=OLD_COMMIT):
    out = os.path.join(ROOT, "build", "old-server", commit)
    binary = os.path.join(out, "firstpass-server")
    if os.access(binary, os.X_OK):
        return binary
    git = ["git", "-C", ROOT]
    if subprocess.run(git + ["cat-file", "-e", commit + "^{commit}"], capture_output=True).returncode:
        why[0] = "commit %s is not in this clone (a shallow one?)" % commit[:12]
        return None
    tmp = tempfile.mkdtemp(prefix="fp-old-")
    src = os.path.join(tmp, "src")
    try:
        subprocess.run(git + ["worktree", "add", "--detach", src, commit], check=True, capture_output=True)
        jobs = os.environ.get("FP_OLD_JOBS", "2")
        # the old tree's own defaults: under `make test-asan` MAKEFLAGS carries BUILD=build-asan,
        # CC and SAN to every make below it, and the old binary went to build-asan/
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
        r = subprocess.run(["nice", "make", "-j" + jobs, "server"], cwd=src, capture_output=True, text=True, env=env)
        if r.returncode:
            why[0] = "make server at %s failed: %s" % (commit[:12], r.stderr[-2000:])
            return None
        os.makedirs(out, exist_ok=True)
        shutil.copy2(os.path.join(src, "build", "firstpass-server"), binary + ".tmp")
        os.replace(binary + ".tmp", binary)
        return binary
    except subprocess.CalledProcessError as e:
        why[0] = "git worktree add %s failed: %s" % (commit[:12], (e.stderr or b"").decode(errors="replace")[-1000:])
        return None
    finally:
        subprocess.run(git + ["worktree", "remove", "--force", src], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    b = old_server(sys.argv[1] if len(sys.argv) > 1 else OLD_COMMIT)
    print(b or why[0])
    sys.exit(0 if b else 1)
