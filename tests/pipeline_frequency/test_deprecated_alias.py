"""The one deprecation alias of the Perseus package: the simulated pipeline GPU's old import path."""

from __future__ import annotations

import importlib
import sys

import pytest

import zeus_core.testing

OLD = "zeus_core.optimizer.pipeline_frequency.simulated_gpu"
NEW_IMPORT = r"from zeus_core\.testing import InstructionWork, SimulatedPipelineGPU"


def test_the_old_path_warns_naming_the_new_import_and_re_exports_the_same_objects() -> None:
    sys.modules.pop(OLD, None)
    with pytest.warns(DeprecationWarning, match=NEW_IMPORT):
        alias = importlib.import_module(OLD)
    assert alias.SimulatedPipelineGPU is zeus_core.testing.SimulatedPipelineGPU
    assert alias.InstructionWork is zeus_core.testing.InstructionWork
    # What the README example did with it still works.
    gpu = alias.SimulatedPipelineGPU("a40", clock=zeus_core.testing.VirtualClock())
    assert gpu.run(alias.InstructionWork(compute_s=0.010, memory_s=0.002)) == pytest.approx(0.012)
