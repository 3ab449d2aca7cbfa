"""``python -m harness.node``: run one embedded rqlite-compatible node."""

import sys

from .server import main

sys.exit(main())
