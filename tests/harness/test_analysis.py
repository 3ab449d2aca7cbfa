"""The analysis report: tables from matrix folders, shrink sections, the template, the plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.analysis import plan, render, tables


def _cell(scenario, engine, subject, seed, verdict="valid", anomalies=None, run_dir=None):
    return {
        "scenario": scenario, "engine": engine, "subject": subject, "seed": seed,
        "exit": {"valid": 0, "ANOMALIES": 1}.get(verdict, 3), "verdict": verdict,
        "anomalies": anomalies or {}, "reason": None, "seconds": 30.0,
        "replicas": "3 nodes at applied index 9, identical (groups 0 rows)", "run_dir": run_dir,
    }  # fmt: skip


def _matrix(folder: Path, cells: list[dict]) -> Path:
    folder.mkdir(parents=True)
    (folder / "matrix.json").write_text(json.dumps(cells))
    return folder


def test_a_later_matrix_replaces_the_same_cell(tmp_path: Path) -> None:
    a = _matrix(tmp_path / "a", [
        _cell("steady", "embedded", "rqueue", 1, "ANOMALIES", {"lost": 2}),
        _cell("steady", "embedded", "rqueue", 2),
    ])  # fmt: skip
    b = _matrix(tmp_path / "b", [_cell("steady", "embedded", "rqueue", 1)])
    cells = tables.load_cells([a, b])
    assert len(cells) == 2 and all(c["verdict"] == "valid" for c in cells)
    assert tables.totals_line(cells, "rqueue") == (
        "2 runs: 2 valid; no anomaly; replicas identical after the drain in 2"
    )
    with pytest.raises(ValueError, match="not a matrix result"):
        tables.load_cells([tmp_path / "nothing"])


def test_the_grid_puts_engines_in_columns_and_names_what_failed(tmp_path: Path) -> None:
    cells = [
        _cell("steady", "rqlited-v6.10.2", "rqueue", 1),
        _cell("steady", "rqlited-v8.36.18", "rqueue", 1),
        _cell("steady", "embedded", "rqueue", 1),
        _cell("steady", "embedded", "rqueue", 2, "ANOMALIES", {"fifo-violation": 3}),
    ]
    text = tables.grid(cells, "rqueue")
    assert text.splitlines()[0] == "| scenario | embedded | rqlited-v8.36.18 | rqlited-v6.10.2 |"
    assert "1: valid; 2: ANOMALIES (fifo-violation 3)" in text
    assert "valid x1 (seeds 1)" in text
    runs = tables.runs_table(cells, ["rqueue"])
    assert "| rqueue | steady | embedded | 2 | ANOMALIES | fifo-violation 3 |" in runs


def _shrink(folder: Path, trial: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "lease-expiry-min.toml").write_text('description = "x"\n')
    (folder / "shrink.md").write_text("# Shrink\n")
    data = {
        "scenario": "lease-expiry", "subject": "seed-reference",
        "engine_args": ["--engine", "embedded"], "kinds": ["duplicate-group-lease"],
        "seed": 1, "budget": 900, "tries": 3, "elapsed": 300.0, "stopped": "done",
        "original": "3 nodes, 20 s; ...", "minimal": "3 nodes, 7 s; ...", "confirmed": [4, 5],
        "steps": [
            {"index": 0, "change": "the original", "kept": True, "tries": []},
            {"index": 1, "change": "confirmation of the smallest", "kept": False, "tries": [
                {"seed": 1001, "reproduced": False, "run_dir": str(trial) + "-x"},
                {"seed": 1002, "reproduced": True, "run_dir": str(trial)},
            ]},
        ],
    }  # fmt: skip
    (folder / "search.json").write_text(json.dumps(data))
    return folder


def test_a_shrink_section_copies_its_scenario_and_gives_the_command(tmp_path: Path) -> None:
    assets = tmp_path / "assets"
    assets.mkdir()
    s = tables.shrink_summary(_shrink(tmp_path / "s", tmp_path / "trial"))
    assert tables.reproducing_trial(s) == tmp_path / "trial"
    text = render.shrink_section(s, assets)
    assert (assets / "seed-reference-lease-expiry-min.toml").is_file()
    assert (assets / "seed-reference-lease-expiry-shrink.md").is_file()
    assert "--seed 1002 --subject seed-reference --engine embedded" in text
    assert "4 of 5 runs" in text
    assert "| seed-reference | lease-expiry | duplicate-group-lease |" in tables.shrinks_table([s])


def test_the_report_fills_every_placeholder_and_refuses_unknown_ones(tmp_path: Path) -> None:
    m = _matrix(tmp_path / "m", [
        _cell("steady", "embedded", "rqueue", 1),
        _cell("lease-expiry", "embedded", "seed-reference", 1, "ANOMALIES", {"lost": 1}),
    ])  # fmt: skip
    assets = tmp_path / "assets"
    assets.mkdir()
    (assets / "repro-rqlited-v8.36.18.txt").write_text("verdict: replicas DIVERGED\n")
    template = "{{generated}}\n{{rqueue_grid}}\n{{subjects_table}}\n{{repro_outputs}}\n{{plan}}"
    text = render.report(template, [m], [], assets, "python -m harness analysis --matrix m")
    assert "{{" not in text and "by `python -m harness analysis --matrix m`" in text
    assert "| seed-reference | lease-expiry | embedded | 1 | ANOMALIES | lost 1 |" in text
    assert "verdict: replicas DIVERGED" in text and "rqlited-v8.36.18" in text
    with pytest.raises(ValueError, match="unknown placeholders: nope"):
        render.report("{{nope}}", [m], [], assets, "x")


def test_the_committed_template_only_names_known_placeholders(tmp_path: Path) -> None:
    template = (Path(render.REPO) / "docs" / "analysis" / "template.md").read_text()
    m = _matrix(tmp_path / "m", [_cell("steady", "embedded", "rqueue", 1)])
    text = render.report(template, [m], [], tmp_path, "cmd")
    assert "{{" not in text


def test_the_plan_builds_matrix_and_shrink_commands(tmp_path: Path) -> None:
    spec = plan.MATRICES[1]
    argv = plan.matrix_argv(spec, tmp_path, "/b/rqlited-v9", "/b/rqlited-v6")
    assert argv[3:] == ["matrix", "--out", str(tmp_path), "--time", "30", "--seeds", "1", "2",
                        "3", "--subject", "seed-reference", "--engine", "embedded",
                        "--scenario", "lease-expiry", "--scenario", "clock-skew",
                        "--scenario", "steady", "--expect-anomalies"]  # fmt: skip
    assert plan.engine_spec("v8", "/b/rqlited-v9", "x") == "rqlited:/b/rqlited-v9"
    cells = [
        _cell("steady", "rqlited-v9", "mutant-subquery-now", 2, "ANOMALIES",
              {"replica-divergence": 3}, run_dir="/r/2"),
        _cell("steady", "rqlited-v9", "mutant-subquery-now", 1, run_dir="/r/1"),
    ]  # fmt: skip
    m = _matrix(tmp_path / "m", cells)
    subq = next(s for s in plan.SHRINKS if s.name == "mutant-subquery-now-v8")
    label = plan.engine_label(subq.engine, "/b/rqlited-v9", "/b/rqlited-v6")
    assert plan.first_failing(m / "matrix.json", subq, label) == Path("/r/2")
    assert "--kind" in plan.shrink_argv(Path("/r/2"), subq, tmp_path)


# -- defaults a user can use -----------------------------------------------------------------
PRODUCT = ("rqueue", "harness", "scripts", "benchmarks")


def test_no_path_of_the_development_machine_in_the_product() -> None:
    root = Path(render.REPO)
    found = []
    for top in PRODUCT:
        for path in sorted((root / top).rglob("*")):
            if not path.is_file() or path.suffix in (".pyc", ".png"):
                continue
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if "/work/" in line or "shared/" in line:
                    found.append(f"{path.relative_to(root)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


def _parse(*argv: str):
    import argparse

    from harness import analysis

    parser = argparse.ArgumentParser()
    analysis.register(parser.add_subparsers())
    return parser, parser.parse_args(["analysis", *argv])


def test_the_analysis_writes_under_results_unless_told(tmp_path: Path, monkeypatch) -> None:
    from harness import analysis

    parser, args = _parse()
    help_text = parser._subparsers._group_actions[0].choices["analysis"].format_help()
    assert "/work/" not in help_text and "shared/" not in help_text
    out = analysis.output_path(args.out)
    assert out.parts[0] == "results" and out.name == "analysis.md", out
    assert not out.resolve().is_relative_to(Path(render.REPO) / "docs")
    assert analysis.output_path(tmp_path / "r.md") == tmp_path / "r.md"


def test_a_rerun_names_the_binary_it_lacks(tmp_path: Path, monkeypatch) -> None:
    from harness import analysis

    for name in ("RQLITED", "RQLITED_V8", "RQLITED_V6"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no rqlited on PATH
    _, args = _parse("--rerun", str(tmp_path / "a"))
    with pytest.raises(ValueError, match=r"--rqlited-v8 PATH.*RQLITED_V8"):
        analysis.binaries(args)
    # the embedded-only parts of the plan need no binary at all
    _, args = _parse("--rerun", str(tmp_path / "a"), "--only", "mutants")
    assert analysis.binaries(args) == (None, None)
    fake = tmp_path / "rqlited"
    fake.write_text("#!/bin/sh\necho 'rqlited 8.36.18 linux/amd64'\n")
    fake.chmod(0o755)
    old = tmp_path / "old"
    old.write_text("#!/bin/sh\necho 'rqlited v6.10.2 linux/amd64'\n")
    old.chmod(0o755)
    _, args = _parse("--rerun", str(tmp_path / "a"), "--only", "subquery-now")
    with pytest.raises(ValueError, match=r"--rqlited-v6 PATH.*RQLITED_V6"):
        analysis.binaries(args)  # v8 from PATH, v6 missing
    monkeypatch.setenv("RQLITED_V6", str(old))
    assert analysis.binaries(args) == (str(fake), str(old))
    monkeypatch.setenv("RQLITED_V6", str(fake))
    with pytest.raises(ValueError, match=r"rqlite v6 or v7.*8\.36\.18"):
        analysis.binaries(args)
    assert analysis.main_analysis(_parse()[1]) == 2  # no matrix: says so, writes nothing
