"""The compose file and the workflow against their published JSON schemas.

Uses the schemas vendored in ``check-jsonschema`` (compose-spec, GitHub workflows), so
nothing is fetched; skipped where that package is not installed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
FILES = {
    "vendor.compose-spec": ROOT / "docker-compose.cluster.yml",
    "vendor.github-workflows": ROOT / ".github" / "workflows" / "nightly-chaos.yml",
}


def validate(schema: str, path: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("check_jsonschema")
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("schema", sorted(FILES))
def test_file_follows_its_schema(schema: str) -> None:
    res = validate(schema, FILES[schema])
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_schema_check_catches_a_misspelt_key(tmp_path: Path) -> None:
    bad = tmp_path / "compose.yml"
    bad.write_text(FILES["vendor.compose-spec"].read_text().replace("healthcheck:", "healthchek:"))
    res = validate("vendor.compose-spec", bad)
    assert res.returncode != 0 and "healthchek" in res.stdout


def test_every_run_step_is_valid_bash() -> None:
    wf = yaml.safe_load(FILES["vendor.github-workflows"].read_text())
    scripts = [s["run"] for job in wf["jobs"].values() for s in job["steps"] if "run" in s]
    assert len(scripts) >= 5
    for script in scripts:
        res = subprocess.run(["bash", "-n", "-c", script], capture_output=True, text=True)
        assert res.returncode == 0, f"{script}\n{res.stderr}"
