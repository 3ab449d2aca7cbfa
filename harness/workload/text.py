"""Adversarial text for group ids and bodies, and the digest that records a body.

A queue must hand back exactly the text it was given. rqlite from v8.31 binds a string
parameter shaped like an SQL blob literal (``x'41'``: after trimming what Go's
``strings.TrimSpace`` trims, ``x'`` or ``X'``, an even number of hex digits, ``'``) as
the BLOB of those bytes, so a client that sends such text as it is gets other text back
(``A``), or bytes that are no text at all. ``workload.adversarial_text`` makes a share
of the groups and of the bodies such text (:func:`group_id`, :func:`body_text`): blob
literals in every case and spacing (Unicode spaces included), empty, NUL and non-UTF-8
bytes, odd numbers of digits and unclosed ones (which must stay text), quotes,
backslashes, NUL, characters of every plane of Unicode, SQL, and long text.

Each adversarial group id is still unique to its publisher's group: the number of the
group is spelled into it (as its hex digits, or as the count of leading spaces of an
empty blob literal), so two groups never meet in one group of the queue unless the
queue itself merges them. A body stays the workload's JSON event (it carries ``msg``),
with the text in one more field; :func:`digest` is what the history records of it.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable

#: hex digits the history keeps of a body's SHA-256 (64 bits: no two bodies of a run meet)
DIGEST_DIGITS = 16


def digest(body: object) -> str | None:
    """The first :data:`DIGEST_DIGITS` hex digits of the SHA-256 of ``body``'s UTF-8
    bytes (a lone surrogate as Python's ``surrogatepass`` writes it); None when the body
    is not text (a subject outside the protocol)."""
    if not isinstance(body, str):
        return None
    data = body.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:DIGEST_DIGITS]


def _mixed_case(h: str) -> str:
    return "".join(c.upper() if i % 2 else c for i, c in enumerate(h))


#: group id makers: ``n`` (unique per group of the run) -> text holding ``n``
GROUP_FORMS: tuple[Callable[[int], str], ...] = (
    lambda n: f"x'{n:04x}'",  # NUL bytes while n < 256: x'0001'
    lambda n: f"X'{n:04X}'",
    lambda n: f" x'{_mixed_case(f'{n + 0xAB00:04x}')}' ",
    lambda n: f"\u3000x'{n + 0x4100:04x}'\n",  # ideographic space: Go trims it too
    lambda n: f"\t\u00a0X'FF{n:04x}'\r\n",  # not UTF-8 once bound as a blob
    lambda n: " " * (n + 1) + "x''",  # an empty blob literal
    lambda n: f"x'{n:05x}'",  # an odd number of digits: text
    lambda n: f"x'{n:04x}",  # unclosed: text
    lambda n: f"it's \"{n}\" '' x'41'",
    lambda n: f"C:\\queue\\{n}\\",
    lambda n: f"nul\x00{n}\x00",
    # every plane in use: 0 (CJK, RTL mark, BOM), 1, 2, 3, 14, 15 and 16
    lambda n: (
        f"\U0001d524\U0001f600-{n}-\u4e2d\u200f\ufeff\U00020001\U00030001\U000e0001"
        "\U000f0001\U0010fffd"
    ),
    lambda n: f"'); DROP TABLE messages; -- {n}",
    lambda n: f"{n}:" + "long-" * 200,
)

#: body texts: what one more field of a body holds (need not be unique)
BODY_TEXTS: tuple[str, ...] = (
    "x'41'",
    "X'00'",
    " x'' ",
    "\u3000x'4142'\n",
    "x'414'",
    "X'FFFE'",
    "'\"\\'",
    "nul\x00nul",
    "\U0001f600\U0001d524\U000e0001\U0010fffd\u0000\u2028",
    "'); DELETE FROM messages; --",
    "\\x'41'\\",
    "long:" + "\u00e9\U0001f600" * 500,
)


def group_id(publisher: int, k: int, groups_per_publisher: int) -> str:
    """The adversarial id of publisher ``publisher``'s group ``k``: a form chosen so that
    a run's groups go through the forms in turn, holding the group's number."""
    n = publisher * groups_per_publisher + k
    return GROUP_FORMS[n % len(GROUP_FORMS)](n)


def body_text(rng: random.Random) -> str:
    """One adversarial text for a body, drawn with ``rng``."""
    return rng.choice(BODY_TEXTS)
