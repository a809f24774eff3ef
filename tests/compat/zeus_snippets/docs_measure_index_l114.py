# zeus-source: docs/measure/index.md:114
# sha256: f583a0a2782a920ae8fdb2161b32949af604ad72fb8dcac852bf1190142b654e
# zeusd: node1:4938 node2:4938 /run/zeusd/zeusd.sock
# stop-after: client 3
# check: ^node1:4938: timestamp= ;; ^node1:4938: GPU=\{0: \d+\.\d+, 1: \S+, 2: \S+, 3: \S+\}, CPU=\{0: CpuPowerReading ;; ^node2:4938: GPU=\{0: \S+, 1: \S+, 2: \S+, 3: \S+\}, CPU=\{0: ;; ^/run/zeusd/zeusd.sock: GPU=\{0: \d.*CPU=\{0: ;; ^\[stand-in\] 3 complete snapshots
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
