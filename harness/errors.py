"""The harness's errors and exit statuses, defined once.

:class:`HarnessError` is the root of every error the harness raises on purpose: a
scenario, history or snapshot it cannot read, a cluster it cannot start or reach, a
subject it cannot load. Its message is the one-line reason a command prints. Errors that
are also bad input subclass ``ValueError`` too, so callers catching that keep working.

Exit statuses: every command returns 0 when all is well and 2 when the harness itself
failed; 1 and 3 carry the command's own meaning (a run: anomalies, inconclusive); 130 is
a command that stopped on Ctrl-C after undoing what it had started; 141 a command whose
standard output was closed by its reader (``| head``), which it leaves quietly, as Unix
tools do (``rqueue._stdout.quiet_when_stdout_closes``, shared with ``python -m rqueue``;
the command-line modules import it from there, never this module: the node image holds
the harness without rqueue, and its entrypoint imports this module).

The errors stay beside the code that raises them; their tree, each class with its module
(under ``harness.``; after a comma, a second base) and when it is raised, is drawn here
and held against the classes by ``tests/harness/test_errors.py``::

    HarnessError (errors): the harness could not do its job
    ├── ClusterError (cluster.base): a cluster cannot be started, reached or controlled
    │   ├── QueryRefused (cluster.base): a node refused a read (HTTP 4xx, a statement's error)
    │   ├── NodeDied (cluster.local.cluster): a local node's process exited on its own
    │   ├── DockerUnreachable (cluster.docker.specs): the Docker engine cannot be reached
    │   ├── PortTaken (cluster.docker.specs): a host port was taken before Docker bound it
    │   ├── ImageMissing (cluster.docker.engine): an image is not here and cannot be pulled
    │   ├── InventoryError (cluster.ssh.inventory): the SSH backend's inventory file is bad
    │   ├── SshError (cluster.ssh.session): a host cannot be reached, or a command on it failed
    │   └── MembershipError (cluster.membership): a member could not be removed or added
    ├── ScenarioError (scenario_reader, ValueError): a scenario file or a value for it is malformed
    ├── UnknownFaultKind (faults.registry, ValueError): a name no fault kind has
    ├── HistoryFormatError (history, ValueError): a history breaks docs/history-format.md
    ├── SnapshotFormatError (divergence, ValueError): a replicas record has the wrong shape
    ├── SubjectError (subjects.base, ValueError): a subject cannot load or misfits the protocol
    ├── WorkloadError (workload.record): the workload cannot start or stop
    │   └── WorkerPoolError (workload.processes): the worker processes cannot start or stop
    ├── ZoneFileError (zonefile, ValueError): a time zone cannot be written as asked
    ├── ShrinkError (shrink, ValueError): a run folder cannot be shrunk
    ├── ClientDied (sim.client, OutcomeUnknown): a simulated client died at a fault point
    ├── ImageError (image.rootfs, RuntimeError): ``image build`` cannot build the node image
    ├── Refused (image.entrypoint): a node container refuses its settings at start
    ├── LoadError (bench.load): a benchmark's load cannot run
    ├── StoreError (bench.store): the store refused or failed a benchmark's request
    └── ProfileError (bench.pprof, ValueError): bytes that are not a CPU profile
"""

from __future__ import annotations

#: a run or a check: the history is valid; any other command: done as asked
EXIT_VALID = EXIT_OK = 0
#: a run or a check: the checker found anomalies
EXIT_ANOMALIES = 1
#: the harness itself failed (one line on stderr says why)
EXIT_HARNESS = 2
#: a run: no anomaly, but the run did not test what it planned
EXIT_INCONCLUSIVE = 3
#: ``matrix``: some cell did not end with the status it wanted
EXIT_SOME_FAILED = 1
#: ``bench``: a target was missed
EXIT_MISSED = 1
#: ``shrink``: the failure did not reproduce
EXIT_NOT_REPRODUCED = 3
#: ``cluster status``: the nodes agree on no leader
EXIT_NO_LEADER = 1
#: ``cluster up``: interrupted (Ctrl-C, 128 + SIGINT); what it had started is stopped
EXIT_INTERRUPTED = 130


class HarnessError(RuntimeError):
    """The harness could not do its job; the message is the one-line reason."""
