"""The metrics' shared parts without a cluster: ``--metrics-addr``, the optional client
library, the worker's observer fed by hand, and the configuration errors of both
commands (exit 2, one line, nothing sent)."""

from __future__ import annotations

import io
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from rqueue import LeaseLost, Unavailable, _cli
from rqueue._metrics import Address, parse_address
from rqueue._metrics_worker import WorkerMetrics
from rqueue._models import DeadLetter, Lease

ROOT = Path(__file__).resolve().parents[2]
NOWHERE = "http://127.0.0.1:9"


# -- the address -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("9464", "127.0.0.1", 9464),
        ("0", "127.0.0.1", 0),
        ("127.0.0.1:9464", "127.0.0.1", 9464),
        ("localhost:80", "127.0.0.1", 80),
        ("[::1]:9464", "::1", 9464),
        ("0.0.0.0:9464", "0.0.0.0", 9464),
        ("10.1.2.3:65535", "10.1.2.3", 65535),
    ],
)
def test_an_address_is_an_ip_and_a_port_and_a_bare_port_is_loopback(
    text: str, host: str, port: int
) -> None:
    assert parse_address(text) == Address(host, port)


def test_only_loopback_is_loopback() -> None:
    assert parse_address("9464").loopback and parse_address("[::1]:1").loopback
    assert not parse_address("0.0.0.0:9464").loopback
    assert parse_address("[::1]:9464").url() == "http://[::1]:9464/metrics"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (":9464", "':9464' names no host: write 127.0.0.1:9464 (this machine only) or 0.0.0.0"),
        ("metrics.example:9464", "HOST must be an IP address or localhost"),
        ("::1:9464", "an IPv6 address goes in brackets, as [::1]:9464"),
        ("127.0.0.1:65536", "PORT must be a number from 0 to 65535"),
        ("127.0.0.1:-1", "PORT must be a number from 0 to 65535"),
        ("127.0.0.1:", "PORT must be a number from 0 to 65535"),
        ("nine", "'nine' is not HOST:PORT or PORT"),
        ("", "'' is not HOST:PORT or PORT"),
        ("300.1.1.1:80", "HOST must be an IP address or localhost, got '300.1.1.1'"),
    ],
)
def test_a_bad_address_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=r"^--metrics-addr: ") as caught:
        parse_address(text)
    assert says in str(caught.value)


# -- the commands' configuration errors ------------------------------------------------------
def cli(*argv: str) -> int:
    return _cli.run(["--url", NOWHERE, "--timeout", "2", *argv], out=io.StringIO())


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["worker", "json:loads", "--metrics-addr", ":9464"], "--metrics-addr: ':9464' names no"),
        (["worker", "json:loads", "--metrics-addr", "a.b:1"], "HOST must be an IP address"),
        (["exporter", "--metrics-addr", "x"], "--metrics-addr: 'x' is not HOST:PORT or PORT"),
        (["exporter", "--metrics-addr", "0", "--interval", "0"], "--interval: must be a number"),
        (["exporter", "--metrics-addr", "0", "--queue", "Bad"], "--queue: 'Bad' is not a queue"),
        (["exporter", "--metrics-addr", "0", "--timeout", "-1"], "--timeout: must be"),
        (["exporter", "--metrics-addr", "10.255.255.1:9464"], "cannot listen on 10.255.255.1"),
    ],
)
def test_a_configuration_error_of_either_command_exits_2_with_one_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(*argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and says in err, err


def test_the_exporter_needs_an_address(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli("exporter")
    assert exited.value.code == 2
    assert "the following arguments are required: --metrics-addr" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["worker", "json:loads"], ["exporter"]])
def test_an_address_already_taken_exits_2(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert cli(*command, "--metrics-addr", f"127.0.0.1:{port}") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --metrics-addr: cannot listen on 127.0.0.1:{port}: ")
    assert err.count("\n") == 1


# -- the optional library ---------------------------------------------------------------------
def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_importing_rqueue_and_its_commands_never_imports_the_client_library() -> None:
    code = (
        "import sys, rqueue, rqueue._cli, rqueue._cli_worker, rqueue._cli_exporter, "
        "rqueue._metrics, rqueue._metrics_worker\n"
        "rqueue._cli.build_parser().parse_args(['exporter', '--metrics-addr', '0'])\n"
        "assert 'prometheus_client' not in sys.modules, 'imported'"
    )
    done = python(code)
    assert done.returncode == 0, done.stderr


#: a Python where ``import prometheus_client`` fails, as where it is not installed
WITHOUT = "import sys; sys.modules['prometheus_client'] = None\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["worker", "json:loads", "--metrics-addr", "127.0.0.1:0"],
        ["exporter", "--metrics-addr", "0"],
    ],
)
def test_without_the_library_metrics_exit_2_saying_how_to_install_it(argv: list[str]) -> None:
    code = WITHOUT + f"from rqueue import _cli; sys.exit(_cli.run(['--url', {NOWHERE!r}, *{argv}]))"
    done = python(code)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "error: metrics need the prometheus_client library: pip install 'rqueue[metrics]'\n"
    )


# -- the worker's observer, fed by hand ---------------------------------------------------
class Seen:
    """An inner observer: notes every call it sees."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def invoke(self, slot: int, f: str, value: dict[str, Any]) -> str:
        return f

    def complete(self, handle: str, result: Any, error: BaseException | None) -> None:
        self.calls.append((handle, "error" if error else "ok"))


def lease(seq: int) -> Lease:
    return Lease(seq, "g", "{}", f"w:{seq}")


def call(m: WorkerMetrics, slot: int, f: str, value: dict[str, Any], result: Any = None,
         error: BaseException | None = None) -> None:  # fmt: skip
    m.complete(m.invoke(slot, f, value), result, error)


def test_the_observer_counts_each_outcome_once_and_hands_every_call_on() -> None:
    reg, seen = CollectorRegistry(), Seen()
    m = WorkerMetrics(reg, "orders", inner=seen)

    def v(name: str, **labels: str) -> float | None:
        return reg.get_sample_value(name, {"queue": "orders", **labels})

    assert v("rqueue_worker_claims_total") == 0  # every series there from the start
    assert v("rqueue_worker_nacks_total", reason="released") == 0
    call(m, 0, "claim", {}, lease(1))
    call(m, 1, "claim", {}, lease(2))
    call(m, 2, "claim", {}, None)  # nothing to claim: not a claim
    call(m, 2, "claim", {}, error=Unavailable("down"))
    assert v("rqueue_worker_leases_held") == 2
    call(m, 0, "extend", {"lease": lease(1)}, lease(1))
    call(m, 0, "ack", {"lease": lease(1)})
    call(m, 1, "extend", {"lease": lease(2)}, error=LeaseLost("gone"))
    call(m, 1, "nack", {"lease": lease(2), "error": "E: x"}, error=LeaseLost("gone"))
    call(m, 3, "claim", {}, lease(3))
    call(m, 3, "nack", {"lease": lease(3), "delay": 0})  # given back at a stop
    m.dead_lettered(DeadLetter(4, "g", "{}", 0, 3, reason="max_deliveries"))
    m.dead_lettered(DeadLetter(5, "g", "{}", 0, 1, reason="retention"))
    assert v("rqueue_worker_claims_total") == 3
    assert v("rqueue_worker_acks_total") == 1
    assert v("rqueue_worker_nacks_total", reason="failed") == 0  # it failed: lease lost
    assert v("rqueue_worker_nacks_total", reason="released") == 1
    assert v("rqueue_worker_failures_total") == 1
    assert v("rqueue_worker_lease_extensions_total") == 1
    assert v("rqueue_worker_leases_lost_total") == 1  # the extend's and the nack's: one lease
    assert v("rqueue_worker_call_errors_total", call="claim") == 1
    assert v("rqueue_worker_call_errors_total", call="extend") == 1
    assert v("rqueue_worker_call_errors_total", call="nack") == 1
    assert v("rqueue_worker_call_errors_total", call="ack") == 0
    assert v("rqueue_worker_dead_letters_total", reason="max_deliveries") == 1
    assert v("rqueue_worker_dead_letters_total", reason="retention") == 1
    assert v("rqueue_worker_leases_held") == 0
    # handled: the ack and the failed nack; the message given back was not handled
    assert v("rqueue_worker_handler_duration_seconds_count") == 2
    assert len(seen.calls) == 10 and seen.calls[2] == ("claim", "ok")
    assert seen.calls[3] == ("claim", "error")
