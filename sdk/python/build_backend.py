"""A PEP 517 build backend in the standard library only, so that
``pip install ./sdk/python`` and ``pip wheel ./sdk/python`` work on a fresh
machine with nothing fetched from a package index (the package has no
dependencies, and neither does its build). It builds the wheel (the
``approvals`` package, pure Python) and the sdist from pyproject.toml."""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "approvals"
SDIST_FILES = ["pyproject.toml", "build_backend.py", "README.md"]


def _project():
    """name, version, description and requires-python from pyproject.toml
    (tomllib is Python 3.11+; the fields read here are plain strings)."""
    with open(os.path.join(HERE, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("[project]", 1)[1].split("\n[", 1)[0]
    fields = {}
    for key in ("name", "version", "description", "requires-python"):
        m = re.search(r'^%s\s*=\s*"([^"]*)"' % re.escape(key), section, re.M)
        if not m:
            raise ValueError("pyproject.toml: [project] has no %s" % key)
        fields[key] = m.group(1)
    return fields


def _metadata(p):
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return (
        "Metadata-Version: 2.1\n"
        "Name: %s\nVersion: %s\nSummary: %s\nLicense: MIT\nRequires-Python: %s\n"
        "Description-Content-Type: text/markdown\n\n%s"
    ) % (p["name"], p["version"], p["description"], p["requires-python"], readme)


def _package_files():
    root = os.path.join(HERE, PACKAGE)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py") or name == "py.typed":
                full = os.path.join(dirpath, name)
                yield full, os.path.relpath(full, HERE).replace(os.sep, "/")


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (path, digest, len(data))


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def _dist_info(p):
    return "%s-%s.dist-info" % (p["name"], p["version"])


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    p = _project()
    d = os.path.join(metadata_directory, _dist_info(p))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata(p))
    return _dist_info(p)


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def _wheel(wheel_directory, entries):
    p = _project()
    name = "%s-%s-py3-none-any.whl" % (p["name"], p["version"])
    info = _dist_info(p)
    files = list(entries) + [
        (info + "/METADATA", _metadata(p).encode()),
        (info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: approvals build_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
    ]
    record = [_record_line(path, data) for path, data in files] + [info + "/RECORD,,"]
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            z.writestr(zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0)), data, zipfile.ZIP_DEFLATED)
        z.writestr(zipfile.ZipInfo(info + "/RECORD", date_time=(2020, 1, 1, 0, 0, 0)), "\n".join(record) + "\n")
    return name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    entries = []
    for full, rel in _package_files():
        with open(full, "rb") as f:
            entries.append((rel, f.read()))
    return _wheel(wheel_directory, entries)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # A .pth file puts this directory on sys.path: the checkout is what runs.
    return _wheel(wheel_directory, [("_approvals_editable.pth", (HERE + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    base = "%s-%s" % (p["name"], p["version"])
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        paths = [(os.path.join(HERE, f), f) for f in SDIST_FILES] + list(_package_files())
        for full, rel in paths:
            t.add(full, arcname=base + "/" + rel, recursive=False)
        pkg_info = _metadata(p).encode()
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size = len(pkg_info)
        t.addfile(ti, io.BytesIO(pkg_info))
    return name
