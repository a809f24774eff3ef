"""Run a script as ``__main__`` on the fake NVML of ``tests/fakes`` (one NVIDIA A40).

Usage: ``python tests/examples/zeus_on_fake_gpu.py SCRIPT ARGS...``.

The ported Zeus examples call ``ZeusMonitor(gpu_indices=[0])`` as Zeus does, which needs an NVIDIA
GPU; CI has none, so ``pynvml`` is replaced by the faithful fake (energy counters that advance
with power × time, power-limit constraints) before the script starts.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from zeus_core.testing import FakeGPUSpec, FakeNVML  # noqa: E402

sys.modules["pynvml"] = FakeNVML([FakeGPUSpec.a40()])  # type: ignore[assignment]
script, *args = sys.argv[1:]
sys.argv = [script, *args]
runpy.run_path(script, run_name="__main__")
