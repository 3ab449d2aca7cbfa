"""Whole runs on the embedded cluster: rqueue stays valid, the harness catches broken subjects.

Each run starts its own cluster, drives the workload with the scenario's fault schedule
(scaled down to a few seconds), heals, drains and checks; the runs that show anomalies
also draw the plots and the report. Most squeezed scenarios are marked ``slow`` (CI runs
them in a stage of their own: ``pytest -m slow``); full-length runs of every scenario are
opt-in: ``pytest -m chaos``.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from harness.cluster.base import DISK
from harness.cluster.disk import disk_problem, foreign_holders, leftovers
from harness.cluster.engines import find_faketime
from harness.scenario import list_scenarios

#: seconds of workload per run in the default suite (the whole schedule, fault lengths
#: included, is squeezed into it: see the ``squeezed`` fixture)
BRIEF = float(os.environ.get("HARNESS_TEST_RUN_TIME", "6"))

RUN_FILES = (
    "history.jsonl", "check.json", "scenario.json", "versions.json", "run.json", "report.html",
)  # fmt: skip
PLOT_FILES = ("throughput.png", "latency.png", "report.md")

SCENARIOS = {s.name: s for s in list_scenarios()}
NOT_ROOT = os.geteuid() != 0
#: an rqlited node's clock is skewed through libfaketime
NO_NODE_CLOCK = os.environ.get("RQUEUE_TEST_ENGINE") == "rqlited" and find_faketime() is None
#: the subjects that send blob-shaped text as it is, and that ignore the nodes' zones
BLOB_BLIND = "mutant-blob-text"
ZONE_BLIND = "mutant-zone-blind"


#: the scenarios the README's suite runs squeezed (the others run in CI's slow stage)
QUICK = frozenset({"leader-failover", "partition-leader"})


def _params(names, quick=frozenset(SCENARIOS)):
    out = []
    for name in names:
        marks = [] if name in quick else [pytest.mark.slow]
        if SCENARIOS[name].needs_netns:
            marks += [
                pytest.mark.root,
                pytest.mark.skipif(NOT_ROOT, reason="partitions need root (netns + iptables)"),
            ]
        if DISK in SCENARIOS[name].needs:
            marks += [
                pytest.mark.root,
                pytest.mark.skipif(disk_problem() is not None, reason=str(disk_problem())),
            ]
        if SCENARIOS[name].needs & {"clock-skew"}:
            reason = "clock-skew-node on rqlited needs libfaketime (scripts/install adds it)"
            marks.append(pytest.mark.skipif(NO_NODE_CLOCK, reason=reason))
        if "membership" in SCENARIOS[name].needs:
            # members join and leave in seconds each, beyond the README command's budget
            marks.append(pytest.mark.slow)
        out.append(pytest.param(name, marks=marks))
    return out


#: a timezone window restarts its nodes twice and needs its transition inside it: squeezed
#: into a few seconds it tests nothing (test_timezone_* below run it at a length that fits)
FAULT_SCENARIOS = _params(
    sorted(n for n, s in SCENARIOS.items() if s.faults and not s.needs_time_zones), QUICK
)
ALL_SCENARIOS = _params(sorted(SCENARIOS))


def assert_complete_run_folder(result, scenario: str, plots: bool = True) -> dict:
    root = result.run_dir
    for name in RUN_FILES + (PLOT_FILES if plots else ()):
        assert (root / name).is_file(), f"{name} missing from {root}"
    check = json.loads((root / "check.json").read_text())
    assert check == result.check
    resolved = json.loads((root / "scenario.json").read_text())
    assert resolved["name"] == scenario
    versions = json.loads((root / "versions.json").read_text())
    assert versions["engine_version"] and versions["python"] and versions["rqueue"]
    run = json.loads((root / "run.json").read_text())
    assert run["drain"]["complete"], run["drain"]
    assert set(run["phases"]) >= {"cluster-up", "workload", "heal", "drain", "check"}
    return check


def assert_no_cluster_left(result) -> None:
    """Every node process is gone and every network namespace removed."""
    state = json.loads((result.run_dir / "cluster" / "cluster.json").read_text())
    for node in state["nodes"]:
        assert node["state"] in ("stopped", "removed"), node  # removed: a member no more
        if node["pid"]:
            with pytest.raises(ProcessLookupError):
                os.kill(node["pid"], 0)
    directory = result.run_dir / "cluster"
    assert [d for d in leftovers(directory) if not foreign_holders(d)] == []  # mounts, loops
    if state.get("netns"):
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        for member in state["netns"]["members"].values():
            assert member["netns"] not in left


@pytest.mark.parametrize("scenario", FAULT_SCENARIOS)
def test_rqueue_is_valid_under_every_scenario(run_scenario, squeezed, scenario):
    result = run_scenario(squeezed(scenario, BRIEF), plots=False)
    assert result.exit_code in (0, 1, 3), (result.reason, result.summary)
    check = assert_complete_run_folder(result, scenario, plots=False)
    if result.exit_code == 3:
        # a 60 s schedule squeezed into a few seconds: a fault due in its last moments may
        # still wait for a leader when it ends, a kill-all may leave little time to work;
        # such a run is inconclusive (it says why), never invalid
        assert check["coverage"]["reasons"], check["coverage"]
    ops = result.summary["ops"]
    assert ops["publish"]["ok"] > 10 and ops["claim"]["ok"] > 10 and ops["ack"]["ok"] > 10
    kinds = {f.kind for f in SCENARIOS[scenario].faults}
    struck = set(result.summary["faults"])
    if result.exit_code == 3 and struck != kinds:
        # on a loaded machine a window may never start before the squeezed run ends (a
        # grow's joins took seconds, and the shrink after it never came): the run says so
        missed = [r for r in check["coverage"]["reasons"] if "did not happen" in r]
        assert struck < kinds and missed, (struck, check["coverage"])
    else:
        assert struck == kinds, (result.exit_code, result.summary)  # every kind struck
    if SCENARIOS[scenario].workload.worker_processes:  # and the pool disrupted its workers
        assert sum(result.summary["worker_disruptions"].values()) > 0, result.summary
    assert not result.summary.get("nemesis_errors")
    assert_no_cluster_left(result)
    assert result.exit_code != 1 and check["valid"] is True, check["anomalies"]


@pytest.mark.parametrize(
    ("subject", "anomaly"),
    [
        ("mutant-no-exclusivity", "duplicate-group-lease"),
        ("mutant-lifo", "fifo-violation"),
        ("mutant-ack-wrong-row", "lost"),
    ],
)
def test_each_mutant_is_caught(run_scenario, subject, anomaly):
    result = run_scenario("steady", time=4, subject=subject, plots=subject == "mutant-lifo")
    assert result.exit_code == 1, (result.reason, result.summary)
    assert result.check["anomalies"][anomaly]["count"] > 0, result.check["anomalies"]
    if subject == "mutant-lifo":
        assert_complete_run_folder(result, "steady")
        report = (result.run_dir / "report.md").read_text()
        assert "fifo-violation" in report and '"f": "claim"' in report  # example operations


@pytest.mark.parametrize(
    ("scenario", "anomalies"),
    [
        ("lease-expiry", {"stale-ack-accepted", "duplicate-group-lease"}),
        ("clock-skew", {"duplicate-group-lease"}),
    ],
)
@pytest.mark.slow
def test_seed_reference_shows_anomalies(run_scenario, squeezed, scenario, anomalies):
    result = run_scenario(squeezed(scenario, BRIEF), subject="seed-reference")
    assert result.exit_code == 1, (result.reason, result.summary)
    found = {k for k, v in result.check["anomalies"].items() if v["count"]}
    assert found & anomalies, result.check["anomalies"]
    assert_complete_run_folder(result, scenario)
    assert "anomaly-timeline.png" in (result.run_dir / "report.md").read_text()


@pytest.mark.chaos
@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
def test_rqueue_is_valid_at_full_length(run_scenario, scenario):
    result = run_scenario(scenario)
    assert result.exit_code == 0, (result.reason, result.summary)
    assert assert_complete_run_folder(result, scenario)["valid"] is True


@pytest.mark.slow
def test_blob_shaped_text_sent_as_it_is_is_caught_as_corrupted(run_scenario, squeezed):
    # a short drain: the groups whose leases can never be acked never move on
    result = run_scenario(squeezed("blob-text", BRIEF, drain_timeout=5.0), subject=BLOB_BLIND)
    assert result.exit_code == 1, (result.reason, result.summary)
    assert result.check["anomalies"]["corrupted"]["count"] > 0, result.check["anomalies"]
    report = (result.run_dir / "report.md").read_text()
    assert "### corrupted:" in report and "another group id" in report


def spring_forward(tmp_path, seconds: float = 16.0) -> str:
    """Every node in UTC+00:00, springing forward an hour 5 s after the restarts began,
    back in UTC 11 s later; a short drain (a group leased an hour ahead stays leased)."""
    path = tmp_path / "spring-forward.toml"
    path.write_text(
        'description = "every node springs forward an hour"\n'
        f"duration = {seconds}\n"
        "[workload]\nvisibility = 3.0\ndrain_timeout = 8.0\n"
        '[[faults]]\nkind = "timezone"\ntarget = "all"\nstart = 1.0\nduration = 11.0\n'
        "offset = 0\ntransition = 5.0\n"
    )
    return str(path)


@pytest.mark.slow
def test_a_spring_forward_gives_a_zone_blind_queue_duplicate_group_leases(run_scenario, tmp_path):
    result = run_scenario(spring_forward(tmp_path), subject=ZONE_BLIND, plots=False)
    assert result.exit_code == 1, (result.reason, result.summary)
    assert result.check["anomalies"]["duplicate-group-lease"]["count"] > 0
    assert result.summary["faults"] == {"timezone": 1} and not result.summary.get("refused")


@pytest.mark.slow
def test_rqueue_refuses_cleanly_while_every_node_is_off_utc(run_scenario, tmp_path):
    result = run_scenario(spring_forward(tmp_path), plots=False)
    assert result.exit_code == 0, (result.reason, result.summary)
    refused = result.summary["refused"]
    assert refused and all("TZ=UTC" in line and "+3600" in line for line in refused[:1])
    stats = result.check["stats"]["refusals"]
    assert stats["count"] > 0 and result.check["coverage"]["conclusive"]
