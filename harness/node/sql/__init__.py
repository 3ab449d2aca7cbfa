"""The embedded node's model of rqlite's SQL processing, apart from the server that uses it.

- :mod:`.tree`        tokens and tree nodes, printed back as rqlite prints them
- :mod:`.parser`      the lexer and the statements of rqlite's SQL parser (rqlite/sql)
- :mod:`.expressions` its expressions and windows
- :mod:`.schema`      its ``CREATE`` and ``ALTER`` statements
- :mod:`.rewrite`     rqlite's rewriting of time functions and random(), decided as it does

The differences between rqlite versions are :mod:`harness.node.versions`.
"""
