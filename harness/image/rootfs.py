"""The node image's root filesystem, assembled from this machine's own Python.

Nothing is pulled: the image holds this interpreter (``sys.base_prefix``, without its
tests, ``site-packages``, tkinter, idlelib, ensurepip, lib2to3 and static library), the
shared libraries it and the kept extension modules link (``ldd``), the node's
dependencies as installed here (each distribution's files, from its ``RECORD``), the
project's ``harness`` package, and two small scripts: the entrypoint
(:mod:`harness.image.entrypoint`, also installed as ``rqlited``, which runs the embedded
node) and a ``wget`` for the health check (:mod:`harness.image.wget`). With ``rqlited``
given, that binary is ``/usr/local/bin/rqlited`` instead.

Layout in the image: Python in ``/usr/local`` (``LD_LIBRARY_PATH=/usr/local/lib``), the
project and its dependencies in ``/opt/rqueue`` (``PYTHONPATH``), data on the volume
``/rqlite/file`` as in the official image, owned by the user ``rqlite`` (uid and gid
1000) the node runs as, as in the official image.
"""

from __future__ import annotations

import importlib.metadata as metadata
import io
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from harness.cluster.docker.specs import IMAGE_UID
from harness.errors import HarnessError

#: the node's third-party distributions (their own requirements are added)
NODE_DISTRIBUTIONS = ("pysyncobj", "apsw")
#: added when installed here: PySyncObj encrypts Raft traffic with it (a cluster secret)
OPTIONAL_DISTRIBUTIONS = ("cryptography",)
PYTHON_HOME = "/usr/local"
SITE = "/opt/rqueue"
ENTRYPOINT = "/usr/local/bin/docker-entrypoint"
WGET = "/usr/bin/wget"
RQLITED = "/usr/local/bin/rqlited"
DATA_VOLUME = "/rqlite/file"
#: the user the node runs as: the official image's (``adduser -u 1000 ... rqlite``)
USER, UID, GID = "rqlite", IMAGE_UID, IMAGE_UID
HOME = f"/home/{USER}"
#: stdlib directories (relative to lib/pythonX.Y) the node never imports
STDLIB_EXCLUDE = {
    "test",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "site-packages",
    "venv",
    "unittest/test",
    "__phello__",
}
_LDD_LINE = re.compile(r"(?:=>\s*)?(/\S+)\s+\(0x")


class ImageError(HarnessError, RuntimeError):
    """The image cannot be built; the message says why in one line."""


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths(vars={"installed_base": sys.base_prefix})["stdlib"])


def _keep_stdlib(rel: Path) -> bool:
    text = rel.as_posix()
    if any(text == ex or text.startswith(ex + "/") for ex in STDLIB_EXCLUDE):
        return False
    if text.startswith("config-"):  # the static library and its makefiles
        return False
    name = rel.name
    if ".opt-" in name and name.endswith(".pyc"):
        return False
    return not (
        text.startswith("lib-dynload/") and re.match(r"(_test|xx|_tkinter|_ctypes_test)", name)
    )


def ldd(paths: Iterable[Path]) -> set[Path]:
    """Every shared library the ELF files ``paths`` load (the loader included)."""
    libs: set[Path] = set()
    for path in paths:
        try:
            out = subprocess.run(["ldd", str(path)], capture_output=True, text=True, timeout=30)
        except FileNotFoundError:
            raise ImageError("ldd is not installed (Debian: libc-bin)") from None
        if out.returncode != 0:
            if "not a dynamic executable" in out.stdout + out.stderr:
                continue
            raise ImageError(f"ldd {path} failed: {out.stderr.strip() or out.stdout.strip()}")
        for line in out.stdout.splitlines():
            if "not found" in line:
                raise ImageError(f"{path} needs a library this machine lacks: {line.strip()}")
            m = _LDD_LINE.search(line)
            if m:
                libs.add(Path(m[1]))
    return libs


def _requirement_names(dist: metadata.Distribution) -> list[str]:
    """The names of the distributions ``dist`` requires here (no extras, markers true)."""
    out = []
    for req in dist.requires or []:
        spec, _, marker = req.partition(";")
        if "extra" in marker:
            continue
        if marker.strip() and not _marker_true(marker.strip()):
            continue
        name = re.split(r"[\s<>=!~\[(]", spec.strip(), maxsplit=1)[0]
        if name:
            out.append(name)
    return out


def _marker_true(marker: str) -> bool:
    try:
        from packaging.markers import Marker
    except ImportError:
        try:
            from pip._vendor.packaging.markers import Marker
        except ImportError:
            return True  # cannot tell: take it, a needless copy is harmless
    return bool(Marker(marker).evaluate())


def distributions(
    names: Iterable[str], optional: Iterable[str] = ()
) -> list[metadata.Distribution]:
    """``names`` and what they require, as installed here (``optional`` when installed)."""
    todo = [(n, True) for n in names] + [(n, False) for n in optional]
    seen: dict[str, metadata.Distribution] = {}
    while todo:
        name, required = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            if required:
                raise ImageError(
                    f"the node needs the Python package {name}, not installed here: "
                    "pip install -e '.[harness]'"
                ) from None
            continue
        seen[key] = dist
        todo.extend((n, True) for n in _requirement_names(dist))
    return [seen[k] for k in sorted(seen)]


def distribution_files(dist: metadata.Distribution) -> Iterator[tuple[Path, str]]:
    """(file on this machine, path under the image's site directory) of one distribution."""
    for f in dist.files or []:
        rel = Path(str(f))
        if rel.parts and rel.parts[0] == "..":
            continue  # scripts in bin/: not needed
        if "__pycache__" in rel.parts:
            continue
        src = Path(str(dist.locate_file(f)))
        if src.is_file():
            yield src, rel.as_posix()


class RootFS:
    """Files for the image, gathered as (path in the image -> source or bytes)."""

    def __init__(self) -> None:
        self.files: dict[str, Path | bytes] = {}
        self.modes: dict[str, int] = {}
        self.links: dict[str, str] = {}
        self.dirs: dict[str, int] = {}
        self.owners: dict[str, tuple[int, int]] = {}  # directory -> (uid, gid); else root

    def add(self, dest: str, src: Path | bytes, mode: int | None = None) -> None:
        self.files[dest] = src
        if mode is not None:
            self.modes[dest] = mode

    def tar(self, out: io.BufferedIOBase) -> int:
        """Write the tree as a tar stream (owner root); return the bytes of file content."""
        size = 0
        with tarfile.open(fileobj=out, mode="w|") as tar:
            made: set[str] = set()

            def mkdir(path: str, mode: int = 0o755) -> None:
                parts = path.strip("/").split("/")
                for i in range(1, len(parts) + 1):
                    d = "/".join(parts[:i])
                    if d and d not in made:
                        made.add(d)
                        info = tarfile.TarInfo(d)
                        info.type = tarfile.DIRTYPE
                        info.mode = self.dirs.get("/" + d, mode)
                        info.uid, info.gid = self.owners.get("/" + d, (0, 0))
                        tar.addfile(info)

            for d in sorted(self.dirs):
                mkdir(d)
            for dest in sorted(self.files):
                src = self.files[dest]
                mkdir(str(Path(dest).parent))
                data = src if isinstance(src, bytes) else None
                info = tarfile.TarInfo(dest.lstrip("/"))
                if data is None:
                    st = os.stat(src)
                    info.size = st.st_size
                    info.mode = self.modes.get(dest, st.st_mode & 0o777)
                    with open(src, "rb") as fh:
                        tar.addfile(info, fh)
                else:
                    info.size = len(data)
                    info.mode = self.modes.get(dest, 0o644)
                    tar.addfile(info, io.BytesIO(data))
                size += info.size
            for dest, target in sorted(self.links.items()):
                mkdir(str(Path(dest).parent))
                info = tarfile.TarInfo(dest.lstrip("/"))
                info.type = tarfile.SYMTYPE
                info.linkname = target
                tar.addfile(info)
        return size


def _script(module_file: Path, interpreter: str) -> bytes:
    """A module of this package as an executable script of the image."""
    return f"#!{interpreter}\n".encode() + module_file.read_bytes()


def site_files(project_root: Path) -> dict[str, Path]:
    """What the image's ``PYTHONPATH`` directory holds (path under it -> file here): the
    node's distributions and the ``harness`` package, nothing else (rqueue is not in it)."""
    files: dict[str, Path] = {}
    for dist in distributions(NODE_DISTRIBUTIONS, OPTIONAL_DISTRIBUTIONS):
        for src, rel in distribution_files(dist):
            files[rel] = src
    package = project_root / "harness"
    for path in package.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files[path.relative_to(project_root).as_posix()] = path
    return files


def assemble(project_root: Path, rqlited: Path | None = None) -> RootFS:
    """The whole root filesystem (see the module docstring)."""
    fs = RootFS()
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    prefix = Path(sys.base_prefix)
    python = prefix / "bin" / f"python{version}"
    if not python.is_file():
        python = Path(os.path.realpath(sys.executable))
    fs.add(f"{PYTHON_HOME}/bin/python{version}", python)
    fs.links[f"{PYTHON_HOME}/bin/python3"] = f"python{version}"
    fs.links[f"{PYTHON_HOME}/bin/python"] = f"python{version}"
    elf = [python]
    for lib in sorted((prefix / "lib").glob(f"libpython{version}*.so.*")):  # by SONAME
        fs.add(f"{PYTHON_HOME}/lib/{lib.name}", Path(os.path.realpath(lib)))
    stdlib = stdlib_dir()
    for path in stdlib.rglob("*"):
        rel = path.relative_to(stdlib)
        if path.is_file() and _keep_stdlib(rel):
            fs.add(f"{PYTHON_HOME}/lib/python{version}/{rel.as_posix()}", path)
            if path.suffix == ".so":
                elf.append(path)
    for rel, src in site_files(project_root).items():
        fs.add(f"{SITE}/{rel}", src)
        if src.suffix == ".so" or ".so." in src.name:
            elf.append(src)
    interpreter = f"{PYTHON_HOME}/bin/python3"
    here = Path(__file__).resolve().parent
    fs.add(ENTRYPOINT, _script(here / "entrypoint.py", interpreter), 0o755)
    fs.add(WGET, _script(here / "wget.py", f"{interpreter} -IS"), 0o755)
    if rqlited is not None:
        fs.add(RQLITED, rqlited, 0o755)
        elf.append(rqlited)
    else:  # `rqlited`: the entrypoint under that name runs the embedded node
        fs.links[RQLITED] = Path(ENTRYPOINT).name
    for lib in ldd(elf):
        real = Path(os.path.realpath(lib))
        if str(lib).startswith(str(prefix)):
            continue  # libpython, already in PYTHON_HOME/lib
        fs.add(str(lib), real)
    passwd = f"root:x:0:0:root:/root:/bin/false\n{USER}:x:{UID}:{GID}::{HOME}:/bin/false\n"
    fs.add("/etc/passwd", (passwd + "nobody:x:65534:65534::/:/bin/false\n").encode())
    fs.add("/etc/group", f"root:x:0:\n{USER}:x:{GID}:\nnogroup:x:65534:\n".encode())
    fs.add("/etc/nsswitch.conf", b"hosts: files dns\n")
    fs.dirs.update({"/tmp": 0o1777, "/root": 0o700, DATA_VOLUME: 0o755, HOME: 0o755})
    fs.owners.update({DATA_VOLUME: (UID, GID), HOME: (UID, GID)})
    return fs
