"""A kombu transport on rqueue, so that Celery runs on rqlite (``pip install
'rqueue[celery]'``; docs/celery.md)::

    import rqueue.celery  # registers the rqlite:// and rqlites:// broker URLs
    app = Celery("tasks", broker="rqlite://node1:4001,node2:4001,node3:4001")

Importing this module registers the schemes in kombu's transport aliases (kombu has no
other registry); ``rqueue.celery.transport:Transport`` is the class itself, for
``Connection(transport=...)``. ``import rqueue`` alone never imports kombu or Celery.
"""

from __future__ import annotations

from kombu.transport import TRANSPORT_ALIASES

from ._mapping import GROUP_HEADER, SCHEMES, node_urls, queue_name, rqueue_priority
from .transport import Channel, Transport

#: where kombu finds the transport class
TRANSPORT = "rqueue.celery.transport:Transport"


def register() -> None:
    """Make kombu resolve ``rqlite://`` and ``rqlites://`` to :class:`Transport`
    (done on import; idempotent)."""
    for scheme in SCHEMES:
        TRANSPORT_ALIASES[scheme] = TRANSPORT


register()

__all__ = [
    "GROUP_HEADER",
    "TRANSPORT",
    "Channel",
    "Transport",
    "node_urls",
    "queue_name",
    "register",
    "rqueue_priority",
]
