"""Framework-free helpers shared by the Lightning and Accelerate adapter tests.

A protocol object that records its events (with checkpointable state), the expected event
sequence of a fit, a runner for multi-process scripts that never leaves processes behind, and the
exit those scripts' ranks take.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

from zeus_core.callback import TrainingCallback


class Recorder(TrainingCallback):
    """A protocol object that records its events and has checkpointable state."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.loaded: dict[str, Any] | None = None

    def on_train_begin(self) -> None:
        self.events.append("train_begin")

    def on_epoch_begin(self) -> None:
        self.events.append("epoch_begin")

    def on_step_begin(self) -> None:
        self.events.append("step_begin")

    def on_step_end(self) -> None:
        self.events.append("step_end")

    def on_epoch_end(self) -> None:
        self.events.append("epoch_end")

    def on_train_end(self) -> None:
        self.events.append("train_end")

    def state_dict(self) -> dict[str, Any]:
        return {"version": 1, "steps_seen": self.events.count("step_end")}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.loaded = dict(state)


def expected_events(epochs: int, steps_per_epoch: int) -> list[str]:
    """The protocol sequence of a fit with ``epochs`` epochs of ``steps_per_epoch`` optimizer steps."""
    epoch = ["epoch_begin"] + ["step_begin", "step_end"] * steps_per_epoch + ["epoch_end"]
    return ["train_begin"] + epoch * epochs + ["train_end"]


def run_script(cmd: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    """Run a multi-process script in its own session; on timeout kill the whole group and raise."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"{cmd} timed out after {timeout_s} s:\n{out[-2000:]}\n{err[-4000:]}") from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def leave_without_finalisation() -> None:
    """End this rank now, skipping interpreter finalisation, where gloo's threads can abort.

    On torch 2.13 a gloo runloop thread may free a finished collective, which holds a Python
    object, after finalisation began: ``terminate called without an active exception`` (SIGABRT)
    in about 1 run in 15 (pytorch/pytorch#179291). Call it once the rank's results are written.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
