"""Leases: a change belongs to the process that asked; it comes back when that process ends, however."""

from __future__ import annotations

import signal
import time

from tests.daemon.harness import Client

A40 = (300000, None, None, False)  # (power limit mW, SM clocks, memory clocks, persistence) at start


def test_sigkill_of_the_client_restores_the_limit_within_2_s(daemon) -> None:
    client = Client(daemon, "set", "150")
    client.expect("READY")
    assert daemon.settings()[0][0] == 150000
    assert daemon.open_leases() == 1
    killed = time.monotonic()
    client.kill()
    daemon.wait_settings(
        lambda s: s[0] == A40, 2.0 - (time.monotonic() - killed), "the limit back after SIGKILL"
    )
    daemon.wait_no_leases()


def test_a_daemon_killed_with_a_dead_clients_lease_open_restores_it_at_start(start_daemon) -> None:
    daemon = start_daemon()
    client = Client(daemon, "set", "150")
    client.expect("READY")
    daemon.kill(signal.SIGKILL)  # the daemon dies first: nobody watches the client any more
    client.kill()  # ... and then the client dies
    assert daemon.settings()[0][0] == 150000 and daemon.open_leases() == 1
    daemon.start()  # answers only once the journal's leases are settled
    assert daemon.settings()[0] == A40
    assert daemon.open_leases() == 0
    assert "its holders ended while the daemon was down" in daemon.read_log()


def test_a_restarted_daemon_keeps_watching_a_live_client(start_daemon) -> None:
    daemon = start_daemon()
    client = Client(daemon, "set", "150")
    client.expect("READY")
    daemon.kill(signal.SIGKILL)
    daemon.start()
    assert daemon.settings()[0][0] == 150000 and daemon.open_leases() == 1  # the client lives: kept
    client.kill()
    daemon.wait_settings(lambda s: s[0] == A40, 5.0, "the limit back after the client's SIGKILL")
    daemon.wait_no_leases()


def test_a_client_that_restores_itself_and_exits_leaves_no_lease(daemon) -> None:
    client = Client(daemon, "guard", "175")
    assert client.expect("READY") == "READY 175"
    assert client.expect("DONE") == "DONE 300"
    assert client.finish()[0] == 0
    assert daemon.open_leases() == 0  # closed before the restore's reply
    assert daemon.settings()[0] == A40
    assert "closed (back to its original value)" in daemon.read_log()


def test_a_client_that_exits_normally_without_restoring_is_restored(daemon) -> None:
    client = Client(daemon, "set-exit", "200")
    client.expect("READY")
    assert client.finish()[0] == 0
    daemon.wait_settings(lambda s: s[0] == A40, 5.0, "the limit back after a normal exit")
    daemon.wait_no_leases()


def test_a_second_live_process_asking_another_value_gets_409_naming_the_holder(daemon) -> None:
    holder = Client(daemon, "set", "150")
    holder.expect("READY")
    other = Client(daemon, "try", "200")
    line = other.expect("ERROR")
    assert "ZeusDeviceError" in line and f"held by pid {holder.pid}" in line and "at 150000 mW" in line
    assert daemon.settings()[0][0] == 150000  # unchanged
    same = Client(daemon, "try", "150")  # the same value: it joins the lease
    assert same.expect("OK") == "OK"
    holder.kill()
    daemon.wait_settings(lambda s: s[0] == A40, 5.0, "the limit back once every holder ended")
    daemon.wait_no_leases()


def test_with_sharing_allowed_the_latest_value_wins_and_the_original_comes_back(start_daemon) -> None:
    daemon = start_daemon(config="share = true\n")
    first = Client(daemon, "set", "150")
    first.expect("READY")
    second = Client(daemon, "set", "200")
    second.expect("READY")
    assert daemon.settings()[0][0] == 200000
    second.kill()
    assert daemon.settings()[0][0] == 200000  # the first still holds the lease
    first.kill()
    daemon.wait_settings(lambda s: s[0] == A40, 5.0, "the original limit back after both ended")
    daemon.wait_no_leases()
