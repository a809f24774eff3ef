"""Zeus's ``PipelineFrequencyOptimizer`` calls drive the suite's Perseus (one stage, a simulated A40)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch.distributed as dist

from zeus_core.compat.optimizer.pipeline_frequency import PipelineFrequencyOptimizer
from zeus_core.optimizer.pipeline_frequency import FrequencySweep
from zeus_core.optimizer.pipeline_frequency.runtime import ApplyingPhase, PlanSettings
from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock


def test_zeus_s_calls_profile_plan_and_apply(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="init_process_group"):
        PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 1, 1, 1, "http://pfo:7787")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        gpu = SimulatedGPU(PhysicalModel.a40(), clock=VirtualClock())
        sweep = FrequencySweep(frequencies_mhz=(1740, 1140, 840), iterations_per_frequency=2, patience=0)
        pfo = PipelineFrequencyOptimizer(
            0,
            0,
            0,
            0,
            gpu,
            1,
            1,
            1,
            1,
            "http://pfo:7787",  # type: ignore[arg-type]  # a simulated GPU as device_id
            sweep=sweep,
            planning=PlanSettings(target="least-energy", unit_time_s=1e-3),
            save_dir=tmp_path,
        )
        for _ in range(9):  # Zeus's loop: steps of 1F1B instructions on one stage, two microbatches
            pfo.on_step_begin()
            for name in ("forward", "backward", "forward", "backward"):
                pfo.on_instruction_begin(name)
                assert pfo.runtime.controller is not None and pfo.runtime.controller.wait()
                f = gpu.locked_sm_frequency or gpu.behavior.f_max_mhz  # type: ignore[attr-defined]
                gpu.set_busy(True)
                gpu.clock.advance((2.0 if name == "backward" else 1.0) * gpu.behavior.time_at(f))  # type: ignore[attr-defined]
                gpu.set_busy(False)
                pfo.on_instruction_end(name)
            pfo.on_step_end()
        assert isinstance(pfo.runtime.phase, ApplyingPhase) and pfo.runtime.plan is not None
        profiled = sorted(
            {r.instructions[0].frequency_mhz for r in pfo.runtime.iterations if r.phase == "profiling"}
        )
        assert profiled == [840, 1140, 1740]
        assert gpu.locked_sm_frequency is not None  # the plan's clocks are set
        pfo.on_train_end()
        assert gpu.locked_sm_frequency is None
    finally:
        dist.destroy_process_group()
