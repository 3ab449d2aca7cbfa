"""The node image: its entrypoint, its wget, and (real engine) the image itself."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.cluster.docker import specs as db
from harness.image import IMAGE_LABEL, changes, project_root
from harness.image.entrypoint import Refused, command, start_delay
from harness.image.rootfs import STDLIB_EXCLUDE, _keep_stdlib, distributions, site_files

WGET = Path(__file__).resolve().parents[2] / "harness" / "image" / "wget.py"


def test_flags_reach_the_node_with_the_missing_addresses_filled_in() -> None:
    argv = command(["-node-id", "n1", "-http-adv-addr", "127.0.0.1:4001"], "n1", "n1.lan", {})
    assert argv == [
        "/usr/local/bin/rqlited",
        "-http-addr", "0.0.0.0:4001",
        "-raft-addr", "0.0.0.0:4002",
        "-raft-adv-addr", "n1.lan:4002",
        "-node-id", "n1", "-http-adv-addr", "127.0.0.1:4001",
        "/rqlite/file/data",
    ]  # fmt: skip
    # every address given (as compose and the backend do): the node id and data directory
    given = ["-http-addr=0.0.0.0:4001", "-http-adv-addr", "h:1", "-raft-addr", "0.0.0.0:4002"]
    given += ["-raft-adv-addr", "n2:4002"]
    assert command(given, "c0ffee", "c0ffee", {}) == [
        "/usr/local/bin/rqlited", "-node-id", "c0ffee", *given, "/rqlite/file/data"
    ]  # fmt: skip


def test_the_environment_fills_what_the_official_entrypoint_fills() -> None:
    """As rqlite v10.2.7's docker-entrypoint.sh: `run` (the image's default command) and
    flags get -node-id (the host name unless NODE_ID), the four address flags from
    HTTP_ADDR, HTTP_ADV_ADDR, RAFT_ADDR, RAFT_ADV_ADDR (else 0.0.0.0 and the full host
    name), -fk with ENABLE_FK, and the data directory ($DATA_DIR) last."""
    env = {
        "NODE_ID": "a", "HTTP_ADDR": "0.0.0.0:5001", "HTTP_ADV_ADDR": "10.0.0.5:5001",
        "RAFT_ADDR": "0.0.0.0:5002", "RAFT_ADV_ADDR": "10.0.0.5:5002", "ENABLE_FK": "1",
        "DATA_DIR": "/d",
    }  # fmt: skip
    assert command(["run"], "host", "host.example", env) == [
        "/usr/local/bin/rqlited", "-node-id", "a",
        "-http-addr", "0.0.0.0:5001", "-http-adv-addr", "10.0.0.5:5001",
        "-raft-addr", "0.0.0.0:5002", "-raft-adv-addr", "10.0.0.5:5002", "-fk", "/d",
    ]  # fmt: skip
    defaults = command([], "c0ffee", "c0ffee.lan", {})
    assert defaults[1:3] == ["-node-id", "c0ffee"]  # always, the host name by default
    assert defaults[defaults.index("-http-adv-addr") + 1] == "c0ffee.lan:4001"
    assert "-fk" not in defaults


def test_other_commands_rqlited_included_run_as_given() -> None:
    for args in (["rqlited", "-node-id", "x", "/data"], ["rqlited", "-version"], ["python3"]):
        assert command(args, "h", "h", {"NODE_ID": "n", "ENABLE_FK": "1"}) == args


def test_start_delay_and_extensions_as_the_official_entrypoint_reads_them() -> None:
    assert start_delay({}) == 0.0
    assert start_delay({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}) == 5.0
    assert start_delay({"START_DELAY": "2"}) == 2.0
    assert start_delay({"START_DELAY": "0.5s"}) == 0.5
    assert start_delay({"START_DELAY": "1m"}) == 60.0
    with pytest.raises(Refused, match="START_DELAY must be seconds"):
        start_delay({"START_DELAY": "soon"})
    with pytest.raises(Refused, match="SQLite extension vec is not in this image"):
        command(["run"], "h", "h", {"SQLITE_EXTENSIONS": "vec"})
    with pytest.raises(Refused, match="both given"):
        command(["-extensions-path=/x"], "h", "h", {"CUSTOM_SQLITE_EXTENSIONS_PATH": "/y"})
    argv = command(["run"], "h", "h", {"CUSTOM_SQLITE_EXTENSIONS_PATH": "/y"})
    assert "-extensions-path=/y" in argv


def test_image_configuration_is_the_official_interface() -> None:
    config = changes(rqlited=False)
    assert 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint"]' in config
    assert 'CMD ["run"]' in config and "USER rqlite" in config  # uid 1000, as the official
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


#: imports every module of the node and of the entrypoint, as the image's Python would
_IMPORT_THE_NODE = """
import importlib, pkgutil, sys
sys.path.insert(0, sys.argv[1])
import harness.image.entrypoint, harness.node
for info in pkgutil.walk_packages(harness.node.__path__, "harness.node."):
    if not info.name.endswith("__main__"):
        importlib.import_module(info.name)
outside = sorted(n for n in sys.modules if n.split(".")[0] in {"rqueue", "hypothesis", "httpx"})
print(len(sys.modules), outside)
"""


def test_the_node_imports_nothing_the_image_leaves_out(tmp_path: Path) -> None:
    """The image's PYTHONPATH holds the harness and the node's distributions, not rqueue:
    every module of the node and its entrypoint imports from that alone (a node that
    imported rqueue died at start in every container)."""
    site = tmp_path / "site"
    for rel, src in site_files(project_root()).items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).symlink_to(src)
    # -S: no site-packages (where this checkout's rqueue is installed); -c: cwd first
    out = subprocess.run(
        [sys.executable, "-S", "-c", _IMPORT_THE_NODE, str(site)],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.split(" ", 1)[1].strip() == "[]"


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


def _wait_exit(container: Any, timeout: float = 60) -> int:
    return int(container.wait(timeout=timeout)["StatusCode"])


@pytest.mark.chaos
def test_the_image_is_a_drop_in_for_the_official_one(engine: Any, node_image: str) -> None:
    """The official image's user (uid 1000, owning the volume), its default command
    `run` with the node id from the host name, `rqlited ...` run as given, and an
    unspecified advertised HTTP address refused, as rqlited refuses it."""
    labels = db.labels("test-image")
    secret = {"RQUEUE_CLUSTER_SECRET": secrets.token_hex(24)}
    probe = "import os; print(os.getuid(), os.getgid(), os.stat('/rqlite/file').st_uid)"
    started = []

    def run(command: list[str] | None = None, **kw: Any) -> Any:
        c = engine.containers.run(node_image, command, detach=True, labels=labels, **kw)
        started.append(c)
        return c

    try:
        who = run(["python3", "-c", probe])
        version = run(["rqlited", "-version"])
        refused = run(environment={"HTTP_ADV_ADDR": "0.0.0.0:4001", **secret})
        solo = run(hostname="solo", environment=secret)
        assert _wait_exit(who) == 0 and who.logs().decode().split() == ["1000", "1000", "1000"]
        assert _wait_exit(version) == 0 and version.logs().decode().startswith("rqlited v")
        assert _wait_exit(refused) == 1
        # the node's own check, worded as rqlited's (cmd/rqlited/flags.go)
        assert refused.logs().decode().strip().splitlines()[-1] == (
            "fatal: advertised HTTP address is not routable (0.0.0.0), "
            "specify it via -http-addr or -http-adv-addr"
        )
        status = ["wget", "-q", "-O", "-", "http://127.0.0.1:4001/status"]
        deadline = time.monotonic() + 60
        while (answer := solo.exec_run(status)).exit_code != 0:
            solo.reload()
            assert solo.status == "running", solo.logs().decode()[-2000:]
            assert time.monotonic() < deadline, "the node answered no /status within 60 s"
            time.sleep(0.5)
        assert json.loads(answer.output)["store"]["node_id"] == "solo"
    finally:
        for c in started:
            c.remove(force=True, v=True)
