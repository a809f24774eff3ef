"""The daemon's parts without a daemon: config, grants, tokens, parameters, journal, and the client side."""

from __future__ import annotations

import os
import time

import pytest

from zeus_core.daemon import ApiGroup, Knob, issue_token, parse_config, parse_expires, verify_token
from zeus_core.daemon._journal import HolderRow, Journal
from zeus_core.daemon._models import SetPowerLimit, parse_ids, parse_query
from zeus_core.daemon._policy import Policy, Principal, Refusal
from zeus_core.daemon._tokens import TokenError
from zeus_core.device._zeusd import Endpoint, daemon_status, describe_status
from zeus_core.device._zeusd_devices import route_gpus
from zeus_core.exceptions import ZeusConfigError
from zeus_core.testing import PhysicalModel, SimulatedGPU

ALL = frozenset(ApiGroup)


def unix(uid: int, *gids: int) -> Principal:
    return Principal("unix", uid=uid, gid=gids[0] if gids else uid, gids=frozenset(gids or (uid,)), pid=42)


# -- config ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("colour = 'blue'", "colour: Extra inputs are not permitted"),
        ("[[grant]]\nusers = ['a']\npower_limit_w = [300, 100]", "0 <= min <= max"),
        ("[[grant]]\nscopes = ['gpu-read']", "must name users, groups or subjects"),
        ("[[grant]]\ngroups = ['no-such-group-xyz']", "group 'no-such-group-xyz' does not exist"),
        ("heartbeat_s = 0", "heartbeat_s"),
        ("share = ", "not valid TOML"),
    ],
)
def test_a_bad_config_says_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(ZeusConfigError, match="daemon config") as e:
        parse_config(text)
    assert words in str(e.value)


def test_no_grant_means_open_to_the_sockets_users() -> None:
    policy = Policy(parse_config(""), ALL)
    policy.check_group(unix(1000), ApiGroup.GPU_CONTROL)
    policy.check_change(unix(1000), 3, Knob.MEM_LOCKED_CLOCKS, (405, 810))


# -- grants ----------------------------------------------------------------------------------------
GRANTS = parse_config(
    """
[[grant]]
groups = [4000]
gpus = [0, 1]
settings = ["power_limit"]
power_limit_w = [150, 250]
[[grant]]
users = [1001]
scopes = ["gpu-read"]
[[grant]]
subjects = ["ci"]
gpus = [2]
"""
)


def test_grants_by_group_gpu_setting_and_range() -> None:
    policy = Policy(GRANTS, ALL, "daemon.toml")
    alice = unix(1000, 1000, 4000)  # in group 4000 as a supplementary group
    policy.check_change(alice, 1, Knob.POWER_LIMIT, 200000)
    with pytest.raises(Refusal, match=r"GPU 2 is outside the GPUs granted .* \(GPUs \[0, 1\]\)"):
        policy.check_change(alice, 2, Knob.POWER_LIMIT, 200000)
    with pytest.raises(Refusal, match="may not change the gpu locked clocks"):
        policy.check_change(alice, 0, Knob.GPU_LOCKED_CLOCKS, (900, 900))
    with pytest.raises(Refusal, match=r"260000 mW is outside .* \(150-250 W\)"):
        policy.check_change(alice, 0, Knob.POWER_LIMIT, 260000)
    policy.check_change(alice, 0, Knob.POWER_LIMIT, 150000)


def test_users_outside_every_grant_and_scopes_not_granted() -> None:
    policy = Policy(GRANTS, ALL, "daemon.toml")
    with pytest.raises(Refusal, match=r"uid 1002.* is in no grant of daemon.toml") as e:
        policy.check_group(unix(1002), ApiGroup.GPU_READ)
    assert e.value.status == 403 and "usermod -aG" in e.value.message
    with pytest.raises(Refusal, match="may not use 'gpu-control'"):
        policy.check_group(unix(1001), ApiGroup.GPU_CONTROL)
    policy.check_group(unix(1001), ApiGroup.GPU_READ)
    policy.check_group(unix(0), ApiGroup.GPU_CONTROL)  # root is an administrator by default
    strict = Policy(parse_config("root_is_admin = false\n[[grant]]\nusers = [5]"), ALL)
    with pytest.raises(Refusal, match="no grant"):
        strict.check_group(unix(0), ApiGroup.GPU_CONTROL)


def test_tokens_scopes_and_subject_grants() -> None:
    policy = Policy(GRANTS, ALL)
    reader = Principal("tcp", subject="bob", scopes=frozenset({ApiGroup.GPU_READ}))
    with pytest.raises(Refusal, match="Token for user 'bob' lacks required scope 'gpu-control'"):
        policy.check_group(reader, ApiGroup.GPU_CONTROL)
    anyone = Principal("tcp", subject="bob", scopes=ALL)  # no grant names bob: the token decides
    policy.check_change(anyone, 5, Knob.PERSISTENCE_MODE, True)
    ci = Principal("tcp", subject="ci", scopes=ALL)  # a grant names ci: it narrows the token
    with pytest.raises(Refusal, match="GPU 0 is outside"):
        policy.check_change(ci, 0, Knob.POWER_LIMIT, 200000)
    summary = policy.summary(ci, [0, 1, 2])
    assert summary["gpu_control"] == {"0": {}, "1": {}, "2": {k.value: "any" for k in Knob}}


def test_summary_lists_ranges_and_disabled_groups() -> None:
    policy = Policy(GRANTS, frozenset({ApiGroup.GPU_CONTROL, ApiGroup.GPU_READ}))
    summary = policy.summary(unix(1000, 4000), [0, 2])
    assert summary["api_groups"]["cpu-read"] == {"allowed": False, "why": "not enabled on this daemon"}
    assert summary["gpu_control"] == {"0": {"power_limit": [[150.0, 250.0]]}, "2": {}}


# -- tokens ----------------------------------------------------------------------------------------
def test_tokens_round_trip_and_expire() -> None:
    key = b"k" * 32
    claims = verify_token(issue_token(key, "alice", ["gpu-read", ApiGroup.CPU_READ], None), key)
    assert (
        claims.sub == "alice"
        and claims.scopes == (ApiGroup.GPU_READ, ApiGroup.CPU_READ)
        and claims.exp is None
    )
    with pytest.raises(TokenError, match="Token has expired."):
        verify_token(issue_token(key, "a", [], int(time.time()) - 5), key)
    with pytest.raises(TokenError, match="Invalid token"):
        verify_token(issue_token(b"x" * 32, "a", [], None), key)
    with pytest.raises(ZeusConfigError, match="scopes are"):
        issue_token(key, "a", ["gpu-write"], None)


def test_expiry_durations() -> None:
    assert parse_expires("never") is None and parse_expires("0") is None
    assert parse_expires("1h30m", now=100) == 100 + 5400 and parse_expires("7d", now=0) == 7 * 86400
    with pytest.raises(ZeusConfigError, match="'1 week'"):
        parse_expires("1 week")


# -- parameters ------------------------------------------------------------------------------------
def test_ids_and_queries_follow_zeusd() -> None:
    assert parse_ids(" 2, 0,2 ", "GPU") == [0, 2]
    for bad, words in (
        ("", "at least one GPU index"),
        ("0,", "empty GPU index"),
        ("-1", "Invalid GPU index: -1"),
    ):
        with pytest.raises(Refusal, match=words):
            parse_ids(bad, "GPU")
    query = parse_query(SetPowerLimit, {"gpu_ids": "0", "power_limit_mw": "150000", "block": "false"}, [])
    assert query.power_limit_mw == 150000 and query.block is False
    with pytest.raises(Refusal, match="repeated parameter"):
        parse_query(SetPowerLimit, {"gpu_ids": "0"}, ["gpu_ids", "gpu_ids"])


# -- journal ---------------------------------------------------------------------------------------
def test_the_journal_keeps_open_leases_and_only_one_daemon(tmp_path) -> None:
    journal = Journal(tmp_path / "j.sqlite")
    with pytest.raises(ZeusConfigError, match="in use by another zeus-suite daemon"):
        Journal(tmp_path / "j.sqlite")
    lease = journal.open_lease(0, "gpu_locked_clocks", None, False)
    journal.add_holder(lease, HolderRow("pid:1:2", "process", 1, 2, 1000, "pid 1", 0.0))
    closed = journal.open_lease(1, "power_limit", 300000, True)
    journal.close_lease(closed, "restored")
    (row,) = journal.open_leases()
    assert (row.gpu, row.knob, row.original, row.original_known) == (0, "gpu_locked_clocks", None, False)
    assert [h.key for h in row.holders] == ["pid:1:2"]
    journal.close()
    reopened = Journal(tmp_path / "j.sqlite")  # what a restarted daemon finds
    assert reopened.count_open() == 1
    reopened.close()
    assert oct(os.stat(tmp_path / "j.sqlite").st_mode & 0o777) == "0o600"


# -- client side -----------------------------------------------------------------------------------
def test_the_environment_names_the_daemon_as_zeus_does() -> None:
    both = {"ZEUSD_SOCK_PATH": "/s", "ZEUSD_HOST_PORT": "h:1", "ZEUSD_TOKEN": "t"}
    assert Endpoint.from_env(both) == Endpoint(socket_path="/s", token="t")  # the socket first
    assert Endpoint.from_env({"ZEUSD_HOST_PORT": "h:1"}) == Endpoint(host_port="h:1")
    assert Endpoint.from_env({}) is None
    status = daemon_status({})
    assert status["configured"] is False and "ZEUSD_SOCK_PATH" in describe_status(status)
    gpu = SimulatedGPU(PhysicalModel.a40())
    assert route_gpus([gpu], {"ZEUSD_SOCK_PATH": "/s"}) == [gpu]  # simulated GPUs need no daemon


def test_an_unreachable_daemon_is_reported_not_raised(tmp_path) -> None:
    status = daemon_status({"ZEUSD_SOCK_PATH": str(tmp_path / "none.sock")}, timeout_s=1)
    assert status["configured"] and status["reachable"] is False
    assert (
        "NOT reachable" in describe_status(status) and "systemctl start zeus-suite-daemon" in status["detail"]
    )


def test_a_daemon_gpu_pickles_without_its_connection() -> None:
    import pickle

    from zeus_core.device._zeusd import client_for
    from zeus_core.device._zeusd_devices import DaemonGPU

    endpoint = Endpoint(socket_path="/nonexistent.sock")
    gpu = DaemonGPU(SimulatedGPU(PhysicalModel.a40()), client_for(endpoint), 3)
    copy = pickle.loads(pickle.dumps(gpu))
    assert copy.gpu_id == 3 and copy.client is client_for(endpoint) and copy.name == gpu.name


def test_control_groups_need_root(monkeypatch) -> None:
    from zeus_core.daemon._server import _check_privileges
    from zeus_core.device import _privileges as privileges
    from zeus_core.exceptions import ZeusPermissionError

    monkeypatch.setattr(privileges, "has_admin_rights", lambda *a: False)
    with pytest.raises(
        ZeusPermissionError, match=r"\['cpu-read', 'gpu-control'\] need root .* --enable gpu-read"
    ):
        _check_privileges(ALL)
    _check_privileges(frozenset({ApiGroup.GPU_READ}))
