"""The Celery app the Celery tests run in real ``celery worker`` processes.

Configured from the environment: ``RQUEUE_CELERY_BROKER`` (the broker URL),
``RQUEUE_CELERY_RUNS`` (a folder: every run of a task appends a line to the file named
by its key), ``RQUEUE_CELERY_ACKS_LATE`` and ``RQUEUE_CELERY_REJECT_ON_LOST`` ("1"),
``RQUEUE_CELERY_VISIBILITY`` (seconds).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from celery import Celery

import rqueue.celery  # noqa: F401  (registers rqlite://)

app = Celery("rqueue_celery_tests", broker=os.environ.get("RQUEUE_CELERY_BROKER", "rqlite://"))
app.conf.update(
    task_acks_late=os.environ.get("RQUEUE_CELERY_ACKS_LATE") == "1",
    task_reject_on_worker_lost=os.environ.get("RQUEUE_CELERY_REJECT_ON_LOST") == "1",
    task_ignore_result=True,
    worker_prefetch_multiplier=1,
    worker_lost_wait=2.0,  # how long a lost pool process's job waits for its result
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
    broker_transport_options={
        "visibility_timeout": float(os.environ.get("RQUEUE_CELERY_VISIBILITY", "60")),
        "polling_interval": 0.2,
        "timeout": 30.0,
        "request_timeout": 5.0,
    },
)


def _record(key: str, **fields: object) -> None:
    runs = Path(os.environ["RQUEUE_CELERY_RUNS"])
    line = json.dumps({"pid": os.getpid(), "t": time.time(), **fields})
    with open(runs / key, "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


@app.task(name="record")
def record(key: str, seconds: float = 0.0) -> None:
    """Note a run of ``key`` (its start and end), taking ``seconds``."""
    _record(key, what="start")
    time.sleep(seconds)
    _record(key, what="end")


@app.task(name="retry_once", bind=True, max_retries=3)
def retry_once(self, key: str, countdown: float) -> None:  # type: ignore[no-untyped-def]
    """Fail the first run with a retry ``countdown`` seconds later; succeed the next."""
    _record(key, what="start", retries=self.request.retries)
    if self.request.retries == 0:
        raise self.retry(countdown=countdown)


@app.task(name="die_once")
def die_once(key: str) -> None:
    """Kill the pool process running it the first time (a lost worker); succeed after."""
    runs = Path(os.environ["RQUEUE_CELERY_RUNS"])
    _record(key, what="start")
    if not (runs / f"{key}.died").exists():
        (runs / f"{key}.died").write_text("")
        os._exit(1)
