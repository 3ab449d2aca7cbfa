"""The Python a host runs the project's node with: the local test hosts run the harness's
own (a virtual environment's included), and the preflight names any module the node
imports that the host's Python lacks, before anything starts."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from harness.cluster.ssh.hosts import inventory_text
from harness.cluster.ssh.inventory import Host
from harness.cluster.ssh.preflight import NODE_MODULES, probe_script, read_probe
from harness.cluster.ssh.session import SshError


def _probe(host: Host) -> str:
    """``host``'s probe run here, as the host's shell would run it."""
    return subprocess.run(
        ["sh", "-c", probe_script(host)], capture_output=True, text=True, timeout=60
    ).stdout


def test_the_test_hosts_run_the_node_on_the_harness_python(tmp_path: Path) -> None:
    text = inventory_text(tmp_path, [{"name": "n1", "ip": "10.9.0.2"}])
    assert tomllib.loads(text)["defaults"]["python"] == sys.executable


def test_the_node_modules_are_what_the_node_imports_beyond_its_zipapp() -> None:
    assert "apsw" in NODE_MODULES  # harness.node.database: the node's SQLite


def test_a_python_without_the_node_modules_is_refused_naming_the_module_and_the_fix(
    tmp_path: Path,
) -> None:
    """A bare virtual environment (no packages) stands for a host's python3 with nothing
    installed: the probe fails on apsw, and the message says how to install it."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    bare = str(tmp_path / "v" / "bin" / "python")
    data = tmp_path / "data"
    data.mkdir()
    host = Host(name="n1", address="127.0.0.1", data_dir=str(data), python=bare)
    out = _probe(host)
    assert out.startswith("FAIL module apsw"), out
    with pytest.raises(SshError) as caught:
        read_probe(host, out)
    message = str(caught.value)
    assert f"{bare} cannot import apsw" in message
    assert f"{bare} -m pip install apsw" in message
    assert "No module named 'apsw'" in message


def test_the_harness_python_passes_the_module_check(tmp_path: Path) -> None:
    host = Host(name="n1", address="127.0.0.1", data_dir=str(tmp_path), python=sys.executable)
    out = _probe(host)
    assert "FAIL module" not in out and "FAIL python" not in out, out
