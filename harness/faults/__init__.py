"""Fault kinds, one home each: what a scenario's ``[[faults]]`` entry can name.

- :mod:`.base`       what a kind declares (:class:`FaultKind`), what it acts on (:class:`Stage`)
- :mod:`.kills`, :mod:`.pause`, :mod:`.partitions`, :mod:`.clock_skew`,
  :mod:`.clock_jumps`, :mod:`.lease_expiry`, :mod:`.timezone`, :mod:`.membership`: the kinds
- :mod:`.registry`   every kind by name (:data:`KINDS`)
- :mod:`.schedule`   one entry of a schedule (:class:`Fault`)

The nemesis (:mod:`harness.nemesis`) runs the kinds; the scenario reader
(:mod:`harness.scenario`) reads their parameters; a cluster backend declares the
capabilities they need (:attr:`harness.cluster.base.Cluster.CAPABILITIES`).
"""

from .base import NODE_TARGETS, RECOVERY, Action, FaultKind, Stage, WorkloadControls
from .registry import KINDS, UnknownFaultKind, kind_of, needs_of
from .schedule import Fault

__all__ = [
    "KINDS",
    "NODE_TARGETS",
    "RECOVERY",
    "Action",
    "Fault",
    "FaultKind",
    "Stage",
    "UnknownFaultKind",
    "WorkloadControls",
    "kind_of",
    "needs_of",
]
