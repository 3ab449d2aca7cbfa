"""One root for the harness's errors, and the exit statuses defined once."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

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
    assert "harness.scenario_reader.ScenarioError" in found
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


# -- the tree drawn in harness/errors.py's docstring -------------------------------------
_LINE = re.compile(
    r"^(?P<lead>(?:│   |    )*)(?P<branch>[├└]── )?(?P<name>\w+) \((?P<where>[^)]+)\): \S"
)
Tree = dict[str, tuple[str, tuple[str, ...], str | None]]


def drawn_tree(doc: str) -> Tree:
    """name -> (module, other bases, parent) as the tree after ``doc``'s ``::`` draws them."""
    block = doc.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    tree: Tree = {}
    parents: list[str] = []  # the names on the path to the line read
    for line in block.splitlines():
        match = _LINE.match(line.removeprefix("    "))
        assert match, f"not a line of the tree: {line!r}"
        depth = len(match["lead"]) // 4 + 1 if match["branch"] else 0
        module, *others = (w.strip() for w in match["where"].split(","))
        del parents[depth:]
        tree[match["name"]] = (f"harness.{module}", tuple(others), parents[-1] if parents else None)
        parents.append(match["name"])
    return tree


def import_every_module() -> set[str]:
    """Import every harness module; those an optional dependency missing here keeps out."""
    missing = set()
    for info in pkgutil.walk_packages(harness.__path__, "harness."):
        if not info.name.endswith("__main__"):
            try:
                importlib.import_module(info.name)
            except ImportError:
                missing.add(info.name)
    return missing


def real_tree() -> Tree:
    """The same, from HarnessError's subclasses (the modules defining them imported)."""
    tree: Tree = {"HarnessError": ("harness.errors", (), None)}
    todo = [HarnessError]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if not sub.__module__.startswith("harness."):
                continue  # a test's own subclass
            others = tuple(b.__name__ for b in sub.__bases__ if b is not cls)
            tree[sub.__name__] = (sub.__module__, others, cls.__name__)
            todo.append(sub)
    return tree


def test_the_drawn_errors_tree_is_the_real_one() -> None:
    missing = import_every_module()
    drawn, real = drawn_tree(errors.__doc__ or ""), real_tree()
    drawn = {n: d for n, d in drawn.items() if d[0] not in missing}
    assert len(real) >= 20 and "NodeDied" in real and "WorkerPoolError" in real
    assert sorted(set(real) - set(drawn)) == [], "draw these in harness/errors.py"
    assert sorted(set(drawn) - set(real)) == [], "these are drawn but do not exist"
    assert {n: drawn[n] for n in real} == real


def test_the_tree_reader_reads_depth_module_and_second_base() -> None:
    doc = """x::

    A (a): root
    ├── B (b.c, ValueError): one
    │   └── C (b.d): two
    └── D (e): three

    after the tree"""
    assert drawn_tree(doc) == {
        "A": ("harness.a", (), None),
        "B": ("harness.b.c", ("ValueError",), "A"),
        "C": ("harness.b.d", (), "B"),
        "D": ("harness.e", (), "A"),
    }
    with pytest.raises(AssertionError, match="not a line of the tree"):
        drawn_tree("x::\n\n    A (a) root\n")
