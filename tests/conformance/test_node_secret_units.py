"""The node's cluster secret and loopback rule, as parsed from its flags (pure units)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.node.config import SECRET_ENV, exposure_refusal, is_loopback_host, parse_args

BASE = ["--node-id", "n1", "--data-dir", "/nonexistent"]


def args(http: str = "127.0.0.1:4001", raft: str = "127.0.0.1:4002", *more: str) -> list[str]:
    return [*BASE, "--http-addr", http, "--raft-addr", raft, *more]


def test_no_secret_anywhere_is_none() -> None:
    assert parse_args(args(), environ={}).cluster_secret is None


def test_the_environment_gives_a_secret() -> None:
    assert parse_args(args(), environ={SECRET_ENV: "s3cret"}).cluster_secret == b"s3cret"


def test_the_file_wins_over_the_environment(tmp_path: Path) -> None:
    f = tmp_path / "secret"
    f.write_bytes(b"from-file\n")  # a trailing newline (echo > file) is not part of it
    cfg = parse_args(args("127.0.0.1:4001", "127.0.0.1:4002", "--cluster-secret-file", str(f)),
                     environ={SECRET_ENV: "from-env"})  # fmt: skip
    assert cfg.cluster_secret == b"from-file"


def test_a_binary_secret_file_is_taken_as_bytes(tmp_path: Path) -> None:
    f = tmp_path / "secret"
    f.write_bytes(bytes(range(1, 200)))
    cfg = parse_args(args("127.0.0.1:4001", "127.0.0.1:4002", "--cluster-secret-file", str(f)),
                     environ={})  # fmt: skip
    assert cfg.cluster_secret == bytes(range(1, 200)).strip()


def test_the_secret_never_shows_in_the_config_repr() -> None:
    cfg = parse_args(args(), environ={SECRET_ENV: "do-not-print-me"})
    assert "do-not-print-me" not in repr(cfg)


@pytest.mark.parametrize("content", [b"", b" \n"])
def test_an_empty_secret_file_is_an_error(tmp_path: Path, capsys, content: bytes) -> None:
    f = tmp_path / "secret"
    f.write_bytes(content)
    with pytest.raises(SystemExit) as exc:
        parse_args(args("127.0.0.1:4001", "127.0.0.1:4002", "--cluster-secret-file", str(f)),
                   environ={})  # fmt: skip
    assert exc.value.code == 2
    assert f"--cluster-secret-file {f} is empty" in capsys.readouterr().err


def test_a_missing_secret_file_is_an_error(tmp_path: Path, capsys) -> None:
    f = tmp_path / "absent"
    with pytest.raises(SystemExit) as exc:
        parse_args(args("127.0.0.1:4001", "127.0.0.1:4002", "--cluster-secret-file", str(f)),
                   environ={})  # fmt: skip
    assert exc.value.code == 2
    assert f"cannot read --cluster-secret-file {f}" in capsys.readouterr().err


def test_an_empty_secret_variable_is_an_error(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(args(), environ={SECRET_ENV: "  "})
    assert exc.value.code == 2
    assert f"{SECRET_ENV} is set but empty" in capsys.readouterr().err


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "127.77.3.11", "::1", "[::1]", "::ffff:127.0.0.1", "localhost"]
)
def test_loopback_hosts(host: str) -> None:
    assert is_loopback_host(host)


@pytest.mark.parametrize(
    "host", ["0.0.0.0", "::", "[::]", "192.0.2.7", "2001:db8::1", "no-such-host.invalid"]
)
def test_hosts_beyond_loopback(host: str) -> None:
    # names are only parsed or resolved here: nothing is sent anywhere
    assert not is_loopback_host(host)


def test_loopback_needs_no_secret() -> None:
    assert exposure_refusal(parse_args(args(), environ={})) is None


@pytest.mark.parametrize(
    ("http", "raft", "named"),
    [
        ("0.0.0.0:4001", "127.0.0.1:4002", "0.0.0.0:4001"),
        ("127.0.0.1:4001", "192.0.2.7:4002", "192.0.2.7:4002"),
    ],
)
def test_beyond_loopback_without_a_secret_is_refused(http: str, raft: str, named: str) -> None:
    refusal = exposure_refusal(parse_args(args(http, raft), environ={}))
    assert refusal is not None and "\n" not in refusal
    assert named in refusal and "--cluster-secret-file" in refusal and SECRET_ENV in refusal


def test_beyond_loopback_with_a_secret_is_allowed() -> None:
    cfg = parse_args(args("0.0.0.0:4001", "192.0.2.7:4002"), environ={SECRET_ENV: "x" * 32})
    assert exposure_refusal(cfg) is None
