"""One plan for one target time without the whole frontier, for large pipelines.

The real-time LP, a repair and slack reclaiming (docs/optimizers/perseus.md, "One plan without
the frontier").
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from zeus_core.optimizer.pipeline_frequency._frequency_plan import FrequencyPlan
from zeus_core.optimizer.pipeline_frequency._profile import InstructionProfile
from zeus_core.optimizer.pipeline_frequency._schedule import PipelineSchedule
from zeus_core.optimizer.pipeline_frequency.planner._blocking_power import resolve_blocking_power
from zeus_core.optimizer.pipeline_frequency.planner._cost_model import ExecutionOption, InstructionOptions
from zeus_core.optimizer.pipeline_frequency.planner._dag import PipelineDAG
from zeus_core.optimizer.pipeline_frequency.planner._real_time import lp_plan, reclaim_slack, repair_to_time

__all__ = ["PlanTiming", "plan_at_time", "replay_options"]


@dataclass(frozen=True)
class PlanTiming:
    """Where :func:`plan_at_time` spent its time, s (``plan.metadata["timing"]`` holds the fields).

    Attributes:
        dag_s: Building the DAG and the options.
        lp_s: The real-time LP.
        repair_s: The repair and slack reclaiming after it.

    Example:
        >>> PlanTiming(dag_s=0.1, lp_s=0.9, repair_s=0.05).total_s
        1.05
    """

    dag_s: float
    lp_s: float
    repair_s: float

    @property
    def total_s(self) -> float:
        """All of it, s."""
        return self.dag_s + self.lp_s + self.repair_s


def replay_options(
    dag: PipelineDAG, chosen: list[ExecutionOption], blocking_power_w: float
) -> tuple[float, float]:
    """Real iteration time (s) and energy of all GPUs, blocking power included (J), of given options.

    Args:
        dag: The iteration's DAG.
        chosen: One option per instruction, in ``dag.instructions`` order.
        blocking_power_w: GPU power while not computing, W.
    """
    times = np.array([o.time_s for o in chosen])
    t = float(dag.longest_path(times))
    idle = dag.schedule.num_stages * t - float(times.sum())
    return t, float(sum(o.energy_j for o in chosen)) + blocking_power_w * idle


def plan_at_time(
    schedule: PipelineSchedule,
    profile: InstructionProfile,
    time_s: float | None = None,
    *,
    blocking_power_w: float | None = None,
    label: str = "",
) -> FrequencyPlan:
    """The least-energy plan whose real iteration time is at most ``time_s`` (s).

    Args:
        schedule: The pipeline schedule.
        profile: Time and energy per (stage, instruction type) and clock.
        time_s: Target iteration time, s; ``None``: the all-highest-clock time (zero slowdown).
        blocking_power_w: W; ``None``: the profile's, else its GPU's documented idle power.
        label: The plan's label (default ``"zero-slowdown"`` or ``"deadline"``).

    Returns:
        The plan, with its replayed time and energy, ``metadata["baseline"]`` (the all-highest
        clock plan's time and energy) and ``metadata["timing"]`` (:class:`PlanTiming` fields).

    Raises:
        ZeusConfigError: ``time_s`` is shorter than the all-highest-clock time, or the blocking
            power is unknown.
        ZeusProfileError: The profile does not cover the schedule.
        ModuleNotFoundError: scipy is missing (``pip install 'zeus-suite[pipeline]'``).

    Example:
        >>> from zeus_core.optimizer.pipeline_frequency import interleaved_1f1b
        >>> from zeus_core.testing import physical_instruction_profile
        >>> plan = plan_at_time(interleaved_1f1b(2, 4, 2), physical_instruction_profile("a40", 2))
        >>> base = plan.metadata["baseline"]
        >>> plan.iteration_time_s <= base["iteration_time_s"] * (1 + 1e-9)
        True
        >>> plan.energy_j < base["energy_j"]
        True
    """
    started = time.perf_counter()
    blocking, source = resolve_blocking_power(blocking_power_w, profile.blocking_power_w, profile.gpu_name)
    profile.check_covers(schedule)
    dag = PipelineDAG(schedule)
    options = {
        key: InstructionOptions(profile.get(*key), 1e-3, blocking, "floor", f"stage {key[0]} {key[1].value}")
        for key in {(i.stage, i.kind) for i in dag.instructions}
    }
    ladders = [options[(i.stage, i.kind)].all_pareto for i in dag.instructions]
    top = [_highest_clock_option(profile, i.stage, i.kind, blocking) for i in dag.instructions]
    base_t, base_e = replay_options(dag, top, blocking)
    target = base_t if time_s is None else float(time_s)
    dag_done = time.perf_counter()
    chosen = lp_plan(dag, ladders, target)
    lp_done = time.perf_counter()
    chosen, _ = repair_to_time(dag, ladders, chosen, target)
    chosen = reclaim_slack(dag, ladders, chosen, target)
    t, e = replay_options(dag, chosen, blocking)
    done = time.perf_counter()
    timing = PlanTiming(dag_done - started, lp_done - dag_done, done - lp_done)
    return FrequencyPlan(
        schedule.name,
        schedule.num_stages,
        schedule.num_microbatches,
        {inst: o.frequency_mhz for inst, o in zip(dag.instructions, chosen)},
        schedule.num_chunks,
        label or ("zero-slowdown" if time_s is None else "deadline"),
        t,
        e,
        profile.simulated,
        {
            "planner": {"method": "lp", "blocking_power_w": blocking, "blocking_power_source": source},
            "baseline": {"iteration_time_s": base_t, "energy_j": base_e},
            "timing": {"dag_s": timing.dag_s, "lp_s": timing.lp_s, "repair_s": timing.repair_s},
        },
    )


def _highest_clock_option(
    profile: InstructionProfile, stage: int, kind: object, blocking_w: float
) -> ExecutionOption:
    m = profile.get(stage, kind)[0]  # type: ignore[arg-type]
    return ExecutionOption(m.frequency_mhz, m.time_s, m.energy_j, m.energy_j - blocking_w * m.time_s, 0)
