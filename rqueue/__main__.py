"""``python -m rqueue``: see :mod:`rqueue._cli`."""

import sys

from ._cli import run

sys.exit(run())
