"""Reading ``/metrics`` as Prometheus does: a real HTTP GET, the text format parsed by the
client library's own parser."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from .polling import wait_for

#: a sample: its name and its labels, as ``(name, (("label", "value"), ...))``
Key = tuple[str, tuple[tuple[str, str], ...]]


def scrape(url: str) -> dict[Key, float]:
    """Every sample served at ``url``, by name and sorted labels."""
    with urllib.request.urlopen(url, timeout=5) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain")
        text = answer.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: dict[Key, float], name: str, **labels: str) -> float | None:
    """The sample ``name`` with exactly ``labels`` (None: not served)."""
    return samples.get((name, tuple(sorted(labels.items()))))


def served_at(log: Path, timeout: float = 10.0) -> str:
    """The ``/metrics`` URL a command's start-up line in ``log`` names."""

    def found() -> str | None:
        m = re.search(r"metrics at (http://\S+/metrics)", log.read_text() if log.exists() else "")
        return m.group(1) if m else None

    return wait_for(f"the metrics URL in {log}", found, timeout)
