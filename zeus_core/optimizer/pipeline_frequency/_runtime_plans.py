"""Rank-0 decisions of :class:`~.runtime.PerseusRuntime`: the observed schedule, saved files, planning.

Everything here is plain data in, plain data out, so the runtime's collectives only carry
picklable values (:class:`RankInfo`, :class:`RankProfile`, :class:`Decision`). Any failure on rank
0 becomes a :class:`Decision` with an ``error`` that every rank raises, so no rank waits forever.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from zeus_core import console
from zeus_core.device.base import GPU
from zeus_core.exceptions import ZeusConfigError, ZeusDeviceNotFoundError, ZeusError, ZeusProfileError
from zeus_core.optimizer.pipeline_frequency.blocking_power import resolve_blocking_power
from zeus_core.optimizer.pipeline_frequency.controller import ControlMode
from zeus_core.optimizer.pipeline_frequency.plan import FrequencyPlan
from zeus_core.optimizer.pipeline_frequency.profile import InstructionProfile
from zeus_core.optimizer.pipeline_frequency.schedule import (
    SCHEDULES,
    Instruction,
    InstructionKind,
    PipelineSchedule,
    make_schedule,
)

__all__ = [
    "PlanTarget",
    "PlanSettings",
    "RankInfo",
    "RankProfile",
    "Decision",
    "PROFILE_FILE",
    "PROFILE_META_FILE",
    "plan_file_name",
    "auto_unit_time",
    "resolve_gpu",
    "schedule_of",
    "decide_after_discovery",
    "decide_after_profiling",
    "describe_plan",
]

logger = logging.getLogger(__name__)

#: Profile CSV and its metadata in ``save_dir``.
PROFILE_FILE = "profile.csv"
PROFILE_META_FILE = "profile.json"
_META_VERSION = 1


class PlanTarget(str, enum.Enum):
    """Which point of the time–energy frontier to run.

    Attributes:
        ZERO_SLOWDOWN: Least energy with no slowdown versus the highest clocks (Perseus's default).
        LEAST_ENERGY: Least energy at any iteration time.
        DEADLINE: Least energy for an iteration of ``deadline_s`` (a deadline, or a straggler's time).
    """

    ZERO_SLOWDOWN = "zero-slowdown"
    LEAST_ENERGY = "least-energy"
    DEADLINE = "deadline"


@dataclass(frozen=True)
class PlanSettings:
    """What rank 0 plans for.

    Args:
        target: A :class:`PlanTarget` (``"zero-slowdown"``, ``"least-energy"``, ``"deadline"``).
        deadline_s: Iteration time to plan for, s (sets ``target`` to ``"deadline"``).
        unit_time_s: The planner's time quantum, s; ``None``: 1 ms, or a twentieth of the shortest
            profiled instruction where that is shorter.
        blocking_power_w: GPU power while blocked on communication, W; ``None``: measured while
            profiling (rank average), else the GPUs' idle power (a simulated GPU's model, or the
            documented figure of :mod:`.blocking_power`), never a silent 0 W.

    Raises:
        ZeusConfigError: Unknown target, a deadline target without ``deadline_s``, or a bad value.

    Example:
        >>> PlanSettings(deadline_s=0.35).label
        'deadline-0.35s'
    """

    target: PlanTarget | str = PlanTarget.ZERO_SLOWDOWN
    deadline_s: float | None = None
    unit_time_s: float | None = None
    blocking_power_w: float | None = None

    def __post_init__(self) -> None:
        try:
            target = PlanTarget(self.target)
        except ValueError:
            raise ZeusConfigError(
                f"PlanSettings(target={self.target!r}): use one of {[t.value for t in PlanTarget]}."
            ) from None
        if self.deadline_s is not None:
            if self.deadline_s <= 0:
                raise ZeusConfigError(f"PlanSettings(deadline_s={self.deadline_s}): must be > 0 s.")
            if target is PlanTarget.LEAST_ENERGY:
                raise ZeusConfigError(
                    "PlanSettings: pass either target='least-energy' or deadline_s, not both."
                )
            target = PlanTarget.DEADLINE
        elif target is PlanTarget.DEADLINE:
            raise ZeusConfigError("PlanSettings(target='deadline'): also pass deadline_s (s).")
        if self.unit_time_s is not None and self.unit_time_s <= 0:
            raise ZeusConfigError(f"PlanSettings(unit_time_s={self.unit_time_s}): must be > 0 s.")
        if self.blocking_power_w is not None and self.blocking_power_w < 0:
            raise ZeusConfigError(f"PlanSettings(blocking_power_w={self.blocking_power_w}): must be >= 0 W.")
        object.__setattr__(self, "target", target)

    @property
    def label(self) -> str:
        """Short name used as the plan label and in file names."""
        if self.target is PlanTarget.DEADLINE:
            return f"deadline-{self.deadline_s:g}s"
        return PlanTarget(self.target).value


@dataclass(frozen=True)
class RankInfo:
    """What one rank tells rank 0 after discovery."""

    rank: int
    stage: int
    num_stages: int
    schedule: str
    gpu_name: str
    simulated: bool
    supported_mhz: tuple[int, ...]
    order: tuple[tuple[str, int], ...]
    sweep_error: str | None = None
    mode: str = ControlMode.CONTROL.value
    idle_power_w: float | None = None


@dataclass(frozen=True)
class RankProfile:
    """One rank's profiling result: profile CSV rows and measured blocking power (W or ``None``)."""

    stage: int
    rows: list[tuple[int, str, int, float, float]]
    blocking_power_w: float | None


@dataclass(frozen=True)
class Decision:
    """Rank 0's decision, broadcast to all ranks: a plan to apply (as a dict), profile, or an error."""

    plan: dict[str, Any] | None = None
    profile_csv: str | None = None
    error: str | None = None
    source: str = ""


def plan_file_name(schedule: PipelineSchedule, planning: PlanSettings) -> str:
    """``plan-<schedule>-s<S>-m<M>-<target>.json``."""
    return f"plan-{schedule.name}-s{schedule.num_stages}-m{schedule.num_microbatches}-{planning.label}.json"


def resolve_gpu(gpu: GPU | int | None) -> GPU:
    """The GPU object for ``gpu`` (an object, an index, or ``None``: current CUDA device / ``LOCAL_RANK``).

    Raises:
        ZeusDeviceNotFoundError: No such GPU is visible.
    """
    if isinstance(gpu, GPU):
        return gpu
    if gpu is None:
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            gpu = int(torch.cuda.current_device())
        else:
            gpu = int(os.environ.get("LOCAL_RANK", "0"))
    from zeus_core.device.discovery import get_gpus

    gpus = get_gpus()
    for g in gpus:
        if g.index == gpu:
            return g
    raise ZeusDeviceNotFoundError(
        f"PerseusRuntime(gpu={gpu}): this process sees GPUs {[g.index for g in gpus]}. Pass the index of the "
        "GPU this stage runs on, or a GPU object (e.g. a SimulatedGPU on machines without GPUs)."
    )


def _by_stage(infos: Sequence[RankInfo]) -> dict[int, list[RankInfo]]:
    sizes = sorted({i.num_stages for i in infos})
    if len(sizes) != 1:
        raise ZeusConfigError(f"Ranks disagree on the number of pipeline stages: {sizes}.")
    groups: dict[int, list[RankInfo]] = {}
    for info in infos:
        groups.setdefault(info.stage, []).append(info)
    missing = sorted(set(range(sizes[0])) - set(groups))
    if missing:
        raise ZeusConfigError(
            f"No rank runs pipeline stage(s) {missing} of {sizes[0]}; attach a PerseusRuntime on every rank."
        )
    return groups


def schedule_of(infos: Sequence[RankInfo]) -> PipelineSchedule:
    """The pipeline schedule the ranks actually ran in their discovery iteration.

    Raises:
        ZeusConfigError: Ranks of one stage ran different orders, or the orders do not form a
            pipeline iteration (an instruction missing or repeated).
    """
    groups = _by_stage(infos)
    orders = []
    for stage in sorted(groups):
        seen = {g.order for g in groups[stage]}
        if len(seen) > 1:
            raise ZeusConfigError(
                f"Ranks of pipeline stage {stage} ran different instruction orders: {sorted(seen)}."
            )
        orders.append(tuple(Instruction(stage, InstructionKind(k), m) for k, m in groups[stage][0].order))
    no_backward = [s for s, o in enumerate(orders) if all(i.kind is InstructionKind.FORWARD for i in o)]
    if no_backward:
        raise ZeusConfigError(
            f"Pipeline stage(s) {no_backward} ran no backward instruction in the first training iteration. "
            "With torch.distributed.pipelining, build the schedule with loss_fn on every rank (backward only "
            "runs where it is set)."
        )
    num_mb = sum(1 for i in orders[0] if i.kind is InstructionKind.FORWARD)
    name = infos[0].schedule
    try:
        schedule = PipelineSchedule(name, len(orders), num_mb, tuple(orders))
    except ZeusConfigError as exc:
        text = "\n".join(f"stage {s}: " + " ".join(i.short_name for i in o) for s, o in enumerate(orders))
        raise ZeusConfigError(
            f"The instructions seen in the first iteration do not form one pipeline iteration "
            f"({exc}):\n{text}\nAttach the hook before the first training step, on every rank."
        ) from exc
    if name in SCHEDULES:
        textbook = make_schedule(name, schedule.num_stages, num_mb)
        if textbook.stage_orders != schedule.stage_orders:
            logger.warning(
                "The observed order differs from textbook %s; planning for the observed order:\n%s",
                name,
                schedule.to_text(),
            )
    return schedule


def _gpu_names(infos: Sequence[RankInfo]) -> dict[str, str]:
    names: dict[str, str] = {}
    for stage, group in sorted(_by_stage(infos).items()):
        kinds = sorted({g.gpu_name for g in group})
        if len(kinds) > 1:
            raise ZeusConfigError(
                f"Pipeline stage {stage} runs on different GPU models {kinds}; one plan cannot fit both."
            )
        names[str(stage)] = kinds[0]
    return names


def _supported(infos: Sequence[RankInfo]) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for info in infos:
        clocks = set(info.supported_mhz)
        out[info.stage] = out[info.stage] & clocks if info.stage in out else clocks
    return out


def _check_clocks(plan: FrequencyPlan, infos: Sequence[RankInfo]) -> None:
    supported = _supported(infos)
    plan.validate({(s, k): clocks for s, clocks in supported.items() for k in InstructionKind})


def _runtime_meta(schedule: PipelineSchedule, infos: Sequence[RankInfo], **extra: Any) -> dict[str, Any]:
    return {"gpu_names": _gpu_names(infos), "stage_orders": schedule.to_text(), **extra}


def _check_saved_plan(
    plan: FrequencyPlan, path: Path, schedule: PipelineSchedule, infos: Sequence[RankInfo]
) -> None:
    meta = plan.metadata.get("runtime", {})
    names = _gpu_names(infos)
    if meta.get("gpu_names") != names:
        raise ZeusProfileError(
            f"{path} was planned for GPUs {meta.get('gpu_names')} but this job runs on {names}. "
            f"Delete it (and {PROFILE_FILE}) or pass another save_dir to profile this hardware."
        )
    plan.check_matches(schedule)
    if meta.get("stage_orders") != schedule.to_text():
        raise ZeusProfileError(
            f"{path} was planned for the instruction order\n{meta.get('stage_orders')}\nbut this job runs\n"
            f"{schedule.to_text()}\nDelete the plan file to plan again from the saved profile."
        )
    _check_clocks(plan, infos)


def _load_saved_profile(
    save_dir: Path, infos: Sequence[RankInfo]
) -> tuple[InstructionProfile, float | None] | None:
    csv_path, meta_path = save_dir / PROFILE_FILE, save_dir / PROFILE_META_FILE
    if not csv_path.exists():
        return None
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ZeusProfileError(
            f"{csv_path} exists but its metadata {meta_path} cannot be read ({exc}), so the GPUs it "
            "was measured on are unknown. Delete both files to profile again."
        ) from exc
    names = _gpu_names(infos)
    num_stages = infos[0].num_stages
    if meta.get("gpu_names") != names or int(meta.get("num_stages", -1)) != num_stages:
        raise ZeusProfileError(
            f"{csv_path} was measured on GPUs {meta.get('gpu_names')} with {meta.get('num_stages')} "
            f"stages, but this job runs {names} with {num_stages} stages. Delete {csv_path} and "
            f"{meta_path} (or pass another save_dir) to profile again."
        )
    profile = InstructionProfile.from_csv(
        csv_path, gpu_name=meta.get("gpu_name", ""), simulated=bool(meta.get("simulated", False))
    )
    return profile, meta.get("blocking_power_w")


def _make_plan(
    schedule: PipelineSchedule,
    profile: InstructionProfile,
    blocking_w: float,
    planning: PlanSettings,
    infos: Sequence[RankInfo],
) -> FrequencyPlan:
    from zeus_core.optimizer.pipeline_frequency.frontier import plan_frontier

    deadline = planning.deadline_s if planning.target is PlanTarget.DEADLINE else None
    unit_s = planning.unit_time_s or auto_unit_time(profile)
    frontier = plan_frontier(
        schedule,
        profile,
        unit_time_s=unit_s,
        blocking_power_w=blocking_w,
        stop_at_time_s=deadline,
    )
    if planning.target is PlanTarget.DEADLINE:
        plan = frontier.plan_for_time(float(deadline), label=planning.label)  # type: ignore[arg-type]
    elif planning.target is PlanTarget.LEAST_ENERGY:
        plan = frontier.least_energy_plan()
    else:
        plan = frontier.zero_slowdown_plan()
    base = frontier.max_frequency_plan()
    plan.label = planning.label
    plan.metadata["runtime"] = _runtime_meta(
        schedule,
        infos,
        target=planning.label,
        unit_time_s=unit_s,
        blocking_power_w=blocking_w,
        baseline_time_s=base.iteration_time_s,
        baseline_energy_j=base.energy_j,
    )
    _check_clocks(plan, infos)
    return plan


def auto_unit_time(profile: InstructionProfile) -> float:
    """The planner's time quantum for ``profile``: 1 ms, or 1/20 of its shortest instruction, s."""
    shortest = min(m.time_s for key in profile.keys() for m in profile.get(*key))
    return min(1e-3, shortest / 20)


def _max_plan(schedule: PipelineSchedule, infos: Sequence[RankInfo]) -> FrequencyPlan:
    top = {s: max(c) for s, c in _supported(infos).items()}
    return FrequencyPlan(
        schedule.name,
        schedule.num_stages,
        schedule.num_microbatches,
        {i: top[i.stage] for i in schedule.instructions()},
        schedule.num_chunks,
        "max-frequency",
        simulated=any(i.simulated for i in infos),
        metadata={"runtime": _runtime_meta(schedule, infos)},
    )


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
        planning.blocking_power_w, measured_w, " / ".join(_gpu_names(infos).values())
    )
    if source.startswith("documented"):
        console.warn(
            f"Perseus: no rank spent measurable time blocked on communication; planning with the {source}, "
            f"{watts:g} W (set PlanSettings(blocking_power_w=W) to override)."
        )
    return watts


def _failsafe(func: Any) -> Any:
    def wrapped(*args: Any, **kwargs: Any) -> Decision:
        try:
            return func(*args, **kwargs)
        except ZeusError as exc:
            logger.error("Perseus on rank 0: %s", exc)
            return Decision(error=str(exc))
        except Exception as exc:  # a bug must not leave the other ranks waiting in a collective
            logger.exception("Perseus on rank 0 failed.")
            return Decision(error=f"Perseus planning failed on rank 0: {type(exc).__name__}: {exc}")

    wrapped.__doc__, wrapped.__name__ = func.__doc__, func.__name__
    return wrapped


@_failsafe
def decide_after_discovery(
    infos: Sequence[RankInfo],
    planning: PlanSettings,
    mode: ControlMode,
    given: FrequencyPlan | None,
    save_dir: Path | None,
) -> Decision:
    """Rank 0: apply a given or saved plan, plan from a saved profile, or ask every rank to profile."""
    modes = sorted({i.mode for i in infos})
    if len(modes) > 1:
        raise ZeusConfigError(
            f"Ranks run PerseusRuntime in different modes {modes}; use one mode on every rank."
        )
    schedule = schedule_of(infos)
    _gpu_names(infos)  # one GPU model per stage
    if given is not None:
        given.check_matches(schedule)
        _check_clocks(given, infos)
        return Decision(plan=given.to_dict(), source="given plan")
    if save_dir is not None:
        plan_path = save_dir / plan_file_name(schedule, planning)
        saved = _load_saved_profile(save_dir, infos)
        csv_text = saved[0].to_csv_text() if saved else None
        if plan_path.exists():
            plan = FrequencyPlan.load(plan_path)
            _check_saved_plan(plan, plan_path, schedule, infos)
            return Decision(plan=plan.to_dict(), profile_csv=csv_text, source=f"reused {plan_path}")
        if saved is not None:
            profile, blocking = saved
            blocking_w = _blocking_for(planning, blocking, infos)
            plan = _make_plan(schedule, profile, blocking_w, planning, infos)
            plan.save(plan_path)
            return Decision(
                plan=plan.to_dict(), profile_csv=csv_text, source=f"planned from {save_dir / PROFILE_FILE}"
            )
    if mode is ControlMode.MEASURE:
        return Decision(
            plan=_max_plan(schedule, infos).to_dict(),
            source="measure mode without a plan: recording the highest clocks",
        )
    errors = [i.sweep_error for i in infos if i.sweep_error]
    if errors:
        raise ZeusConfigError("Cannot profile: " + "; ".join(errors))
    return Decision(source="profile")


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
    names = _gpu_names(infos)
    simulated = any(i.simulated for i in infos)
    profile = InstructionProfile.from_rows(
        rows, gpu_name=" / ".join(sorted(set(names.values()))), simulated=simulated
    )
    measured = [r.blocking_power_w for r in results if r.blocking_power_w is not None]
    blocking_w = _blocking_for(planning, sum(measured) / len(measured) if measured else None, infos)
    if save_dir is not None:
        profile.to_csv(save_dir / PROFILE_FILE)
        meta = {
            "version": _META_VERSION,
            "num_stages": schedule.num_stages,
            "gpu_names": names,
            "gpu_name": profile.gpu_name,
            "simulated": simulated,
            "blocking_power_w": blocking_w,
            "frequencies_mhz": {
                str(s): sorted({int(f) for st, _, f, _, _ in rows if st == s}, reverse=True)
                for s in range(schedule.num_stages)
            },
        }
        (save_dir / PROFILE_META_FILE).write_text(json.dumps(meta, indent=1))
    plan = _make_plan(schedule, profile, blocking_w, planning, infos)
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
