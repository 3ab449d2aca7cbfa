"""SSH test hosts made and removed side by side (`hosts up` / `hosts down` of several
folders at once, as pytest's workers and a user's own hosts do)."""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from harness.cluster.ssh.hosts import SSHD, hosts_down, hosts_up

pytestmark = [pytest.mark.slow, pytest.mark.root]


def test_hosts_of_several_folders_come_and_go_at_once(tmp_path: Path) -> None:
    """One folder's ``hosts down`` removes sshd's privilege-separation folder only when
    no sshd runs; without the lock it took it from under another folder's starting sshd,
    which then exited at once (seen in CI: exit 255, "Missing privilege separation
    directory")."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("SSH test hosts need root (network namespaces)")
    if not os.access(SSHD, os.X_OK):
        pytest.skip("SSH test hosts need openssh-server (scripts/install test)")

    def cycle(name: str) -> int:
        for i in range(4):
            directory = tmp_path / f"{name}{i}"
            hosts_up(1, directory)
            hosts_down(directory)
        return 4

    with ThreadPoolExecutor(3) as pool:
        assert sum(pool.map(cycle, ["a", "b", "c"])) == 12
