"""The node image: its entrypoint, its wget, and (real engine) the image itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.cluster.docker import specs as db
from harness.image import IMAGE_LABEL, changes
from harness.image.entrypoint import command
from harness.image.rootfs import STDLIB_EXCLUDE, _keep_stdlib, distributions

WGET = Path(__file__).resolve().parents[2] / "harness" / "image" / "wget.py"


def test_flags_reach_the_node_with_the_missing_addresses_filled_in() -> None:
    argv = command(["-node-id", "n1", "-http-adv-addr", "127.0.0.1:4001"], "n1", {}, False)
    assert argv == [
        "/usr/local/bin/python3", "-m", "harness.node",
        "-http-addr", "0.0.0.0:4001",
        "-raft-addr", "0.0.0.0:4002",
        "-raft-adv-addr", "n1:4002",
        "-node-id", "n1", "-http-adv-addr", "127.0.0.1:4001",
        "/rqlite/file/data",
    ]  # fmt: skip
    # every address given (as compose and the backend do): only the data directory is added
    given = ["-http-addr=0.0.0.0:4001", "-http-adv-addr", "h:1", "-raft-addr", "0.0.0.0:4002"]
    given += ["-raft-adv-addr", "n2:4002"]
    assert command(given, "n2", {}, True) == ["/usr/local/bin/rqlited", *given, "/rqlite/file/data"]


def test_entrypoint_defaults_and_other_commands() -> None:
    argv = command([], "c0ffee", {"NODE_ID": "a", "DATA_DIR": "/d"}, False)
    assert argv[3:5] == ["-node-id", "a"] and argv[-1] == "/d"
    assert command(["rqlited", "-version"], "h", {}, True)[:2] == [
        "/usr/local/bin/rqlited",
        "-http-addr",
    ]
    assert command(["python3", "-c", "pass"], "h", {}, False) == ["python3", "-c", "pass"]


def test_image_configuration_is_the_official_interface() -> None:
    config = changes(rqlited=False)
    assert 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint"]' in config
    assert "EXPOSE 4001 4002" in config and 'VOLUME ["/rqlite/file"]' in config
    # not io.rqueue.harness: containers inherit the image's labels, and that one is reaped
    assert f"LABEL {IMAGE_LABEL}=embedded" in config
    assert not any(db.LABEL_HARNESS in c for c in config)


def test_what_the_root_filesystem_leaves_out() -> None:
    assert {"test", "tkinter", "idlelib", "ensurepip", "site-packages"} <= STDLIB_EXCLUDE
    assert not _keep_stdlib(Path("test/test_os.py"))
    assert not _keep_stdlib(Path("config-3.11-x86_64-linux-gnu/libpython3.11.a"))
    assert not _keep_stdlib(Path("json/__pycache__/decoder.cpython-311.opt-1.pyc"))
    assert _keep_stdlib(Path("json/decoder.py"))
    names = {d.metadata["Name"].lower() for d in distributions(["pysyncobj", "apsw"])}
    assert names == {"pysyncobj", "apsw"}


def _wget(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-IS", str(WGET), *args], capture_output=True, text=True, timeout=30
    )


def test_wget_answers_the_health_check(cluster: Any) -> None:
    url = cluster.nodes()[0].url
    assert _wget("-q", "-O", "/dev/null", f"{url}/readyz").returncode == 0
    out = _wget("-q", "-O", "-", f"{url}/status")
    assert out.returncode == 0 and json.loads(out.stdout)["store"]["ready"]
    assert _wget("-q", "-O", "/dev/null", f"{url}/no-such-page").returncode == 1
    assert _wget("-q", "-O", "/dev/null", "http://127.0.0.1:1/readyz").returncode == 1
    assert _wget("--no-such-option", url).returncode == 2


@pytest.mark.chaos
def test_the_built_image(engine: Any, node_image: str) -> None:
    image = engine.images.get(node_image)
    config = image.attrs["Config"]
    assert config["Entrypoint"] == ["/usr/local/bin/docker-entrypoint"]
    assert set(config["ExposedPorts"]) == {"4001/tcp", "4002/tcp"}
    assert set(config["Volumes"]) == {"/rqlite/file"}
    # labelled as the harness's, so that `cluster down --all` would reap them; removed
    # with their anonymous volume (the image declares /rqlite/file a volume)
    labels = db.labels("test-image")
    version = engine.containers.run(node_image, ["-version"], detach=True, labels=labels)
    # an unsupported flag reaches the node, which says so in one line and exits 2
    auth = engine.containers.run(node_image, ["-auth", "x.json"], detach=True, labels=labels)
    try:
        assert version.wait(timeout=60)["StatusCode"] == 0
        assert version.logs().decode().startswith("rqlited v")
        assert auth.wait(timeout=60)["StatusCode"] == 2
        assert "-auth is not supported" in auth.logs().decode()
    finally:
        for c in (version, auth):
            c.remove(force=True, v=True)
