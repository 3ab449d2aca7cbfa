"""The SSH backend: one node per host of an inventory, reached over SSH (docs/ssh.md).

- :mod:`.inventory` the TOML file of hosts (pure)
- :mod:`.session`   OpenSSH master connections, commands with timeouts, run on all hosts at once
- :mod:`.preflight` what is checked on each host before anything starts
- :mod:`.remote`    the shell text run on a host (pure) and the project node's zipapp
- :mod:`.cluster`   :class:`~.cluster.SshCluster` and the sweep after a crashed run
- :mod:`.hosts`, :mod:`.hosts_cli` local SSH test hosts (``python -m harness hosts``)
"""
