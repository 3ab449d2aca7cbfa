"""The Docker backend's dealings with the engine itself: connecting, images, reaping.

One line for each way it can fail: no engine (:class:`DockerUnreachable`), no image and
no pull (:class:`ImageMissing`). :func:`reap_docker` removes what the harness made, by
label: one cluster, or those whose owner is gone. :mod:`harness.cluster.docker.cluster`
drives the engine through them.
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
    LABEL_OWNER,
    LABEL_TAG,
    DockerUnreachable,
    docker_address,
    image_missing_message,
    unreachable_message,
)
from harness.cluster.owners import describe_owner, owner_gone


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


def _image_environment(client: Any, image: str) -> list[str]:
    """The image's configured environment, ``KEY=value`` lines (a ``TZ`` there decides the
    containers' zone before any mounted ``/etc/localtime``)."""
    found = client.images.get(image)
    return list(found.attrs.get("Config", {}).get("Env") or [])


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


def _labels_of(resource: Any) -> dict[str, str]:
    labels = getattr(resource, "labels", None)
    if labels is None:  # networks and volumes: in their attributes
        labels = (getattr(resource, "attrs", None) or {}).get("Labels")
    return dict(labels or {})


def _harness_resources(client: Any, flt: dict) -> list[tuple[str, Any, dict[str, str]]]:
    """(kind, resource, labels) of every harness container, network and volume that
    ``flt`` selects, containers first (a network or volume in use cannot go before)."""
    found = [("container", c, _labels_of(c)) for c in client.containers.list(all=True, filters=flt)]
    found += [("network", n, _labels_of(n)) for n in client.networks.list(filters=flt)]
    found += [("volume", v, _labels_of(v)) for v in client.volumes.list(filters=flt)]
    return found


def _filter(cluster_id: str | None, tag: str | None) -> dict:
    selector = [f"{LABEL_HARNESS}=true"]
    if cluster_id:
        selector.append(f"{LABEL_CLUSTER}={cluster_id}")
    if tag:
        selector.append(f"{LABEL_TAG}={tag}")
    return {"label": selector}


def reap_docker(
    client: Any | None = None,
    cluster_id: str | None = None,
    *,
    tag: str | None = None,
    live_too: bool = False,
) -> list[str]:
    """Remove the harness's containers, networks and volumes: one cluster's
    (``cluster_id``, whatever its state: its owner is stopping it), else those of every
    cluster whose owner is provably gone (:func:`harness.cluster.owners.owner_gone`), or
    with ``live_too`` every cluster's (live ones, ``cluster up``'s and the compose
    file's included). ``tag``: only clusters made under ``RQUEUE_REAP_TAG=tag``.

    Used by a cluster's ``stop()`` and by ``python -m harness cluster down --all
    --backend docker``. Returns the names removed; raises :class:`ClusterError` naming
    any it could not remove, after trying all of them.
    """
    import docker

    client = connect() if client is None else client
    removed: list[str] = []
    failed: list[str] = []
    for kind, resource, marks in _harness_resources(client, _filter(cluster_id, tag)):
        if not (cluster_id or live_too or owner_gone(marks.get(LABEL_OWNER))):
            continue
        try:
            if kind == "container":
                resource.remove(force=True, v=True)
            elif kind == "volume":
                resource.remove(force=True)
            else:
                resource.remove()
        except docker.errors.NotFound:
            pass  # went away on its own meanwhile
        except docker.errors.APIError as exc:
            failed.append(f"{resource.name}: {exc.explanation or exc}")
            continue
        removed.append(resource.name)
    if failed:
        raise ClusterError("could not remove " + "; ".join(failed))
    return removed


def docker_clusters(client: Any | None = None, tag: str | None = None) -> list[dict]:
    """The harness's clusters on the engine: ``{"cluster", "why", "resources"}`` each
    (``why``: whose it is), for what ``cluster down --all`` leaves alone."""
    client = connect() if client is None else client
    clusters: dict[str, dict] = {}
    for _kind, resource, marks in _harness_resources(client, _filter(None, tag)):
        cid = marks.get(LABEL_CLUSTER, "?")
        entry = clusters.setdefault(
            cid, {"cluster": cid, "why": describe_owner(marks.get(LABEL_OWNER)), "resources": []}
        )
        entry["resources"].append(resource.name)
    return list(clusters.values())
