"""50 clients on 8 GPUs at once: ``python -m tests.daemon.swarm SOCKET CLIENTS GPUS``.

Forks ``CLIENTS`` processes that start together (a pipe releases them). Client ``i`` works on GPU
``i % GPUS`` and asks one of three power limits, so clients on one GPU often collide; then it holds a
moment and leaves in one of five ways (``i % 5``): SIGKILL; restores itself and exits; exits without
restoring; also locks the SM clock, then SIGKILL; also enables persistence mode, then exits. Prints one
line ``RESULT {"status": {code: count}, "conflict": a 409 message}``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections import Counter

from zeus_core.device._zeusd import DaemonClient, Endpoint


def _child(sock: str, i: int, gpus: int, go: int, out: int) -> None:
    os.read(go, 1)  # every client starts at once
    client = DaemonClient(Endpoint(socket_path=sock))
    gpu, limit = i % gpus, 150000 + (i % 3) * 50000
    codes = []

    def post(path: str, **params: object) -> None:
        status, body = client.request("POST", path, {"gpu_ids": gpu, "block": "true", **params})
        codes.append(str(status))
        if status == 409:
            codes.append("MSG " + json.dumps(body))

    post("/gpu/set_power_limit", power_limit_mw=limit)
    mode = i % 5
    if mode == 3:
        post("/gpu/set_gpu_locked_clocks", min_clock_mhz=900 + 15 * (i % 2), max_clock_mhz=1200)
    if mode == 4:
        post("/gpu/set_persistence_mode", enabled="true")
    time.sleep(0.05 + (i % 7) * 0.03)
    if mode == 1:
        post("/gpu/set_power_limit", power_limit_mw=300000)
    os.write(out, ("\n".join(codes) + "\n").encode())
    if mode in (0, 3):
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(0)


def main(sock: str, clients: int, gpus: int) -> None:
    go_r, go_w = os.pipe()
    out_r, out_w = os.pipe()
    pids = []
    for i in range(clients):
        pid = os.fork()
        if pid == 0:
            os.close(go_w)
            os.close(out_r)
            try:
                _child(sock, i, gpus, go_r, out_w)
            finally:
                os._exit(1)
        pids.append(pid)
    os.close(go_r)
    os.close(out_w)
    os.write(go_w, b"x" * clients)
    os.close(go_w)
    chunks = []
    while chunk := os.read(out_r, 65536):
        chunks.append(chunk)
    for pid in pids:
        os.waitpid(pid, 0)
    lines = b"".join(chunks).decode().splitlines()
    status = Counter(line for line in lines if not line.startswith("MSG "))
    conflict = next((json.loads(line[4:]) for line in lines if line.startswith("MSG ")), None)
    print("RESULT " + json.dumps({"status": status, "conflict": conflict}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
