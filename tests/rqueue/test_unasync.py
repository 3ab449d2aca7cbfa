"""scripts/unasync.py: how it writes the blocking twin from the asyncio one.

(tests/test_lint.py checks that rqueue/_sync.py is what it writes from rqueue/_async.py.)
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("unasync", ROOT / "scripts" / "unasync.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


unasync = _script()

SOURCE = '''import asyncio
import time


class AsyncTransport(AsyncAdmin):
    """Close it with ``await t.aclose()``; it is the asyncio twin."""

    async def __aenter__(self) -> AsyncTransport:
        async with self._lock:
            await asyncio.sleep(0)
        async for x in self._items():
            await self._session.aclose()
        return self
'''


def test_keywords_go_and_names_become_blocking() -> None:
    out = unasync.unasync(SOURCE)
    assert out.startswith("# generated from rqueue/_async.py by scripts/unasync.py; do not edit\n")
    code = out.split("\n", 2)[2]
    assert "import asyncio" not in code
    assert "class Transport(Admin):" in code
    assert "    def __enter__(self) -> Transport:" in code
    assert "        with self._lock:\n            time.sleep(0)" in code
    assert "        for x in self._items():\n            self._session.close()" in code
    # strings are rewritten alike (usage in docstrings), but only whole async names
    assert "Close it with ``t.close()``; it is the asyncio twin." in code
    assert unasync.left_over(out) == []


def test_an_async_name_outside_the_table_is_found() -> None:
    out = unasync.unasync("class AsyncThing:\n    x = asyncio.Event()\n")
    assert unasync.left_over(out) == ["line 3: AsyncThing", "line 4: asyncio"]


def test_the_generated_twin_imports_no_http_library() -> None:
    """The admin CLI drives the generated Admin and must start without requests or httpx."""
    code = (
        "import sys, rqueue._sync, rqueue._cli_http; "
        "assert not {'requests', 'httpx'} & set(sys.modules), sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
