"""Expressions and schema statements of the rqlite parser model (see :mod:`.rqlite_sql`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .versions import Dialect


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
_CURRENT = ("CURRENT_TIME", "CURRENT_DATE", "CURRENT_TIMESTAMP")
_COL_CONSTRAINT = (
    "CONSTRAINT", "PRIMARY", "NOT", "UNIQUE", "CHECK", "DEFAULT", "COLLATE", "REFERENCES",
    "GENERATED", "AS",
)  # fmt: skip
_TABLE_CONSTRAINT = ("CONSTRAINT", "PRIMARY", "UNIQUE", "CHECK", "FOREIGN")


class ExprMixin:
    """Expression, window and schema-statement rules; mixed into the parser."""

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
    ident_list: object
    select: object
    order_by: object
    expr_list: object
    paren_exprs: object
    insert: object
    update: object
    delete: object
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
        if t.kind in ("id", "qid") or (t.kind == "kw" and t.up in _CURRENT):
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

    # -- CREATE / ALTER
    def if_not_exists(self) -> str:
        if not self.accept("IF"):
            return ""
        self.expect("NOT")
        self.expect("EXISTS")
        return "IF NOT EXISTS "

    def create(self) -> Node:
        self.expect("CREATE")
        if self.accept("TABLE"):
            return self.create_table()
        if self.accept("VIEW"):
            ine = self.if_not_exists()
            parts: list = ["CREATE VIEW ", ine, self.ident("view name")]
            if self.at("("):
                parts += [" (", *join_(self.ident_list()), ")"]
            self.expect("AS")
            return n_("create", *parts, " AS ", self.select())
        if self.at("UNIQUE", "INDEX"):
            unique = "UNIQUE " if self.accept("UNIQUE") else ""
            self.expect("INDEX")
            parts = [f"CREATE {unique}INDEX ", self.if_not_exists(), self.ident("index name")]
            self.expect("ON")
            parts += [" ON ", self.ident("table name"), " ("]
            self.expect("(")
            cols = [self.indexed_column()]
            while self.accept(","):
                cols.append(self.indexed_column())
            self.expect(")")
            parts += [*join_(cols), ")"]
            if self.accept("WHERE"):
                parts += [" WHERE ", self.expr()]
            return n_("create", *parts)
        if self.accept("TRIGGER"):
            return self.create_trigger()
        raise self.fail("TABLE, VIEW, INDEX, TRIGGER")

    def create_table(self) -> Node:
        parts: list = ["CREATE TABLE ", self.if_not_exists(), self.ident("table name")]
        if self.accept("AS"):
            return n_("create", *parts, " AS ", self.select())
        self.expect("(")
        items: list[Node] = []
        while self.is_ident(bare=True) and not self.at(*_TABLE_CONSTRAINT):
            items.append(self.column_def())
            self.accept(",")  # optional to rqlite's parser: "PRIMARY KEY DESC" is two columns
        if self.at(*_TABLE_CONSTRAINT):
            items.append(self.constraint(table=True))
            while self.accept(","):
                items.append(self.constraint(table=True))
        self.expect(")")
        while self.at("STRICT", "WITHOUT"):  # accepted, and not printed back (as rqlite)
            if self.accept("WITHOUT") and self.tok.up != "ROWID":
                raise self.fail("ROWID")
            self.next()
            if not self.accept(","):
                break
        return n_("create", *parts, " (", *join_(items), ")")

    def column_def(self) -> Node:
        parts: list = [self.ident("column name")]
        if self.tok.kind == "id":
            parts += [" ", self.type_name()]
        while self.at(*_COL_CONSTRAINT):
            parts += [" ", self.constraint(table=False)]
        return n_("coldef", *parts)

    def constraint(self, table: bool) -> Node:
        parts: list = []
        if self.accept("CONSTRAINT"):
            parts += ["CONSTRAINT ", self.ident("constraint name"), " "]
        if self.accept("PRIMARY"):
            self.expect("KEY")
            parts.append("PRIMARY KEY")
            if table:
                parts += [" (", *join_(self.ident_list()), ")"]
            if not table and self.accept("AUTOINCREMENT"):
                parts.append(" AUTOINCREMENT")
        elif not table and self.accept("NOT"):
            self.expect("NULL")
            parts.append("NOT NULL")
        elif self.accept("UNIQUE"):
            parts.append("UNIQUE")
            if table:
                self.expect("(")
                cols = [self.indexed_column()]
                while self.accept(","):
                    cols.append(self.indexed_column())
                self.expect(")")
                parts += [" (", *join_(cols), ")"]
        elif self.accept("CHECK"):
            self.expect("(")
            parts += ["CHECK (", self.expr(), ")"]
            self.expect(")")
        elif not table and self.accept("DEFAULT"):
            parts += ["DEFAULT ", self.default_value()]
        elif not table and self.accept("COLLATE"):
            parts += ["COLLATE ", self.ident("collation name")]
        elif not table and self.at("GENERATED", "AS"):
            if self.accept("GENERATED"):
                if self.tok.up != "ALWAYS":
                    raise self.fail("ALWAYS")
                self.next()
                parts.append("GENERATED ALWAYS ")
            self.expect("AS")
            self.expect("(")
            parts += ["AS (", self.expr(), ")"]
            self.expect(")")
            if self.at("STORED", "VIRTUAL"):
                parts.append(" " + self.next().up)
        elif table and self.accept("FOREIGN"):
            self.expect("KEY")
            parts += ["FOREIGN KEY (", *join_(self.ident_list()), ") ", self.references()]
        elif not table and self.at("REFERENCES"):
            parts.append(self.references())
        else:
            raise self.fail("constraint")
        return n_("constraint", *parts)

    def default_value(self) -> Node | str:
        t = self.tok
        if t.kind == "qid":  # rqlite reads a double-quoted default as a string
            self.next()
            value = t.text[1:-1].replace('""', '"')
            return Node("str", ["'" + value.replace("'", "''") + "'"], value=value)
        if t.kind in ("num", "str", "blob") or t.up in ("NULL", "TRUE", "FALSE", *_CURRENT):
            return self.operand() if t.kind in ("str", "blob") else self.next().text.upper()
        if self.at("+", "-"):
            return self.signed_number()
        self.expect("(")
        x = self.expr()
        self.expect(")")
        return n_("paren", "(", x, ")")

    def references(self) -> Node:
        self.expect("REFERENCES")
        parts: list = ["REFERENCES ", self.ident("foreign table name")]
        parts += [" (", *join_(self.ident_list()), ")"]  # rqlite requires the column list
        while self.accept("ON"):
            if not self.at("UPDATE", "DELETE"):
                raise self.fail("UPDATE or DELETE")
            parts.append(" ON " + self.next().up)
            if self.accept("SET"):
                if not self.at("NULL", "DEFAULT"):
                    raise self.fail("NULL or DEFAULT")
                parts.append(" SET " + self.next().up)
            elif self.at("CASCADE", "RESTRICT"):
                parts.append(" " + self.next().up)
            elif self.accept("NO"):
                self.expect("ACTION")
                parts.append(" NO ACTION")
            else:
                raise self.fail("SET NULL, SET DEFAULT, CASCADE, RESTRICT, or NO ACTION")
        if self.at("NOT", "DEFERRABLE"):
            parts.append(" NOT DEFERRABLE" if self.accept("NOT") else " DEFERRABLE")
            self.expect("DEFERRABLE")
            if self.accept("INITIALLY"):
                if not self.at("DEFERRED", "IMMEDIATE"):
                    raise self.fail("DEFERRED or IMMEDIATE")
                parts.append(" INITIALLY " + self.next().up)
        return n_("references", *parts)

    def create_trigger(self) -> Node:
        parts: list = ["CREATE TRIGGER ", self.if_not_exists(), self.ident("trigger name")]
        if self.at("BEFORE", "AFTER"):
            parts.append(" " + self.next().up)
        elif self.accept("INSTEAD"):
            self.expect("OF")
            parts.append(" INSTEAD OF")
        if self.at("DELETE", "INSERT"):
            parts.append(" " + self.next().up)
        elif self.accept("UPDATE"):
            parts.append(" UPDATE")
            if self.accept("OF"):
                cols = [self.ident("column name")]
                while self.accept(","):
                    cols.append(self.ident("column name"))
                parts += [" OF ", *join_(cols)]
        else:
            raise self.fail("DELETE, INSERT, or UPDATE")
        self.expect("ON")
        parts += [" ON ", self.ident("table name")]
        if self.accept("FOR"):
            self.expect("EACH")
            self.expect("ROW")
            parts.append(" FOR EACH ROW")
        if self.accept("WHEN"):
            parts += [" WHEN ", self.expr()]
        self.expect("BEGIN")
        parts.append(" BEGIN ")
        while True:
            if self.at("SELECT", "VALUES"):
                body = self.select()
            elif self.at("INSERT", "REPLACE"):
                body = self.insert(None)
            elif self.at("UPDATE"):
                body = self.update(None)
            elif self.at("DELETE"):
                body = self.delete(None)
            else:
                raise self.fail("statement")
            self.expect(";")
            parts += [body, "; "]
            if self.accept("END"):
                break
        parts.append("END")
        return n_("create", *parts)

    def alter(self) -> Node:
        self.expect("ALTER")
        self.expect("TABLE")
        name = self.ident("table name")
        if self.accept("ADD"):
            self.accept("COLUMN")
            return n_("alter", "ALTER TABLE ", name, " ADD COLUMN ", self.column_def())
        if not self.accept("RENAME"):
            raise self.fail("ADD or RENAME")
        rest = []
        while self.tok.kind != "eof" and not self.at(";"):
            rest.append(self.next().text)
        return n_("alter", "ALTER TABLE ", name, " RENAME ", " ".join(rest))
