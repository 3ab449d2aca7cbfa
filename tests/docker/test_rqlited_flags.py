"""The embedded node speaks rqlited's command line (harness/node/rqlited_flags.py).

Pure parsing tests, then real nodes started with rqlited's flags: a cluster whose
advertised HTTP addresses differ from where the nodes listen (as in a container), a
bounded wait for a peer that never comes, and the local backend driving the embedded
node as if it were an ``rqlited`` binary (kill and restart included).
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cluster.engines import parse_rqlited_version
from harness.cluster.local.cluster import LocalCluster
from harness.node import VERSION
from harness.node.discovery import NodeCard, decode, encode, reach_addr
from harness.node.rqlited_flags import (
    FlagError,
    RqlitedFlags,
    go_duration,
    is_rqlited_argv,
    parse,
    to_config,
)

COMPOSE_N1 = [
    "-node-id",
    "n1",
    "-http-addr",
    "0.0.0.0:4001",
    "-http-adv-addr",
    "127.0.0.1:4001",
    "-raft-addr",
    "0.0.0.0:4002",
    "-raft-adv-addr",
    "n1:4002",
    "-bootstrap-expect",
    "3",
    "-join",
    "n1:4002,n2:4002,n3:4002",
    "/rqlite/file/data",
]


def test_the_compose_files_flags_parse() -> None:
    flags = parse(COMPOSE_N1)
    assert flags == RqlitedFlags(
        data_dir=Path("/rqlite/file/data"),
        node_id="n1",
        http_addr="0.0.0.0:4001",
        http_adv_addr="127.0.0.1:4001",
        raft_addr="0.0.0.0:4002",
        raft_adv_addr="n1:4002",
        bootstrap_expect=3,
        join=("n1:4002", "n2:4002", "n3:4002"),
    )
    assert flags.peer_raft_addrs == ["n2:4002", "n3:4002"]


def test_go_flag_spellings_and_defaults() -> None:
    flags = parse(
        ["--node-id=a", "-raft-addr=127.0.0.1:5002", "-bootstrap-expect-timeout", "2m30s", "d"]
    )
    assert isinstance(flags, RqlitedFlags)
    assert (flags.node_id, flags.raft_addr, flags.bootstrap_timeout) == (
        "a",
        "127.0.0.1:5002",
        150.0,
    )
    assert flags.http_addr == "localhost:4001" and flags.http_advertised == "localhost:4001"
    # no -node-id: the advertised Raft address, as rqlited does
    assert (
        parse(["-raft-adv-addr", "h:4002", "-raft-addr", "0.0.0.0:4002", "d"]).identity == "h:4002"
    )
    assert go_duration("x", "500ms") == 0.5
    with pytest.raises(FlagError, match="duration"):
        go_duration("x", "12")


def test_rqlited_style_is_told_from_the_embedded_flags() -> None:
    assert is_rqlited_argv(COMPOSE_N1)
    assert is_rqlited_argv(["/data"])
    assert not is_rqlited_argv(["--node-id", "n1", "--http-addr", "127.0.0.1:1"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-auth", "/a.json", "d"], "-auth is not supported by the embedded node"),
        (["-http-cert", "c.pem", "d"], "no authentication, no TLS"),
        (["-node-id", "n1"], "give the data directory as the last argument"),
        (["d1", "d2"], "give the data directory"),
        (["-join", "http://n1:4001", "-bootstrap-expect", "2", "d"], "Raft addresses"),
        (
            ["-raft-adv-addr", "a:4002", "-bootstrap-expect", "3", "-join", "a:4002,b:4002", "d"],
            "names 2",
        ),
        (["-raft-addr", "0.0.0.0:4002", "-raft-adv-addr", "n1:5002", "d"], "different ports"),
        (["-node-id"], "needs a value"),
        (["-raft-addr", "0.0.0.0:4002", "d"], "give -raft-adv-addr"),
        (["-http-addr", "0.0.0.0:4001", "d"], r"advertised HTTP address is not routable \(0\.0"),
        (["-http-adv-addr", "[::]:4001", "d"], r"not routable \(::\), specify it via -http-addr"),
    ],
)
def test_what_the_embedded_node_cannot_run_is_named(argv: list[str], message: str) -> None:
    with pytest.raises(FlagError, match=message):
        parse(argv)


def test_version_and_help() -> None:
    text = str(parse(["-version"]))
    assert text.startswith(f"rqlited {VERSION} ")  # as rqlited prints it
    assert ".".join(map(str, parse_rqlited_version(text))) in VERSION
    assert str(parse(["-h"])).startswith("usage:")


def test_unsupported_flag_is_one_line_and_exit_2(tmp_path: Path) -> None:
    res = _node(["-auth", "users.json", str(tmp_path)]).communicate(timeout=30)
    err = res[1].strip().splitlines()
    assert err == [
        "harness.node: rqlited flag -auth is not supported by the embedded node "
        "(it takes -node-id, -http-addr, -http-adv-addr, -raft-addr, -raft-adv-addr, "
        "-bootstrap-expect, -bootstrap-expect-timeout, -join, -cluster-secret-file, "
        "-clock-offset-file, -fk, -version; no authentication, no TLS)"
    ]


def test_what_rqlited_itself_refuses_is_fatal_and_exit_1_as_there(tmp_path: Path) -> None:
    res = _node(["-http-addr", "0.0.0.0:4001", str(tmp_path)])
    _, err = res.communicate(timeout=30)
    assert res.returncode == 1
    assert err.strip().splitlines() == [
        "fatal: advertised HTTP address is not routable (0.0.0.0), "
        "specify it via -http-addr or -http-adv-addr"
    ]


def test_cards_are_signed_with_the_secret() -> None:
    card = NodeCard("n1", "n1:4002", "127.0.0.1:4001", "0.0.0.0:4001")
    assert decode(encode(card, b"s3"), b"s3") == card
    assert decode(encode(card, b"s3"), b"other") is None
    assert decode(encode(card, None), b"s3") is None  # unsigned: refused when we have one
    assert decode(b"\x00\x00\x01garbage", None) is None
    # a wildcard bind is reached at the Raft host, a concrete one as it is
    assert reach_addr(card, "n1:4002") == "n1:4001"
    assert reach_addr(NodeCard("a", "h:2", "x:1", "127.0.0.1:1"), "h:2") == "127.0.0.1:1"


def test_fk_reaches_the_node() -> None:
    flags = parse(["-fk", "-http-adv-addr", "127.0.0.1:4001", "d"])
    assert isinstance(flags, RqlitedFlags) and flags.foreign_keys
    assert to_config(flags, []).foreign_keys
    plain = parse(["-http-adv-addr", "127.0.0.1:4001", "d"])
    assert isinstance(plain, RqlitedFlags) and not to_config(plain, []).foreign_keys


def test_config_keeps_advertised_and_reached_addresses_apart() -> None:
    flags = parse(COMPOSE_N1)
    assert isinstance(flags, RqlitedFlags)
    cards = [
        NodeCard("n2", "n2:4002", "127.0.0.1:4011", "0.0.0.0:4001"),
        NodeCard("n3", "n3:4002", "127.0.0.1:4021", "0.0.0.0:4001"),
    ]
    cfg = to_config(flags, cards)
    assert (cfg.node_id, cfg.http_addr, cfg.raft_addr) == ("n1", "0.0.0.0:4001", "n1:4002")
    assert [(m.node_id, m.http_addr, m.reach) for m in cfg.members] == [
        ("n1", "127.0.0.1:4001", "0.0.0.0:4001"),
        ("n2", "127.0.0.1:4011", "n2:4001"),
        ("n3", "127.0.0.1:4021", "n3:4001"),
    ]


# -- real nodes ------------------------------------------------------------------------------


def _node(argv: list[str]) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    return subprocess.Popen(
        [sys.executable, "-m", "harness.node", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _get(url: str, data: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with opener.open(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


@pytest.fixture
def advertised_cluster(tmp_path: Path) -> Iterator[dict]:
    """Three nodes from rqlited's flags, each advertising an HTTP address nobody can
    reach (192.0.2.x, TEST-NET-1) while it listens on 127.0.0.1, as a container
    advertises the host's published port."""
    ports = _free_ports(6)
    http, raft = ports[:3], ports[3:]
    join = ",".join(f"127.0.0.1:{p}" for p in raft)
    procs = []
    for i in range(3):
        argv = [
            "-node-id", f"n{i + 1}",
            "-http-addr", f"127.0.0.1:{http[i]}",
            "-http-adv-addr", f"192.0.2.{i + 1}:{http[i]}",
            "-raft-addr", f"127.0.0.1:{raft[i]}",
            "-bootstrap-expect", "3",
            "-join", join,
            str(tmp_path / f"n{i + 1}"),
        ]  # fmt: skip
        procs.append(_node(argv))
    try:
        yield {"http": http, "procs": procs, "dir": tmp_path}
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()


def _wait_leader(http: list[int], timeout: float = 60.0) -> str:
    """The leader's id once every node names the same one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = set()
        for port in http:
            try:
                status, _, body = _get(f"http://127.0.0.1:{port}/status")
                seen.add(json.loads(body)["store"]["leader"]["node_id"] if status == 200 else "")
            except (OSError, ValueError, KeyError):
                seen.add("")
        if len(seen) == 1 and "" not in seen:
            return seen.pop()
        time.sleep(0.2)
    raise AssertionError("no leader named by every node within the deadline")


def test_a_cluster_from_rqlited_flags_forwards_inside_and_advertises_outside(
    advertised_cluster: dict,
) -> None:
    http = advertised_cluster["http"]
    lead = _wait_leader(http)
    lead_i = int(lead[1:]) - 1
    follower = http[(lead_i + 1) % 3]
    # a write on a follower is forwarded to where the leader listens, not where it advertises
    status, _, body = _get(
        f"http://127.0.0.1:{follower}/db/execute",
        b'["CREATE TABLE t (x)", "INSERT INTO t VALUES (1)"]',
    )
    assert status == 200 and b"error" not in body, body
    # redirects and /nodes name the advertised addresses, and every node is reachable
    status, headers, _ = _get(f"http://127.0.0.1:{follower}/db/execute?redirect", b'["SELECT 1"]')
    assert status == 301
    assert headers["Location"].startswith(f"http://192.0.2.{lead_i + 1}:{http[lead_i]}/db/execute")
    _, _, body = _get(f"http://127.0.0.1:{follower}/nodes")
    nodes = json.loads(body)
    assert {n["api_addr"] for n in nodes.values()} == {
        f"http://192.0.2.{i + 1}:{p}" for i, p in enumerate(http)
    }
    assert all(n["reachable"] for n in nodes.values()), nodes
    # an answer a node gave itself names its advertised HTTP address (rqlited's HTTPAdv)
    f = (lead_i + 1) % 3
    _, headers, _ = _get(f"http://127.0.0.1:{follower}/db/query?level=none&q=SELECT%201")
    assert headers["X-Rqlite-Served-By"] == f"192.0.2.{f + 1}:{http[f]}"
    # each node keeps what it learnt for its restarts
    saved = json.loads((advertised_cluster["dir"] / "n1" / "rqlited-peers.json").read_text())
    assert sorted(p["node_id"] for p in saved["peers"]) == ["n2", "n3"]


def test_a_peer_that_never_comes_ends_the_wait_with_one_line(tmp_path: Path) -> None:
    http, raft, other = _free_ports(3)
    argv = [
        "-http-addr", f"127.0.0.1:{http}",
        "-raft-addr", f"127.0.0.1:{raft}",
        "-bootstrap-expect", "2",
        "-bootstrap-expect-timeout", "1s",
        "-join", f"127.0.0.1:{raft},127.0.0.1:{other}",
        str(tmp_path),
    ]  # fmt: skip
    proc = _node(argv)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert err.strip().splitlines()[-1] == (
        f"harness.node: -bootstrap-expect 2: after 1s still waiting for 127.0.0.1:{other} "
        "(nothing listens there)"
    )


@pytest.fixture
def rqlited_wrapper(tmp_path: Path) -> Path:
    """An executable that is the embedded node under rqlited's name and flags."""
    path = tmp_path / "rqlited"
    root = Path(__file__).resolve().parents[2]
    path.write_text(
        f'#!/bin/sh\nPYTHONPATH="{root}" exec "{sys.executable}" -m harness.node "$@"\n'
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_the_local_backend_drives_it_as_an_rqlited_binary(
    tmp_path: Path, rqlited_wrapper: Path
) -> None:
    cluster = LocalCluster.start(
        nodes=3, directory=tmp_path / "c", engine="rqlited", rqlited=rqlited_wrapper, timeout=60
    )
    try:
        lead = cluster.wait_for_leader(30)
        cluster.kill(lead.id)
        cluster.wait_for_leader(30, all_ready=False, exclude=[lead.id])
        cluster.restart(lead.id)  # from the peers it saved: nobody needs to introduce it
        cluster.wait_for_leader(30)
    finally:
        cluster.stop()


def test_a_connection_reset_mid_introduction_is_not_an_answer(tmp_path: Path) -> None:
    """A peer that hands its port to Raft while a dial is in flight resets the connection
    (seen: a node of a 5-node cluster died of the ConnectionResetError). The dial says
    "not a card" and the node's own listener keeps serving after a reset of its own."""
    import threading

    from harness.node import discovery

    me = NodeCard("n1", "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:2")
    resetter = socket.socket()
    resetter.bind(("127.0.0.1", 0))
    resetter.listen(1)

    def reset_after_reading() -> None:
        conn, _ = resetter.accept()
        conn.recv(4096)  # the dialler's card has arrived: now reset, as Raft's port may
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        conn.close()

    t = threading.Thread(target=reset_after_reading)
    t.start()
    addr = f"127.0.0.1:{resetter.getsockname()[1]}"
    directory = discovery.Directory(tmp_path, me, [addr])
    assert discovery._dial(addr, directory, None) == "other"
    t.join(timeout=10)
    resetter.close()

    # the listener side: a client that resets mid-line does not stop it
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    peer = NodeCard("n2", f"127.0.0.1:{port + 1}", "127.0.0.1:3", "127.0.0.1:3")
    served = discovery.Directory(tmp_path / "s", me, [peer.raft])
    stop = threading.Event()
    worker = threading.Thread(target=discovery._serve, args=(server, served, None, stop))
    worker.start()
    try:
        rude = socket.create_connection(("127.0.0.1", port))
        rude.sendall(b'{"protocol": ')
        rude.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        rude.close()
        polite = socket.create_connection(("127.0.0.1", port), timeout=5)
        polite.sendall(discovery.encode(peer, None))
        assert discovery.decode(polite.makefile("rb").readline(), None) == me
        polite.close()
    finally:
        stop.set()
        worker.join(timeout=10)
        server.close()


def test_no_cluster_secret_beyond_loopback_is_refused_before_waiting(tmp_path: Path) -> None:
    """The refusal comes at once, not after -bootstrap-expect-timeout spent waiting for
    peers (which would be refused too)."""
    http, raft, other = _free_ports(3)
    argv = [
        "-http-addr", f"0.0.0.0:{http}", "-http-adv-addr", f"127.0.0.1:{http}",
        "-raft-addr", f"127.0.0.1:{raft}",
        "-bootstrap-expect", "2",
        "-bootstrap-expect-timeout", "120s",
        "-join", f"127.0.0.1:{raft},127.0.0.1:{other}",
        str(tmp_path),
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "RQUEUE_CLUSTER_SECRET"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.node", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(env, PYTHONPATH=str(Path(__file__).resolve().parents[2])),
    )
    try:
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 2
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"harness.node: refusing to listen on 0.0.0.0:{http} (--http-addr)")


def test_join_without_bootstrap_expect_joins_a_running_cluster_through_the_members_apis(
    tmp_path,
) -> None:
    flags = parse(
        ["-node-id", "n4", "-http-addr", "0.0.0.0:4001", "-http-adv-addr", "127.0.0.1:9",
         "-raft-addr", "0.0.0.0:4002", "-raft-adv-addr", "n4:4002", "-join", "n1:4002,n2:4002",
         str(tmp_path)]
    )  # fmt: skip
    cfg = to_config(flags, [])
    assert cfg.peers == () and cfg.join == ("n1:4001", "n2:4001")
    assert cfg.http_advertised == "127.0.0.1:9"
