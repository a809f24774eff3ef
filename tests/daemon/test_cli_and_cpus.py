"""``zeus-suite daemon --check/--status/--issue-token``, and RAPL read through the daemon (``cpu-read``)."""

from __future__ import annotations

import json

import pytest

from tests.daemon.harness import Daemon, make_rapl, raw
from zeus_core._cli import main
from zeus_core.daemon import verify_token
from zeus_core.exceptions import ZeusPermissionError


@pytest.fixture(scope="module")
def daemon():
    d = Daemon(gpus=2)
    make_rapl(d.dir / "rapl")
    d.args = ("--rapl-root", str(d.dir / "rapl"), "--cpu-power-poll-hz", "20")
    d.start()
    yield d
    d.stop()


def test_check_says_what_the_caller_may_do(daemon, capsys) -> None:
    assert main(["daemon", "--check", "--socket", daemon.socket]) == 0
    out = capsys.readouterr().out
    assert "zeus-suite daemon (leases)" in out and "(may do everything)" in out
    assert (
        "gpu-control: yes" in out
        and "cpu-read: yes" in out
        and "GPU 1: may change power_limit (any value)" in out
    )
    assert main(["daemon", "--check", "--json", "--socket", daemon.socket]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["permissions"]["api_groups"]["gpu-read"]["allowed"] is True


def test_check_without_a_daemon_says_so(tmp_path, capsys) -> None:
    assert main(["daemon", "--check", "--socket", str(tmp_path / "none.sock")]) == 1
    assert "Cannot reach the daemon at ZEUSD_SOCK_PATH=" in capsys.readouterr().err


def test_status_lists_the_open_leases(daemon, capsys) -> None:
    client = daemon.client()
    client.post("/gpu/set_power_limit", 1, "set", power_limit_mw=210000)  # held by this test process
    try:
        assert main(["daemon", "--status", "--socket", daemon.socket]) == 0
        out = capsys.readouterr().out
        assert "GPUs: 0: NVIDIA A40, 1: NVIDIA A40" in out and "CPUs: [0]" in out
        assert "GPU 1 power_limit = 210000 mW (restores 300000 mW)" in out and "held by pid" in out
    finally:
        client.post("/gpu/set_power_limit", 1, "restore", power_limit_mw=300000)
        client.close()
    assert main(["daemon", "--status", "--socket", daemon.socket]) == 0
    assert "Open leases: none." in capsys.readouterr().out


def test_issue_token_signs_with_the_key(tmp_path, capsys) -> None:
    key = tmp_path / "key"
    key.write_bytes(b"0123456789abcdef0123456789abcdef")
    key.chmod(0o600)
    argv = [
        "daemon",
        "--issue-token",
        "alice",
        "--scope",
        "gpu-read",
        "--expires",
        "1h",
        "--signing-key-path",
        str(key),
    ]
    assert main(argv) == 0
    claims = verify_token(capsys.readouterr().out.strip(), key.read_bytes())
    assert (
        claims.sub == "alice" and [s.value for s in claims.scopes] == ["gpu-read"] and claims.exp is not None
    )


def test_cpu_energy_and_power_as_zeusd_serves_them(daemon) -> None:
    status, body = raw(daemon.socket, "GET", "/cpu/get_cumulative_energy?cpu=true&dram=true")
    assert status == 200 and body == {"0": {"cpu_energy_uj": 1_000_000, "dram_energy_uj": 500_000}}
    status, body = raw(daemon.socket, "GET", "/cpu/get_cumulative_energy?cpu=true&dram=false&cpu_ids=0")
    assert body == {"0": {"cpu_energy_uj": 1_000_000, "dram_energy_uj": None}}
    assert raw(daemon.socket, "GET", "/cpu/get_cumulative_energy?cpu=true")[0] == 400  # dram is required
    status, body = raw(daemon.socket, "GET", "/cpu/get_power")
    assert status == 200 and body["power_mw"] == {
        "0": {"cpu_mw": 0, "dram_mw": 0}
    }  # the counters stood still


def test_an_unprivileged_process_reads_rapl_through_the_daemon(daemon, monkeypatch) -> None:
    from zeus_core.device import _discovery as discovery
    from zeus_core.device import _rapl as rapl

    def unreadable(sysfs_root: str, **_: object) -> list:
        raise ZeusPermissionError("RAPL counters are readable by root only (test)")

    monkeypatch.setattr(rapl, "rapl_cpus", unreadable)
    with pytest.raises(ZeusPermissionError):
        discovery.get_cpus()  # no daemon configured: the error stands
    monkeypatch.setenv("ZEUSD_SOCK_PATH", daemon.socket)
    (cpu,) = discovery.get_cpus()
    assert cpu.describe() == "CPU 0: package-0 + DRAM (via daemon)"
    first = cpu.get_energy()
    assert (first.cpu_j, first.dram_j) == (1.0, 0.5)
    (daemon.dir / "rapl" / "intel-rapl:0" / "energy_uj").write_text("3500000\n")
    assert cpu.get_energy().cpu_j == 3.5


def test_non_blocking_writes_and_reset_locked_clocks(daemon) -> None:
    status, body = raw(
        daemon.socket,
        "POST",
        "/gpu/set_gpu_locked_clocks?gpu_ids=0,1&min_clock_mhz=900&max_clock_mhz=1200&block=false",
    )
    assert (status, body) == (200, None)  # dispatched; journaled before this reply
    assert (
        raw(
            daemon.socket,
            "POST",
            "/gpu/set_mem_locked_clocks?gpu_ids=1&min_clock_mhz=810&max_clock_mhz=5001&block=true",
        )[0]
        == 200
    )
    daemon.wait_settings(
        lambda s: s[0][1] == (900, 1200) and s[1][1:3] == ((900, 1200), (810, 5001)), 5.0, "locked"
    )
    assert raw(daemon.socket, "POST", "/gpu/reset_locked_clocks?gpu_ids=0,1&block=true")[0] == 200
    # every request came from a new connection of this test process: one holder, whose reset closed its leases
    assert daemon.settings() == [(300000, None, None, False)] * 2
    daemon.wait_no_leases()
    status, body = raw(
        daemon.socket,
        "POST",
        "/gpu/set_mem_locked_clocks?gpu_ids=0&min_clock_mhz=1&max_clock_mhz=2&block=true",
    )
    assert status == 400 and "NVML rejected the argument" in body["errors"]["0"]  # the fake's range: 405-7251
    assert daemon.open_leases() == 0  # the failed write opened no lease
