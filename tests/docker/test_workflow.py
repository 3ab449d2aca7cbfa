"""The nightly chaos workflow parses, lists every scenario and fails on a bad run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "nightly-chaos.yml"


@pytest.fixture(scope="module")
def wf() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def step(job: dict, name_part: str) -> dict:
    found = [s for s in job["steps"] if name_part in s.get("name", "")]
    assert len(found) == 1, f"one step named like {name_part!r}"
    return found[0]


def test_scheduled_and_manual(wf: dict) -> None:
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` as true
    assert triggers["schedule"][0]["cron"].split()[2:] == ["*", "*", "*"]  # every night
    assert "workflow_dispatch" in triggers
    assert wf["permissions"] == {"contents": "read"}


def test_every_scenario_runs_with_the_docker_backend(wf: dict) -> None:
    run = wf["jobs"]["run"]
    assert run["needs"] == "scenarios"
    assert run["strategy"]["fail-fast"] is False
    assert run["strategy"]["matrix"]["include"] == "${{ fromJSON(needs.scenarios.outputs.matrix) }}"
    assert wf["jobs"]["scenarios"]["outputs"]["matrix"] == "${{ steps.list.outputs.matrix }}"
    script = step(run, "Run the scenario")["run"]
    assert 'args=(run "$SCENARIO" --backend docker --image "$IMAGE" --out results)' in script
    assert 'for kind in $DROP; do args+=(--skip-fault "$kind"); done' in script
    assert re.search(r'sudo .*"\$\(command -v python\)" -m harness "\$\{args\[@\]\}"', script)
    assert run["env"] == {
        "SCENARIO": "${{ matrix.scenario }}",
        "IMAGE": "${{ matrix.image }}",
        "DROP": "${{ matrix.drop }}",
    }


def test_the_schedule_runs_the_official_image_too(wf: dict) -> None:
    """Real rqlite every night: the schedule's images are the project's and the official
    one; a manual dispatch runs the input's image (the project's by default)."""
    images = wf["env"]["IMAGES"]
    assert "github.event_name == 'schedule'" in images
    assert "'rqueue/node:local rqlite/rqlite:10.2.7'" in images
    assert "inputs.image || 'rqueue/node:local'" in images
    findings = wf["jobs"]["findings"]
    assert "repro_rqlite_now_localtime.py --image" in step(findings, "local time")["run"]
    assert "repro_rqlite_now_subquery.py" in step(findings, "scalar subquery")["run"]
    assert "repro_rqlite_forward_resend.py --image" in step(findings, "applied twice")["run"]


def test_run_folders_are_uploaded_and_clusters_torn_down(wf: dict) -> None:
    run = wf["jobs"]["run"]
    upload = step(run, "Upload the run folder")
    assert upload["uses"].startswith("actions/upload-artifact@")
    assert upload["if"] == "always()"
    assert upload["with"]["path"] == "results/"
    assert "${{ matrix.scenario }}" in upload["with"]["name"]  # one artifact per scenario
    down = step(run, "Tear down")
    assert down["if"] == "always()"
    tagged = '-m harness cluster down --all --backend docker --tag "nightly-${{ github.run_id }}"'
    assert tagged in down["run"]  # only this run's leftovers, never another's cluster
    backend = wf["jobs"]["backend"]
    assert "-m harness image build" in step(backend, "Node image")["run"]
    assert "-m pytest -q -m chaos tests/docker" in step(backend, "Live backend")["run"]
    assert "-m harness image build" in step(run, "Node image")["run"]
    assert tagged in step(backend, "Tear down")["run"]


def _list_script(wf: dict) -> str:
    text = step(wf["jobs"]["scenarios"], "Every scenario")["run"]
    m = re.search(r"<<'EOF'[^\n]*\n(.*?)\nEOF", text, re.S)
    assert m, "the list step embeds a Python heredoc"
    return m.group(1)


#: stand-in scenario files: the matrix logic reads only each fault's kind
FAKE_SCENARIOS = {
    "clock-skew": (
        '[[faults]]\nkind = "clock-skew-worker"\n\n[[faults]]\nkind = "clock-skew-node"\n'
    ),
    "leader-failover": '[[faults]]\nkind = "kill-leader"\nstart = 10.0\n',
    "steady": 'description = "no faults"\n',
}


def _run_list(
    wf: dict, tmp_path: Path, listed: list[str], image: str = "rqlite/rqlite:10.2.7"
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "harness" / "scenarios").mkdir(parents=True)
    for name, text in FAKE_SCENARIOS.items():
        (tmp_path / "harness" / "scenarios" / f"{name}.toml").write_text(text)
    (tmp_path / "harness-list.txt").write_text(
        "\n".join(f"{n}   some description" for n in listed) + "\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "IMAGES": image}
    return subprocess.run(
        [sys.executable, "-c", _list_script(wf)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_matrix_lists_every_scenario_on_every_image(wf: dict, tmp_path: Path) -> None:
    images = "rqueue/node:local rqlite/rqlite:10.2.7"
    res = _run_list(wf, tmp_path, sorted(FAKE_SCENARIOS), image=images)
    assert res.returncode == 0, res.stderr
    out = res.stdout.strip()
    assert out.startswith("matrix=")
    node, official = "rqueue/node:local", "rqlite/rqlite:10.2.7"
    assert json.loads(out.removeprefix("matrix=")) == [
        {"scenario": "clock-skew", "image": node, "drop": ""},  # its nodes read a clock file
        {"scenario": "leader-failover", "image": node, "drop": ""},
        {"scenario": "steady", "image": node, "drop": ""},
        # the official image's nodes share the host's clock: that one fault is left out
        {"scenario": "clock-skew", "image": official, "drop": "clock-skew-node"},
        {"scenario": "leader-failover", "image": official, "drop": ""},
        {"scenario": "steady", "image": official, "drop": ""},
    ]


def test_matrix_step_fails_when_a_scenario_is_not_listed(wf: dict, tmp_path: Path) -> None:
    res = _run_list(wf, tmp_path, ["clock-skew", "steady"])
    assert res.returncode != 0
    assert "leader-failover.toml is not in `python -m harness list`" in res.stderr


def test_the_project_scenarios_parse_for_the_matrix() -> None:
    """Every scenario file (once there are any) has the shape the matrix step reads."""
    for path in (ROOT / "harness" / "scenarios").glob("*.toml"):
        faults = tomllib.loads(path.read_text()).get("faults", [])
        assert isinstance(faults, list), path
        assert all(isinstance(f, dict) and isinstance(f.get("kind"), str) for f in faults), path


@pytest.mark.parametrize(
    ("rc", "verdict"),
    [(0, "valid"), (1, "ANOMALIES FOUND"), (2, "HARNESS FAILED"), (3, "INCONCLUSIVE")],
)
def test_run_step_exits_with_the_harness_status(
    wf: dict, tmp_path: Path, rc: int, verdict: str
) -> None:
    """Run the step's shell with stand-ins for sudo and python: the job fails on 1, 2, 3."""
    if not shutil.which("bash"):
        pytest.skip("bash is needed to run the workflow step")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sudo").write_text(
        '#!/bin/sh\nwhile [ "${1#--}" != "$1" ]; do shift; done\nexec "$@"\n'
    )
    (bin_dir / "python").write_text('#!/bin/sh\necho "$@" > "$ARGS_FILE"\nexit "$FAKE_RC"\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    summary = tmp_path / "summary.md"
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SCENARIO": "leader-failover",
        "IMAGE": "rqlite/rqlite:10.2.7",
        "DROP": "clock-skew-node",
        "RUN_TIME": "20",
        "FAKE_RC": str(rc),
        "ARGS_FILE": str(tmp_path / "args"),
        "GITHUB_STEP_SUMMARY": str(summary),
    }
    script = step(wf["jobs"]["run"], "Run the scenario")["run"]
    res = subprocess.run(["bash", "-e", "-c", script], env=env, cwd=tmp_path, timeout=30)
    assert res.returncode == rc
    assert (tmp_path / "args").read_text().split() == [
        "-m", "harness", "run", "leader-failover", "--backend", "docker",
        "--image", "rqlite/rqlite:10.2.7", "--out", "results", "--time", "20",
        "--skip-fault", "clock-skew-node",
    ]  # fmt: skip
    assert summary.read_text().strip() == (
        f"| leader-failover | rqlite/rqlite:10.2.7 | faults dropped: clock-skew-node | {verdict} |"
    )
