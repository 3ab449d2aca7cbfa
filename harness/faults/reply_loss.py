"""Lose replies after the write committed: ``reply-loss`` on the client path (the
harness's proxy in front of every node, :mod:`harness.cluster.reply_proxy`) and
``forward-reply-loss`` on the follower-to-leader path (:mod:`harness.cluster.forward_loss`).

A scenario with either kind runs its workload through the proxies, its clients spread
over every node (followers included, so that writes are forwarded): :func:`proxied`.

``reply-loss`` is recorded as ``reply-loss`` then ``reply-restore``; the end's value
carries ``lost``, the replies the window lost per outcome (``close``, ``reset``,
``hold``). ``forward-reply-loss`` is recorded as ``forward-loss`` then
``forward-restore``, naming the ``nodes`` (followers) whose forwarded replies are
dropped, the ``leader`` and its forwarding ``port``; during its window the proxy sets
``timeout`` on every ``/db/`` request, so a forwarded send gives up within the client's
own timeout (rqlite's forwarding deadline is the request's ``?timeout``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from ..cluster.base import LINKS, ClusterError
from ..cluster.reply_proxy import OUTCOMES, Loss, ReplyProxies
from .base import Action, FaultKind, ParamReader, Stage

#: a forwarding deadline as Go's time.ParseDuration reads it (rqlite's ``?timeout``): a
#: bare number would parse as 0 there
_DURATION = re.compile(r"^\d+(\.\d+)?(ms|s)$")


def proxied(kinds: Iterable[str]) -> bool:
    """Whether a scenario whose faults are of ``kinds`` runs its workload through the
    reply proxies."""
    return any(k in (ReplyLoss.name, ForwardReplyLoss.name) for k in kinds)


def _proxies(stage: Stage) -> ReplyProxies:
    proxies = getattr(stage.workload, "reply_proxies", None)
    if proxies is None:
        raise ClusterError(
            "this workload does not connect through the reply proxies (the runner starts "
            "them for a scenario with reply-loss or forward-reply-loss)"
        )
    return proxies


class ReplyLoss(FaultKind):
    name = "reply-loss"
    f_start, f_end = "reply-loss", "reply-restore"
    #: ``rate``: the share of ``/db/`` replies lost in a window; ``close``, ``reset``,
    #: ``hold``: the weights of each way to lose one; ``hold``'s reply waits until the
    #: client closes, at most ``hold_max`` seconds
    params: ClassVar[Mapping[str, Any]] = {
        "rate": 0.5,
        "close": 1.0,
        "reset": 1.0,
        "hold": 1.0,
        "hold_max": 10.0,
    }

    @classmethod
    def read(cls, r: ParamReader, length: float) -> dict[str, Any]:
        rate = r.probability("rate", 0.5)
        if rate == 0:
            raise r.fail("rate", "a probability above 0 (the share of replies lost)", 0)
        weights = {o: r.number(o, 1.0) for o in OUTCOMES}
        if sum(weights.values()) <= 0:
            raise r.fail("close", "weights close, reset, hold with at least one above 0", 0)
        hold_max = r.number("hold_max", 10.0, strict=True)
        return {"rate": rate, **weights, "hold_max": hold_max}

    @classmethod
    def begin(cls, stage: Stage, params: Mapping[str, Any]) -> Action:
        loss = Loss(params["rate"], tuple(float(params[o]) for o in OUTCOMES), params["hold_max"])
        lost: dict[str, int] = {}  # filled at the end; the end's value shares this dict
        value = {
            "nodes": stage.ids(),
            "rate": loss.rate,
            "weights": dict(zip(OUTCOMES, loss.weights, strict=True)),
            "mechanism": "proxy",
            "detail": f"{loss.rate * 100:g}%",
            "lost": lost,
        }

        def undo() -> None:
            lost.update(_proxies(stage).clear_loss())

        return cls.action(value, lambda: _proxies(stage).set_loss(loss), undo)


class ForwardReplyLoss(FaultKind):
    name = "forward-reply-loss"
    f_start, f_end = "forward-loss", "forward-restore"
    #: ``target``: the followers whose forwarded replies are dropped (``follower``: one,
    #: ``followers``: every one); ``timeout``: the forwarding deadline the proxy sets on
    #: each ``/db/`` request in the window, as Go writes a duration
    params: ClassVar[Mapping[str, Any]] = {"target": "followers", "timeout": "1s"}
    needs = frozenset({LINKS})
    min_nodes = 2

    @classmethod
    def read(cls, r: ParamReader, length: float) -> dict[str, Any]:
        target = r.text("target", "followers", choices=("follower", "followers"))
        timeout = r.text("timeout", "1s")
        if not _DURATION.match(timeout):
            raise r.fail("timeout", "a duration as Go writes it, e.g. '1s' or '750ms'", timeout)
        return {"target": target, "timeout": timeout}

    @classmethod
    def begin(cls, stage: Stage, params: Mapping[str, Any]) -> Action:
        c = stage.cluster
        leader = stage.leader()
        followers = [n for n in stage.ids() if n != leader]
        if params["target"] == "follower":
            followers = [stage.rng.choice(followers)]
        try:
            port: int | None = c.forward_port(leader)
        except (AttributeError, ClusterError):
            port = None  # act names why
        value = {
            "nodes": followers,
            "leader": leader,
            "port": port,
            "timeout": params["timeout"],
            "mechanism": "iptables-sport",
            "detail": f"{','.join(followers)}←{leader}",
        }

        def act() -> None:
            if port is None:
                raise ClusterError(f"the {c.engine} backend cannot lose forwarded replies")
            proxies = _proxies(stage)
            proxies.set_timeout(params["timeout"])
            done: list[str] = []
            try:
                for n in followers:
                    c.set_forward_reply_loss(n, leader)
                    done.append(n)
            except BaseException:
                for n in done:
                    c.clear_forward_reply_loss(n)
                proxies.set_timeout(None)
                raise

        def undo() -> None:
            failed = []
            for n in followers:
                try:
                    c.clear_forward_reply_loss(n)
                except ClusterError as e:
                    failed.append(f"{n}: {e}")
            _proxies(stage).set_timeout(None)
            if failed:
                raise ClusterError(f"could not restore forwarding of {'; '.join(failed)}")

        return cls.action(value, act, undo)
