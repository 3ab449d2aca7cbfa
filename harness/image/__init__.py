"""``python -m harness image build``: the node image, built from this machine, nothing pulled.

::

    python -m harness image build [--tag rqueue/node:local]            # the embedded node
    python -m harness image build --rqlited PATH [--tag rqueue/rqlited:local]   # your rqlited

The image has the official ``rqlite/rqlite`` image's interface: the node runs as the
user ``rqlite`` (uid 1000); the container's command (``run``, the default, or flags
starting with ``-``) reaches the node with the entrypoint's environment
(:mod:`harness.image.entrypoint`), other commands (``rqlited ...``) run as given; the data
directory is ``/rqlite/file/data`` on the volume ``/rqlite/file``, HTTP on 4001 and Raft
on 4002, and ``wget`` for the health check of ``docker-compose.cluster.yml``. Its root
filesystem is assembled by :mod:`harness.image.rootfs` and imported with the engine's
``import`` (one layer).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.cluster.docker.specs import IMAGE_LABEL, NODE_IMAGE
from harness.errors import EXIT_HARNESS, EXIT_OK

from .rootfs import DATA_VOLUME, ENTRYPOINT, PYTHON_HOME, SITE, USER, ImageError, assemble

#: the image `image build --rqlited PATH` tags by default
RQLITED_IMAGE = "rqueue/rqlited:local"


@dataclass(frozen=True)
class Built:
    tag: str
    image_id: str
    size: int  # bytes, as the engine reports the image
    seconds: float


def changes(rqlited: bool) -> list[str]:
    """The image's configuration, as Dockerfile instructions for ``import``."""
    kind = "rqlited" if rqlited else "embedded"
    env = {
        "PATH": f"{PYTHON_HOME}/bin:/usr/bin:/bin",
        "LD_LIBRARY_PATH": f"{PYTHON_HOME}/lib",
        "PYTHONPATH": SITE,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "LANG": "C.UTF-8",
    }
    return [
        *(f"ENV {k}={v}" for k, v in env.items()),
        f"ENTRYPOINT {json.dumps([ENTRYPOINT])}",
        'CMD ["run"]',
        f"USER {USER}",
        "EXPOSE 4001 4002",
        f"VOLUME {json.dumps([DATA_VOLUME])}",
        "WORKDIR /",
        f"LABEL {IMAGE_LABEL}={kind}",
    ]


def project_root() -> Path:
    """The checkout this package runs from (holding ``harness/``)."""
    return Path(__file__).resolve().parents[2]


def build(
    tag: str | None = None,
    rqlited: Path | None = None,
    client: Any | None = None,
    log: Any = None,
) -> Built:
    """Assemble the root filesystem, import it as ``tag``; the tag's previous image is
    removed when nothing else uses it."""
    import docker

    from harness.cluster.docker.engine import connect

    tag = tag or (RQLITED_IMAGE if rqlited else NODE_IMAGE)
    if ":" not in tag.rsplit("/", 1)[-1]:
        tag += ":latest"
    if rqlited is not None:
        rqlited = Path(rqlited).resolve()
        if not rqlited.is_file():
            raise ImageError(f"--rqlited {rqlited}: no such file")
    started = time.monotonic()
    client = connect() if client is None else client
    try:
        old = client.images.get(tag).id
    except docker.errors.ImageNotFound:
        old = None
    fs = assemble(project_root(), rqlited)
    repo, _, version = tag.rpartition(":")
    with tempfile.TemporaryDirectory(prefix="rqueue-image-") as tmp:
        archive = Path(tmp) / "rootfs.tar"
        with archive.open("wb") as fh:
            content = fs.tar(fh)
        if log:
            log(f"root filesystem: {len(fs.files)} files, {content / 2**20:.0f} MiB; importing")
        try:
            client.api.import_image_from_file(
                str(archive), repository=repo, tag=version, changes=changes(rqlited is not None)
            )
        except docker.errors.APIError as exc:
            raise ImageError(f"the engine refused the image: {exc.explanation or exc}") from None
    image = client.images.get(tag)
    if old and old != image.id:
        # still used by a container, or tagged otherwise: leave it
        with contextlib.suppress(docker.errors.APIError):
            client.images.remove(old)
    return Built(tag, image.id, int(image.attrs.get("Size", 0)), time.monotonic() - started)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "image",
        help="build the node image (nothing is pulled)",
        description=(
            "Build a Docker image with the official rqlite/rqlite image's interface from this "
            "machine: its Python, the project and the node's dependencies as installed here "
            "(or, with --rqlited, your own rqlited binary). Use it with --image TAG or "
            "RQLITE_IMAGE=TAG (docs/docker.md)."
        ),
    )
    isub = p.add_subparsers(dest="image_command", metavar="{build}", required=True)
    b = isub.add_parser("build", help="build the image and print its tag, id and size")
    b.add_argument(
        "--tag", help=f"image tag (default {NODE_IMAGE}; {RQLITED_IMAGE} with --rqlited)"
    )
    b.add_argument(
        "--rqlited",
        type=Path,
        metavar="PATH",
        help="build around this rqlited binary instead of the embedded node (untested here)",
    )
    b.set_defaults(handler=_build)


def _build(args: argparse.Namespace) -> int:
    from harness.cluster.base import ClusterError

    def say(text: str) -> None:
        print(text, file=sys.stderr)

    try:
        built = build(args.tag, args.rqlited, log=say)
    except (ImageError, ClusterError, OSError) as exc:
        print(f"harness: error: {exc}", file=sys.stderr)
        return EXIT_HARNESS
    print(
        json.dumps(
            {
                "tag": built.tag,
                "id": built.image_id,
                "size_mib": round(built.size / 2**20, 1),
                "seconds": round(built.seconds, 1),
            }
        )
    )
    return EXIT_OK
