#!/usr/bin/env python3
"""Write rqueue's blocking twin from its asyncio one: rqueue/_sync.py from rqueue/_async.py.

    python scripts/unasync.py          # (re)write rqueue/_sync.py
    python scripts/unasync.py --check  # exit 1, saying so, if rqueue/_sync.py is stale

The rewriting is plain text and explicit: ``async def``, ``async with`` and ``async for``
lose ``async``, ``await`` goes, lines in :data:`DROP` go, and the names in :data:`NAMES`
(whole words) become their blocking forms. The result goes through ``ruff format`` (a
line that lost its ``await`` may now fit on one). Then the code (not the strings and
comments) must hold no ``async``, ``await``, ``asyncio`` or ``Async...`` name: an async
name the table does not cover stops the script, naming it, rather than being copied.
"""

from __future__ import annotations

import argparse
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE, TARGET = "rqueue/_async.py", "rqueue/_sync.py"
HEADER = (
    f"# generated from {SOURCE} by scripts/unasync.py; do not edit\n"
    f"# (edit {SOURCE}, then run: python scripts/unasync.py)\n"
)

#: whole lines (stripped) that the blocking twin drops
DROP = {"import asyncio"}
#: async names and their blocking forms
NAMES = {
    "AsyncAdmin": "Admin",
    "AsyncMerger": "Merger",
    "AsyncPoller": "Poller",
    "AsyncSendBatch": "SendBatch",
    "AsyncSession": "Session",
    "AsyncTransport": "Transport",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "aclose": "close",
    "asyncio.sleep": "time.sleep",
}
KEYWORDS = ((re.compile(r"\basync (def|with|for)\b"), r"\1"), (re.compile(r"\bawait "), ""))
_WORDS = re.compile(r"\b(" + "|".join(re.escape(n) for n in sorted(NAMES, key=len)[::-1]) + r")\b")
_LEFT = re.compile(r"async|await|asyncio|Async\w*|aclose|__aenter__|__aexit__")


def unasync(source: str) -> str:
    """The blocking twin's text, before formatting."""
    text = "".join(line for line in source.splitlines(True) if line.strip() not in DROP)
    for pattern, replacement in KEYWORDS:
        text = pattern.sub(replacement, text)
    return HEADER + _WORDS.sub(lambda m: NAMES[m.group(1)], text)


def left_over(text: str) -> list[str]:
    """Async names still in the code of ``text`` (strings and comments aside)."""
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return [
        f"line {t.start[0]}: {t.string}"
        for t in tokens
        if t.type == tokenize.NAME and _LEFT.fullmatch(t.string)
    ]


def formatted(text: str) -> str:
    """``text`` as ``ruff format`` writes it, with the project's settings."""
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", TARGET, "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    if done.returncode != 0:
        raise SystemExit(f"ruff format failed on the generated {TARGET}:\n{done.stderr}")
    return done.stdout


def generate() -> str:
    """The blocking twin, formatted; stops if an async name was left in its code."""
    text = formatted(unasync((ROOT / SOURCE).read_text()))
    left = left_over(text)
    if left:
        raise SystemExit(
            f"{SOURCE} uses async names that scripts/unasync.py does not replace "
            f"(add them to NAMES or DROP): {', '.join(left)}"
        )
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help=f"exit 1 if {TARGET} is stale")
    args = parser.parse_args(argv)
    wanted = generate()
    target = ROOT / TARGET
    if args.check:
        present = target.read_text() if target.exists() else ""
        # compared as ruff formats both, so that another ruff version does not count
        if not present or formatted(present) != wanted:
            print(
                f"{TARGET} is stale: it is not what scripts/unasync.py writes from {SOURCE}; "
                "run: python scripts/unasync.py",
                file=sys.stderr,
            )
            return 1
        return 0
    target.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
