"""Which clusters can run which faults: the refusal of a scenario that needs what the
cluster lacks, in one line before anything runs, and the backends a kind runs on."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..cluster.base import (
    CLOCK_SKEW,
    DISK,
    KILL,
    LINKS,
    MEMBERSHIP,
    PARTITIONS,
    PAUSE,
    TIME_ZONES,
    Cluster,
)
from .registry import KINDS, kind_of
from .schedule import Fault

#: per capability, in the order they are checked: the refusal of scenario ``{name}``
#: whose faults ``{kinds}`` need it, on a cluster of engine ``{engine}`` that says ``{why}``
REFUSALS: dict[str, str] = {
    PARTITIONS: (
        "scenario {name} partitions the network, which the {engine} cluster here cannot do "
        "(it needs root on the machine that runs the nodes, with nsenter and iptables)"
    ),
    TIME_ZONES: "scenario {name} sets nodes' time zones ({kinds}): {why}",
    CLOCK_SKEW: "scenario {name} skews nodes' clocks ({kinds}): {why}",
    KILL: "scenario {name} kills nodes ({kinds}): {why}",
    PAUSE: "scenario {name} pauses nodes ({kinds}): {why}",
    DISK: "scenario {name} fills nodes' disks ({kinds}): {why}",
    LINKS: "scenario {name} degrades network links ({kinds}): {why}",
    MEMBERSHIP: "scenario {name} removes and adds cluster members ({kinds}): {why}",
}


def refusal(name: str, kinds: Iterable[str], cluster: Cluster) -> str | None:
    """Why ``cluster`` cannot run scenario ``name``'s faults of ``kinds`` (None: it can),
    in one line: the first capability they need that it lacks."""
    kinds = sorted(set(kinds))
    for capability, line in REFUSALS.items():
        needing = [k for k in kinds if capability in kind_of(k).needs]
        why = cluster.capability_problem(capability) if needing else None
        if why is not None:
            return line.format(name=name, kinds=", ".join(needing), engine=cluster.engine, why=why)
    return None


def params_refusal(name: str, faults: Iterable[Fault], cluster: Cluster) -> str | None:
    """Why ``cluster``, which has every capability the faults need, cannot run one of
    scenario ``name``'s faults with its parameters (None: it can), in one line."""
    for f in faults:
        why = kind_of(f.kind).cluster_problem(cluster, dict(f.params))
        if why is not None:
            shown = ", ".join(f"{k}={v}" for k, v in f.params)
            return f"scenario {name} runs {f.kind} ({shown}), which this cluster cannot: {why}"
    return None


def backends_for(kind: str, backends: Mapping[str, frozenset[str]]) -> list[str]:
    """The backends (name -> what it can do at best) whose capabilities fault ``kind`` needs."""
    needs = kind_of(kind).needs
    return [b for b, can in backends.items() if needs <= can]


def kinds_table(backends: Mapping[str, frozenset[str]]) -> list[tuple[str, str, list[str]]]:
    """(kind, the capabilities it needs, the backends that have them) for every kind."""
    return [
        (name, ", ".join(sorted(k.needs)) or "-", backends_for(name, backends))
        for name, k in KINDS.items()
    ]
