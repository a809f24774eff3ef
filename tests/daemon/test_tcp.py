"""TCP: zeusd's bearer tokens (401/403, ``/auth/whoami``), Zeus's client with a token, heartbeat leases."""

from __future__ import annotations

import http.client
import json
import time

import pytest

from tests.conftest import free_port
from tests.daemon.harness import Daemon, wait_for
from zeus_core.daemon import issue_token
from zeus_core.device._zeusd import DaemonClient, Endpoint

KEY = b"a-signing-key-of-at-least-32-bytes\n"
HEARTBEAT = "heartbeat_s = 0.3\nmissed_heartbeats = 5\n"  # a lease lives 1.5 s without a heartbeat


@pytest.fixture(scope="module")
def daemon():
    port = free_port()
    d = Daemon(gpus=2, config=HEARTBEAT, args=("--tcp", f"127.0.0.1:{port}"))
    (d.dir / "key").write_bytes(KEY)
    (d.dir / "key").chmod(0o600)
    d.args += ("--signing-key-path", str(d.dir / "key"))
    d.host_port = f"127.0.0.1:{port}"  # type: ignore[attr-defined]
    d.start()
    yield d
    d.stop()


def get(daemon: Daemon, method: str, path: str, token: str | None = None) -> tuple[int, dict, dict]:
    host, port = daemon.host_port.split(":")  # type: ignore[attr-defined]
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    headers = {"Content-Length": "0", **({"Authorization": f"Bearer {token}"} if token else {})}
    conn.request(method, path, headers=headers)
    response = conn.getresponse()
    body = json.loads(response.read() or b"null")
    conn.close()
    return response.status, body, dict(response.headers)


def test_discover_and_time_need_no_token_and_say_a_token_is_required(daemon) -> None:
    status, body, _ = get(daemon, "GET", "/discover")
    assert status == 200 and body["auth_required"] is True
    assert get(daemon, "GET", "/time")[0] == 200


@pytest.mark.parametrize(
    ("token", "status", "words"),
    [
        (None, 401, "Authentication required. Provide an Authorization: Bearer <token> header."),
        (
            issue_token(b"another key that is also long enough!", "eve", ["gpu-control"], None),
            401,
            "Invalid token",
        ),
        (issue_token(KEY, "bob", ["gpu-control"], int(time.time()) - 60), 401, "Token has expired."),
        ("not.a.jwt", 401, "Invalid token"),
        (
            issue_token(KEY, "carol", ["gpu-read"], None),
            403,
            "Token for user 'carol' lacks required scope 'gpu-control'",
        ),
    ],
)
def test_bad_tokens_are_refused_as_zeusd_does_and_nothing_changes(daemon, token, status, words) -> None:
    before = daemon.writes()
    code, body, headers = get(
        daemon, "POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=150000&block=true", token
    )
    assert code == status and words in body["error"]
    if status == 401:
        assert headers["WWW-Authenticate"] == 'Bearer realm="zeusd"'
    assert daemon.writes() == before and daemon.open_leases() == 0
    assert token is None or token not in daemon.read_log()  # the log never holds a token


def test_whoami_and_zeus_client_with_a_token(daemon) -> None:
    from zeus.utils.zeusd import ZeusdClient, ZeusdConfig

    token = issue_token(KEY, "alice", ["gpu-read", "gpu-control"], int(time.time()) + 3600)
    status, body, _ = get(daemon, "GET", "/auth/whoami", token)
    assert status == 200 and body["sub"] == "alice" and body["scopes"] == ["gpu-control", "gpu-read"]
    host, port = daemon.host_port.split(":")
    zeus = ZeusdClient(ZeusdConfig.tcp(host, int(port), token=token))
    assert zeus.auth_error is None and zeus.can_control_gpu and not zeus.can_read_cpu
    zeus.set_power_limit([1], 220000)  # no session header (Zeus's client): unleased, as with zeusd
    assert zeus.get_power_limit([1]) == {1: 220000} and daemon.open_leases() == 0
    zeus.set_power_limit([1], 300000)
    assert "token subject 'alice'" in daemon.read_log() and token not in daemon.read_log()


def test_a_tcp_session_holds_its_lease_by_heartbeat_and_loses_it_when_they_stop(daemon) -> None:
    token = issue_token(KEY, "dave", ["gpu-control", "gpu-read"], None)
    client = DaemonClient(Endpoint(host_port=daemon.host_port, token=token))  # type: ignore[attr-defined]
    client.post("/gpu/set_power_limit", 0, "set", power_limit_mw=160000)
    assert daemon.settings()[0][0] == 160000 and daemon.open_leases() == 1
    start = time.monotonic()
    wait_for(lambda: time.monotonic() - start > 2.5, 5, "more than a lease's lifetime")  # heartbeats keep it
    assert daemon.settings()[0][0] == 160000 and daemon.open_leases() == 1
    client.close()  # the process "dies": no more heartbeats
    stopped = time.monotonic()
    daemon.wait_settings(lambda s: s[0][0] == 300000, 10.0, "the limit back after the heartbeats stopped")
    assert time.monotonic() - stopped > 1.1  # not before the lease expired (5 x 0.3 s after the last beat)
    daemon.wait_no_leases()
    assert "missed its heartbeats" in daemon.read_log()
