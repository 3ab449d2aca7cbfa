"""Network partitions as iptables rules: pure functions from components to argv lists.

A partition is a list of *components*, each a list of node ids. Two nodes can talk
exactly when some component holds both of them, so overlapping components describe a
bridge::

    [["n1"], ["n2", "n3"]]                      # isolate n1
    [["n1", "n2"], ["n3", "n4", "n5"]]          # minority / majority
    [["n1", "n2", "n3"], ["n3", "n4", "n5"]]    # bridge: only n3 sees everyone

The rules live in a chain of the project's own (:data:`CHAIN`) inside each node's network
namespace (or container): the chain drops packets from and to every peer the node may
not reach, and ``INPUT``/``OUTPUT`` jump to it. :func:`heal_rules` removes exactly that
jump and chain and nothing else. Nodes that may reach everyone get no rules at all.

A *one-way* cut (:func:`one_way_rules`) is a list of ``(a, b)`` pairs: every packet
``a`` sends to ``b`` is dropped while ``b``'s packets to ``a`` pass. Its chain on ``a``
holds ``-d B -j DROP`` only, which matches in ``OUTPUT`` alone (an ``INPUT`` packet is
addressed to ``a`` itself), so it drops both the connections ``a`` opens to ``b`` and
``a``'s answers on connections ``b`` opened; nothing is matched by connection state, so
conntrack never lets a reply through. TCP then fails both ways at the connection level
(``b``'s SYN reaches ``a`` but the SYN-ACK never comes back), while what ``b`` sends on
a connection it already holds still arrives: ``b``'s Raft messages reach ``a`` and ``a``
acts on them, ``a``'s answers are lost (docs/faults.md, "One-way partitions").

Both the local network-namespace backend and the Docker backend run these argv lists
(prefixed with ``ip netns exec NS`` or ``docker exec CONTAINER``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

#: the iptables chain that holds every partition rule the project adds
CHAIN = "RQUEUE-PARTITION"
#: the built-in chains that jump to :data:`CHAIN`
HOOKS = ("INPUT", "OUTPUT")


def normalise(components: Iterable[Iterable[str]], node_ids: Iterable[str]) -> list[list[str]]:
    """Validate ``components`` against the cluster's ``node_ids``; return them as lists.

    Raises :class:`ValueError` naming the problem: an unknown node, an empty component,
    fewer than two components, or a node left out of every component.
    """
    if isinstance(components, str | bytes):
        raise ValueError(f"components must be a list of lists of node ids, got {components!r}")
    known = list(node_ids)
    comps = []
    for comp in components:
        if isinstance(comp, str | bytes):
            raise ValueError(f"each component must be a list of node ids, got {comp!r}")
        ids = list(comp)
        if not ids:
            raise ValueError("a partition component is empty")
        for node in ids:
            if node not in known:
                raise ValueError(f"unknown node {node!r} in partition (nodes: {known})")
        comps.append(ids)
    if len(comps) < 2:
        raise ValueError(f"a partition needs at least two components, got {comps}")
    listed = {n for comp in comps for n in comp}
    missing = [n for n in known if n not in listed]
    if missing:
        raise ValueError(f"nodes {missing} are in no component; list every node")
    return comps


def blocked_peers(
    components: Iterable[Iterable[str]], node_ids: Iterable[str]
) -> dict[str, list[str]]:
    """For each node, the peers it must not reach (in ``node_ids`` order)."""
    known = list(node_ids)
    comps = normalise(components, known)
    reach = {n: {m for comp in comps if n in comp for m in comp} for n in known}
    return {n: [m for m in known if m != n and m not in reach[n]] for n in known}


def apply_rules(
    components: Iterable[Iterable[str]],
    addresses: Mapping[str, str],
    *,
    iptables: str = "iptables",
    chain: str = CHAIN,
) -> dict[str, list[list[str]]]:
    """The iptables argv lists to run inside each node's namespace to cut the network.

    ``addresses`` maps every node id to the IP address its peers reach it at. Only nodes
    with something to block appear in the result; pass those ids to :func:`heal_rules`.
    """
    blocked = blocked_peers(components, addresses)
    matches = {
        node: [m for peer in peers for m in (["-s", addresses[peer]], ["-d", addresses[peer]])]
        for node, peers in blocked.items()
    }
    return _chains(matches, iptables, chain)


def one_way_drops(cuts: Iterable[Iterable[str]], node_ids: Iterable[str]) -> dict[str, list[str]]:
    """Validate the one-way ``cuts`` (``(a, b)`` pairs: drop what ``a`` sends to ``b``)
    against ``node_ids``; return, per sending node, the peers it may not send to (in
    ``node_ids`` order). Raises :class:`ValueError` naming the problem: no pairs, a pair
    that is not two node ids, an unknown node, or a node cut from itself."""
    if isinstance(cuts, str | bytes):
        raise ValueError(f"one-way cuts must be a list of (from, to) pairs, got {cuts!r}")
    known = list(node_ids)
    drops: dict[str, set[str]] = {}
    for cut in cuts:
        pair = list(cut) if not isinstance(cut, str | bytes) else [cut]
        if len(pair) != 2 or not all(isinstance(n, str) for n in pair):
            raise ValueError(f"a one-way cut is a (from, to) pair of node ids, got {cut!r}")
        a, b = pair
        for node in pair:
            if node not in known:
                raise ValueError(f"unknown node {node!r} in one-way cut (nodes: {known})")
        if a == b:
            raise ValueError(f"a one-way cut from {a!r} to itself")
        drops.setdefault(a, set()).add(b)
    if not drops:
        raise ValueError("a one-way partition needs at least one (from, to) pair")
    return {n: [m for m in known if m in drops[n]] for n in known if n in drops}


def one_way_rules(
    cuts: Iterable[Iterable[str]],
    addresses: Mapping[str, str],
    *,
    iptables: str = "iptables",
    chain: str = CHAIN,
) -> dict[str, list[list[str]]]:
    """The iptables argv lists, per sending node, that drop every packet ``a`` sends to
    ``b`` for each ``(a, b)`` in ``cuts``; :func:`heal_rules` removes them as a partition's."""
    drops = one_way_drops(cuts, addresses)
    matches = {n: [["-d", addresses[p]] for p in peers] for n, peers in drops.items()}
    return _chains(matches, iptables, chain)


def _chains(
    matches: Mapping[str, list[list[str]]], iptables: str, chain: str
) -> dict[str, list[list[str]]]:
    """Per node with matches: create ``chain``, DROP each match there, jump to it from
    :data:`HOOKS`."""
    ipt = [iptables, "-w", "5"]
    rules: dict[str, list[list[str]]] = {}
    for node, ms in matches.items():
        if not ms:
            continue
        argvs = [[*ipt, "-N", chain]]
        argvs.extend([*ipt, "-A", chain, *m, "-j", "DROP"] for m in ms)
        argvs.extend([*ipt, "-I", hook, "1", "-j", chain] for hook in HOOKS)
        rules[node] = argvs
    return rules


def heal_rules(
    node_ids: Iterable[str], *, iptables: str = "iptables", chain: str = CHAIN
) -> dict[str, list[list[str]]]:
    """The argv lists that remove exactly what :func:`apply_rules` added on these nodes."""
    ipt = [iptables, "-w", "5"]
    argvs = [[*ipt, "-D", hook, "-j", chain] for hook in HOOKS]
    argvs += [[*ipt, "-F", chain], [*ipt, "-X", chain]]
    return {node: [list(a) for a in argvs] for node in node_ids}
