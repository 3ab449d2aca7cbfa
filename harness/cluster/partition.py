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
    ipt = [iptables, "-w", "5"]
    rules: dict[str, list[list[str]]] = {}
    for node, peers in blocked.items():
        if not peers:
            continue
        argvs = [[*ipt, "-N", chain]]
        for peer in peers:
            addr = addresses[peer]
            argvs.append([*ipt, "-A", chain, "-s", addr, "-j", "DROP"])
            argvs.append([*ipt, "-A", chain, "-d", addr, "-j", "DROP"])
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
