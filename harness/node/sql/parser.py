"""A model of the SQL parser rqlite uses before rewriting (Go package rqlite/sql).

rqlite only rewrites statements this parser accepts, walks the tree it builds, and re-prints
it (every identifier double-quoted). To decide exactly as rqlite does, this module accepts
what that parser accepts, rejects what it rejects (measured against the real binary: see
``docs/embedded-node.md``, section "Rewriting"), and re-prints as it prints. The grammar is
v8.36.18's; a :class:`~harness.node.versions.Dialect` adds what later versions' parsers
accept (``UPDATE ... FROM``, ``COLLATE`` in expressions, backticks, postfix null tests) and
takes away what v10 rejects (``DELETE ... LIMIT``).

Here: the lexer and the statements of a request (``SELECT``, ``INSERT``, ``UPDATE``,
``DELETE``, ``WITH``, ``EXPLAIN``). Expressions are :mod:`.expressions`, ``CREATE`` and
``ALTER`` :mod:`.schema`, the tree they build :mod:`.tree`.
"""

from __future__ import annotations

import re

from ..versions import Dialect
from ..versions import get as get_version
from .schema import SchemaMixin
from .tree import Node, ParseError, Tok, join_, n_, quote_ident

# -- lexer ---------------------------------------------------------------------------------
_LEX = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<comment>--[^\n]*|/\*.*?(?:\*/|\Z))
  | (?P<blob>[xX]'[0-9a-fA-F]*')
  | (?P<str>'(?:[^']|'')*')
  | (?P<qid>"(?:[^"]|"")*")
  | (?P<bqid>`(?:[^`]|``)*`)
  | (?P<num>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<bind>\?\d*|[:@$][A-Za-z0-9_]+)
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>->>|->|\|\||<<|>>|<=|>=|==|!=|<>|[;(),=<>&|+\-*/%.])
  | (?P<bad>.)
    """,
    re.VERBOSE | re.DOTALL,
)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: words the parser treats as keywords (an identifier must be quoted to use them)
KEYWORDS = _words(
    """ABORT ACTION ADD AFTER ALL ALTER ALWAYS ANALYZE AND AS ASC ATTACH AUTOINCREMENT BEFORE
    BEGIN BETWEEN BY CASCADE CASE CAST CHECK COLLATE COLUMN COMMIT CONFLICT CONSTRAINT CREATE
    CROSS CURRENT CURRENT_DATE CURRENT_TIME CURRENT_TIMESTAMP DATABASE DEFAULT DEFERRABLE
    DEFERRED DELETE DESC DETACH DISTINCT DO DROP EACH ELSE END ESCAPE EXCEPT EXCLUDE EXCLUSIVE
    EXISTS EXPLAIN FAIL FILTER FIRST FOLLOWING FOR FOREIGN FROM GENERATED GLOB GROUP GROUPS
    HAVING IF IGNORE IMMEDIATE IN INDEX INDEXED INITIALLY INNER INSERT INSTEAD INTERSECT INTO
    IS ISNULL JOIN KEY LAST LEFT LIKE LIMIT MATCH MATERIALIZED NATURAL NO NOT NOTHING NOTNULL
    NULL NULLS OF OFFSET ON OR ORDER OTHERS OUTER OVER PARTITION PLAN PRAGMA PRECEDING PRIMARY
    QUERY RAISE RANGE RECURSIVE REFERENCES REGEXP REINDEX RELEASE RENAME REPLACE RESTRICT
    RETURNING RIGHT ROLLBACK ROW ROWS SAVEPOINT SELECT SET STORED STRICT TABLE TEMP
    TEMPORARY THEN TIES TO TRANSACTION TRIGGER TRUE FALSE UNBOUNDED UNION UNIQUE UPDATE USING
    VACUUM VALUES VIEW VIRTUAL WHEN WHERE WINDOW WITH WITHOUT"""
)
#: keywords still accepted as a name where rqlite's parser reads a plain identifier: the
#: table of INSERT, column lists, table aliases after AS, CREATE names (measured: rows,
#: key, first, filter, window, partition, current, exclude, replace, groups, do, temp
#: are; nothing is not); never in expressions, SET, result aliases, or the table of
#: UPDATE, DELETE and FROM
BARE_OK = _words(
    """ABORT ACTION AFTER ALWAYS ANALYZE ASC ATTACH BEFORE BEGIN BY CASCADE CAST COLUMN
    CONFLICT CURRENT DATABASE DEFERRED DESC DETACH DO EACH END EXCLUDE EXCLUSIVE EXPLAIN FAIL
    FILTER FIRST FOLLOWING FOR GENERATED GROUPS IGNORE IMMEDIATE INITIALLY INSTEAD KEY LAST MATCH NO
    NULLS OF OFFSET OTHERS OVER PARTITION PLAN PRAGMA PRECEDING QUERY RAISE RANGE RECURSIVE
    REINDEX RELEASE RENAME REPLACE RESTRICT ROW ROWS SAVEPOINT STORED STRICT TEMP
    TEMPORARY TIES TRIGGER UNBOUNDED VACUUM VIEW VIRTUAL WINDOW WITH WITHOUT"""
)


def tokenize(sql: str, backticks: bool = False) -> list[Tok]:
    """The statement's tokens; with ``backticks`` a `` `name` `` is a quoted identifier (as
    if written ``"name"``), without it the backtick is an illegal character."""
    out: list[Tok] = []
    for m in _LEX.finditer(sql):
        kind = m.lastgroup or "bad"
        text = m.group()
        if kind in ("ws", "comment"):
            continue
        if kind == "bqid":
            if not backticks:
                raise ParseError("illegal character '`'")
            kind, text = "qid", quote_ident(text[1:-1].replace("``", "`"))
        if kind == "bad":
            raise ParseError(f"illegal character {text!r}")
        if kind == "id" and text.upper() in KEYWORDS:
            kind = "kw"
        out.append(Tok(kind, text))
    out.append(Tok("eof", ""))
    return out


# -- parser --------------------------------------------------------------------------------
_OPAQUE = {"BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE", "DROP", "ANALYZE"}
_CONFLICT = {"ROLLBACK", "ABORT", "REPLACE", "FAIL", "IGNORE"}


def joins_printed(first: Node, joins: list[tuple[str, Node, Node | None]], style: str) -> list:
    """``first`` and its ``joins`` (operator, source, constraint) in the order rqlite/sql
    prints them (:attr:`.Dialect.join_constraints`). Before its 2026-02-23 rewrite the
    parser nests each further join under the right-hand side of the first, which keeps
    its own constraint: the tree prints the first constraint last (v8), and v9's printer
    undoes that for up to three joins only."""

    def run(chain: list[tuple[str, Node, Node | None]]) -> list:
        return [p for op, source, cons in chain for p in (op, source, cons) if p is not None]

    n = len(joins)
    if style == "in-place" or n == 1 or (style == "three-joins" and n <= 3):
        return [first, *run(joins)]
    op, source, cons = joins[0]
    moved = [cons] if cons is not None else []
    if style == "first-last":
        return [first, op, source, *run(joins[1:]), *moved]
    return [first, op, source, *run(joins[1 : n - 2]), *moved, *run(joins[n - 2 :])]


class Parser(SchemaMixin):
    """Recursive descent over rqlite's grammar; :meth:`statement` parses one statement.

    ``dialect`` is what the parser of the rqlite version followed accepts beyond
    v8.36.18's (default: the version the node follows by default)."""

    def __init__(self, sql: str, dialect: Dialect | None = None) -> None:
        self.dialect = dialect if dialect is not None else get_version().dialect
        self.toks = tokenize(sql, self.dialect.backticks)
        self.i = 0

    # -- token helpers
    @property
    def tok(self) -> Tok:
        return self.toks[self.i]

    def peek(self, k: int = 1) -> Tok:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def next(self) -> Tok:
        t = self.tok
        self.i = min(self.i + 1, len(self.toks) - 1)
        return t

    def at(self, *words: str) -> bool:
        t = self.tok
        return t.kind in ("kw", "op") and t.up in words

    def accept(self, *words: str) -> bool:
        if self.at(*words):
            self.next()
            return True
        return False

    def expect(self, word: str) -> None:
        if not self.accept(word):
            raise ParseError(f"expected {word}, found {self.tok.text!r}")

    def fail(self, what: str) -> ParseError:
        return ParseError(f"expected {what}, found {self.tok.text or 'EOF'!r}")

    # -- names
    def ident(self, what: str = "identifier", bare: bool = True) -> Node:
        t = self.tok
        if t.kind == "id" or (bare and t.kind == "kw" and t.up in BARE_OK):
            self.next()
            return Node("ident", [quote_ident(t.text)], value=t.text)
        if t.kind == "qid":
            self.next()
            name = t.text[1:-1].replace('""', '"')
            return Node("ident", [quote_ident(name)], value=name)
        raise self.fail(what)

    def is_ident(self, bare: bool = False) -> bool:
        t = self.tok
        return t.kind in ("id", "qid") or (bare and t.kind == "kw" and t.up in BARE_OK)

    def ident_list(self) -> list[Node]:
        self.expect("(")
        items = [self.ident("column name")]
        while self.accept(","):
            items.append(self.ident("column name"))
        self.expect(")")
        return items

    # -- statements
    def statement(self) -> Node:
        if self.tok.kind == "eof":
            raise ParseError("empty statement")
        if self.accept("EXPLAIN"):
            head = "EXPLAIN "
            if self.accept("QUERY"):
                self.expect("PLAN")
                head = "EXPLAIN QUERY PLAN "
            stmt = n_("explain", head, self.non_explain())
        else:
            stmt = self.non_explain()
        if self.tok.kind != "eof" and not self.at(";"):
            raise self.fail("semicolon or EOF")
        return stmt  # like rqlite, anything after the first statement is dropped

    def non_explain(self) -> Node:
        t = self.tok
        word = t.up if t.kind == "kw" else ""
        if word in ("SELECT", "VALUES"):
            return self.select()
        if word in ("INSERT", "REPLACE"):
            return self.insert(None)
        if word == "UPDATE":
            return self.update(None)
        if word == "DELETE":
            return self.delete(None)
        if word == "WITH":
            return self.with_statement()
        if word == "CREATE":
            return self.create()
        if word == "ALTER":
            return self.alter()
        if word in _OPAQUE:
            return self.opaque()
        raise self.fail("statement")

    def opaque(self) -> Node:
        """Statements without expressions: nothing in them can be rewritten, so their
        exact grammar does not matter here; they are kept as written."""
        parts = []
        while self.tok.kind != "eof" and not self.at(";"):
            parts.append(self.next().text)
        return n_("opaque", " ".join(parts))

    def with_clause(self) -> Node:
        self.expect("WITH")
        rec = "RECURSIVE " if self.accept("RECURSIVE") else ""
        ctes = [self.cte()]
        while self.accept(","):
            ctes.append(self.cte())
        return n_("with", "WITH ", rec, *join_(ctes), walk=False)

    def cte(self) -> Node:
        name = self.ident("table name", bare=False)
        cols: list = []
        if self.at("("):
            cols = [" (", *join_(self.ident_list()), ")"]
        self.expect("AS")
        self.expect("(")
        sel = self.select()
        self.expect(")")
        return n_("cte", name, *cols, " AS (", sel, ")")

    def with_statement(self) -> Node:
        w = self.with_clause()
        if self.at("SELECT", "VALUES"):
            return self.select(w)
        if self.at("INSERT", "REPLACE"):
            return self.insert(w)
        if self.at("UPDATE"):
            return self.update(w)
        if self.at("DELETE"):
            return self.delete(w)
        raise self.fail("SELECT, VALUES, INSERT, REPLACE, UPDATE, or DELETE")

    # -- SELECT
    def select(self, with_clause: Node | None = None) -> Node:
        parts: list = [with_clause, " "] if with_clause else []
        parts.append(self.select_core())
        while self.at("UNION", "INTERSECT", "EXCEPT"):
            op = self.next().up
            if op == "UNION" and self.accept("ALL"):
                op = "UNION ALL"
            parts += [f" {op} ", self.select_core()]
        if self.at("ORDER"):
            parts += [" ORDER BY ", *join_(self.order_by())]
        if self.accept("LIMIT"):
            parts += [" LIMIT ", self.expr()]
            if self.accept("OFFSET") or self.accept(","):
                parts += [" OFFSET ", self.expr()]
        return n_("select", *parts)

    def order_by(self) -> list[Node]:
        self.expect("ORDER")
        self.expect("BY")
        terms = [self.ordering_term()]
        while self.accept(","):
            terms.append(self.ordering_term())
        return terms

    def ordering_term(self) -> Node:
        parts: list = [self.expr()]
        if self.at("ASC", "DESC"):
            parts.append(" " + self.next().up)
        if self.accept("NULLS"):
            if not self.at("FIRST", "LAST"):
                raise self.fail("FIRST or LAST")
            parts.append(" NULLS " + self.next().up)
        return n_("order", *parts)

    def select_core(self) -> Node:
        if self.accept("VALUES"):
            rows = [self.paren_exprs()]
            while self.accept(","):
                rows.append(self.paren_exprs())
            return n_("values", "VALUES ", *join_(rows))
        self.expect("SELECT")
        parts: list = ["SELECT "]
        if self.at("DISTINCT", "ALL"):
            parts.append(self.next().up + " ")
        cols = [self.result_column()]
        while self.accept(","):
            cols.append(self.result_column())
        parts += join_(cols)
        if self.accept("FROM"):
            parts += [" FROM ", self.source()]
        if self.accept("WHERE"):
            parts += [" WHERE ", self.expr()]
        if self.accept("GROUP"):
            self.expect("BY")
            parts += [" GROUP BY ", *join_(self.expr_list())]
            if self.accept("HAVING"):
                parts += [" HAVING ", self.expr()]
        if self.accept("WINDOW"):
            wins = [self.named_window()]
            while self.accept(","):
                wins.append(self.named_window())
            parts += [" WINDOW ", *join_(wins)]
        return n_("core", *parts)

    def named_window(self) -> Node:
        name = self.ident("window name", bare=False)
        self.expect("AS")
        return n_("window", name, " AS ", self.window_def())

    def paren_exprs(self) -> Node:
        self.expect("(")
        items = self.expr_list() if not self.at(")") else []
        self.expect(")")
        return n_("exprs", "(", *join_(items), ")")

    def expr_list(self) -> list[Node]:
        items = [self.expr()]
        while self.accept(","):
            items.append(self.expr())
        return items

    def result_column(self) -> Node:
        if self.accept("*"):
            return n_("col", "*")
        if self.is_ident() and self.peek().text == "." and self.peek(2).text == "*":
            table = self.ident()
            self.next()
            self.next()
            return n_("col", table, ".*")
        e = self.expr()
        if self.accept("AS"):
            return n_("col", e, " AS ", self.ident("column alias", bare=False))
        if self.is_ident():
            return n_("col", e, " AS ", self.ident())
        return n_("col", e)

    # -- FROM
    def source(self) -> Node:
        first = self.unary_source()
        joins: list[tuple[str, Node, Node | None]] = []
        while True:
            op = self.join_operator()
            if op is None:
                break
            right = self.unary_source()
            cons = None
            if self.accept("ON"):
                cons = n_("on", " ON ", self.expr())
            elif self.accept("USING"):
                cons = n_("using", " USING (", *join_(self.ident_list_after_paren()), ")")
            joins.append((op, right, cons))
        if not joins:
            return first
        return n_("join", *joins_printed(first, joins, self.dialect.join_constraints))

    def ident_list_after_paren(self) -> list[Node]:
        return self.ident_list()

    def join_operator(self) -> str | None:
        if self.accept(","):
            return ", "
        words = []
        if self.accept("NATURAL"):
            words.append("NATURAL")
        if self.accept("LEFT"):
            words.append("LEFT")
            if self.accept("OUTER"):
                words.append("OUTER")
        elif self.at("INNER", "CROSS"):
            words.append(self.next().up)
        if not words and not self.at("JOIN"):
            return None
        self.expect("JOIN")
        return " " + " ".join([*words, "JOIN"]) + " "

    def unary_source(self) -> Node:
        if self.accept("("):
            if not self.at("SELECT", "VALUES", "WITH"):
                inner = self.source()
                self.expect(")")
                return n_("psource", "(", inner, ")", *self.alias())
            sel = self.with_statement() if self.at("WITH") else self.select()
            self.expect(")")
            return n_("psource", "(", sel, ")", *self.alias())
        name = self.ident("table name or left paren", bare=False)
        if self.at("."):
            raise ParseError("schema-qualified table names are not accepted")
        if self.at("("):
            args = self.paren_exprs()
            return n_("tfunc", name, args, *self.alias())
        parts: list = [name, *self.alias()]
        if self.accept("INDEXED"):
            self.expect("BY")
            parts += [" INDEXED BY ", self.ident("index name")]
        elif self.at("NOT") and self.peek().up == "INDEXED":
            self.next()
            self.next()
            parts.append(" NOT INDEXED")
        return n_("table", *parts)

    def alias(self) -> list:
        if self.accept("AS"):
            return [" AS ", self.ident("alias")]
        if self.is_ident():
            return [" AS ", self.ident()]
        return []

    # -- INSERT / UPDATE / DELETE
    def insert(self, with_clause: Node | None) -> Node:
        parts: list = [with_clause, " "] if with_clause else []
        if self.accept("REPLACE"):
            parts.append("REPLACE")
        else:
            self.expect("INSERT")
            parts.append("INSERT")
            if self.accept("OR"):
                if not self.at(*_CONFLICT):
                    raise self.fail("ROLLBACK, REPLACE, ABORT, FAIL, or IGNORE")
                parts.append(" OR " + self.next().up)
        self.expect("INTO")
        parts += [" INTO ", self.ident("table name")]
        if self.accept("AS"):
            parts += [" AS ", self.ident("alias")]
        if self.at("("):
            parts += [" (", *join_(self.ident_list()), ")"]
        if self.accept("DEFAULT"):
            self.expect("VALUES")
            parts.append(" DEFAULT VALUES")
        elif self.at("VALUES"):
            self.next()
            rows = [self.paren_exprs()]
            while self.accept(","):
                rows.append(self.paren_exprs())
            parts += [" VALUES ", *join_(rows)]
        elif self.at("SELECT"):
            parts += [" ", self.select()]
        else:
            raise self.fail("DEFAULT VALUES, VALUES or SELECT")
        if self.at("ON"):
            parts += [" ", self.upsert()]
        if self.at("RETURNING"):
            parts += [" ", self.returning()]
        return n_("insert", *parts)

    def upsert(self) -> Node:
        self.expect("ON")
        self.expect("CONFLICT")
        parts: list = ["ON CONFLICT"]
        if self.accept("("):
            cols = [self.indexed_column()]
            while self.accept(","):
                cols.append(self.indexed_column())
            self.expect(")")
            parts += [" (", *join_(cols), ")"]
            if self.accept("WHERE"):
                parts += [" WHERE ", self.expr()]
        self.expect("DO")
        if self.accept("NOTHING"):
            parts.append(" DO NOTHING")
        else:
            self.expect("UPDATE")
            self.expect("SET")
            parts += [" DO UPDATE SET ", *join_(self.assignments())]
            if self.accept("WHERE"):
                parts += [" WHERE ", self.expr()]
        return n_("upsert", *parts)

    def assignments(self) -> list[Node]:
        items = [self.assignment()]
        while self.accept(","):
            items.append(self.assignment())
        return items

    def assignment(self) -> Node:
        col = self.ident("column name", bare=False)
        self.expect("=")
        return n_("assign", col, " = ", self.expr())

    def returning(self) -> Node:
        self.expect("RETURNING")
        cols = [self.result_column()]
        while self.accept(","):
            cols.append(self.result_column())
        return n_("returning", "RETURNING ", *join_(cols))

    def qualified_table(self) -> list:
        parts: list = [self.ident("table name", bare=False)]
        if self.at("."):
            raise ParseError("schema-qualified table names are not accepted")
        if self.accept("AS"):
            parts += [" AS ", self.ident("alias")]
        if self.accept("INDEXED"):
            self.expect("BY")
            parts += [" INDEXED BY ", self.ident("index name")]
        elif self.at("NOT") and self.peek().up == "INDEXED":
            self.next()
            self.next()
            parts.append(" NOT INDEXED")
        return parts

    def update(self, with_clause: Node | None) -> Node:
        parts: list = [with_clause, " "] if with_clause else []
        self.expect("UPDATE")
        parts.append("UPDATE ")
        if self.accept("OR"):
            if not self.at(*_CONFLICT):
                raise self.fail("ROLLBACK, REPLACE, ABORT, FAIL, or IGNORE")
            parts.append("OR " + self.next().up + " ")
        parts += self.qualified_table()
        self.expect("SET")
        parts += [" SET ", *join_(self.assignments())]
        if self.dialect.update_from and self.accept("FROM"):
            parts += [" FROM ", self.source()]
        if self.accept("WHERE"):
            parts += [" WHERE ", self.expr()]
        if self.at("RETURNING"):  # walked, but rqlite does not print it back
            parts.append(n_("hidden", self.returning()))
        return n_("update", *parts)

    def delete(self, with_clause: Node | None) -> Node:
        parts: list = [with_clause, " "] if with_clause else []
        self.expect("DELETE")
        self.expect("FROM")
        parts += ["DELETE FROM ", *self.qualified_table()]
        if self.accept("WHERE"):
            parts += [" WHERE ", self.expr()]
        if self.at("RETURNING"):
            parts.append(n_("hidden", self.returning()))
        if not self.dialect.delete_limit:  # ORDER BY/LIMIT: "expected semicolon or EOF"
            return n_("delete", *parts)
        if self.at("ORDER"):
            parts += [" ORDER BY ", *join_(self.order_by())]
        if self.accept("LIMIT"):
            parts += [" LIMIT ", self.expr()]
            if self.accept("OFFSET") or self.accept(","):
                parts += [" OFFSET ", self.expr()]
        if self.at("RETURNING"):
            parts.append(n_("hidden", self.returning()))
        return n_("delete", *parts)
