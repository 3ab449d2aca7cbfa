"""The external backend: a cluster someone else runs, named by its URLs (``RQLITE_URLS``,
``bench --urls``); it can only be probed.

- :mod:`.cluster` :class:`~.cluster.ExternalCluster`, the URLs read and checked
- :mod:`.backend` its entry in the registry: no command starts one
"""
