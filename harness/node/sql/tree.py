"""The tree of the rqlite parser model: tokens, nodes, and the two ways it fails.

A :class:`Node` holds printable parts (strings and child nodes), a ``walk`` flag
(``False`` where rqlite's tree walk does not descend: a scalar subquery used as a value, a
``WITH`` clause) and, for calls, the call's name and argument nodes; :meth:`Node.render`
prints it back as rqlite re-prints it (every identifier double-quoted).
"""

from __future__ import annotations

from dataclasses import dataclass, field


class ParseError(ValueError):
    """rqlite's parser rejects the statement (so rqlite leaves it as it is)."""


class PrintPanic(RuntimeError):
    """rqlite's printer panics on this tree (its request then fails with HTTP 500)."""


@dataclass(frozen=True)
class Tok:
    kind: str  # id, kw, qid, str, blob, num, bind, op, eof
    text: str

    @property
    def up(self) -> str:
        return self.text.upper()


@dataclass
class Node:
    """One node of the tree; :meth:`render` prints it as rqlite re-prints it."""

    kind: str
    parts: list = field(default_factory=list)
    walk: bool = True  # rqlite's tree walk descends into it
    name: str = ""  # calls: the function name as written
    args: list = field(default_factory=list)  # calls: argument nodes (also in parts)
    value: str = ""  # string literals and identifiers: the value

    def render(self) -> str:
        if self.kind == "hidden":  # walked, not printed (RETURNING of UPDATE and DELETE)
            return ""
        if self.kind == "escape":
            raise PrintPanic("sql.BinaryExpr.String(): invalid op ESCAPE")
        return "".join(p if isinstance(p, str) else p.render() for p in self.parts)

    def children(self) -> list[Node]:
        return [p for p in self.parts if isinstance(p, Node)]


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def n_(kind: str, *parts: str | Node | None, walk: bool = True) -> Node:
    return Node(kind, [p for p in parts if p is not None and p != ""], walk)


def join_(items: list[Node], sep: str = ", ") -> list[str | Node]:
    out: list[str | Node] = []
    for i, item in enumerate(items):
        if i:
            out.append(sep)
        out.append(item)
    return out
