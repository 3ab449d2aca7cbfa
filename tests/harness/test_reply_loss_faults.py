"""The reply-loss fault kinds (harness.faults.reply_loss): their parameters, what they
ask of the proxies and the cluster and record, the scenario, chaos's pool, the clients
spread over the nodes, and the forward-loss rules as text. A stand-in cluster records
what it is asked; the proxies are real (not started: only their window is set)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from harness import chaos
from harness.cluster.base import CAPABILITY_NAMES, LINKS, Cluster, ClusterError, NodeInfo
from harness.cluster.forward_loss import apply_argvs, heal_argvs, rule
from harness.cluster.reply_proxy import ReplyProxies
from harness.cluster.ssh import forward
from harness.faults import Fault, Stage, kind_of
from harness.faults.reply_loss import proxied
from harness.scenario import ScenarioError, list_scenarios, load_scenario
from harness.workload import Workload

ALL = frozenset(CAPABILITY_NAMES)


class Followers(Cluster):
    """Three nodes, n1 the leader; records the forward-loss calls, fails on ``broken``."""

    engine = "fake"
    CAPABILITIES = ALL

    def __init__(self, broken: str | None = None) -> None:
        self.calls: list[tuple] = []
        self.broken = broken

    def nodes(self):
        return [NodeInfo(i, f"http://{i}:4001") for i in ("n1", "n2", "n3")]

    def wait_for_leader(self, timeout: float, **kw):
        return NodeInfo("n1", "")

    def kill(self, node_id):
        raise AssertionError("not a reply-loss fault")

    restart = pause = resume = kill

    def stop(self):
        pass

    def forward_port(self, node_id):
        return 4002

    def set_forward_reply_loss(self, follower, leader):
        self.calls.append(("loss", follower, leader))
        if follower == self.broken:
            raise ClusterError(f"{follower} has no namespace")

    def clear_forward_reply_loss(self, follower):
        self.calls.append(("clear", follower))


class Proxied:
    """The workload's side a fault asks: its reply proxies."""

    claimer_names = ()

    def __init__(self) -> None:
        self.reply_proxies = ReplyProxies({"n1": "http://127.0.0.1:1"}, seed=1)


def begin(cluster, workload, kind: str, **params):
    fault = Fault(kind, 0.0, 1.0, **params)
    stage = Stage(cluster, workload, random.Random(1))
    return kind_of(kind).begin(stage, dict(fault.params))


def test_reply_loss_sets_the_window_and_records_what_it_lost() -> None:
    w = Proxied()
    action = begin(Followers(), w, "reply-loss", rate=0.25, hold=0.0)
    assert (action.f, action.f_end) == ("reply-loss", "reply-restore")
    assert action.value["nodes"] == ["n1", "n2", "n3"] and action.value["detail"] == "25%"
    assert action.value["weights"] == {"close": 1.0, "reset": 1.0, "hold": 0.0}
    action.act()
    state = w.reply_proxies._state
    assert state.loss is not None and state.loss.rate == 0.25
    state.window["reset"] = 2  # as two lost replies would
    action.undo()
    assert state.loss is None
    assert action.value["lost"] == {"close": 0, "reset": 2, "hold": 0}  # the end's value


def test_without_the_proxies_the_window_fails_naming_why() -> None:
    class Plain:
        claimer_names = ()

    action = begin(Followers(), Plain(), "reply-loss")
    with pytest.raises(ClusterError, match="does not connect through the reply proxies"):
        action.act()


def test_forward_reply_loss_drops_at_every_follower_with_a_short_forwarding_timeout() -> None:
    c, w = Followers(), Proxied()
    action = begin(c, w, "forward-reply-loss")
    assert (action.f, action.f_end) == ("forward-loss", "forward-restore")
    assert action.value["nodes"] == ["n2", "n3"] and action.value["leader"] == "n1"
    assert action.value["port"] == 4002 and action.value["timeout"] == "1s"
    action.act()
    assert c.calls == [("loss", "n2", "n1"), ("loss", "n3", "n1")]
    assert w.reply_proxies._state.timeout == "1s"
    action.undo()
    assert c.calls[2:] == [("clear", "n2"), ("clear", "n3")]
    assert w.reply_proxies._state.timeout is None
    one = begin(Followers(), Proxied(), "forward-reply-loss", target="follower", timeout="750ms")
    assert len(one.value["nodes"]) == 1 and one.value["timeout"] == "750ms"


def test_a_failed_start_undoes_the_followers_done_and_the_timeout() -> None:
    c, w = Followers(broken="n3"), Proxied()
    action = begin(c, w, "forward-reply-loss")
    with pytest.raises(ClusterError, match="n3 has no namespace"):
        action.act()
    assert c.calls == [("loss", "n2", "n1"), ("loss", "n3", "n1"), ("clear", "n2")]
    assert w.reply_proxies._state.timeout is None


def scenario(tmp_path: Path, fault: str) -> Path:
    path = tmp_path / "replies.toml"
    path.write_text(f'description = "x"\n[[faults]]\nstart = 1\nduration = 2\n{fault}\n')
    return path


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ('kind = "reply-loss"\nrate = 0', "'faults[0].rate': expected a probability above 0"),
        ('kind = "reply-loss"\nclose = 0\nreset = 0\nhold = 0', "at least one above 0"),
        ('kind = "reply-loss"\nhold_max = 0', "'faults[0].hold_max'"),
        ('kind = "forward-reply-loss"\ntimeout = "1"', "a duration as Go writes it"),
        ('kind = "forward-reply-loss"\ntarget = "leader"', "expected one of 'follower'"),
    ],
)
def test_bad_parameters_name_the_file_and_the_key(tmp_path, fault, message) -> None:
    path = scenario(tmp_path, fault)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert str(path) in str(info.value) and message in str(info.value)


def test_the_scenario_runs_both_paths_through_the_proxies_and_chaos_may_draw_them() -> None:
    s = load_scenario("lost-replies")
    kinds = {f.kind for f in s.faults}
    assert kinds == {"reply-loss", "forward-reply-loss"} and proxied(kinds)
    assert not proxied(["lossy-link", "kill-leader"])
    assert "lost-replies" in {x.name for x in list_scenarios()}
    assert s.needs_netns and kind_of("forward-reply-loss").needs == {LINKS}
    assert kind_of("reply-loss").needs == frozenset()  # the proxy runs anywhere
    c = load_scenario("chaos")
    pool, left = chaos.pool(c.chaos, 3, c.workload, ALL)
    assert "reply-loss" in pool and "forward-reply-loss" in pool
    pool, left = chaos.pool(c.chaos, 3, c.workload, ALL - {LINKS})
    assert "reply-loss" in pool and "forward-reply-loss" in left


def test_behind_the_proxies_each_client_starts_at_a_node_of_its_own() -> None:
    spec = load_scenario("lost-replies").workload
    urls = ["http://a", "http://b", "http://c"]
    plain = Workload(spec, None, urls, None, seed=1)
    assert plain.urls_for("p0") == urls
    w = Workload(spec, None, urls, None, seed=1, reply_proxies=object())
    firsts = {w.urls_for(n)[0] for n in ("p0", "p1", "s0", "s1", "a0", "a1")}
    assert firsts == set(urls)  # followers included
    assert all(sorted(w.urls_for(n)) == urls for n in ("p0", "s1"))
    assert w.urls_for("p0") == Workload(spec, None, urls, None, seed=1, reply_proxies=1).urls_for(
        "p0"
    )


def test_behind_the_proxies_clients_start_at_the_followers_and_keep_the_leader_last() -> None:
    """rqueue keeps to the node it is on until it fails: a client that starts at a
    follower has its writes forwarded, which the forward-path faults need (a client on
    the leader never forwards); the leader stays last in every list, so a client whose
    followers fail can still go on."""
    spec = load_scenario("lost-replies").workload
    urls = ["http://a", "http://b", "http://c"]
    w = Workload(spec, None, urls, None, seed=1, reply_proxies=object(), leader_url="http://b")
    names = ("p0", "p1", "p2", "s0", "s1", "a0", "a1", "sync-claimers")
    assert {w.urls_for(n)[0] for n in names} == {"http://a", "http://c"}
    assert all(w.urls_for(n)[-1] == "http://b" and sorted(w.urls_for(n)) == urls for n in names)
    alone = Workload(spec, None, ["http://a"], None, reply_proxies=1, leader_url="http://a")
    assert alone.urls_for("p0") == ["http://a"]  # a single node: it, whatever it is


def test_the_rule_spares_the_syn_ack_and_heals_exactly_itself() -> None:
    spec = rule("10.0.0.2", 4002, "rqueue-fwd:abc")
    assert spec[:8] == ["-p", "tcp", "-s", "10.0.0.2", "--sport", "4002", "!", "--tcp-flags"]
    assert spec[-4:] == ["--comment", "rqueue-fwd:abc", "-j", "DROP"]
    (add,) = apply_argvs("10.0.0.2", 4002, "rqueue-fwd:abc")
    assert add[3:6] == ["-I", "INPUT", "1"] and add[6:] == spec
    heals = heal_argvs("10.0.0.2", 4002, "rqueue-fwd:abc")
    assert all(h[3:5] == ["-D", "INPUT"] and h[5:] == spec for h in heals)
    with pytest.raises(ValueError, match="port"):
        rule("10.0.0.2", 0, "x")


def test_on_a_host_the_comment_is_the_sweeps_but_not_a_partitions() -> None:
    note = forward.comment("ab12cd34")
    assert note.startswith("rqueue-ssh:") and not note.startswith("rqueue-ssh:ab12cd34")
