"""rqlite's HTTP answers, parsed and classified: ok, retry elsewhere, failed, or unknown.

The classification is what makes the transports safe under faults:

* **retry** — certainly not applied, and another node or a later try may work:
  connection refused, connect timeout, HTTP 503 (``leader not found``), a redirect.
* **failed** — certainly not applied, and retrying will not help: a statement's error
  where rqlite rolled the whole request back (below), HTTP 400, HTTP 401/403.
* **unknown** — may have been applied: a timeout or a dropped connection after the
  request was sent, HTTP 200 with a top-level ``"error"`` (``leadership lost while
  committing log``; seen applied later), other 5xx, an unreadable body; and a
  statement's error where rqlite may have committed the request's other statements
  (``Verdict.statement_failed``: the node answered, and the same request would fail
  alike, so the core does not send it again).

A statement's error, by endpoint (rqlite ``db/db.go``, the same in v8.36, v9.4 and
v10.2; rqueue sends every write with ``transaction``):

* ``/db/execute``: the first statement that fails, whether it fails to prepare (no such
  table or column, a syntax error) or while running (a constraint, ``RAISE``), rolls
  the transaction back and ends the results: failed.
* ``/db/request`` (``RequestWithContext``): a statement that fails to *prepare* gets an
  error entry and the others run on and **commit**; one that fails while *running* rolls
  everything back and ends the results. So: results that stop short after an error, or
  where every statement that did not fail is the request's time stamp (rqueue's own
  bookkeeping, rewritten by every timed request): failed. An error followed by results,
  or a last statement's error with every result there (a prepare failure of the last
  statement commits the rest; a run-time one rolls it back), with an operation's
  statement among the others: unknown.
* ``/db/query`` (reads): nothing is written: failed.

Reads (``HttpCall.idempotent``) turn *unknown* into *retry*: re-reading is harmless.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any

from ._models import HttpCall, Result


class Outcome(enum.Enum):
    OK = "ok"
    RETRY = "retry"
    FAILED = "failed"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Verdict:
    """What one HTTP exchange came to."""

    outcome: Outcome
    results: tuple[Result, ...] = ()
    reason: str = ""
    auth_failed: bool = False
    #: unknown because a statement failed where rqlite may have committed the others
    statement_failed: bool = False


def _unknown_or_retry(call: HttpCall, reason: str) -> Verdict:
    return Verdict(Outcome.RETRY if call.idempotent else Outcome.UNKNOWN, reason=reason)


def classify_response(call: HttpCall, status: int, text: str) -> Verdict:
    """Classify one HTTP answer to ``call``."""
    snippet = " ".join(text.split())[:200]
    if status == 200:
        try:
            body = json.loads(text)
        except ValueError:
            return _unknown_or_retry(call, f"HTTP 200 with a body that is not JSON: {snippet!r}")
        return _classify_body(call, body)
    if status == 503:
        return Verdict(Outcome.RETRY, reason=f"HTTP 503: {snippet or 'unavailable'}")
    if status in (301, 302, 307, 308):
        return Verdict(Outcome.RETRY, reason=f"HTTP {status} redirect")
    if status in (401, 403):
        return Verdict(
            Outcome.FAILED,
            reason=f"HTTP {status}: authentication or permission refused",
            auth_failed=True,
        )
    if status == 400 or status == 413:
        return Verdict(Outcome.FAILED, reason=f"HTTP {status}: {snippet}")
    return _unknown_or_retry(call, f"HTTP {status}: {snippet}")


def _classify_body(call: HttpCall, body: Any) -> Verdict:
    if not isinstance(body, dict):
        return _unknown_or_retry(call, "HTTP 200 with a JSON body that is not an object")
    top = body.get("error")
    if top:
        return _unknown_or_retry(call, f"rqlite error: {top}")
    raw = body.get("results")
    if isinstance(raw, list):
        errors = [i for i, item in enumerate(raw) if isinstance(item, dict) and item.get("error")]
        if errors:
            return _statement_error(call, raw, errors)
    if not isinstance(raw, list) or len(raw) != len(call.statements):
        return _unknown_or_retry(
            call, f"expected {len(call.statements)} results, got {_describe(raw)}"
        )
    if not all(isinstance(item, dict) for item in raw):
        return _unknown_or_retry(call, "a result is not an object")
    return Verdict(Outcome.OK, results=tuple(parse_result(item) for item in raw))


def _statement_error(call: HttpCall, raw: list[Any], errors: list[int]) -> Verdict:
    """An answer holding a statement's error: failed where rqlite certainly applied none
    of the operation's statements, else unknown (see the module's doc)."""
    first = errors[0]
    reason = f"statement {first} failed: {raw[first]['error']}"
    if call.path == "/db/query":
        return Verdict(Outcome.FAILED, reason=reason)
    stopped = errors[-1] == len(raw) - 1
    if call.path == "/db/request" and stopped and len(raw) < len(call.statements):
        return Verdict(Outcome.FAILED, reason=reason)  # failed running: rolled back
    if call.path == "/db/execute" and stopped and len(errors) == 1:
        return Verdict(Outcome.FAILED, reason=reason)  # rolled back, results end at it
    own = range(1 if call.stamped else 0, len(raw))
    if call.path == "/db/request" and len(raw) <= len(call.statements):
        if all(i in errors for i in own):
            return Verdict(Outcome.FAILED, reason=reason)  # no statement of the operation ran
        reason += (
            "; rqlite may have committed the request's other statements (/db/request "
            "commits around a statement that fails to prepare)"
        )
    else:
        reason += f"; {_describe(raw)} results of {len(call.statements)} statements"
    return Verdict(Outcome.UNKNOWN, reason=reason, statement_failed=True)


def _describe(raw: Any) -> str:
    return f"{len(raw)}" if isinstance(raw, list) else type(raw).__name__


def parse_result(item: dict[str, Any]) -> Result:
    """One entry of ``results``: rows (query, or a write with RETURNING) and counters."""
    columns = tuple(item.get("columns") or ())
    rows = tuple(tuple(r) for r in item.get("values") or ())
    affected = item.get("rows_affected")
    last_id = item.get("last_insert_id")
    return Result(
        columns=columns,
        rows=rows,
        rows_affected=int(affected) if isinstance(affected, int) else 0,
        last_insert_id=int(last_id) if isinstance(last_id, int) else None,
    )
