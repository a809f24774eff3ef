# zeus-source: docs/measure/index.md:114
# sha256: f583a0a2782a920ae8fdb2161b32949af604ad72fb8dcac852bf1190142b654e
# status: not run: needs zeusd daemons on hosts node1 and node2 (port 4938) and at /run/zeusd/zeusd.sock, and its `for readings in client` loop ends only when another thread calls stop()
# change: none: against running daemons (`zeus-suite daemon` or Zeus's zeusd) it runs with the imports changed
# ---
from zeus_core.compat.utils.zeusd import ZeusdConfig
from zeus_core.compat.monitor.power_streaming import PowerStreamingClient

# SSE connections start immediately on construction.
client = PowerStreamingClient(
    servers=[
        ZeusdConfig.tcp("node1", 4938, gpu_indices=[0, 1, 2, 3], cpu_indices=[0]),
        ZeusdConfig.tcp("node2", 4938),        # all GPUs + all CPUs
        ZeusdConfig.uds("/run/zeusd/zeusd.sock"), # local UDS
    ],
)

# Snapshot: latest readings from all endpoints, keyed by endpoint identifier.
readings = client.get_power()
for endpoint, pr in readings.items():
    print(f"{endpoint}: timestamp={pr.timestamp_s:.3f}s")
    print(f"  GPU power: {pr.gpu_power_w}")
    for cpu_idx, cpu_reading in pr.cpu_power_w.items():
        print(f"  CPU {cpu_idx}: {cpu_reading.cpu_w:.1f} W, DRAM: {cpu_reading.dram_w}")

# Blocking iterator: yields a snapshot each time new SSE data arrives.
# Iteration stops when stop() is called.
for readings in client:
    for endpoint, pr in readings.items():
        print(f"{endpoint}: GPU={pr.gpu_power_w}, CPU={pr.cpu_power_w}")

# Async iterator: same as above, without blocking the event loop.
async for readings in client:
    for endpoint, pr in readings.items():
        print(f"{endpoint}: GPU={pr.gpu_power_w}, CPU={pr.cpu_power_w}")

client.stop()
