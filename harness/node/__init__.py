"""The embedded rqlite-compatible node: SQLite replicated by PySyncObj Raft, rqlite's HTTP API.

Run it as ``python -m harness.node --node-id n1 --http-addr ... --raft-addr ... --peer ...``.
Modules, one job each:

- :mod:`.config`     command-line flags -> :class:`NodeConfig`
- :mod:`.clock`      the node's wall clock, with an offset read from a file
- :mod:`.rewrite`    rqlite's rewriting of RANDOM()/randomblob()/time functions, decided as it does
- :mod:`.rqlite_sql` a model of rqlite's SQL parser and printer (expressions: ``.rqlite_sql_expr``)
- :mod:`.statements` statements and query parameters
- :mod:`.body`       parsing request bodies as rqlite does (JSON, ``text/plain``)
- :mod:`.sqlexec`    running a statement as rqlite's SQLite driver does (arguments, several
  statements in one string, ``db_timeout``)
- :mod:`.values`     rendering values as rqlite does (times, booleans, blobs, REALs)
- :mod:`.database`   the SQLite state machine and rqlite's result shapes
- :mod:`.dump`       the SQL dump of ``/db/backup?fmt=sql``
- :mod:`.raft`       the PySyncObj state machine, snapshots, waiting for outcomes
- :mod:`.forward`    forwarding requests from a follower to the leader over HTTP
- :mod:`.api`        ``/db/execute``, ``/db/query``, ``/db/request``
- :mod:`.admin`      ``/status``, ``/nodes``, ``/readyz``, ``/leader``, ``/db/backup``,
  ``/db/load``, ``/remove``
- :mod:`.replies`    the reply shapes; :mod:`.httpd` the HTTP server and routing
- :mod:`.server`     wiring it all together and shutting down cleanly
"""

#: the rqlite version whose API this node matches (clients detect features by it)
RQLITE_COMPAT_VERSION = "v8.36.0"
#: what the node reports as its build version and in ``X-RQLITE-VERSION``
VERSION = f"{RQLITE_COMPAT_VERSION}-rqueue-embedded"
