"""``python -m harness.node``: run one embedded rqlite-compatible node.

It takes its own flags (``--node-id ... --peer ...``, :mod:`.config`) or rqlited's
(``-node-id ... -join ... DATA_DIR``, :mod:`.rqlited_flags`). On a PySyncObj release it
was not built for it exits at once with one line (:mod:`.pysyncobj_pin`)."""

import sys

from .pysyncobj_pin import mismatch

if (why := mismatch()) is not None:
    sys.exit(f"harness.node: {why}")

from .rqlited_flags import is_rqlited_argv
from .rqlited_flags import main as rqlited_main
from .server import main

sys.exit(rqlited_main(sys.argv[1:]) if is_rqlited_argv(sys.argv[1:]) else main())
