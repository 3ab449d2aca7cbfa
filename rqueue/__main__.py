"""``python -m rqueue``: see :mod:`rqueue._cli`."""

import sys

from ._cli import run
from ._stdout import quiet_when_stdout_closes

sys.exit(quiet_when_stdout_closes(run))
