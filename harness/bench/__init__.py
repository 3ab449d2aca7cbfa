"""``python -m harness bench``: claim throughput and latency against the store's own limit.

:mod:`.run` measures (see its docstring for the order), :mod:`.command` is the command
line, :mod:`.load` times concurrent workers, :mod:`.queue` and :mod:`.store` are the
queue's and the store's operations as load steps, :mod:`.report` renders ``bench.json``.
"""

from .command import command_line, main_bench, register
from .run import BenchSettings, run_bench

__all__ = ["BenchSettings", "command_line", "main_bench", "register", "run_bench"]
