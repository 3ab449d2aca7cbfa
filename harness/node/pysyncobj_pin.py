"""The one PySyncObj release the node is built for.

The node reaches past PySyncObj's public API: :mod:`.raft` overrides and calls its
name-mangled methods (``_SyncObj__onMessageReceived``, ``_SyncObj__setState``, ...),
:mod:`.journal` replaces its journal classes, :mod:`.raft_transport` and
:mod:`.membership` subclass its transport and nodes. Another release may rename any of
them, so pyproject.toml pins ``pysyncobj`` to this release and :mod:`.raft` refuses to
load on any other, with one line saying so, before a renamed internal fails obscurely.
"""

from __future__ import annotations

from pysyncobj.version import VERSION

#: the release whose internals the node uses (pyproject.toml: ``>=BUILT_FOR,<next``)
BUILT_FOR = "0.3.17"


class PySyncObjMismatch(ImportError):
    """The installed PySyncObj is not the release the node is built for."""


def mismatch(found: str = VERSION) -> str | None:
    """Why the node cannot run on PySyncObj ``found`` (one line), or None."""
    if found == BUILT_FOR:
        return None
    return (
        f"the embedded node is built for pysyncobj {BUILT_FOR} (it uses its internals), "
        f"found {found}: pip install 'pysyncobj=={BUILT_FOR}'"
    )


def require(found: str = VERSION) -> None:
    """Raise :class:`PySyncObjMismatch` unless PySyncObj ``found`` is :data:`BUILT_FOR`."""
    why = mismatch(found)
    if why is not None:
        raise PySyncObjMismatch(why)
