"""Expressions and windows of the rqlite parser model (mixed into :mod:`.parser`'s parser).

What rqlite/sql's expression grammar accepts, with its precedences, and the few
differences between versions (:class:`~harness.node.versions.Dialect`): ``COLLATE`` in an
expression, postfix null tests and how v10 prints ``IS NOT NULL``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .tree import Node, Tok, join_, n_

if TYPE_CHECKING:
    from ..versions import Dialect


_CMP = {"=": "=", "==": "=", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_PREC = {
    "OR": 1, "AND": 2, "IS": 4, "IN": 4, "LIKE": 4, "GLOB": 4, "REGEXP": 4, "MATCH": 4,
    "BETWEEN": 4, "=": 4, "!=": 4, "<": 5, "<=": 5, ">": 5, ">=": 5, "ESCAPE": 6,
    "&": 7, "|": 7, "<<": 7, ">>": 7, "+": 8, "-": 8, "*": 9, "/": 9, "%": 9,
    "||": 10, "->": 10, "->>": 10,
}  # fmt: skip
_NEGATABLE = ("IN", "LIKE", "GLOB", "REGEXP", "MATCH", "BETWEEN")
#: postfix null tests (rqlite/sql since May 2025) and how they are printed back
_POSTFIX = {"ISNULL": " IS NULL", "NOTNULL": " NOT NULL"}
#: keywords that are values (the current time, date or timestamp)
CURRENT_KEYWORDS = ("CURRENT_TIME", "CURRENT_DATE", "CURRENT_TIMESTAMP")


class ExprMixin:
    """Expression and window rules, and the operands they are made of; mixed into the parser."""

    # provided by the parser
    dialect: Dialect
    tok: Tok
    peek: object
    next: object
    at: object
    accept: object
    expect: object
    fail: object
    ident: object
    is_ident: object
    select: object
    order_by: object
    expr_list: object
    with_statement: object

    # -- expressions
    def expr(self, min_prec: int = 1) -> Node:
        x = self.collated_operand()
        while True:
            op, width = self._binary_op()
            if op is None:
                return x
            prec = _PREC["IS" if op.startswith("IS") or op in _POSTFIX else op.split()[-1]]
            if prec < min_prec:
                return x
            for _ in range(width):
                self.next()
            if op in _POSTFIX:
                x = n_("postfix", x, _POSTFIX[op])
            elif op.endswith("BETWEEN"):
                lo = self.expr(3)
                self.expect("AND")
                hi = self.expr(3)
                x = n_("binary", x, f" {op} ", n_("range", lo, " AND ", hi))
            elif op.endswith("IN"):
                x = n_("binary", x, f" {op} ", self._in_rhs())
            elif op == "ESCAPE":
                x = Node("escape", [x, " ESCAPE ", self.expr(prec + 1)])
            else:
                x = n_("binary", x, f" {op} ", self.expr(prec + 1))

    def _binary_op(self) -> tuple[str | None, int]:
        t = self.tok
        if t.kind == "op" and t.text in _CMP:
            return _CMP[t.text], 1
        if t.kind == "op" and t.text in _PREC:
            return t.text, 1
        if t.kind != "kw":
            return None, 0
        word = t.up
        nxt = self.peek().up if self.peek().kind == "kw" else ""
        if self.dialect.null_postfix:
            if word in ("ISNULL", "NOTNULL"):
                return word, 1
            if word == "NOT" and nxt == "NULL":
                return "NOTNULL", 2
            if (
                self.dialect.is_not_null_postfix
                and (word, nxt) == ("IS", "NOT")
                and self.peek(2).kind == "kw"
                and self.peek(2).up == "NULL"
            ):
                return "NOTNULL", 3
        if word == "NOT" and nxt in _NEGATABLE:
            return "NOT " + nxt, 2
        if word == "IS" and nxt == "NOT":
            return "IS NOT", 2
        if word in _PREC:
            return word, 1
        return None, 0

    def collated_operand(self) -> Node:
        """An operand and, where the dialect has it, its postfix ``COLLATE name``."""
        x = self.operand()
        while self.dialect.collate_expr and self.at("COLLATE"):
            self.next()
            x = n_("collate", x, " COLLATE ", self.ident("collation name"))
        return x

    def _in_rhs(self) -> Node:
        self.expect("(")
        if self.at("SELECT", "VALUES", "WITH"):
            sel = self.with_statement() if self.at("WITH") else self.select()
            self.expect(")")
            return n_("subquery", "(", sel, ")", walk=False)
        items = self.expr_list() if not self.at(")") else []
        self.expect(")")
        return n_("exprs", "(", *join_(items), ")")

    def operand(self) -> Node:
        t = self.tok
        if t.kind in ("num", "bind", "blob"):
            self.next()
            text = "x" + t.text[1:] if t.kind == "blob" else t.text
            return Node("num" if t.kind == "num" else "lit", [text], value=t.text)
        if t.kind == "str":
            self.next()
            value = t.text[1:-1].replace("''", "'")
            return Node("str", ["'" + value.replace("'", "''") + "'"], value=value)
        if t.kind in ("id", "qid") or (t.kind == "kw" and t.up in CURRENT_KEYWORDS):
            if t.kind == "kw" or self.peek().text not in ("(", "."):
                self.next()
                name = t.text[1:-1].replace('""', '"') if t.kind == "qid" else t.text
                return Node("ident", ['"' + name.replace('"', '""') + '"'], value=name)
            if self.peek().text == "(":
                return self.call()
            table = self.ident()
            self.next()
            col = self.ident("column name", bare=False)
            if self.at("."):
                raise self.fail("expression")
            return n_("qref", table, ".", col)
        if t.kind == "op" and t.text in ("-", "+"):
            self.next()
            return n_("unary", t.text, self.operand())
        if t.kind == "op" and t.text == "(":
            self.next()
            if self.at("SELECT", "VALUES", "WITH"):
                sel = self.with_statement() if self.at("WITH") else self.select()
                self.expect(")")
                return n_("subquery", "(", sel, ")", walk=False)
            inner = self.expr()
            self.expect(")")
            return n_("paren", "(", inner, ")")
        if t.kind != "kw":
            raise self.fail("expression")
        word = t.up
        if word in ("NULL", "TRUE", "FALSE"):
            self.next()
            return Node("lit", [word])
        if word == "NOT":
            self.next()
            if self.at("EXISTS"):
                return self.exists("NOT EXISTS")
            return n_("unary", "NOT ", self.expr(3))
        if word == "EXISTS":
            return self.exists("EXISTS")
        if word == "CAST":
            self.next()
            self.expect("(")
            x = self.expr()
            self.expect("AS")
            typ = self.type_name()
            self.expect(")")
            return n_("cast", "CAST(", x, " AS ", typ, ")")
        if word == "CASE":
            return self.case()
        if word == "RAISE":
            self.next()
            self.expect("(")
            if self.accept("IGNORE"):
                self.expect(")")
                return n_("raise", "RAISE(IGNORE)")
            if not self.at("ROLLBACK", "ABORT", "FAIL"):
                raise self.fail("IGNORE, ROLLBACK, ABORT, or FAIL")
            kind = self.next().up
            self.expect(",")
            msg = self.operand()
            self.expect(")")
            return n_("raise", f"RAISE({kind}, ", msg, ")")
        raise self.fail("expression")

    def exists(self, head: str) -> Node:
        self.expect("EXISTS")
        self.expect("(")
        sel = self.with_statement() if self.at("WITH") else self.select()
        self.expect(")")
        return n_("exists", head, " (", sel, ")")

    def case(self) -> Node:
        self.expect("CASE")
        parts: list = ["CASE"]
        if not self.at("WHEN"):
            parts += [" ", self.expr()]
        if not self.at("WHEN"):
            raise self.fail("WHEN")
        while self.accept("WHEN"):
            cond = self.expr()
            self.expect("THEN")
            parts += [" WHEN ", cond, " THEN ", self.expr()]
        if self.accept("ELSE"):
            parts += [" ELSE ", self.expr()]
        self.expect("END")
        parts.append(" END")
        return n_("case", *parts)

    def call(self) -> Node:
        name = self.next().text
        self.expect("(")
        parts: list = [name, "("]
        args: list[Node] = []
        if self.accept("DISTINCT"):
            parts.append("DISTINCT ")
        if self.accept("*"):
            parts.append("*")
        elif not self.at(")"):
            args = self.expr_list()
            parts += join_(args)
        self.expect(")")
        parts.append(")")
        if self.accept("FILTER"):
            self.expect("(")
            self.expect("WHERE")
            cond = self.expr()
            self.expect(")")
            parts += [" FILTER (WHERE ", cond, ")"]
        if self.accept("OVER"):
            if self.at("("):
                parts += [" OVER ", self.window_def()]
            else:
                parts += [" OVER ", self.ident("window name", bare=False)]
        node = n_("call", *parts)
        node.name, node.args = name, args
        return node

    def window_def(self) -> Node:
        self.expect("(")
        items: list = []
        if self.is_ident():
            items.append(self.ident())
        if self.accept("PARTITION"):
            self.expect("BY")
            items.append(n_("partition", "PARTITION BY ", *join_(self.expr_list())))
        if self.at("ORDER"):
            items.append(n_("orderby", "ORDER BY ", *join_(self.order_by())))
        if self.at("RANGE", "ROWS", "GROUPS"):
            items.append(self.frame())
        self.expect(")")
        return n_("windef", "(", *join_(items, " "), ")")

    def frame(self) -> Node:
        parts: list = [self.next().up, " "]
        if self.accept("BETWEEN"):
            lo = self.frame_bound()
            self.expect("AND")
            parts += ["BETWEEN ", *lo, " AND ", *self.frame_bound()]
        else:
            parts += self.frame_bound()
        if self.accept("EXCLUDE"):
            if self.accept("NO"):
                self.expect("OTHERS")
                parts.append(" EXCLUDE NO OTHERS")
            elif self.accept("CURRENT"):
                self.expect("ROW")
                parts.append(" EXCLUDE CURRENT ROW")
            elif self.at("GROUP", "TIES"):
                parts.append(" EXCLUDE " + self.next().up)
            else:
                raise self.fail("NO OTHERS, CURRENT ROW, GROUP, or TIES")
        return n_("frame", *parts)

    def frame_bound(self) -> list:
        if self.accept("UNBOUNDED"):
            if not self.at("PRECEDING", "FOLLOWING"):
                raise self.fail("PRECEDING or FOLLOWING")
            return ["UNBOUNDED " + self.next().up]
        if self.accept("CURRENT"):
            self.expect("ROW")
            return ["CURRENT ROW"]
        x = self.expr(3)
        if not self.at("PRECEDING", "FOLLOWING"):
            raise self.fail("PRECEDING or FOLLOWING")
        return [x, " " + self.next().up]

    def type_name(self) -> Node:
        words = []
        while self.tok.kind == "id":
            words.append(self.next().text)
        if not words:
            raise self.fail("type name")
        parts: list = [" ".join(words)]
        if self.accept("("):
            parts += ["(", self.signed_number()]
            if self.accept(","):
                parts += [",", self.signed_number()]
            self.expect(")")
            parts.append(")")
        return n_("type", *parts)

    def signed_number(self) -> str:
        sign = self.next().text if self.at("+", "-") else ""
        if self.tok.kind != "num":
            raise self.fail("signed number")
        return sign + self.next().text

    def indexed_column(self) -> Node:
        x = self.expr()
        if self.at("ASC", "DESC"):
            return n_("icol", x, " " + self.next().up)
        return n_("icol", x)
