"""Synthetic instruction profiles from the documented DVFS model (A100-like and A40-like GPUs).

For benchmarks, examples and tests without a GPU. Each (stage, instruction) gets the model of
:class:`zeus_core.testing._simulated_gpu.PhysicalModel`, evaluated at a sweep of SM clocks ``f``:

* time ``t(f) = t_mem + t_comp · f_max / f`` (s): the memory-bound part does not speed up with the
  SM clock; ``t_mem`` is ``memory_fraction`` of the time at ``f_max``;
* power ``P(f) = P_static + activity · P_dynamic · (f / f_max) · V(f)²`` (W) with
  ``V(f) = v_min + (1 − v_min)(f − f_min)/(f_max − f_min)``; ``activity`` (≤ 1) is how hard the
  instruction drives the SMs;
* energy ``E(f) = P(f) · t(f)`` (J), optionally with seeded Gaussian measurement noise.

Stages are imbalanced, as real partitions are: stage ``s`` does ``weight_s`` times the base work,
with weights drawn uniformly in ``[1 − imbalance, 1 + imbalance]`` (seeded) and the last stage
(loss / LM head) ``last_stage_extra`` heavier. A backward pass does ``backward_ratio`` (≈ 2) times
a forward's compute, and drives the SMs harder.

Example:
    >>> prof = physical_instruction_profile("a100", num_stages=4, seed=0)
    >>> prof.simulated, len(prof.get(0, "forward")) > 10
    (True, True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.pipeline_frequency._profile import InstructionProfile, ProfileMeasurement
from zeus_core.optimizer.pipeline_frequency._schedule import SPLIT_BACKWARD, InstructionKind
from zeus_core.testing._gpu_models import PhysicalModel

__all__ = ["PhysicalGpuSpec", "PHYSICAL_GPUS", "stage_weights", "physical_instruction_profile"]


@dataclass(frozen=True)
class PhysicalGpuSpec:
    """A GPU model plus the per-instruction workload it runs.

    Attributes:
        model: DVFS model (clock range, static/dynamic power, voltage curve).
        forward_time_s: Forward time of a weight-1 stage at ``f_max``, s.
        forward_memory_fraction: Share of the forward time at ``f_max`` that is memory-bound.
        backward_memory_fraction: Same for the backward pass.
        forward_activity: Dynamic-power activity factor of a forward pass (0–1].
        backward_activity: Same for a backward pass.
        blocking_power_w: Power while blocked on pipeline communication, W.
        sweep_min_mhz: Lowest SM clock profiled, MHz (Perseus sweeps down from the maximum).
        sweep_step_mhz: Clock step of the sweep, MHz.
    """

    model: PhysicalModel
    forward_time_s: float
    forward_memory_fraction: float
    backward_memory_fraction: float
    forward_activity: float
    backward_activity: float
    blocking_power_w: float
    sweep_min_mhz: int
    sweep_step_mhz: int


PHYSICAL_GPUS: dict[str, PhysicalGpuSpec] = {
    "a100": PhysicalGpuSpec(
        model=PhysicalModel.a100(),
        forward_time_s=0.020,
        forward_memory_fraction=0.25,
        backward_memory_fraction=0.15,
        forward_activity=0.85,
        backward_activity=1.0,
        blocking_power_w=80.0,
        sweep_min_mhz=795,
        sweep_step_mhz=15,
    ),
    "a40": PhysicalGpuSpec(
        model=PhysicalModel.a40(),
        forward_time_s=0.030,
        forward_memory_fraction=0.2,
        backward_memory_fraction=0.12,
        forward_activity=0.9,
        backward_activity=1.0,
        blocking_power_w=60.0,
        sweep_min_mhz=900,
        sweep_step_mhz=15,
    ),
}
"""The GPUs :func:`physical_instruction_profile` models by name, with their per-instruction workload.

``"a100"`` (SXM4 40 GB: 210–1410 MHz, 400 W) and ``"a40"`` (210–1740 MHz, 300 W).

Example:
    >>> from zeus_core.testing import PHYSICAL_GPUS
    >>> sorted(PHYSICAL_GPUS), PHYSICAL_GPUS["a100"].blocking_power_w
    (['a100', 'a40'], 80.0)
"""


def stage_weights(
    num_stages: int, imbalance: float = 0.15, last_stage_extra: float = 0.2, seed: int = 0
) -> np.ndarray:
    """Relative work per stage: uniform in ``[1 − imbalance, 1 + imbalance]``, last stage heavier.

    Example:
        >>> w = stage_weights(4, seed=1)
        >>> bool(w[-1] > 1.0), len(w)
        (True, 4)
    """
    if num_stages < 1 or not 0 <= imbalance < 1:
        raise ZeusConfigError(
            f"stage_weights({num_stages}, imbalance={imbalance}): need >= 1 stage, 0 <= imbalance < 1."
        )
    rng = np.random.default_rng(seed)
    w = 1.0 + rng.uniform(-imbalance, imbalance, size=num_stages)
    w[-1] += last_stage_extra
    return w


def physical_instruction_profile(
    gpu: str | PhysicalGpuSpec = "a100",
    num_stages: int = 4,
    *,
    seed: int = 0,
    imbalance: float = 0.15,
    last_stage_extra: float = 0.2,
    backward_ratio: float = 2.0,
    noise: float = 0.0,
    weights: np.ndarray | None = None,
) -> InstructionProfile:
    """An :class:`InstructionProfile` for every stage and instruction kind, from the DVFS model.

    Covers forward, backward, and the two halves of a split backward (zero-bubble schedules).

    Args:
        gpu: ``"a100"``, ``"a40"`` or a :class:`PhysicalGpuSpec`.
        num_stages: Pipeline stages.
        seed: Seed of the stage weights and the noise.
        imbalance: Spread of the stage weights (see :func:`stage_weights`).
        last_stage_extra: Extra work of the last stage.
        backward_ratio: Backward compute time over forward compute time.
        noise: Relative standard deviation of the measured time and energy (0: exact model).
        weights: Explicit per-stage work weights (overrides ``imbalance``/``last_stage_extra``).

    Raises:
        ZeusConfigError: Unknown GPU name, or bad sizes.

    Example:
        >>> from zeus_core.testing import physical_instruction_profile
        >>> profile = physical_instruction_profile("a100", 2)
        >>> profile.stages, profile.simulated
        ([0, 1], True)
        >>> fastest = profile.get(0, "forward")[0]  # the highest clock first
        >>> fastest.frequency_mhz, fastest.time_s < profile.get(0, "forward")[-1].time_s
        (1410, True)
    """
    if isinstance(gpu, str):
        try:
            spec = PHYSICAL_GPUS[gpu.lower()]
        except KeyError:
            raise ZeusConfigError(
                f"Unknown physical GPU {gpu!r}; choose one of {sorted(PHYSICAL_GPUS)}."
            ) from None
    else:
        spec = gpu
    m = spec.model
    w = (
        stage_weights(num_stages, imbalance, last_stage_extra, seed)
        if weights is None
        else np.asarray(weights, float)
    )
    if len(w) != num_stages:
        raise ZeusConfigError(f"physical_instruction_profile: {len(w)} weights for {num_stages} stages.")
    rng = np.random.default_rng(seed + 1)
    freqs = [
        f
        for f in m.sm_frequencies_mhz
        if f >= spec.sweep_min_mhz and (m.f_max_mhz - f) % spec.sweep_step_mhz == 0
    ]
    data: dict[tuple[int, InstructionKind], list[ProfileMeasurement]] = {}
    # A split backward (zero bubble): the input and the weight gradient each take half of it.
    share = {InstructionKind.FORWARD: 1.0, InstructionKind.BACKWARD: backward_ratio}
    share.update({k: backward_ratio / 2 for k in SPLIT_BACKWARD[1:]})
    for stage in range(num_stages):
        for kind in InstructionKind:
            forward = kind is InstructionKind.FORWARD
            mem_frac = spec.forward_memory_fraction if forward else spec.backward_memory_fraction
            total = spec.forward_time_s * w[stage] * share[kind]
            t_mem, t_comp = total * mem_frac, total * (1.0 - mem_frac)
            activity = spec.forward_activity if forward else spec.backward_activity
            rows = []
            for f in freqs:
                t = t_mem + t_comp * m.f_max_mhz / f
                v = m.v_min + (1.0 - m.v_min) * (f - m.f_min_mhz) / (m.f_max_mhz - m.f_min_mhz)
                p = m.static_power_w + activity * m.dynamic_power_w * (f / m.f_max_mhz) * v * v
                e = p * t
                if noise:
                    t *= 1.0 + noise * rng.standard_normal()
                    e *= 1.0 + noise * rng.standard_normal()
                rows.append(ProfileMeasurement(int(f), float(t), float(e)))
            data[(stage, kind)] = rows
    return InstructionProfile(
        data,
        gpu_name=f"{m.gpu_name} (physical model)",
        simulated=True,
        blocking_power_w=spec.blocking_power_w,
    )
