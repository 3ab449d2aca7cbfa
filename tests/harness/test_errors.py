"""One root for the harness's errors, and the exit statuses defined once."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import harness
from harness import errors
from harness.errors import HarnessError

#: modules that need optional pieces (the Docker SDK, matplotlib) or are the node's own
SKIPPED = ("harness.node", "harness.cluster.docker", "harness.plots", "harness.analysis")


def harness_modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages(harness.__path__, "harness.")]
    return [n for n in names if not n.startswith(SKIPPED) and not n.endswith("__main__")]


def test_every_harness_error_has_the_one_root() -> None:
    """Each exception class a harness module defines derives from HarnessError."""
    found = {}
    for name in harness_modules():
        try:
            module = importlib.import_module(name)
        except ImportError:  # an optional dependency this machine lacks
            continue
        for cls_name, cls in vars(module).items():
            if inspect.isclass(cls) and issubclass(cls, Exception) and cls.__module__ == name:
                found[f"{name}.{cls_name}"] = cls
    assert "harness.cluster.base.ClusterError" in found
    assert "harness.scenario.ScenarioError" in found
    outside = sorted(n for n, cls in found.items() if not issubclass(cls, HarnessError))
    assert outside == []


@pytest.mark.parametrize(
    "name", ["ScenarioError", "HistoryFormatError", "SnapshotFormatError", "SubjectError"]
)
def test_bad_input_errors_stay_value_errors(name: str) -> None:
    from harness.divergence import SnapshotFormatError
    from harness.history import HistoryFormatError
    from harness.scenario import ScenarioError
    from harness.subjects import SubjectError

    cls = {
        c.__name__: c
        for c in (ScenarioError, HistoryFormatError, SnapshotFormatError, SubjectError)
    }[name]
    assert issubclass(cls, ValueError) and issubclass(cls, HarnessError)


def test_exit_statuses_are_defined_once() -> None:
    """The verdicts' exit statuses are the ones errors.py names."""
    from harness.verdict import ANOMALIES, EXIT_CODES, INCONCLUSIVE, NO_VERDICT, VALID

    assert EXIT_CODES == {
        VALID: errors.EXIT_VALID,
        ANOMALIES: errors.EXIT_ANOMALIES,
        NO_VERDICT: errors.EXIT_HARNESS,
        INCONCLUSIVE: errors.EXIT_INCONCLUSIVE,
    }
    assert (errors.EXIT_VALID, errors.EXIT_ANOMALIES, errors.EXIT_HARNESS) == (0, 1, 2)
