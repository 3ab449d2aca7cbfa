"""What ran (versions.json): its pure parts."""

from __future__ import annotations

import re

from harness.node.pysyncobj_pin import BUILT_FOR
from harness.versions import engine_of, versions


def test_the_engine_is_told_apart_from_the_backend_by_the_version_the_nodes_report() -> None:
    assert engine_of("ssh", "v10.2.7-rqueue-embedded") == "embedded"
    assert engine_of("docker", "v10.2.7-rqueue-embedded") == "embedded"
    assert engine_of("docker", "v10.2.7") == "rqlited"
    assert engine_of("ssh", "v8.36.18") == "rqlited"
    assert engine_of("embedded", None) == "embedded"  # a local cluster knows its own
    assert engine_of("rqlited", "v10.2.7-rqueue-embedded") == "rqlited"
    assert engine_of("ssh", None) == "ssh"  # no node answered: only the backend is known


def test_versions_json_names_what_ran() -> None:
    v = versions("embedded", "v10.2.7-rqueue-embedded")
    assert list(v) == [
        "rqueue", "git", "engine", "engine_version", "python", "platform", "pysyncobj",
    ]  # fmt: skip
    assert v["engine"] == "embedded" and v["engine_version"] == "v10.2.7-rqueue-embedded"
    assert v["pysyncobj"] == BUILT_FOR
    assert v["git"] is None or re.fullmatch(r"[0-9a-f]{7,}(\+dirty)?", v["git"])
