"""Subjects from outside the project: ``--subject package.module:ATTRIBUTE`` and entry points.

The run tests start ``python -m harness`` in a subprocess with a module written to
``tmp_path`` on PYTHONPATH, as a team testing its own queue would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.subjects import ENTRY_POINT_GROUP, SubjectError, get_subject
from harness.subjects.base import client_problem

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "example_subject" / "mymodule.py"


def harness(tmp_path: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def write(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))


# -- loading, in process -------------------------------------------------------------------
@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


@pytest.mark.parametrize(
    ("spec", "module", "reason"),
    [
        ("nowhere_xyz:SUBJECT", None, "cannot import 'nowhere_xyz': ModuleNotFoundError"),
        ("syntaxbad:SUBJECT", "def (:\n", "cannot import 'syntaxbad': SyntaxError"),
        ("raises:SUBJECT", "raise RuntimeError('no config')\n", "RuntimeError: no config"),
        ("exits:SUBJECT", "import sys\nsys.exit(3)\n", "cannot import 'exits': SystemExit"),
        ("plain:NOPE", "X = 1\n", "module 'plain' has no 'NOPE'"),
        ("plain2:X", "X = 1\n", "is not a subject: a int lacks name, open_sync, open_async"),
        ("plain3:", "X = 1\n", "expected package.module:ATTRIBUTE"),
        (
            "coro:SUBJECT",
            "from types import SimpleNamespace as N\n"
            "async def o(u, c, t): ...\n"
            "SUBJECT = N(name='x', open_sync=o, open_async=o)\n",
            "open_sync must be a plain function",
        ),
    ],
)
def test_a_subject_that_cannot_load_says_why_in_one_line(
    on_path: Path, spec: str, module: str | None, reason: str
) -> None:
    if module is not None:
        (on_path / f"{spec.partition(':')[0]}.py").write_text(module)
    with pytest.raises(SubjectError) as e:
        get_subject(spec)
    assert reason in str(e.value)
    assert "\n" not in str(e.value)
    assert str(e.value).startswith(f"subject {spec!r}")


def test_unknown_names_list_the_known_ones_and_the_path_form() -> None:
    with pytest.raises(ValueError, match=r"known subjects: rqueue.*package\.module:ATTRIBUTE"):
        get_subject("nope")


class _Full:
    def publish(self, group_id, event, priority=0): ...
    def claim(self, worker_id, visibility, min_priority=0): ...
    def ack(self, lease): ...
    def ack_and_claim(self, lease, worker_id, visibility, min_priority=0): ...
    def nack(self, lease, delay=0): ...
    def extend(self, lease, visibility): ...
    def close(self): ...


class _AsyncFull:
    async def publish(self, group_id, event, priority=0): ...
    async def claim(self, worker_id, visibility, min_priority=0): ...
    async def ack(self, lease): ...
    async def ack_and_claim(self, lease, worker_id, visibility, min_priority=0): ...
    async def nack(self, lease, delay=0): ...
    async def extend(self, lease, visibility): ...
    async def close(self): ...


def test_client_protocol_problems_are_named() -> None:
    assert client_problem(_Full(), is_async=False) is None
    assert client_problem(_AsyncFull(), is_async=True) is None
    assert client_problem(_Full(), is_async=True) == "_Full.publish is not an async method"
    assert client_problem(_AsyncFull(), is_async=False) == (
        "_AsyncFull.publish is async in the sync client"
    )
    partial = type("Partial", (), {"publish": _Full.publish, "close": _Full.close})()
    assert client_problem(partial, is_async=False) == (
        "Partial lacks claim, ack, ack_and_claim, nack, extend"
    )


# -- the CLI, in a subprocess --------------------------------------------------------------
@pytest.mark.slow
def test_the_documented_example_runs_steady_and_is_valid(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE, tmp_path / "mymodule.py")
    out = tmp_path / "run"
    res = harness(tmp_path, "run", "steady", "--time", "4", "--subject", "mymodule:SUBJECT",
                  "--no-progress", "--no-plots", "--out", str(out))  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    check = json.loads((out / "check.json").read_text())
    assert check["valid"] is True
    ops = check["stats"]["ops"]
    assert ops["publish"]["ok"] > 10 and ops["claim"]["ok"] > 10 and ops["ack"]["ok"] > 10
    assert check["stats"]["published"] == check["stats"]["acked"]  # drained by its pending()
    run = json.loads((out / "run.json").read_text())
    assert run["options"]["subject"] == "mymodule:SUBJECT" and run["drain"]["complete"]


def test_a_module_that_fails_to_import_exits_2_with_one_line(tmp_path: Path) -> None:
    write(tmp_path, "broken", "import not_installed_anywhere_xyz\n")
    res = harness(tmp_path, "run", "steady", "--time", "2", "--subject", "broken:SUBJECT",
                  "--no-progress")  # fmt: skip
    assert res.returncode == 2
    assert res.stderr.splitlines() == [
        "harness: error: subject 'broken:SUBJECT': cannot import 'broken': "
        "ModuleNotFoundError: No module named 'not_installed_anywhere_xyz'"
    ]
    assert not (tmp_path / "results").exists()  # nothing was started


@pytest.mark.slow
def test_a_client_that_does_not_fit_exits_2_with_one_line(tmp_path: Path) -> None:
    write(
        tmp_path,
        "noextend",
        """
        from harness.subjects import Subject

        class Client:
            def __init__(self, urls, clock, timeout): ...
            def publish(self, group_id, event, priority=0): return 1
            def claim(self, worker_id, visibility, min_priority=0): return None
            def ack(self, lease): ...
            def ack_and_claim(self, lease, worker_id, visibility, min_priority=0): ...
            def nack(self, lease, delay=0): ...
            def close(self): ...

        async def open_async(urls, clock, timeout):
            raise AssertionError("not reached: the sync client is opened first")

        SUBJECT = Subject("noextend", "lacks extend", Client, open_async)
        """,
    )
    res = harness(tmp_path, "run", "steady", "--time", "2", "--subject", "noextend:SUBJECT",
                  "--no-progress", "--out", str(tmp_path / "run"))  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert res.stderr.splitlines() == [
        "harness: error: subject 'noextend:SUBJECT': open_sync returned a client that does "
        "not fit: Client lacks extend"
    ]
    # issue 21: the run folder it leaves, over an empty history, never says valid
    report = (tmp_path / "run" / "report.md").read_text()
    assert "Verdict: valid" not in report
    assert (
        "**No verdict: the run failed:** subject 'noextend:SUBJECT': open_sync returned a "
        "client that does not fit: Client lacks extend" in report
    )
    assert "| verdict | no verdict |" in report


def test_installed_subjects_are_listed_and_run_by_name(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE, tmp_path / "mymodule.py")
    info = tmp_path / "tinyq_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tinyq-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\ntinyq = mymodule:SUBJECT\nbroken = nowhere_xyz:SUBJECT\n"
    )
    res = harness(tmp_path, "list")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert "subjects (--subject NAME, or --subject package.module:ATTRIBUTE):" in lines
    tiny = next(x for x in lines if x.strip().startswith("tinyq "))
    assert "one table on rqlite's HTTP API" in tiny and "[installed: mymodule:SUBJECT" in tiny
    broken = next(x for x in lines if x.strip().startswith("broken "))
    assert "(cannot load: entry point 'broken'" in broken
    assert any(x.strip().startswith("steady ") for x in lines)
    res = harness(tmp_path, "run", "steady", "--subject", "broken", "--no-progress")
    assert res.returncode == 2
    assert res.stderr.startswith("harness: error: entry point 'broken' (rqueue.harness.subjects)")


@pytest.mark.slow
def test_an_async_client_with_plain_methods_exits_2_with_one_line(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE, tmp_path / "mymodule.py")
    write(
        tmp_path,
        "plainasync",
        """
        import dataclasses

        import mymodule

        async def open_async(urls, clock, timeout):
            return mymodule.TinyQueue(urls, clock, timeout)  # the sync client, by mistake

        SUBJECT = dataclasses.replace(mymodule.SUBJECT, open_async=open_async)
        """,
    )
    res = harness(tmp_path, "run", "steady", "--time", "2", "--subject", "plainasync:SUBJECT",
                  "--no-progress", "--out", str(tmp_path / "run"))  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert res.stderr.splitlines() == [
        "harness: error: subject 'plainasync:SUBJECT': open_async returned a client that does "
        "not fit: TinyQueue.publish is not an async method"
    ]
