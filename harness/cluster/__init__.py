"""Clusters of rqlite-compatible nodes that the harness starts, inspects and breaks.

Each backend is a folder of its own, its entry in the registry (``backend.py``) beside
its modules: ``local/`` (processes on this machine), ``docker/`` (containers), ``ssh/``
(hosts of an inventory), ``external/`` (someone else's cluster, only probed). The top
holds only what they share:

- :mod:`.base`       the interface (:class:`~.base.Cluster`), capabilities, probing nodes
- :mod:`.backend`    what a backend's entry declares; :mod:`.backends` the registry
- :mod:`.factory`    :func:`~.factory.make_cluster`; :mod:`.cli` ``python -m harness cluster``
- :mod:`.engines`, :mod:`.ports`, :mod:`.owners`, :mod:`.netns`, :mod:`.partition`,
  :mod:`.links`, :mod:`.forward_loss`, :mod:`.reply_proxy`, :mod:`.disk`,
  :mod:`.membership`: engines' command lines, ports, owners, namespaces, rules and
  filesystems the backends build their faults from
"""
