"""The local backend: rqlite-compatible nodes as processes on this machine, on loopback
ports or, as root, each in a network namespace of its own (:mod:`harness.cluster.netns`).

- :mod:`.cluster`    :class:`~.cluster.LocalCluster`: starting, attaching, stopping, restarting
- :mod:`.processes`  the node processes as /proc shows them: finding, signalling, reaping
- :mod:`.faults`     kill, pause, partitions, clock skew, time zones, disks on its nodes
- :mod:`.membership` members removed and added
"""
