"""Zeus 0.16's own client against the daemon, unchanged: ``python -m tests.daemon.zeus_client SOCKET``.

Runs as an unprivileged client on the shared fake NVML (its writes refused) with ``ZEUSD_SOCK_PATH``
set, as a Zeus user would, and prints one JSON line ``RESULT {...}`` of what Zeus saw. It leaves
the limits it set behind and exits: the daemon must restore them.
"""

from __future__ import annotations

import json
import sys

from tests.daemon.fake_gpus import install_from_env


def main(sock: str) -> None:
    install_from_env()
    from zeus.device.cpu.rapl import ZeusdRAPLCPU
    from zeus.device.gpu.nvidia import NVIDIAGPUs
    from zeus.monitor.power_streaming import PowerStreamingClient
    from zeus.utils.zeusd import ZeusdClient, ZeusdConfig, require_capabilities

    out: dict[str, object] = {}
    client = ZeusdClient(ZeusdConfig.uds(sock))
    require_capabilities(client, read_gpu=True, control_gpu=True, gpu_ids=[0, 1])
    out["gpus"] = [(g.id, g.name) for g in client.gpus]
    out["can"] = [client.can_read_gpu, client.can_control_gpu, client.auth_required]
    client.set_power_limit([0], 150000)
    out["limits"] = client.get_power_limit()
    out["constraints"] = client.get_power_limit_constraints([1])
    client.set_persistence_mode([1], True)
    out["persistence"] = client.get_persistence_mode()
    client.set_gpu_locked_clocks([1], 900, 1200)
    client.set_mem_locked_clocks([1], 810, 5001)
    out["power"] = client.get_gpu_power([0, 1]).power_mw
    out["energy"] = client.get_gpu_energy([0])
    out["time"] = client.get_time() > 0
    out["cpu_mj"] = ZeusdRAPLCPU(0, client).get_total_energy_consumption().cpu_mj  # Zeus's RAPL via cpu-read
    out["cpu_power"] = client.get_cpu_power().power_mw[0].cpu_mw
    try:
        client.set_power_limit([0], 999999)
    except Exception as e:  # zeusd answers 400; Zeus raises ZeusdError with the text
        out["out_of_range"] = f"{type(e).__name__}: {e}"
    # ZeusdNVIDIAGPU, chosen by NVIDIAGPUs because ZEUSD_SOCK_PATH is set (what Zeus's optimizers use)
    nvidia = NVIDIAGPUs()  # kept alive: Zeus shuts NVML down when it is collected
    gpus = nvidia.gpus
    out["gpu_class"] = type(gpus[1]).__name__
    gpus[1].set_power_management_limit(200000)
    out["zeusd_gpu_limit"] = gpus[1].get_power_management_limit()
    streaming = PowerStreamingClient([ZeusdConfig.uds(sock)])
    try:
        for readings in streaming:
            seen = readings[sock].gpu_power_w
            if set(seen) == {0, 1}:
                out["stream_w"] = seen
                break
    finally:
        streaming.stop()
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
