"""Many clients at once: collisions get 409 naming the holder; at the end every setting is back, no lease."""

from __future__ import annotations

import json

from tests.daemon.harness import Client

A40 = (300000, None, None, False)


def test_50_clients_on_8_gpus_leave_every_setting_where_it_started(start_daemon) -> None:
    daemon = start_daemon(gpus=8)
    swarm = Client(daemon, daemon.socket, "50", "8", module="tests.daemon.swarm")
    result = json.loads(swarm.expect("RESULT ", timeout_s=120)[len("RESULT ") :])
    assert swarm.finish()[0] == 0
    status = result["status"]
    assert set(status) <= {"200", "409"}, status
    assert status["200"] >= 8 and status["409"] >= 1, status  # every GPU was changed, some clients collided
    message = result["conflict"]["errors"]
    ((gpu, text),) = message.items()
    assert f"GPU {gpu}'s power limit is held by pid" in text and "share = true" in text
    daemon.wait_settings(lambda s: s == [A40] * 8, 15.0, "every GPU back where it started")
    daemon.wait_no_leases(15.0)
