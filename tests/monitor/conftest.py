"""Monitor tests measure GPUs that behave like real ones by default (zeus_core/testing/_quirky_nvml.py).

The idealized fake (zeus_core/testing/_fake_nvml.py) stays for tests that need exact counters.
"""

from __future__ import annotations

import pytest

from zeus_core.testing._quirky_nvml import FakeGPUSpec, Quirks, QuirkyNVML, square_wave


@pytest.fixture
def quirky_h100(monkeypatch: pytest.MonkeyPatch) -> QuirkyNVML:
    """One fake H100 as ``pynvml``: Hopper's quirks, true power 100 <-> 300 W every 15 ms."""
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ZEUS_SUITE_SIMULATE"):
        monkeypatch.delenv(var, raising=False)
    return QuirkyNVML([FakeGPUSpec.h100()], quirks=Quirks.hopper(), profiles=[square_wave()]).patch(
        monkeypatch
    )  # type: ignore[return-value]
