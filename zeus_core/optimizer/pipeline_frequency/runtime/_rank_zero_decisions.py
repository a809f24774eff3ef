"""Rank 0's decisions for ``PerseusRuntime``: reuse a plan, plan from a profile, or profile.

Plain data in, a :class:`Decision` out, which rank 0 broadcasts; a failure on rank 0 becomes a
decision every rank raises, so no rank waits forever in a collective. The order of the options:
docs/optimizers/perseus.md ("Phases").
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from zeus_core import console
from zeus_core.exceptions import ZeusConfigError, ZeusError, ZeusProfileError
from zeus_core.optimizer.pipeline_frequency._frequency_plan import FrequencyPlan
from zeus_core.optimizer.pipeline_frequency._profile import InstructionProfile
from zeus_core.optimizer.pipeline_frequency._schedule import PipelineSchedule
from zeus_core.optimizer.pipeline_frequency.planner._blocking_power import resolve_blocking_power
from zeus_core.optimizer.pipeline_frequency.runtime._controller import ControlMode
from zeus_core.optimizer.pipeline_frequency.runtime._observed_schedule import (
    RankInfo,
    RankProfile,
    check_clocks,
    gpu_names,
    schedule_of,
    supported_clocks,
)
from zeus_core.optimizer.pipeline_frequency.runtime._plan_target import (
    PlanSettings,
    PlanTarget,
    auto_unit_time,
)
from zeus_core.optimizer.pipeline_frequency.runtime._save_dir import (
    PROFILE_FILE,
    load_plan,
    load_profile,
    plan_file_name,
    runtime_metadata,
    save_profile,
)

__all__ = ["Decision", "decide_after_discovery", "decide_after_profiling", "make_plan", "describe_plan"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Decision:
    """Rank 0's decision, broadcast to all ranks.

    Attributes:
        plan: A plan to apply (as a dict), or ``None``: profile.
        profile_csv: The profile the plan came from, as CSV text.
        error: A message every rank raises as :class:`~zeus_core.exceptions.ZeusProfileError`.
        source: Where the plan came from, in words.
        notes: What the user should be told (shown once, on rank zero).
    """

    plan: dict[str, Any] | None = None
    profile_csv: str | None = None
    error: str | None = None
    source: str = ""
    notes: tuple[str, ...] = ()


def _blocking_for(planning: PlanSettings, measured_w: float | None, infos: Sequence[RankInfo]) -> float:
    """Blocking power to plan with, W: the setting, the measured value, else the GPUs' idle power."""
    if planning.blocking_power_w is None and measured_w is None:
        idle = [i.idle_power_w for i in infos if i.idle_power_w is not None]
        if idle:
            console.warn(
                "Perseus: no rank spent measurable time blocked on communication; planning with the GPUs' "
                f"idle power {max(idle):g} W as blocking power (PlanSettings(blocking_power_w=W) overrides)."
            )
            return max(idle)
    watts, source = resolve_blocking_power(
        planning.blocking_power_w, measured_w, " / ".join(gpu_names(infos).values())
    )
    if source.startswith("documented"):
        console.warn(
            f"Perseus: no rank spent measurable time blocked on communication; planning with the {source}, "
            f"{watts:g} W (PlanSettings(blocking_power_w=W) overrides)."
        )
    return watts


def make_plan(
    schedule: PipelineSchedule,
    profile: InstructionProfile,
    blocking_w: float,
    planning: PlanSettings,
    infos: Sequence[RankInfo],
) -> FrequencyPlan:
    """Plan ``schedule`` from ``profile`` for ``planning``'s target; checked against the GPUs' clocks.

    Raises:
        ZeusConfigError: The target cannot be met (e.g. a deadline shorter than the fastest plan).
        ZeusProfileError: The profile does not cover the schedule, or a planned clock is unsupported.
    """
    from zeus_core.optimizer.pipeline_frequency.planner._frontier import plan_frontier

    deadline = planning.deadline_s if planning.target is PlanTarget.DEADLINE else None
    unit_s = planning.unit_time_s or auto_unit_time(profile)
    frontier = plan_frontier(
        schedule, profile, unit_time_s=unit_s, blocking_power_w=blocking_w, stop_at_time_s=deadline
    )
    if deadline is not None:
        plan = frontier.plan_for_time(float(deadline), label=planning.label)
    elif planning.target is PlanTarget.LEAST_ENERGY:
        plan = frontier.least_energy_plan()
    else:
        plan = frontier.zero_slowdown_plan()
    base = frontier.max_frequency_plan()
    plan.label = planning.label
    plan.metadata["runtime"] = runtime_metadata(
        schedule,
        infos,
        target=planning.label,
        unit_time_s=unit_s,
        blocking_power_w=blocking_w,
        baseline_time_s=base.iteration_time_s,
        baseline_energy_j=base.energy_j,
    )
    check_clocks(plan, infos)
    return plan


def _max_plan(schedule: PipelineSchedule, infos: Sequence[RankInfo]) -> FrequencyPlan:
    top = {s: max(c) for s, c in supported_clocks(infos).items()}
    return FrequencyPlan(
        schedule.name,
        schedule.num_stages,
        schedule.num_microbatches,
        {i: top[i.stage] for i in schedule.instructions()},
        schedule.num_chunks,
        "max-frequency",
        simulated=any(i.simulated for i in infos),
        metadata={"runtime": runtime_metadata(schedule, infos)},
    )


def _failsafe(func: Callable[..., Decision]) -> Callable[..., Decision]:
    @functools.wraps(func)
    def wrapped(*args: Any, **kwargs: Any) -> Decision:
        try:
            return func(*args, **kwargs)
        except ZeusError as exc:
            logger.error("Perseus on rank 0: %s", exc)
            return Decision(error=str(exc))
        except Exception as exc:  # a bug must not leave the other ranks waiting in a collective
            logger.exception("Perseus on rank 0 failed.")
            return Decision(error=f"Perseus planning failed on rank 0: {type(exc).__name__}: {exc}")

    return wrapped


def _given_plan(given: FrequencyPlan, schedule: PipelineSchedule, infos: Sequence[RankInfo]) -> str | None:
    """Why a given plan does not fit the observed pipeline (``None``: it fits; bad clocks raise)."""
    try:
        given.check_matches(schedule)
    except ZeusProfileError as exc:
        return f"The given plan does not fit this pipeline ({exc})"
    check_clocks(given, infos)
    return None


@_failsafe
def decide_after_discovery(
    infos: Sequence[RankInfo],
    planning: PlanSettings,
    mode: ControlMode,
    given: FrequencyPlan | None,
    save_dir: Path | None,
    profile_csv: str | None = None,
) -> Decision:
    """Rank 0: apply a given or saved plan, plan from a saved or in-memory profile, or ask to profile.

    Args:
        infos: Every rank's report.
        planning: What to plan for.
        mode: The ranks' control mode.
        given: A plan the user gave.
        save_dir: Folder of saved profiles and plans.
        profile_csv: A profile already measured in this run (CSV text), e.g. before the
            pipeline's shape changed.
    """
    modes = sorted({i.mode for i in infos})
    if len(modes) > 1:
        raise ZeusConfigError(
            f"Ranks run PerseusRuntime in different modes {modes}; use one mode on every rank."
        )
    schedule = schedule_of(infos)
    gpu_names(infos)  # one GPU model per stage
    notes: list[str] = []
    if given is not None:
        problem = _given_plan(given, schedule, infos)
        if problem is None:
            return Decision(plan=given.to_dict(), source="given plan")
        notes.append(problem + "; using a saved or new plan instead.")
    profile = InstructionProfile.from_csv_text(profile_csv, "profile of this run") if profile_csv else None
    plan_path = None
    if save_dir is not None:
        saved, set_aside = load_profile(save_dir, infos)
        notes += set_aside
        profile = profile or saved
        plan_path = save_dir / plan_file_name(schedule, planning)
        if plan_path.exists():
            plan, problem = load_plan(plan_path, schedule, infos)
            csv_text = profile.to_csv_text() if profile else None
            if plan is not None:
                return Decision(plan.to_dict(), csv_text, source=f"reused {plan_path}", notes=tuple(notes))
            notes.append(f"{problem}\nPlanning again" + (" from the profile." if profile else "."))
    if profile is not None:
        plan = make_plan(
            schedule, profile, _blocking_for(planning, profile.blocking_power_w, infos), planning, infos
        )
        if plan_path is not None:
            plan.save(plan_path)
        source = f"planned from {save_dir / PROFILE_FILE}" if save_dir else "planned from this run's profile"
        return Decision(plan.to_dict(), profile.to_csv_text(), source=source, notes=tuple(notes))
    if mode is ControlMode.MEASURE:
        return Decision(
            plan=_max_plan(schedule, infos).to_dict(),
            source="measure mode without a plan: recording the highest clocks",
            notes=tuple(notes),
        )
    errors = [i.sweep_error for i in infos if i.sweep_error]
    if errors:
        raise ZeusConfigError("Cannot profile: " + "; ".join(errors))
    return Decision(source="profile", notes=tuple(notes))


@_failsafe
def decide_after_profiling(
    infos: Sequence[RankInfo],
    results: Sequence[RankProfile],
    planning: PlanSettings,
    save_dir: Path | None,
) -> Decision:
    """Rank 0: merge the ranks' rows into one profile, plan, save both."""
    schedule = schedule_of(infos)
    rows = [row for r in results for row in r.rows]
    names = gpu_names(infos)
    measured = [r.blocking_power_w for r in results if r.blocking_power_w is not None]
    blocking_w = _blocking_for(planning, sum(measured) / len(measured) if measured else None, infos)
    profile = InstructionProfile.from_rows(
        rows,
        gpu_name=" / ".join(sorted(set(names.values()))),
        simulated=any(i.simulated for i in infos),
        blocking_power_w=blocking_w,
    )
    if save_dir is not None:
        save_profile(save_dir, profile, schedule, infos)
    plan = make_plan(schedule, profile, blocking_w, planning, infos)
    if save_dir is not None:
        plan.save(save_dir / plan_file_name(schedule, planning))
    return Decision(plan=plan.to_dict(), profile_csv=profile.to_csv_text(), source="profiled")


def describe_plan(plan: FrequencyPlan) -> str:
    """One line: predicted time and energy versus the highest clocks (where known)."""
    meta = plan.metadata.get("runtime", {})
    base_t, base_e = meta.get("baseline_time_s"), meta.get("baseline_energy_j")
    if plan.iteration_time_s is None or plan.energy_j is None or not base_t or not base_e:
        return "no prediction"
    return (
        f"predicted {plan.iteration_time_s:.4g} s and {plan.energy_j:.4g} J per iteration; at the highest "
        f"clocks {base_t:.4g} s and {base_e:.4g} J ({100 * (1 - plan.energy_j / base_e):.1f}% less energy)"
    )
