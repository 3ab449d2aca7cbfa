"""One step on several nodes (harness.faults.nodes): the end on every node even after one
fails, the failures named together; a start's done nodes undone when one fails."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from harness.cluster.base import ClusterError
from harness.faults.nodes import on_every_node, start_each


def _step(done: list[str], failing: set[str]):
    def step(n: str) -> None:
        if n in failing:
            raise ClusterError(f"{n} will not")
        done.append(n)

    return step


@pytest.mark.parametrize("together", [False, True])
def test_every_node_is_tried_and_the_failures_named(together: bool) -> None:
    done: list[str] = []
    with pytest.raises(ClusterError) as err:
        on_every_node("restart", ["n3", "n1", "n2"], _step(done, {"n3", "n1"}), together=together)
    assert done == ["n2"]
    named = "n1: n1 will not; n3: n3 will not" if together else "n3: n3 will not; n1: n1 will not"
    assert str(err.value) == f"could not restart {named}"
    on_every_node("restart", ["n1", "n2"], _step(done, set()), together=together)


@pytest.mark.parametrize(("undo_failed", "undone"), [(False, ["n1"]), (True, ["n1", "n2"])])
def test_a_failed_start_undoes_the_nodes_done(undo_failed: bool, undone: list[str]) -> None:
    done: list[str] = []
    back: list[Sequence[str]] = []
    with pytest.raises(ClusterError, match="n2 will not"):
        start_each(
            "kill", ["n1", "n2", "n3"], _step(done, {"n2"}), back.append, undo_failed=undo_failed
        )
    assert done == ["n1"] and back == [undone]


def test_a_failed_undo_is_logged_and_the_start_s_failure_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def undo(nodes: Sequence[str]) -> None:
        raise ClusterError("undo failed too")

    with pytest.raises(ClusterError, match="n2 will not"):
        start_each("fill", ["n1", "n2"], _step([], {"n2"}), undo)
    assert "after a failed fill of n2" in caplog.text
