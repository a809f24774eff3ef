"""Perseus's files in ``save_dir``: the profile, its metadata, and one plan per pipeline shape and target.

Reading is forgiving: a file that no longer fits is set aside or re-planned, never a reason to stop
training, and nothing is deleted (docs/optimizers/perseus.md, "Files and restarts").
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Sequence

from zeus_core._files import write_atomic
from zeus_core.exceptions import ZeusConfigError, ZeusError, ZeusProfileError
from zeus_core.optimizer.pipeline_frequency._frequency_plan import FrequencyPlan
from zeus_core.optimizer.pipeline_frequency._profile import InstructionProfile
from zeus_core.optimizer.pipeline_frequency._schedule import PipelineSchedule
from zeus_core.optimizer.pipeline_frequency.runtime._observed_schedule import (
    RankInfo,
    check_clocks,
    gpu_names,
)
from zeus_core.optimizer.pipeline_frequency.runtime._plan_target import PlanSettings
from zeus_core.optimizer.pipeline_frequency.runtime._profiler import InstructionProfiler

__all__ = [
    "PROFILE_FILE",
    "PROFILE_META_FILE",
    "plan_file_name",
    "runtime_metadata",
    "load_profile",
    "save_profile",
    "load_plan",
    "save_partial_profile",
]

logger = logging.getLogger(__name__)

#: Profile CSV and its metadata in ``save_dir``.
PROFILE_FILE = "profile.csv"
PROFILE_META_FILE = "profile.json"
_META_VERSION = 1


def plan_file_name(schedule: PipelineSchedule, planning: PlanSettings) -> str:
    """``plan-<schedule>-s<S>-m<M>-<target>.json``."""
    return f"plan-{schedule.name}-s{schedule.num_stages}-m{schedule.num_microbatches}-{planning.label}.json"


def runtime_metadata(schedule: PipelineSchedule, infos: Sequence[RankInfo], **extra: Any) -> dict[str, Any]:
    """What a plan records about the job it was made for (``plan.metadata["runtime"]``)."""
    return {"gpu_names": gpu_names(infos), "stage_orders": schedule.to_text(), **extra}


def _set_aside(*paths: Path) -> str:
    moved = []
    for path in paths:
        if path.exists():
            target = path.with_name(path.name + ".replaced")
            path.replace(target)
            moved.append(str(target))
    return ", ".join(moved)


def load_profile(save_dir: Path, infos: Sequence[RankInfo]) -> tuple[InstructionProfile | None, list[str]]:
    """The saved profile if it was measured on this job's GPUs and stages.

    Returns:
        ``(profile or None, notes)``: notes say why a saved profile was set aside.
    """
    csv_path, meta_path = save_dir / PROFILE_FILE, save_dir / PROFILE_META_FILE
    if not csv_path.exists():
        return None, []
    names, num_stages = gpu_names(infos), infos[0].num_stages
    try:
        meta = json.loads(meta_path.read_text())
        if meta.get("gpu_names") != names or int(meta.get("num_stages", -1)) != num_stages:
            problem = (
                f"was measured on GPUs {meta.get('gpu_names')} with {meta.get('num_stages')} stages, "
                f"but this job runs {names} with {num_stages} stages"
            )
        else:
            return InstructionProfile.from_csv(csv_path), []
    except (OSError, ValueError, ZeusProfileError, ZeusConfigError) as exc:
        problem = f"cannot be used ({exc})"
    moved = _set_aside(csv_path, meta_path)
    return None, [f"The saved profile {csv_path} {problem}; moved to {moved}; profiling again."]


def save_profile(
    save_dir: Path, profile: InstructionProfile, schedule: PipelineSchedule, infos: Sequence[RankInfo]
) -> None:
    """Write ``profile.csv`` and ``profile.json`` (rank 0)."""
    profile.to_csv(save_dir / PROFILE_FILE)
    meta = {
        "version": _META_VERSION,
        "num_stages": schedule.num_stages,
        "gpu_names": gpu_names(infos),
        "gpu_name": profile.gpu_name,
        "simulated": profile.simulated,
        "blocking_power_w": profile.blocking_power_w,
        "frequencies_mhz": {
            str(s): sorted({m.frequency_mhz for k in profile.keys() if k[0] == s for m in profile.get(*k)})[
                ::-1
            ]
            for s in profile.stages
        },
    }
    write_atomic(save_dir / PROFILE_META_FILE, json.dumps(meta, indent=1))


def load_plan(
    path: Path, schedule: PipelineSchedule, infos: Sequence[RankInfo]
) -> tuple[FrequencyPlan | None, str | None]:
    """A saved plan if it fits this job (GPUs, instruction order, shape, clocks).

    Returns:
        ``(plan, None)``, or ``(None, why not)`` when the file is corrupt or made for another job.
    """
    try:
        plan = FrequencyPlan.load(path)
        meta = plan.metadata.get("runtime", {})
        if meta.get("gpu_names") != gpu_names(infos):
            return None, f"{path} was planned for GPUs {meta.get('gpu_names')}, not {gpu_names(infos)}."
        plan.check_matches(schedule)
        if meta.get("stage_orders") != schedule.to_text():
            return None, f"{path} was planned for another instruction order:\n{meta.get('stage_orders')}"
        check_clocks(plan, infos)
    except ZeusProfileError as exc:
        return None, f"{path} cannot be used: {exc}"
    return plan, None


def save_partial_profile(save_dir: Path, profiler: InstructionProfiler, rank: int, gpu_name: str) -> str:
    """Keep what one rank profiled before training ended: ``profile-partial-stage<s>-rank<r>.csv``.

    Returns:
        A sentence for the user: where the partial profile is, or why it could not be saved.
    """
    path = save_dir / f"profile-partial-stage{profiler.stage}-rank{rank}.csv"
    try:
        InstructionProfile.from_rows(
            profiler.rows(),
            gpu_name=gpu_name,
            simulated=profiler.simulated,
            blocking_power_w=profiler.blocking_power_w(),
        ).to_csv(path)
    except (OSError, ZeusError) as exc:
        return f"Saving the partial profile to {path} failed: {exc}."
    return f"The partial profile ({len(profiler.frequencies())} clocks) is in {path}."
