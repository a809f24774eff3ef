"""Refusals: each names the reason, and nothing changes (no write to any GPU, no lease)."""

from __future__ import annotations

import os
from urllib.parse import urlencode

import pytest

from tests.daemon.harness import Client, Daemon, cannot_run_as, raw

CONFIG = f"""
root_is_admin = false          # even root (the test) is subject to the grants below
[[grant]]
users = [{os.getuid()}]
gpus = [0, 1]
settings = ["power_limit", "persistence_mode"]
power_limit_w = [150, 250]
scopes = ["gpu-control", "gpu-read"]
"""


@pytest.fixture(scope="module")
def daemon():
    d = Daemon(gpus=3, config=CONFIG, args=("--enable", "gpu-control,gpu-read")).start()
    yield d
    d.stop()


def post(daemon: Daemon, path: str, **params: object) -> tuple[int, object]:
    return raw(daemon.socket, "POST", f"{path}?{urlencode(params)}")


@pytest.mark.parametrize(
    ("params", "status", "words"),
    [
        (
            {"gpu_ids": "0", "power_limit_mw": 140000, "block": "true"},
            403,
            "outside the power limit range granted",
        ),
        ({"gpu_ids": "0,1", "power_limit_mw": 260000, "block": "true"}, 403, "(150-250 W)"),
        (
            {"gpu_ids": "2", "power_limit_mw": 200000, "block": "true"},
            403,
            "GPU 2 is outside the GPUs granted",
        ),
        (
            {"gpu_ids": "0,2", "power_limit_mw": 200000, "block": "true"},
            403,
            "GPU 2 is outside",
        ),  # GPU 0 unchanged
        ({"gpu_ids": "9", "power_limit_mw": 200000, "block": "true"}, 400, "GPU index 9 does not exist"),
        ({"gpu_ids": "0", "block": "true"}, 400, "missing parameter `power_limit_mw`"),
        (
            {"gpu_ids": "0", "power_limit_mw": "abc", "block": "true"},
            400,
            "`power_limit_mw` must be a whole number",
        ),
        ({"gpu_ids": "0", "power_limit_mw": "-5", "block": "true"}, 400, "(got '-5')"),
        ({"gpu_ids": "0", "power_limit_mw": 2**32, "block": "true"}, 400, "`power_limit_mw`"),
        (
            {"gpu_ids": "0", "power_limit_mw": 200000, "block": "yes"},
            400,
            "`block` must be 'true' or 'false'",
        ),
        ({"gpu_ids": "0,,1", "power_limit_mw": 200000, "block": "true"}, 400, "contains an empty GPU index"),
        ({"gpu_ids": "x", "power_limit_mw": 200000, "block": "true"}, 400, "Invalid GPU index: x"),
        (
            {"gpu_ids": "0", "power_limit_mw": 200000, "block": "true", "force": "1"},
            400,
            "unknown parameter `force`",
        ),
    ],
)
def test_a_refused_power_limit_names_the_reason_and_changes_nothing(daemon, params, status, words) -> None:
    before = daemon.writes()
    code, body = post(daemon, "/gpu/set_power_limit", **params)
    assert code == status, body
    assert words in str(body)
    assert daemon.writes() == before and daemon.open_leases() == 0


def test_a_setting_outside_the_grant_is_refused(daemon) -> None:
    before = daemon.writes()
    code, body = post(
        daemon, "/gpu/set_gpu_locked_clocks", gpu_ids="0", min_clock_mhz=900, max_clock_mhz=900, block="true"
    )
    assert code == 403 and "may not change the gpu locked clocks of GPU 0" in body["error"]
    assert "persistence_mode" in body["error"] and "power_limit" in body["error"]  # what is allowed
    assert daemon.writes() == before


def test_a_disabled_group_is_404_as_in_zeusd(daemon) -> None:
    code, body = raw(daemon.socket, "GET", "/cpu/get_power")
    assert (code, body) == (404, {"error": "API group 'cpu-read' is not enabled on this server."})
    code, body = raw(daemon.socket, "GET", "/auth/whoami")  # no tokens on the Unix socket
    assert code == 404 and "peer credentials" in body["error"]


def test_within_the_grant_the_change_is_made_and_undone_even_outside_the_range(daemon) -> None:
    client = daemon.client()
    client.post("/gpu/set_power_limit", 1, "set", power_limit_mw=200000)  # this test process holds the lease
    assert daemon.settings()[1][0] == 200000 and daemon.open_leases() == 1
    client.post(
        "/gpu/set_power_limit", 1, "restore", power_limit_mw=300000
    )  # 300 W: outside 150-250, but the undo
    assert daemon.settings()[1][0] == 300000 and daemon.open_leases() == 0
    client.close()
    assert "Refused POST /gpu/set_power_limit" in daemon.read_log()  # refusals are in the audit log


def test_a_user_outside_the_granted_group_is_refused(daemon) -> None:
    if reason := cannot_run_as(12345):  # the Policy tests cover the decision without switching users
        pytest.skip(reason)
    before = daemon.writes()
    client = Client(daemon, "try", "200", user=12345)  # no grant names uid 12345
    line = client.expect("ERROR")
    assert "ZeusPermissionError" in line and "uid 12345" in line and "is in no grant" in line
    assert daemon.writes() == before and daemon.settings()[0][0] == 300000
