"""The harness reads an external rqlited's version by running it, and gives it the flags that
version has. Pure: small fake ``rqlited`` scripts that print what each version prints for
``-version`` (shaped as rqlite's own source prints it); no rqlite binary is run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.cluster.base import ClusterError
from harness.cluster.engines import NodeSpec, rqlited_argv, rqlited_version
from harness.cluster.local import cluster as local
from harness.cluster.local.cluster import LocalCluster

TAIL = "(commit 1a2b3c, branch master, compiler gc)"
#: ``rqlited -version`` of each version: v6/v7 print it on stdout, v8 and later on stderr
#: (with the SQLite version); the version is the release tag rqlite builds into the binary
OUTPUTS = {
    (6, 10, 2): (f"rqlited v6.10.2 linux amd64 go1.17.5 {TAIL}", 1),
    (8, 36, 18): (f"rqlited v8.36.18 linux amd64 go1.23.4 sqlite3.49.1 {TAIL}", 2),
    (9, 4, 5): (f"rqlited v9.4.5 linux amd64 go1.24.2 sqlite3.50.1 {TAIL}", 2),
    (10, 2, 7): (f"rqlited v10.2.7 linux amd64 go1.24.4 sqlite3.50.4 {TAIL}", 2),
}


def fake_rqlited(directory: Path, name: str, line: str, stream: int = 2, code: int = 0) -> Path:
    """An executable called ``name`` that answers ``-version`` with ``line``."""
    path = directory / name
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' '{line}' >&{stream}\nexit {code}\n")
    path.chmod(0o755)
    return path


def _specs(n: int = 3) -> list[NodeSpec]:
    return [
        NodeSpec(f"n{i}", "127.0.0.1", 4001 + 10 * i, 4002 + 10 * i, f"/d/n{i}") for i in (1, 2, 3)
    ][:n]


@pytest.mark.parametrize("version", sorted(OUTPUTS))
def test_the_version_is_read_from_what_the_binary_prints(
    tmp_path: Path, version: tuple[int, int, int]
) -> None:
    line, stream = OUTPUTS[version]
    # the file's name says another version: only what the binary prints counts
    binary = fake_rqlited(tmp_path, "rqlited-v8.36.18", line, stream)
    assert rqlited_version(str(binary)) == version


def test_a_binary_that_fails_or_prints_no_version_is_a_clear_error(tmp_path: Path) -> None:
    failing = fake_rqlited(tmp_path, "rqlited-v10.2.7", "flag provided but not defined", 2, 2)
    with pytest.raises(ClusterError, match=r"-version` failed \(exit 2\): flag provided"):
        rqlited_version(str(failing))
    silent = fake_rqlited(tmp_path, "rqlited-v9.4.5", "usage: something else", 1)
    with pytest.raises(ClusterError, match="cannot read a version"):
        rqlited_version(str(silent))
    # a wrapper that only echoes its own path: the version in the file name is not read
    echo = tmp_path / "rqlited-v8.36.18"
    echo.write_text('#!/bin/sh\necho "$0: started with $*"\n')
    echo.chmod(0o755)
    with pytest.raises(ClusterError, match="cannot read a version"):
        rqlited_version(str(echo))


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ((10, 2, 7), ["-raft-heartbeat-timeout", "500ms", "-raft-election-timeout", "2s"]),
        ((9, 4, 5), ["-raft-timeout", "500ms", "-raft-election-timeout", "2s"]),
        ((8, 36, 18), ["-raft-timeout", "500ms", "-raft-election-timeout", "2s"]),
        ((6, 10, 2), ["-raft-timeout", "500ms", "-raft-election-timeout", "2s"]),
    ],
)
def test_settings_become_the_flags_the_version_has(
    version: tuple[int, int, int], expected: list[str]
) -> None:
    s = _specs()
    settings = {"raft-heartbeat-timeout": "500ms", "raft-election-timeout": "2s"}
    argv = rqlited_argv("r", version, s[1], s, settings)
    assert argv[-5:-1] == expected and argv[-1] == "/d/n2/data"
    assert rqlited_argv("r", version, s[1], s)[-1] == "/d/n2/data"  # no settings, no flags


def test_on_disk_path_exists_before_v10_only() -> None:
    s = _specs()
    setting = {"on-disk-path": "/fast/db.sqlite"}
    assert rqlited_argv("r", (9, 4, 5), s[0], s, setting)[-3:-1] == [
        "-on-disk-path",
        "/fast/db.sqlite",
    ]
    assert rqlited_argv("r", (6, 10, 2), s[0], s, setting)[-4:-1] == [
        "-on-disk",  # v6 and v7 keep the database in memory unless told
        "-on-disk-path",
        "/fast/db.sqlite",
    ]
    with pytest.raises(ClusterError, match=r"^rqlited 10\.2\.7 has no setting 'on-disk-path'$"):
        rqlited_argv("r", (10, 2, 7), s[0], s, setting)
    with pytest.raises(ClusterError, match="unknown rqlited setting 'raft-timeout'"):
        rqlited_argv("r", (10, 2, 7), s[0], s, {"raft-timeout": "1s"})


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            f"rqlited v11.0.0 linux amd64 go1.26 sqlite3.52.0 {TAIL}",
            r"^rqlited 11\.0\.0 is newer than the versions this harness knows the flags of "
            r"\(v6 to v10\); use one of those, or the embedded engine$",
        ),
        (
            f"rqlited v5.12.1 linux amd64 go1.14 {TAIL}",
            r"^rqlited 5\.12\.1 is too old; need v6 or later$",
        ),
    ],
)
def test_an_unsupported_version_is_one_line_before_any_node_starts(
    tmp_path: Path, line: str, message: str
) -> None:
    binary = fake_rqlited(tmp_path, "rqlited", line)
    with pytest.raises(ClusterError, match=message) as info:
        LocalCluster.start(nodes=3, directory=tmp_path / "c", engine="rqlited", rqlited=binary)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "c" / local.STATE_FILE).exists()
    assert not (tmp_path / "c" / "n1").exists()


def test_a_setting_the_version_lacks_is_refused_before_any_node_starts(tmp_path: Path) -> None:
    binary = fake_rqlited(tmp_path, "rqlited", OUTPUTS[(10, 2, 7)][0])
    with pytest.raises(ClusterError, match="has no setting 'on-disk-path'"):
        LocalCluster.start(
            nodes=1,
            directory=tmp_path / "c",
            engine="rqlited",
            rqlited=binary,
            rqlited_settings={"on-disk-path": str(tmp_path / "db")},
        )
    assert not (tmp_path / "c" / "n1").exists()
    with pytest.raises(ClusterError, match="for the engine 'rqlited'"):
        LocalCluster.start(nodes=1, directory=tmp_path / "e", rqlited_settings={"x": "1"})


def test_settings_survive_attach(tmp_path: Path) -> None:
    """A node restarted by another process (``cluster`` CLI) gets the same flags."""
    c = LocalCluster(
        tmp_path,
        "rqlited",
        _specs(1),
        rqlited="/bin/rqlited",
        rqlited_version=(10, 2, 7),
        rqlited_settings={"raft-heartbeat-timeout": "700ms"},
    )
    c._save()
    again = LocalCluster.attach(tmp_path)
    assert again._argv(again._spec("n1"))[-3:-1] == ["-raft-heartbeat-timeout", "700ms"]
    assert os.path.exists(tmp_path / local.STATE_FILE)
