"""The Docker backend's dealings with the engine itself: connecting, images, reaping.

One line for each way it can fail: no engine (:class:`DockerUnreachable`), no image and
no pull (:class:`ImageMissing`). :func:`reap_docker` removes what the harness made, by
label. :mod:`harness.cluster.docker.cluster` drives the engine through them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from harness.cluster.base import ClusterError
from harness.cluster.docker.specs import (
    IMAGE_LABEL,
    LABEL_CLUSTER,
    LABEL_HARNESS,
    DockerUnreachable,
    docker_address,
    image_missing_message,
    unreachable_message,
)


def _root_cause(exc: BaseException) -> str:
    """The innermost OS-level reason behind an SDK/requests exception, one line."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    found: str | None = None
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError) and cur.strerror:
            found = cur.strerror
        for arg in getattr(cur, "args", ()):
            if isinstance(arg, OSError) and arg.strerror:
                found = arg.strerror
        cur = cur.__cause__ or cur.__context__
    if found:
        return found
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def connect(env: Mapping[str, str] | None = None, timeout: float = 30.0) -> Any:
    """A docker SDK client that has answered a ping, or :class:`DockerUnreachable`."""
    address = docker_address(env)
    try:
        import docker
    except ImportError as exc:
        raise ClusterError(
            "the docker backend needs the docker Python package: pip install -e '.[harness]'"
        ) from exc
    try:
        client = docker.from_env(
            environment=dict(os.environ if env is None else env), timeout=int(timeout)
        )
        client.ping()
    except Exception as exc:  # the SDK raises DockerException, requests errors, OSError
        from_env = bool((os.environ if env is None else env).get("DOCKER_HOST"))
        msg = unreachable_message(address, _root_cause(exc), from_env)
        raise DockerUnreachable(msg) from None
    return client


def _image_facts(client: Any, image: str) -> tuple[str | None, str]:
    """The project's label on the image (``embedded`` or ``rqlited``, else None), and
    the image's id."""
    found = client.images.get(image)
    labels = found.attrs.get("Config", {}).get("Labels") or {}
    return labels.get(IMAGE_LABEL), found.id


class ImageMissing(ClusterError):
    """The image is not here and could not be pulled; the message is one line."""


def _ensure_image(client: Any, image: str) -> None:
    import docker

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        repo, sep, tag = image.rpartition(":")
        if not sep or "/" in tag:
            repo, tag = image, "latest"
        try:
            client.images.pull(repo, tag=tag)
        except docker.errors.APIError as exc:
            raise ImageMissing(image_missing_message(image, str(exc.explanation or exc))) from None


def reap_docker(client: Any | None = None, cluster_id: str | None = None) -> list[str]:
    """Remove every harness container, network and volume (or one cluster's).

    Used by ``python -m harness cluster down --all --backend docker`` after a crash;
    also removes what ``docker compose -f docker-compose.cluster.yml up`` made.
    Returns the names removed; raises :class:`ClusterError` naming any it could not
    remove, after trying all of them.
    """
    import docker

    client = connect() if client is None else client
    selector = f"{LABEL_HARNESS}=true"
    flt = {"label": [selector] + ([f"{LABEL_CLUSTER}={cluster_id}"] if cluster_id else [])}
    removed: list[str] = []
    failed: list[str] = []

    def remove(name: str, action: Any) -> None:
        try:
            action()
        except docker.errors.NotFound:
            pass  # went away on its own meanwhile
        except docker.errors.APIError as exc:
            failed.append(f"{name}: {exc.explanation or exc}")
            return
        removed.append(name)

    for c in client.containers.list(all=True, filters=flt):
        remove(c.name, lambda c=c: c.remove(force=True, v=True))
    for n in client.networks.list(filters=flt):
        remove(n.name, n.remove)
    for v in client.volumes.list(filters=flt):
        remove(v.name, lambda v=v: v.remove(force=True))
    if failed:
        raise ClusterError("could not remove " + "; ".join(failed))
    return removed
