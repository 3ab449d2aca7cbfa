"""The embedded rqlite-compatible node: SQLite replicated by PySyncObj Raft, rqlite's HTTP API.

Run it as ``python -m harness.node --node-id n1 --http-addr ... --raft-addr ... --peer ...``.
Modules, one job each:

- :mod:`.config`     command-line flags -> :class:`NodeConfig`
- :mod:`.versions`   the rqlite releases the node can follow (``--rqlite-version``)
- :mod:`.clock`      the node's wall clock, with an offset read from a file
- :mod:`.localzone`  the local time zone rqlite's rewritten ``'now'`` is read in, found by
  Go's rules from ``TZ`` and ``/etc/localtime``; :mod:`.tzif` reads a zone file as Go does
- :mod:`.sql`        the model of rqlite's SQL: its parser and printer, and its rewriting of
  RANDOM()/randomblob()/time functions, decided as it does
- :mod:`.statements` statements and query parameters
- :mod:`.body`       parsing request bodies as rqlite does (JSON, ``text/plain``)
- :mod:`.sqlexec`    running a statement as rqlite's SQLite driver does (arguments, several
  statements in one string, ``db_timeout``)
- :mod:`.values`     rendering values as rqlite does (times, booleans, blobs, REALs)
- :mod:`.database`   the SQLite state machine and rqlite's result shapes
- :mod:`.dump`       the SQL dump of ``/db/backup?fmt=sql``
- :mod:`.raft`       the PySyncObj state machine, snapshots, waiting for outcomes
- :mod:`.pysyncobj_pin` the one PySyncObj release the node is built for (it uses its internals)
- :mod:`.rules`      what the followed version decides before a request runs (rewriting
  per endpoint, the read path per level, refused PRAGMAs, freshness)
- :mod:`.forward`    forwarding requests from a follower to the leader over HTTP
- :mod:`.relay`      handing a request to the leader and answering as rqlite does
- :mod:`.write_queue` queued writes (``/db/execute?queue``)
- :mod:`.api`        ``/db/execute``, ``/db/query``, ``/db/request``
- :mod:`.admin`      ``/status``, ``/nodes``, ``/readyz``, ``/leader``, ``/db/backup``,
  ``/db/load``, ``/remove``
- :mod:`.stats`      rqlite's HTTP counters (``/debug/vars``)
- :mod:`.replies`    the reply shapes; :mod:`.httpd` the HTTP server and routing
- :mod:`.server`     wiring it all together and shutting down cleanly
"""

from .versions import DEFAULT as _DEFAULT
from .versions import get as _get

#: the rqlite version whose API the node matches unless told otherwise (``--rqlite-version``;
#: clients detect features by it)
RQLITE_COMPAT_VERSION = _get(_DEFAULT).tag
#: what the node reports by default as its build version and in ``X-RQLITE-VERSION``
VERSION = _get(_DEFAULT).build_version
