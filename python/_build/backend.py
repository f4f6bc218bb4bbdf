"""backend.py: the PEP 517 build backend of the firstpass package, standard library only.

Why it exists: pip builds a package in an isolated environment and installs the backend's
requirements there from the index; a setuptools backend therefore needs the network. This one
needs nothing, so `pip install ./python` works offline with any pip >= 21.3 on Python >= 3.8.

It reads the [project] table of pyproject.toml (name, version, description, requires-python:
plain `key = "string"` lines, which is all that file holds) and packs every .py file under
firstpass/ into a py3-none-any wheel. build_editable gives a wheel whose .pth file points at
this folder (pip install -e)."""
import base64
import hashlib
import os
import re
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "firstpass"


def _project():
    """Returns {name, version, description, requires-python} from pyproject.toml's [project].
    Raises ValueError when name or version is missing."""
    out, section = {}, None
    with open(os.path.join(HERE, "pyproject.toml"), encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            m = re.match(r"^\[([^\]]+)\]$", line)
            if m:
                section = m.group(1).strip()
                continue
            m = re.match(r'^([A-Za-z0-9_-]+)\s*=\s*"([^"\\]*)"\s*(#.*)?$', line)
            if section == "project" and m:
                out[m.group(1)] = m.group(2)
    for key in ("name", "version"):
        if key not in out:
            raise ValueError("pyproject.toml: [project] has no %s" % key)
    return out


def _dist_info(p):
    return "%s-%s.dist-info" % (p["name"], p["version"])


def _metadata(p):
    lines = ["Metadata-Version: 2.1", "Name: " + p["name"], "Version: " + p["version"]]
    if p.get("description"):
        lines.append("Summary: " + p["description"])
    if p.get("requires-python"):
        lines.append("Requires-Python: " + p["requires-python"])
    return "\n".join(lines) + "\n"


def _wheel_text():
    return "Wheel-Version: 1.0\nGenerator: firstpass-backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def _write_wheel(wheel_directory, files):
    """files: [(arcname, bytes)] without the dist-info; writes the wheel, returns its name."""
    p = _project()
    di = _dist_info(p)
    files = list(files) + [(di + "/METADATA", _metadata(p).encode()), (di + "/WHEEL", _wheel_text().encode())]
    record = [_record_line(a, d) for a, d in files] + [di + "/RECORD,,"]
    files.append((di + "/RECORD", ("\n".join(record) + "\n").encode()))
    name = "%s-%s-py3-none-any.whl" % (p["name"], p["version"])
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, data in files:
            info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return name


def _sources():
    """[(arcname, bytes)] for every .py file of the package, sorted."""
    out = []
    root = os.path.join(HERE, PACKAGE)
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(d, f)
                with open(path, "rb") as fh:
                    out.append((os.path.relpath(path, HERE).replace(os.sep, "/"), fh.read()))
    return out


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """PEP 517: writes firstpass-VERSION-py3-none-any.whl into wheel_directory; returns its name."""
    return _write_wheel(wheel_directory, _sources())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """PEP 660: a wheel holding only firstpass.pth (this folder), so edits here take effect."""
    return _write_wheel(wheel_directory, [("firstpass.pth", (HERE + "\n").encode())])
