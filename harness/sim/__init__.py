"""Deterministic simulation: rqueue's own core against simulated rqlite nodes, in virtual
time, every choice drawn from one seed (``python -m harness sim``, docs/simulation.md).

- :mod:`.loop`      virtual time, timed events, tasks as generators
- :mod:`.net`       message delays, partitions, lossy and slow links
- :mod:`.raft`      terms, elections, the replicated log, commit on a majority
- :mod:`.node`      a node's HTTP contract: rewriting, forwarding, SQLite, rqlite's answers
- :mod:`.cluster`   the nodes as the harness's fault kinds drive a cluster
- :mod:`.nemesis`   the harness's nemesis on the virtual clock
- :mod:`.client`    rqueue's core driven over the simulated network
- :mod:`.workload`  the harness's workload loops driven as tasks
- :mod:`.world`     one world, and the seeded stand-ins for OS randomness
- :mod:`.run`       one seed: the run folder, judged by the harness's checker
- :mod:`.sweep`     many seeds over the cores, a table of verdicts
"""
