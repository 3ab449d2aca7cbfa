"""Degraded links on SSH hosts (capability ``links``): packet loss and slow links, made
on the host itself, sparing the harness's own SSH sessions (docs/ssh.md).

- **loss** (:func:`loss_text`): a chain of the run's own, ``RQUEUE-LINKS-<run>``
  (:func:`chain`), that drops TCP between the host and each peer address on the node
  ports (either end) with probability ``rate`` (``-m statistic --mode random``);
  ``INPUT`` and ``OUTPUT`` jump to it. A chain per run, not one shared chain: two runs on
  one host make and delete their own without racing on one chain's ``-N``/``-X``, and
  the name says whose it is. Every rule and jump has the comment
  ``rqueue-ssh:links:<run>`` (:func:`comment`): under the backend's prefix
  (:data:`remote.COMMENT_PREFIX`, which the sweep deletes), but not matched by a
  partition's heal (``rqueue-ssh:<run>``), so a heal and a loss's end never touch each
  other's rules. Only node ports match: SSH (any port) is never dropped.
- **shape** (:func:`shape_text`): on each interface that carries the host's traffic to a
  peer (``ip -o route get PEER``), a root ``htb`` of the run's handle (:func:`handle`,
  ``5xxx:``) whose u32 filters send TCP from or to a node port to class ``:1``, under
  which a ``tbf`` at ``rate`` (handle :data:`TBF_HANDLE`; with a delay, ``netem``
  (:data:`NETEM_HANDLE`) and the tbf under it). Traffic no filter takes (SSH, anything
  else of the host) leaves by htb's direct queue, first and unlimited. The limiter is a
  tbf with the local backend's parameters (:func:`harness.cluster.links._tbf`), so the
  recorded mechanism (``tbf``, ``netem+tbf``) is what ran.

:func:`cleanup_text` removes one run's loss and qdiscs (``stop``); :func:`sweep_text`
every run's (``cluster down --inventory``), a qdisc only when it is the harness's: a root
htb of a ``5xxx:`` handle with the harness's tbf or netem under its class ``:1``.
:class:`SshLinks` is the cluster side, mixed into :class:`.cluster.SshCluster`.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from harness.cluster.base import LINKS, ClusterError
from harness.cluster.links import LinkControl, Shape, _tbf, shape_error
from harness.cluster.ssh import remote
from harness.cluster.ssh.inventory import Host

#: every run's loss chain is this and the run's id
CHAIN_PREFIX = "RQUEUE-LINKS-"
#: the handles of the qdiscs under the run's root (one root per interface, so these are
#: unique on it); the root's own is :func:`handle`
TBF_HANDLE, NETEM_HANDLE = "4151:", "4152:"
#: the rate of htb's class for the node ports: above any rate asked for, so the tbf
#: under it is what limits
CLASS_RATE = "100gbit"
#: a probe's one-line answer when netem is missing (tc says "qdisc kind is unknown")
NETEM_MISSING = "the kernel's netem qdisc (sch_netem) is missing, so links cannot be delayed"

#: reads ``tc qdisc show`` and prints ``DEVICE HANDLE`` of each root qdisc that is the
#: harness's: an htb of a ``5xxx:`` handle with the harness's tbf or netem under ``:1``
QDISC_AWK = (
    '$2 == "htb" && $6 == "root" && $3 ~ /^5[0-9a-f][0-9a-f][0-9a-f]:$/ { root[$5] = $3 } '
    f'$3 ~ /^({TBF_HANDLE.rstrip(":")}|{NETEM_HANDLE.rstrip(":")}):$/ && $6 == "parent" '
    '{ under[$5 " " $7] = 1 } '
    'END { for (d in root) if ((d " " root[d] "1") in under) print d, root[d] }'
)

_IPT = "iptables -w 5"


def chain(run: str) -> str:
    return f"{CHAIN_PREFIX}{run}"


def comment(run: str) -> str:
    """The comment of every loss rule of ``run``."""
    return f"{remote.COMMENT_PREFIX}links:{run}"


def handle(run: str) -> str:
    """The run's root qdisc handle: ``5`` and three hex digits of the run's id (a run of
    another harness on the same host picks another, but for 1 in 4096)."""
    return f"5{run[:3]}:"


def _heal_loss(run: str) -> str:
    ch, c = chain(run), comment(run)
    jumps = " ".join(
        f"while {_IPT} -D {hook} -m comment --comment {c} -j {ch} 2>/dev/null; do :; done;"
        for hook in ("INPUT", "OUTPUT")
    )
    return f"{jumps} {_IPT} -F {ch} 2>/dev/null; {_IPT} -X {ch} 2>/dev/null; true"


def loss_text(peers: Iterable[str], ports: Iterable[int], rate: float, run: str) -> str:
    """Replace the run's loss on a host: drop TCP between it and each of ``peers`` on
    ``ports`` (either end) with probability ``rate``; one ``iptables-restore`` (all or
    nothing), after and (when it fails) followed by :func:`loss_heal_text`."""
    if not 0 < rate <= 1:
        raise ValueError(f"a loss rate is a probability above 0 and at most 1, got {rate!r}")
    ch, c = chain(run), comment(run)
    plist = ",".join(str(p) for p in sorted(set(ports)))
    match = f"-p tcp -m multiport --ports {plist}"
    chance = f"-m statistic --mode random --probability {rate:.6f}"
    lines = ["*filter", f":{ch} - [0:0]"]
    for peer in peers:
        for side in ("-s", "-d"):
            lines.append(f"-A {ch} {side} {peer} {match} {chance} -m comment --comment {c} -j DROP")
    lines += [f"-I {hook} 1 -m comment --comment {c} -j {ch}" for hook in ("INPUT", "OUTPUT")]
    text = "\n".join([*lines, "COMMIT"]) + "\n"
    heal = _heal_loss(run)
    return f"{heal}; printf '%s' {shlex.quote(text)} | iptables-restore -w 5 --noflush || {{ {heal}; exit 1; }}"  # noqa: E501


def loss_heal_text(run: str) -> str:
    """Remove exactly the run's loss on a host (nothing there: nothing happens)."""
    return _heal_loss(run)


def shape_heal_text(run: str) -> str:
    """Delete the run's root qdisc on every interface that has it; prints each."""
    h = handle(run)
    find = f'tc qdisc show | awk \'$2 == "htb" && $3 == "{h}" && $6 == "root" {{print $5}}\''
    return (
        f'for d in $({find}); do tc qdisc del dev "$d" root handle {h} && echo "tc qdisc del '
        f'dev $d root handle {h}"; done; true'
    )


def shape_commands(shape: Shape, device: str, ports: Iterable[int], run: str) -> list[str]:
    """The tc commands that slow the node ports' traffic leaving ``device`` (a name, or a
    shell word such as ``"$d"``) to ``shape``."""
    h, dev = handle(run), device
    q = f"tc qdisc add dev {dev}"
    cmds = [
        f"{q} root handle {h} htb",
        f"tc class add dev {dev} parent {h} classid {h}1 htb rate {CLASS_RATE} quantum 60000",
    ]
    tbf = " ".join(_tbf(shape.rate))
    if shape.needs_netem:
        delay = f"delay {shape.delay:g}ms" + (f" {shape.jitter:g}ms" if shape.jitter > 0 else "")
        cmds.append(f"{q} parent {h}1 handle {NETEM_HANDLE} netem {delay}")
        cmds.append(f"{q} parent {NETEM_HANDLE}1 handle {TBF_HANDLE} {tbf}")
    else:
        cmds.append(f"{q} parent {h}1 handle {TBF_HANDLE} {tbf}")
    for port in sorted(set(ports)):
        for end in ("sport", "dport"):
            cmds.append(
                f"tc filter add dev {dev} parent {h} protocol ip prio 1 u32 match ip protocol "
                f"6 0xff match ip {end} {port} 0xffff flowid {h}1"
            )
    return cmds


def shape_text(
    shape: Shape,
    peers: Iterable[str],
    ports: Iterable[int],
    run: str,
    devices: Iterable[str] | None = None,
) -> str:
    """Replace the run's shape on a host with ``shape``, on each interface that carries
    its traffic to a peer: ``devices`` when known, else found there (``ip -o route get``,
    in the same round trip); prints ``DEVICES d ...`` (:func:`read_devices`). All or
    nothing: when a command fails, what was made is deleted and tc's words go to stderr."""
    heal = f"{{ {shape_heal_text(run)}; }} >/dev/null"
    if devices is None:
        awk = "awk '{for (i = 1; i < NF; i++) if ($i == \"dev\") print $(i + 1)}'"
        find = f"devs=$({{ {routes_text(peers)}; }} | {awk} | sort -u)"
    else:
        find = f"devs={shlex.quote(' '.join(devices))}"
    none = 'echo "ip route get named no interface towards the peers" >&2; exit 1'
    body = " && ".join(shape_commands(shape, '"$d"', ports, run))
    return (
        f'{heal}; {find}; [ -n "$devs" ] || {{ {none}; }}; '
        f"if ! out=$( {{ for d in $devs; do {body} || exit 1; done; }} 2>&1 ); "
        f'then {heal}; echo "$out" >&2; exit 1; fi; echo DEVICES $devs'
    )


def routes_text(peers: Iterable[str]) -> str:
    """``ip -o route get`` of each peer: the lines name the interface (``dev X``)."""
    return "; ".join(f"ip -o route get {shlex.quote(p)}" for p in peers)


def read_devices(out: str) -> list[str]:
    """The interfaces :func:`shape_text` printed (``DEVICES d ...``)."""
    for line in out.splitlines():
        if line.startswith("DEVICES "):
            return line.split()[1:]
    return []


def cleanup_text(run: str) -> str:
    """Remove the run's loss and qdiscs from a host (``stop``)."""
    return f"{loss_heal_text(run)}; {shape_heal_text(run)}"


def sweep_text() -> str:
    """Remove every run's loss chains (their jumps first) and the harness's qdiscs (a root
    htb of a ``5xxx:`` handle whose class ``:1`` holds the harness's tbf or netem); prints
    what it removed."""
    chains = (
        f'for ch in $({_IPT} -S | awk \'$1 == "-N" && $2 ~ /^{CHAIN_PREFIX}[0-9a-f]+$/ '
        f"{{print $2}}'); do run=${{ch#{CHAIN_PREFIX}}}; "
        + _heal_loss("$run").replace("; true", "")
        + ' && echo "-X $ch"; done'
    )
    qdiscs = (
        f"tc qdisc show 2>/dev/null | awk '{QDISC_AWK}' | while read -r d h; do "
        'tc qdisc del dev "$d" root handle "$h" && echo "tc qdisc del dev $d root handle $h"; done'
    )
    return f"{chains}; {qdiscs}; true"


# -- preflight ------------------------------------------------------------------------------
def probe_lines(h: Host) -> list[str]:
    """Lines of the preflight script (:mod:`.preflight`): in a network namespace of its own
    (``unshare -n``, gone when the probe ends, so nothing is left on the host) add what a
    loss and a shape add; print ``LINKS ok`` or what failed, ``NETEM ok`` or tc's words."""
    ports = "-p tcp -m multiport --ports 1"
    chance = "-m statistic --mode random --probability 0.5"
    inner = "; ".join(
        [
            'command -v tc >/dev/null || { echo "LINKS tc (iproute2) is not installed"; exit 0; }',
            'command -v iptables-restore >/dev/null || { echo "LINKS iptables-restore is not '
            'installed"; exit 0; }',
            f'e=$(iptables -w 5 -A INPUT {ports} {chance} -j DROP 2>&1) || {{ echo "LINKS '
            'iptables cannot match -m statistic: $(echo "$e" | tail -n 1)"; exit 0; }',
            # netem first, alone on lo (tc will not add a second leaf under a class)
            'e=$(tc qdisc add dev lo root handle 3: netem delay 1ms 2>&1) && n=ok || n="$(echo '
            '"$e" | tail -n 1)"; tc qdisc del dev lo root 2>/dev/null',
            "e=$(tc qdisc add dev lo root handle 1: htb 2>&1 && tc class add dev lo parent 1: "
            "classid 1:1 htb rate 1gbit 2>&1 && tc qdisc add dev lo parent 1:1 handle 2: tbf "
            "rate 1mbit burst 8192 latency 500ms 2>&1 && tc filter add dev lo parent 1: protocol "
            "ip prio 1 u32 match ip protocol 6 0xff match ip dport 1 0xffff flowid 1:1 2>&1) || "
            '{ echo "LINKS tc cannot add htb, tbf and a u32 filter: $(echo "$e" | tail -n 1)"; '
            "exit 0; }",
            'echo "LINKS ok"; echo "NETEM $n"',
        ]
    )
    sudo = "sudo -n " if h.sudo else ""
    return [
        f"out=$({sudo}unshare -n sh -c {shlex.quote(inner)} 2>&1); "
        'echo "$out" | grep -E "^(LINKS|NETEM) " || echo "LINKS $(echo "$out" | tail -n 1)"'
    ]


def read_probe(h: Host, values: dict[str, str]) -> tuple[str | None, str | None]:
    """(why links cannot be degraded on ``h``, why they cannot be delayed there), each
    None when they can, from the values :func:`probe_lines` printed."""
    if values.get("UID") != "0" and not h.sudo:
        why = f"host {h.name}: {h.user} is not root and sudo = false, so it cannot run tc"
        return why, why
    links = values.get("LINKS", "no answer from the probe")
    if links != "ok":
        why = f"host {h.name} cannot degrade links: {links}"
        return why, why
    netem = values.get("NETEM", "no answer from the probe")
    if netem == "ok":
        return None, None
    if "kind is unknown" in netem:
        return None, f"host {h.name}: a link delay needs netem: {NETEM_MISSING} (tc: {netem!r})"
    return None, f"host {h.name}: a netem qdisc could not be added ({netem})"


# -- the cluster side -----------------------------------------------------------------------
class HostLinks:
    """The link faults of one :class:`SshLinks` cluster on its hosts (what
    :class:`harness.cluster.links.LinkControl` calls), one round trip each; the
    interfaces towards the peers are found once per host and kept."""

    def __init__(self, cluster: SshLinks) -> None:
        self._c = cluster
        self.devices: dict[str, list[str]] = {}  # per host: the interfaces it shapes

    def _peers(self, node: str) -> list[str]:
        return [x.host.address for n, x in self._c._nodes.items() if n != node]

    def _ports(self) -> set[int]:
        hosts = [x.host for x in self._c._nodes.values()]
        return {p for h in hosts for p in (h.http_port, h.raft_port)}

    def _run(self, node: str, text: str, check: bool = True) -> None:
        self._c.sessions[node].run(text, sudo=True, check=check, timeout=60)

    def set_loss(self, node: str, rate: float) -> None:
        self._run(node, loss_text(self._peers(node), self._ports(), rate, self._c.run))

    def clear_loss(self, node: str) -> None:
        self._run(node, loss_heal_text(self._c.run), check=False)

    def set_shape(self, node: str, shape: Shape) -> None:
        """One round trip: the interfaces are found there the first time and kept."""
        known = self.devices.get(node)
        text = shape_text(shape, self._peers(node), self._ports(), self._c.run, known)
        res = self._c.sessions[node].run(text, sudo=True, check=False, timeout=60)
        if not res.ok:
            raise ClusterError(f"cannot slow the links of {node}: {shape_error(res.err)}")
        self.devices[node] = read_devices(res.out) or (known or [])

    def clear_shape(self, node: str) -> None:
        self._run(node, shape_heal_text(self._c.run), check=False)


class SshLinks(LinkControl):
    """``set_link_loss`` and the rest for :class:`.cluster.SshCluster` (which has
    ``_nodes``, ``sessions``, ``facts``, ``run`` and ``_lock``)."""

    def _link_faults(self) -> HostLinks:  # type: ignore[override]
        with self._lock:
            if "_host_links" not in self.__dict__:
                self._host_links = HostLinks(self)
            return self._host_links

    def links_problem(self) -> str | None:
        """Why a host of the cluster cannot degrade links (None: all can), one line."""
        return next((f.links_problem for f in self.facts.values() if f.links_problem), None)

    def link_delay_problem(self) -> str | None:
        return self.capability_problem(LINKS) or next(
            (f.netem_problem for f in self.facts.values() if f.netem_problem), None
        )
