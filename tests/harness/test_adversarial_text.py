"""The workload's adversarial text (harness.workload.text) and the digests the history keeps.

The forms are judged by the embedded node's own model of rqlite's binding
(``harness.node.body.blob_literal``, tested against rqlite's source in tests/conformance),
so "blob-shaped" here means what rqlite >= 8.31 would bind as a BLOB.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata

from harness.node.body import blob_literal
from harness.scenario import WorkloadSpec
from harness.workload import text
from harness.workload.workers import Workload


def test_every_group_form_is_unique_across_a_run_and_holds_its_number() -> None:
    ids = [text.group_id(p, k, 5) for p in range(4) for k in range(5)]
    assert len(set(ids)) == len(ids)
    for form in range(len(text.GROUP_FORMS)):
        assert text.GROUP_FORMS[form](3) != text.GROUP_FORMS[form](4)


def test_the_forms_cover_what_the_binding_gets_wrong_and_what_it_must_leave() -> None:
    ids = [text.GROUP_FORMS[i](i) for i in range(len(text.GROUP_FORMS))]
    blobs = {i: blob_literal(g) for i, g in enumerate(ids)}
    shaped = [ids[i] for i, b in blobs.items() if b is not None]
    # blob literals in both cases, with spaces Go trims (Unicode ones too), empty, NUL
    # bytes and bytes that are no UTF-8
    assert any(g.startswith("x'") for g in shaped) and any(g.startswith("X'") for g in shaped)
    assert any(g != g.strip() for g in shaped) and any("\u3000" in g for g in shaped)
    assert b"" in blobs.values()
    assert any(b is not None and b"\x00" in b for b in blobs.values())
    undecodable = [b for b in blobs.values() if b is not None and not _utf8(b)]
    assert undecodable
    # and text that must stay text: odd digits, unclosed, quotes, backslashes, NUL, SQL
    plain = [g for g, b in zip(ids, blobs.values(), strict=True) if b is None]
    assert any("'" in g for g in plain) and any("\\" in g for g in plain)
    assert any("\x00" in g for g in plain) and any(len(g) > 500 for g in plain)
    planes = {ord(c) >> 16 for g in ids for c in g}
    assert planes >= {0, 1, 2, 3, 14, 15, 16}
    assert not any(unicodedata.category(c) == "Cs" for g in ids for c in g)  # no surrogates


def test_bodies_draw_blob_shaped_and_other_text() -> None:
    assert any(blob_literal(t) is not None for t in text.BODY_TEXTS)
    assert any(blob_literal(t) is None and "\x00" in t for t in text.BODY_TEXTS)


def test_the_digest_is_of_the_utf8_bytes_and_none_for_what_is_no_text() -> None:
    body = json.dumps({"msg": "m0-1", "text": "x'41'\u3000\U0001f600"}, ensure_ascii=False)
    assert text.digest(body) == hashlib.sha256(body.encode()).hexdigest()[:16]
    assert text.digest(body) != text.digest(body.replace("x'41'", "A"))
    assert text.digest(b"bytes") is None and text.digest(None) is None


def test_the_share_of_adversarial_groups_is_drawn_per_group_at_least_one() -> None:
    def groups(share: float, seed: int = 1) -> set[str]:
        spec = WorkloadSpec(publishers=2, groups_per_publisher=4, adversarial_text=share)
        return Workload(spec, None, [], None, seed=seed).adversarial_groups  # type: ignore[arg-type]

    assert groups(0.0) == set()
    assert all(len(groups(0.01, seed)) >= 1 for seed in range(5))
    assert len(groups(1.0)) == 8


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
