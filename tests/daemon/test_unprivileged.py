"""A user who may not change GPU settings does so through the daemon.

Plain calls, the settings seam, the power-limit optimizer, Perseus's clock controller, ``zeus-suite env``.
"""

from __future__ import annotations

import json

import pytest

from tests.daemon.harness import Client, cannot_run_as

A40 = (300000, None, None, False)


def test_direct_writes_are_refused_and_the_same_call_through_the_daemon_works(daemon) -> None:
    before = len(daemon.writes())
    refused = Client(daemon, "direct", "150")
    assert "NVML refused" in refused.expect("REFUSED")
    assert refused.finish()[0] == 0
    assert len(daemon.writes()) == before  # the fake refused: nothing was written
    client = Client(daemon, "set", "150")  # zeus_core.get_gpus()[0].set_power_limit(150) with ZEUSD_SOCK_PATH
    client.expect("READY")
    assert daemon.settings()[0][0] == 150000
    assert {w[0] for w in daemon.writes()[before:]} == {
        daemon.proc.pid
    }  # the daemon wrote it, not the client
    client.kill()
    daemon.wait_settings(lambda s: s[0] == A40, 5.0, "the limit back")


def test_a_real_non_root_user_sets_a_limit_through_the_daemon(daemon) -> None:
    if reason := cannot_run_as(65534):
        pytest.skip(reason)
    client = Client(daemon, "set", "180", user=65534)  # nobody
    client.expect("READY")
    assert daemon.settings()[0][0] == 180000
    assert "uid 65534" in daemon.read_log()  # the audit log names who
    client.kill()
    daemon.wait_settings(lambda s: s[0] == A40, 5.0, "the limit back after the non-root client died")
    daemon.wait_no_leases()


def test_the_power_limit_optimizer_and_perseus_work_through_the_daemon(daemon) -> None:
    plo = Client(daemon, "plo")
    assert float(plo.expect("READY").split()[1]) < 250
    assert plo.expect("RESTORED") == "RESTORED 300"
    assert plo.finish()[0] == 0
    perseus = Client(daemon, "perseus", "900")
    assert perseus.expect("READY") == "READY [900, 900]"  # the GPU's clocks while the controller runs
    perseus.expect("RESTORED")
    assert perseus.finish()[0] == 0
    assert daemon.settings()[0] == A40
    daemon.wait_no_leases()


def test_env_shows_the_daemon_configured_reachable_and_what_it_allows(daemon) -> None:
    client = Client(daemon, "env")
    data = json.loads(client.expect("{"))
    assert data["control"] == ["yes"]  # asked of the daemon, not of the (refusing) NVML
    status = data["daemon"]
    assert status["configured"] and status["reachable"] and status["leases"]
    assert status["may"]["gpu-control"] is True
    assert daemon.socket in status["detail"] and "zeus-suite daemon" in status["detail"]
