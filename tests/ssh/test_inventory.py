"""The inventory's parser: defaults, the node to run, and one line naming the file and the
key for each bad input (pure, fast)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cluster.ssh.inventory import InventoryError, load_inventory, parse_inventory

P = Path("inv.toml")


def test_defaults_fill_every_host_and_a_host_overrides_them(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("k")
    path = tmp_path / "inv.toml"
    path.write_text(
        f'[defaults]\nkey = "{key}"\ndata_dir = "/var/tmp/rq"\nuser = "ops"\nsudo = true\n'
        '[hosts.a]\naddress = "10.0.0.1"\n'
        '[hosts.b]\naddress = "10.0.0.2"\nuser = "root"\nsudo = false\nhttp_port = 5001\n'
        'rqlited = "/usr/local/bin/rqlited"\n'
    )
    inv = load_inventory(path)
    a, b = inv.hosts
    assert (a.name, a.user, a.port, a.sudo, a.key, a.project_node) == (
        "a",
        "ops",
        22,
        True,
        str(key),
        True,
    )
    assert (b.user, b.sudo, b.http_port, b.raft_port) == ("root", False, 5001, 4002)
    assert b.rqlited == "/usr/local/bin/rqlited" and not b.project_node
    assert b.url == "http://10.0.0.2:5001"
    assert [h.name for h in inv.first(1).hosts] == ["a"]
    with pytest.raises(InventoryError, match="2 hosts, but 3 nodes"):
        inv.first(3)


def test_a_host_given_node_project_overrides_a_default_rqlited() -> None:
    data = {
        "defaults": {"rqlited": "/opt/rqlited", "data_dir": "/d"},
        "hosts": {"a": {"address": "10.0.0.1", "node": "project"}, "b": {"address": "10.0.0.2"}},
    }
    a, b = parse_inventory(data, P).hosts
    assert a.project_node and b.rqlited == "/opt/rqlited"


def _one(**keys: object) -> dict:
    """An inventory of one host ``a`` with ``keys`` over a valid address and data_dir."""
    return {"hosts": {"a": {"address": "h", "data_dir": "/d", **keys}}}


TWO_ON_ONE_ADDRESS = {"hosts": {"a": _one()["hosts"]["a"], "b": _one()["hosts"]["a"]}}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"hosts": {}}, "inv.toml: hosts: no hosts"),
        ({"host": {}}, "inv.toml: unknown key 'host'"),
        ({"hosts": {"a": {"data_dir": "/d"}}}, "inv.toml: hosts.a.address: missing"),
        ({"hosts": {"a": {"address": "h"}}}, "inv.toml: hosts.a.data_dir: missing"),
        (_one(data_dir="d"), "inv.toml: hosts.a.data_dir: must be an absolute path"),
        (_one(port="22"), "inv.toml: hosts.a.port: must be a port"),
        (_one(sudo="yes"), "inv.toml: hosts.a.sudo: must be true or false"),
        (_one(colour=1), "inv.toml: hosts.a.colour: unknown key"),
        (_one(node="mine"), "inv.toml: hosts.a.node: must be 'project'"),
        (_one(node="project", rqlited="/r"), "inv.toml: hosts.a: give rqlited"),
        (_one(rqlited="rqlited"), "inv.toml: hosts.a.rqlited: must be an absolute path"),
        (_one(http_port=22), "inv.toml: hosts.a.http_port: 22 is the host's ssh port"),
        (_one(raft_port=4001), "inv.toml: hosts.a.raft_port: must differ"),
        (_one(key="/no/such/key"), "inv.toml: hosts.a.key: no such file here"),
        ({"hosts": {"a b": _one()["hosts"]["a"]}}, "inv.toml: hosts.a b: a host's name"),
        (_one(address="h x"), "inv.toml: hosts.a.address: not an IP address"),
        ({**_one(), "defaults": {"port": 0}}, "inv.toml: defaults.port: must be a port"),
        (TWO_ON_ONE_ADDRESS, "inv.toml: hosts.b.address: h is hosts.a's too"),
    ],
)
def test_bad_inventories_say_which_key_in_one_line(data: dict, message: str) -> None:
    with pytest.raises(InventoryError) as info:
        parse_inventory(data, P)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_missing_or_broken_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match=r"nope\.toml: cannot read the inventory"):
        load_inventory(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[hosts.a\n")
    with pytest.raises(InventoryError, match=r"bad\.toml: not valid TOML"):
        load_inventory(bad)
