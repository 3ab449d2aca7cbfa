"""The SSH backend's inventory: the hosts to run nodes on, read from a TOML file (pure).

::

    [defaults]                      # optional: every host's value unless it gives its own
    user = "root"
    key = "~/.ssh/id_ed25519"
    data_dir = "/var/tmp/rqueue"    # must exist; each run works in a folder of its own there

    [hosts.n1]                      # the table's name is the node's id
    address = "10.0.0.11"
    [hosts.n2]
    address = "10.0.0.12"
    rqlited = "/usr/local/bin/rqlited"   # the user's own binary on the host ...
    [hosts.n3]
    address = "10.0.0.13"
    node = "project"                # ... or the project's node, shipped by the harness

Keys of a host (and of ``[defaults]``): ``address`` (required), ``user`` (``root``),
``port`` (22), ``key`` (a private key file here; none: ssh's own), ``known_hosts`` (a file
here; none: the user's, new hosts accepted once), ``rqlited`` or ``node = "project"``
(default the project's node), ``data_dir`` (required), ``sudo`` (false: the user runs
iptables itself, so it must be root for partitions), ``http_port`` (4001), ``raft_port``
(4002), ``python`` (``python3``: the host's interpreter for the project's node).
Every problem is one line naming the file and the key (:class:`InventoryError`).
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.cluster.base import ClusterError
from harness.wording import plural

#: the ``node`` value that means the project's own node, shipped to the host
PROJECT_NODE = "project"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
_HOST_KEYS = {
    "address", "user", "port", "key", "known_hosts", "rqlited", "node", "data_dir", "sudo",
    "http_port", "raft_port", "python",
}  # fmt: skip
_DEFAULTS = {"user": "root", "port": 22, "sudo": False, "http_port": 4001, "raft_port": 4002}


class InventoryError(ClusterError):
    """The inventory file is missing, not TOML, or has a bad key; the message names it."""


@dataclass(frozen=True)
class Host:
    """One host of the inventory, with every default filled in."""

    name: str
    address: str
    data_dir: str
    user: str = "root"
    port: int = 22
    key: str | None = None
    known_hosts: str | None = None
    rqlited: str | None = None  # None: the project's node
    sudo: bool = False
    http_port: int = 4001
    raft_port: int = 4002
    python: str = "python3"

    @property
    def project_node(self) -> bool:
        return self.rqlited is None

    @property
    def url(self) -> str:
        return f"http://{_bracketed(self.address)}:{self.http_port}"

    @property
    def target(self) -> str:
        """``user@address`` as ssh takes it, with the port shown (for messages)."""
        return f"{self.user}@{self.address}:{self.port}"


@dataclass(frozen=True)
class Inventory:
    path: Path
    hosts: tuple[Host, ...]

    def first(self, count: int) -> Inventory:
        """The first ``count`` hosts (a scenario of fewer nodes than the inventory has)."""
        if count > len(self.hosts):
            raise InventoryError(
                f"{self.path}: {plural(len(self.hosts), 'host')}, but {plural(count, 'node')} "
                "are asked for"
            )
        return Inventory(self.path, self.hosts[:count])


def _bracketed(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def load_inventory(path: Path | str) -> Inventory:
    """Read and check the inventory file; :class:`InventoryError` names the first problem."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise InventoryError(f"{path}: cannot read the inventory: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InventoryError(f"{path}: not valid TOML: {exc}") from None
    return parse_inventory(data, path)


def parse_inventory(data: dict[str, Any], path: Path) -> Inventory:
    """The inventory in ``data`` (a parsed TOML document) read from ``path``."""
    for key in data:
        if key not in ("defaults", "hosts"):
            raise InventoryError(
                f"{path}: unknown key {key!r}; the file has [defaults] and [hosts.NAME]"
            )
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise InventoryError(f"{path}: defaults: must be a table ([defaults])")
    _check_keys(defaults, path, "defaults")
    hosts = data.get("hosts")
    if not isinstance(hosts, dict) or not hosts:
        raise InventoryError(f"{path}: hosts: no hosts; add a [hosts.NAME] table per host")
    parsed = []
    for name, table in hosts.items():
        where = f"hosts.{name}"
        if not _NAME.match(name):
            raise InventoryError(
                f"{path}: {where}: a host's name is its node's id: letters, digits, - and _"
            )
        if not isinstance(table, dict):
            raise InventoryError(f"{path}: {where}: must be a table ([{where}])")
        _check_keys(table, path, where)
        parsed.append(_host(name, {**defaults, **table}, path, where, table, defaults))
    _check_unique(parsed, path)
    return Inventory(path, tuple(parsed))


def _check_keys(table: dict, path: Path, where: str) -> None:
    for key in table:
        if key not in _HOST_KEYS:
            raise InventoryError(
                f"{path}: {where}.{key}: unknown key; known: {', '.join(sorted(_HOST_KEYS))}"
            )


def _host(name: str, v: dict, path: Path, where: str, own: dict, defaults: dict) -> Host:
    def at(key: str) -> str:
        return f"{path}: {'defaults' if key in defaults and key not in own else where}.{key}"

    for key in ("address", "data_dir"):
        if key not in v:
            raise InventoryError(f"{path}: {where}.{key}: missing (required for every host)")
    strings = ("address", "user", "key", "known_hosts", "rqlited", "node", "data_dir", "python")
    for key in strings:
        if key in v and (not isinstance(v[key], str) or not v[key].strip()):
            raise InventoryError(f"{at(key)}: must be a non-empty string, got {v[key]!r}")
    for key in ("port", "http_port", "raft_port"):
        value = v.get(key, _DEFAULTS[key])
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
            raise InventoryError(f"{at(key)}: must be a port number 1-65535, got {value!r}")
    if "sudo" in v and not isinstance(v["sudo"], bool):
        raise InventoryError(f"{at('sudo')}: must be true or false, got {v['sudo']!r}")
    for table, label in ((own, where), (defaults, "defaults")):
        if "rqlited" in table and "node" in table:
            raise InventoryError(f"{path}: {label}: give rqlited (a binary) or node, not both")
    choice = own if ("rqlited" in own or "node" in own) else defaults
    node = choice.get("node", PROJECT_NODE)
    rqlited = choice.get("rqlited")
    if node != PROJECT_NODE:
        raise InventoryError(
            f"{at('node')}: must be {PROJECT_NODE!r} (the project's node); a binary of your "
            f'own is rqlited = "/path/on/host", got {node!r}'
        )
    for key in ("rqlited", "data_dir"):
        value = rqlited if key == "rqlited" else v[key]
        if value is not None and not value.startswith("/"):
            raise InventoryError(f"{at(key)}: must be an absolute path on the host, got {value!r}")
    http_port = v.get("http_port", _DEFAULTS["http_port"])
    raft_port = v.get("raft_port", _DEFAULTS["raft_port"])
    port = v.get("port", _DEFAULTS["port"])
    if http_port == raft_port:
        raise InventoryError(f"{at('raft_port')}: must differ from http_port ({http_port})")
    if port in (http_port, raft_port):
        clash = "http_port" if port == http_port else "raft_port"
        raise InventoryError(
            f"{at(clash)}: {port} is the host's ssh port; partitions would cut the "
            "harness's own sessions"
        )
    address = v["address"].strip()
    try:
        ipaddress.ip_address(address)
    except ValueError:
        if not re.match(r"^[A-Za-z0-9.-]+$", address):
            raise InventoryError(
                f"{at('address')}: not an IP address or host name: {address!r}"
            ) from None
    key = v.get("key")
    for name_, file in (("key", key), ("known_hosts", v.get("known_hosts"))):
        if file is not None and not Path(file).expanduser().is_file():
            raise InventoryError(f"{at(name_)}: no such file here: {file}")
    return Host(
        name=name,
        address=address,
        data_dir=v["data_dir"].rstrip("/") or "/",
        user=v.get("user", _DEFAULTS["user"]),
        port=port,
        key=str(Path(key).expanduser()) if key else None,
        known_hosts=str(Path(v["known_hosts"]).expanduser()) if v.get("known_hosts") else None,
        rqlited=rqlited,
        sudo=v.get("sudo", _DEFAULTS["sudo"]),
        http_port=http_port,
        raft_port=raft_port,
        python=v.get("python", "python3"),
    )


def _check_unique(hosts: list[Host], path: Path) -> None:
    seen: dict[str, str] = {}
    for h in hosts:
        if h.address in seen:
            raise InventoryError(
                f"{path}: hosts.{h.name}.address: {h.address} is hosts.{seen[h.address]}'s "
                "too; partitions cut hosts by address, so each node needs a host of its own"
            )
        seen[h.address] = h.name
