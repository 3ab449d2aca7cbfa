"""scripts/repro_rqlite_now_localtime.py --image on the project's node image: the zone
file mounted as the container's /etc/localtime shifts the rewritten 'now'; the image
carries no zone data of its own, so TZ=<name> alone leaves it in UTC."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.docker.conftest import anonymous_volumes

pytestmark = pytest.mark.chaos

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "repro_rqlite_now_localtime.py"
SECRET = "RQUEUE_CLUSTER_SECRET=" + "s" * 32  # the node listens beyond loopback in a container


def test_a_mounted_localtime_shifts_the_node_in_its_image(engine: Any, node_image: str) -> None:
    before = anonymous_volumes(engine)
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--image", node_image, "--env", SECRET],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    shifts = re.findall(r"rewritten minus SQLite's own: ([+-][\d.]+) s", proc.stdout)
    assert len(shifts) == 2 and all(abs(float(s) - 19800) < 2 for s in shifts), proc.stdout
    # its container is removed with the anonymous volume the image's VOLUME gave it
    assert anonymous_volumes(engine) <= before


def test_the_image_has_no_zone_data(node_image: str) -> None:
    paths = ["/etc/localtime", "/usr/share/zoneinfo", "/usr/share/lib/zoneinfo", "/etc/zoneinfo"]
    code = f"import os; print([p for p in {paths!r} if os.path.exists(p)])"
    out = subprocess.run(
        ["docker", "run", "--rm", "--entrypoint", "/usr/local/bin/python3", node_image, "-c", code],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert out.stdout.strip() == "[]"
