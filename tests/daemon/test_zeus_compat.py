"""Zeus 0.16's ``ZeusdClient``, ``ZeusdNVIDIAGPU`` and ``PowerStreamingClient`` drive the daemon unchanged."""

from __future__ import annotations

import json

from tests.daemon.harness import Client, make_rapl

A40 = (300000, None, None, False)


def test_zeus_client_discovers_sets_reads_and_streams(start_daemon, tmp_path) -> None:
    daemon = start_daemon(gpus=2, args=("--rapl-root", str(make_rapl(tmp_path / "rapl"))))
    zeus = Client(daemon, daemon.socket, module="tests.daemon.zeus_client")
    out = json.loads(zeus.expect("RESULT ", timeout_s=120)[len("RESULT ") :])
    assert zeus.finish()[0] == 0
    assert out["gpus"] == [[0, "NVIDIA A40"], [1, "NVIDIA A40"]]
    assert out["can"] == [True, True, False]  # read, control, no token on the Unix socket
    assert out["limits"] == {"0": 150000, "1": 300000}
    assert out["constraints"] == {"1": [100000, 300000]}
    assert out["persistence"] == {"0": False, "1": True}
    assert out["power"] == {"0": 150000, "1": 250000}  # the fake draws 250 W, capped by the limit
    assert out["energy"]["0"] > 0 and out["time"]
    assert (
        "ZeusdError" in out["out_of_range"]
        and "outside GPU 0's range 100000-300000 mW" in out["out_of_range"]
    )
    assert out["gpu_class"] == "ZeusdNVIDIAGPU" and out["zeusd_gpu_limit"] == 200000
    assert out["stream_w"] == {"0": 150.0, "1": 200.0}
    assert out["cpu_mj"] == 1000.0 and out["cpu_power"] == 0  # 1,000,000 µJ; the counter stands still
    # Zeus never restores: the daemon does, once the Zeus process has ended.
    daemon.wait_settings(lambda s: s == [A40, A40], 5.0, "every setting back after Zeus's process ended")
    daemon.wait_no_leases()
    log = daemon.read_log()
    assert "GPU 1 locked clocks" not in log  # (Knob labels: gpu locked clocks / mem locked clocks)
    assert "GPU 1 gpu locked clocks restored to unlocked" in log and "GPU 1 mem locked clocks restored" in log
