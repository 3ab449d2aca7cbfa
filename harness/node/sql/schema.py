"""Schema statements of the rqlite parser model: ``CREATE TABLE``/``VIEW``/``INDEX``/``TRIGGER``
and ``ALTER TABLE`` (mixed into :mod:`.parser`'s parser).

``STRICT`` and ``WITHOUT ROWID`` are accepted and not printed back; a trigger's body holds
``SELECT``, ``VALUES``, ``INSERT``, ``REPLACE``, ``UPDATE`` and ``DELETE`` statements.
"""

from __future__ import annotations

from .expressions import CURRENT_KEYWORDS, ExprMixin
from .tree import Node, join_, n_

_COL_CONSTRAINT = (
    "CONSTRAINT", "PRIMARY", "NOT", "UNIQUE", "CHECK", "DEFAULT", "COLLATE", "REFERENCES",
    "GENERATED", "AS",
)  # fmt: skip
_TABLE_CONSTRAINT = ("CONSTRAINT", "PRIMARY", "UNIQUE", "CHECK", "FOREIGN")


class SchemaMixin(ExprMixin):
    """``CREATE`` and ``ALTER`` rules, built on the expression rules; mixed into the parser."""

    # provided by the parser
    ident_list: object
    insert: object
    update: object
    delete: object

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
        if t.kind in ("num", "str", "blob") or t.up in ("NULL", "TRUE", "FALSE", *CURRENT_KEYWORDS):
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
