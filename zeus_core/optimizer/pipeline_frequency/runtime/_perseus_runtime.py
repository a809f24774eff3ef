"""PerseusRuntime: profile, plan and apply per-instruction GPU clocks inside real training.

One runtime per pipeline stage, driven by a hook of :mod:`zeus_integrations.pipeline`. Its phases,
rank 0's decisions and the files it keeps: docs/optimizers/perseus.md ("The runtime").
"""

from __future__ import annotations

import collections
import logging
import os
import sys
from pathlib import Path
from typing import Any, Deque

from zeus_core import _distributed as distributed
from zeus_core import console
from zeus_core.callback import TrainingCallback
from zeus_core.device._base import GPU
from zeus_core.exceptions import ZeusConfigError, ZeusDeviceNotFoundError, ZeusError, ZeusProfileError
from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.optimizer.pipeline_frequency._frequency_plan import FrequencyPlan
from zeus_core.optimizer.pipeline_frequency._profile import InstructionProfile
from zeus_core.optimizer.pipeline_frequency._schedule import InstructionKind
from zeus_core.optimizer.pipeline_frequency.runtime._controller import ControlMode, FrequencyController
from zeus_core.optimizer.pipeline_frequency.runtime._observed_schedule import (
    RankInfo,
    RankProfile,
    schedule_of,
)
from zeus_core.optimizer.pipeline_frequency.runtime._phases import (
    ApplyingPhase,
    DiscoveryPhase,
    ProfilingPhase,
    RuntimePhase,
)
from zeus_core.optimizer.pipeline_frequency.runtime._plan_target import PlanSettings
from zeus_core.optimizer.pipeline_frequency.runtime._profiler import (
    FrequencySweep,
    InstructionProfiler,
    profiler_window_name,
)
from zeus_core.optimizer.pipeline_frequency.runtime._rank_zero_decisions import (
    Decision,
    decide_after_discovery,
    decide_after_profiling,
    describe_plan,
)
from zeus_core.optimizer.pipeline_frequency.runtime._records import InstructionRecord, IterationRecord
from zeus_core.optimizer.pipeline_frequency.runtime._save_dir import save_partial_profile
from zeus_core.optimizer.pipeline_frequency.runtime._stage_plan import StagePlan

__all__ = ["PerseusRuntime", "resolve_gpu"]

logger = logging.getLogger(__name__)

_STATE_VERSION = 1
_ITERATION_WINDOW = profiler_window_name("runtime_iteration")


class PerseusRuntime(TrainingCallback):
    """Perseus in training: profiles instructions, plans on rank 0, applies the plan on every rank.

    Clocks are restored by :meth:`close` (also ``on_train_end``, the context manager's exit,
    interpreter exit and SIGTERM/SIGINT). Rank 0 (global) writes the files and logs.

    Args:
        gpu: The GPU this process computes on: a :class:`~zeus_core.device._base.GPU`, an index,
            or ``None`` for the current CUDA device (else ``LOCAL_RANK``).
        mode: ``"control"`` locks clocks; ``"measure"`` records the clocks it would set and
            changes nothing (it never profiles; it uses a given or saved plan, else the highest clock).
        sweep: Clocks to profile (:class:`FrequencySweep`; default: adaptive).
        planning: What to plan for (:class:`PlanSettings`: target, deadline, time unit, blocking power).
        plan: A plan to apply instead of profiling (object or JSON path); checked against the
            observed pipeline and the GPU's clocks.
        save_dir: Folder for the profile and plans (written by rank 0, read on restart).
        warmup_iterations: Untouched iterations before anything else (at least 1).
        history: Iteration records kept in :attr:`iterations`.

    Raises:
        ZeusConfigError: A bad argument.
        ZeusProfileError: From :meth:`end_iteration`, on every rank: rank 0 rejected a file or
            could not plan (clocks are restored first).

    Attributes:
        iterations: Recent :class:`IterationRecord` s, oldest first.
        profile: The profile the plan came from (on every rank), or ``None``.

    Example:
        Normally a hook from :mod:`zeus_integrations.pipeline` makes these calls:

        >>> from zeus_core.optimizer.pipeline_frequency import FrequencyPlan, synchronous_1f1b
        >>> from zeus_core.testing import PhysicalModel, SimulatedGPU
        >>> gpu = SimulatedGPU(PhysicalModel.a40(), busy=True)
        >>> runtime = PerseusRuntime(gpu, plan=FrequencyPlan.uniform(synchronous_1f1b(1, 1), 1200))
        >>> runtime.set_pipeline(stage=0, num_stages=1)
        >>> with runtime:
        ...     for _ in range(2):  # discovery, then the plan
        ...         runtime.begin_iteration()
        ...         for kind in ("forward", "backward"):
        ...             runtime.begin_instruction(kind, 0); runtime.end_instruction(kind, 0)
        ...         runtime.end_iteration()
        >>> runtime.phase.name, [i.frequency_mhz for i in runtime.iterations[-1].instructions]
        ('applying', [1200, 1200])
        >>> gpu.locked_sm_frequency is None  # restored on close
        True
    """

    def __init__(
        self,
        gpu: GPU | int | None = None,
        *,
        mode: ControlMode | str = ControlMode.CONTROL,
        sweep: FrequencySweep | None = None,
        planning: PlanSettings | None = None,
        plan: FrequencyPlan | str | Path | None = None,
        save_dir: str | Path | None = None,
        warmup_iterations: int = 1,
        history: int = 100,
    ) -> None:
        if warmup_iterations < 1:
            raise ZeusConfigError(
                f"PerseusRuntime(warmup_iterations={warmup_iterations}): at least 1 iteration is needed to "
                "see the stage's instruction order."
            )
        if history < 1:
            raise ZeusConfigError(f"PerseusRuntime(history={history}): keep at least 1 iteration record.")
        self.mode = ControlMode.parse(mode)
        self.sweep = sweep or FrequencySweep()
        self.planning = planning or PlanSettings()
        self._gpu_arg = gpu
        self._given_plan = _load_given_plan(plan) if isinstance(plan, (str, Path)) else plan
        self.save_dir = Path(save_dir) if save_dir is not None else None
        self.warmup_iterations = warmup_iterations
        self.iterations: Deque[IterationRecord] = collections.deque(maxlen=history)
        self.profile: InstructionProfile | None = None
        self.stage: int | None = None
        self.num_stages: int | None = None
        self.schedule_name: str | None = None
        self._phase: RuntimePhase = DiscoveryPhase(warmup_iterations)
        self._gpu: GPU | None = None
        self._monitor: ZeusMonitor | None = None
        self._controller: FrequencyController | None = None
        self._profiler: InstructionProfiler | None = None
        self._sweep_mhz: list[int] = []
        self._stage_plan: StagePlan | None = None  # while applying
        self._in_iteration = False
        self._iteration = 0
        self._records: list[InstructionRecord] = []
        self._counts: dict[tuple[InstructionKind, int], int] = {}
        self._open: tuple[InstructionKind, int] | None = None
        self._unfinished_warned = False
        self._warned: set[str] = set()  # once-only warnings of this runtime's stage plans
        self.framework = ""
        self._infos: list[RankInfo] = []

    # -- configuration -------------------------------------------------------------------------
    def set_pipeline(
        self, stage: int, num_stages: int, schedule: str | None = None, framework: str | None = None
    ) -> None:
        """Tell the runtime which stage this process runs (the framework hooks call this).

        Args:
            stage: This process's pipeline stage, from 0.
            num_stages: Pipeline stages.
            schedule: The framework's schedule name (``"1f1b"``, ``"gpipe"``), for file names
                and a check against the observed order.
            framework: The hook's framework (``"torch"``, ``"deepspeed"``, ``"megatron"``), so
                error messages name the fix for it.

        Raises:
            ZeusConfigError: Out of range, or different from an earlier call.
        """
        if not 0 <= stage < num_stages:
            raise ZeusConfigError(
                f"PerseusRuntime.set_pipeline(stage={stage}, num_stages={num_stages}): "
                "need 0 <= stage < num_stages."
            )
        if self.stage is not None and (self.stage, self.num_stages) != (stage, num_stages):
            raise ZeusConfigError(
                f"PerseusRuntime.set_pipeline({stage}, {num_stages}): already attached as stage "
                f"{self.stage} of {self.num_stages}. Use one runtime per pipeline stage."
            )
        self.stage, self.num_stages = int(stage), int(num_stages)
        self.schedule_name = (schedule or self.schedule_name or "observed").lower()
        self.framework = framework or self.framework

    @property
    def phase(self) -> RuntimePhase:
        """The current phase (:class:`DiscoveryPhase`, :class:`ProfilingPhase` or :class:`ApplyingPhase`)."""
        return self._phase

    @property
    def plan(self) -> FrequencyPlan | None:
        """The plan being applied, or ``None`` before it exists."""
        return self._phase.plan if isinstance(self._phase, ApplyingPhase) else None

    @property
    def controller(self) -> FrequencyController | None:
        """The clock controller (after :meth:`start`)."""
        return self._controller

    @property
    def gpu(self) -> GPU | None:
        """The GPU this process computes on (after :meth:`start`)."""
        return self._gpu

    # -- lifetime -------------------------------------------------------------------------------
    def start(self) -> None:
        """Resolve the GPU and start the controller (idempotent; the first iteration calls it too).

        Raises:
            ZeusPermissionError: In control mode, the process may not lock clocks.
        """
        if self._controller is not None and self._controller.active:
            return
        gpu = self._gpu = resolve_gpu(self._gpu_arg)
        if self._monitor is None:
            self._monitor = ZeusMonitor(gpus=[gpu], cpu_indices=[])
        self._controller = FrequencyController(gpu, self.mode)
        self._controller.start()

    def close(self) -> None:
        """Restore the GPU's clocks and stop measuring (idempotent).

        Closing before a plan exists warns (on rank zero) and saves what was profiled so far.
        """
        try:
            self._warn_unfinished()
            if self._controller is not None:
                self._controller.close()
        finally:
            if self._monitor is not None:
                self._monitor.close()
                self._monitor = None
            self._in_iteration = False

    def _warn_unfinished(self) -> None:
        """Training ends before a plan: say so once, and keep this rank's partial profile."""
        phase = self._phase
        if self._unfinished_warned or self._iteration == 0 or isinstance(phase, ApplyingPhase):
            return
        self._unfinished_warned = True
        saved = ""
        if self._profiler is not None and self._profiler.measurements and self.save_dir is not None:
            name = self._gpu.name if self._gpu else ""
            saved = " " + save_partial_profile(self.save_dir, self._profiler, distributed.rank(), name)
        budget = self.warmup_iterations + self.sweep.iterations_per_frequency * (
            self.sweep.max_frequencies if self.sweep.adaptive else len(self._sweep_mhz) or 1
        )
        console.warn(
            f"Perseus: training ended after {self._iteration} iteration(s), while {phase.name}, before a "
            f"frequency plan was made; clocks were not optimised.{saved} Run at least {budget} iterations "
            "(or pass a plan) for Perseus to plan."
        )

    def __enter__(self) -> "PerseusRuntime":
        self.start()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self._close_quietly()

    def _close_quietly(self) -> None:
        """Close while another error is in flight: a failing restore is logged, not raised over it."""
        self._unfinished_warned = True  # the error says what happened; no "ended before a plan" too
        try:
            self.close()
        except Exception:
            logger.exception("Restoring GPU %s's clocks failed.", getattr(self._gpu, "index", "?"))

    def on_train_begin(self) -> None:
        """Training starts: :meth:`start`."""
        self.start()

    def on_train_end(self) -> None:
        """Training ended (normally or not): :meth:`close`."""
        self.close()

    # -- iteration boundaries -------------------------------------------------------------------
    def begin_iteration(self) -> None:
        """An iteration (optimizer step) of the pipeline starts on this rank.

        Raises:
            ZeusConfigError: :meth:`set_pipeline` was never called.
        """
        if self.stage is None:
            raise ZeusConfigError(
                "PerseusRuntime: the pipeline stage is unknown; attach a framework hook "
                "(zeus_integrations.pipeline) or call set_pipeline(stage, num_stages) first."
            )
        self.start()
        assert self._monitor is not None and self._controller is not None
        self._in_iteration = True
        self._records, self._counts, self._open = [], {}, None
        phase = self._phase
        if isinstance(phase, ProfilingPhase):
            mhz = self._sweep_mhz[phase.index] if phase.measuring else self._sweep_mhz[0]
            self._controller.request(mhz, tag="profile")
            if not self._controller.wait():
                logger.warning("GPU %s did not reach %d MHz in time; profiling anyway.", self.stage, mhz)
            if phase.measuring:
                self._profiler_for().begin_iteration(mhz)
        elif isinstance(phase, ApplyingPhase) and self._stage_plan is not None:
            first = self._stage_plan.first_mhz()
            if first is not None:
                self._controller.request(first, tag="prefetch")
        if _ITERATION_WINDOW in self._monitor.open_windows:
            self._monitor.end_window(_ITERATION_WINDOW, cancel=True)
        self._monitor.begin_window(_ITERATION_WINDOW)

    def end_iteration(self, failed: bool = False) -> None:
        """The iteration ended on this rank. Every rank must call this the same number of times.

        Phase changes (and their collectives) happen here, outside the pipeline's communication.

        Args:
            failed: The iteration raised; it is dropped and no collective runs.

        Raises:
            ZeusProfileError, ZeusConfigError: Rank 0 rejected a saved plan/profile or could not plan
                (raised on every rank; clocks are restored first).
        """
        if not self._in_iteration:
            return
        self._in_iteration = False
        assert self._monitor is not None and self._controller is not None
        profiler = self._profiler
        if failed:
            self._monitor.end_window(_ITERATION_WINDOW, cancel=True)
            if profiler is not None:
                profiler.cancel_iteration()
            logger.warning("Iteration %d failed; it is not counted.", self._iteration)
            return
        m = self._monitor.end_window(_ITERATION_WINDOW)
        phase = self._phase
        if isinstance(phase, ProfilingPhase) and phase.measuring and profiler is not None:
            profiler.end_iteration()
        self.iterations.append(
            IterationRecord(
                self._iteration, phase.name, tuple(self._records), m.time, m.gpu_total_energy, m.simulated
            )
        )
        self._iteration += 1
        if isinstance(phase, ApplyingPhase):
            self._controller.request(self._max_mhz(), tag="between-iterations")
            self._check_shape()
            return
        try:
            self._advance(phase)
        except ZeusError:
            self._close_quietly()
            raise

    # -- instruction boundaries -----------------------------------------------------------------
    def begin_instruction(
        self, kind: InstructionKind | str, microbatch: int | None = None, virtual_stage: int | None = None
    ) -> None:
        """An instruction starts (after its inputs arrived). Ignored outside an iteration.

        Args:
            kind: ``"forward"``, ``"backward"``, or for split backwards ``"backward_input"`` /
                ``"backward_weight"``.
            microbatch: Its microbatch index; ``None``: counted per kind within the iteration.
            virtual_stage: The model chunk's place in the whole model (interleaved schedules:
                torch's ``stage_index``, Megatron's ``vp_stage·S + rank``); ``None``: this stage.
        """
        if not self._in_iteration:
            return
        kind = InstructionKind.parse(kind)
        v = self.stage if virtual_stage is None else int(virtual_stage)
        assert v is not None
        mb = self._counts.get((kind, v), 0) if microbatch is None else int(microbatch)
        self._counts[(kind, v)] = mb + 1
        self._open = (kind, mb)
        phase = self._phase
        mhz: int | None = None
        if isinstance(phase, ApplyingPhase):
            assert self._controller is not None and self._stage_plan is not None
            mhz = self._stage_plan.clock(len(self._records), (kind, mb, v))
            mhz = self._max_mhz() if mhz is None else mhz  # off the plan: the iteration's end plans again
            self._controller.request(mhz, tag=f"stage{self.stage}:{kind.letter}{mb}v{v}")
        elif isinstance(phase, ProfilingPhase):
            mhz = self._sweep_mhz[phase.index] if phase.measuring else self._sweep_mhz[0]
            if phase.measuring:
                self._profiler_for().begin_instruction(kind, mb)
        self._records.append(InstructionRecord(kind, mb, mhz, v))

    def end_instruction(
        self, kind: InstructionKind | str, microbatch: int | None = None, failed: bool = False
    ) -> None:
        """The instruction begun last ended (``failed``: it raised). Ignored outside an iteration."""
        if not self._in_iteration or self._open is None:
            return
        kind, mb = self._open
        self._open = None
        phase = self._phase
        if isinstance(phase, ProfilingPhase) and phase.measuring:
            profiler = self._profiler_for()
            if failed:
                profiler.cancel_instruction()
            else:
                profiler.end_instruction(kind, mb)
        elif isinstance(phase, ApplyingPhase) and not failed and self._stage_plan is not None:
            nxt = self._stage_plan.next_mhz(len(self._records))
            if nxt is not None:  # request the next instruction's clock during the gap
                assert self._controller is not None
                self._controller.request(nxt, tag="prefetch")

    # -- state ----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """JSON-safe state: the plan in use (resuming applies it without profiling again)."""
        plan = self.plan
        return {"version": _STATE_VERSION, "plan": plan.to_dict() if plan is not None else None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (the plan is checked like a given plan after discovery)."""
        version = int(state.get("version", _STATE_VERSION))
        dropped = sorted(set(state) - {"version", "plan"})
        if dropped:
            logger.warning("PerseusRuntime.load_state_dict: ignoring unknown keys %s.", dropped)
        if version > _STATE_VERSION:
            logger.warning("PerseusRuntime state version %d is newer than %d.", version, _STATE_VERSION)
        if state.get("plan") is not None:
            self._given_plan = FrequencyPlan.from_dict(state["plan"], source="PerseusRuntime state")

    # -- internals ------------------------------------------------------------------------------
    def _profiler_for(self) -> InstructionProfiler:
        if self._profiler is None:
            assert self._monitor is not None and self.stage is not None
            self._profiler = InstructionProfiler(self._monitor, self.stage)
        return self._profiler

    def _max_mhz(self) -> int:
        assert self._gpu is not None
        return max(self._gpu.supported_sm_frequencies())

    def _check_shape(self) -> None:
        """After an applied iteration: if it ran other instructions than planned, plan again.

        Every stage sees a change of the microbatch count in the same iteration, so all ranks
        discover again together: the next iteration runs at the highest clocks, then rank 0 plans.
        """
        if self._stage_plan is not None and not self._stage_plan.ran_as_planned(self._records):
            self._phase = DiscoveryPhase(1)
            self._stage_plan = None

    def _advance(self, phase: RuntimePhase) -> None:
        """The only place phases change (after an iteration, on every rank together)."""
        match phase:
            case DiscoveryPhase(remaining=r) if r > 1:
                self._phase = DiscoveryPhase(r - 1)
            case DiscoveryPhase():
                self._after_discovery()
            case ProfilingPhase(index=i, iteration=it, measuring=meas):
                if it + 1 < self.sweep.iterations_per_frequency:
                    self._phase = ProfilingPhase(i, it + 1, meas)
                    return
                local = meas and self._extend_sweep(i)
                if distributed.all_reduce([float(local)], "max")[0] > 0:
                    self._phase = ProfilingPhase(i + 1 if local else i, 0, local)
                else:
                    self._after_profiling()
            case ApplyingPhase():
                pass

    def _extend_sweep(self, index: int) -> bool:
        """Whether this rank profiles another clock after clock ``index`` (adaptive: picks it)."""
        profiler = self._profiler_for()
        if not self.sweep.adaptive:
            return index + 1 < len(self._sweep_mhz) and not profiler.energy_has_risen(
                self.sweep.patience, self.sweep.tolerance
            )
        assert self._gpu is not None
        nxt = self.sweep.next_frequency(self._gpu.supported_sm_frequencies(), profiler.effective_energies())
        if nxt is None or nxt in self._sweep_mhz:
            return False
        self._sweep_mhz.append(nxt)
        return True

    def _local_info(self) -> RankInfo:
        assert self._gpu is not None and self.stage is not None and self.num_stages is not None
        supported = tuple(self._gpu.supported_sm_frequencies())
        sweep_error = None
        if self.mode is ControlMode.CONTROL:
            try:  # checked here, reported by rank 0 only if profiling is needed
                self._sweep_mhz = self.sweep.frequencies_for(supported)
            except ZeusConfigError as exc:
                sweep_error = f"rank {distributed.rank()}: {exc}"
        return RankInfo(
            rank=distributed.rank(),
            stage=self.stage,
            num_stages=self.num_stages,
            schedule=self.schedule_name or "observed",
            gpu_name=self._gpu.name,
            simulated=self._gpu.simulated,
            supported_mhz=supported,
            order=tuple((r.kind.value, r.microbatch, r.virtual_stage) for r in self._records),
            sweep_error=sweep_error,
            mode=self.mode.value,
            framework=self.framework,
            idle_power_w=getattr(getattr(self._gpu, "behavior", None), "idle_power_w", None)
            if self._gpu.simulated
            else None,
        )

    def _after_discovery(self) -> None:
        infos = distributed.all_gather_object(self._local_info())
        self._infos = infos
        decision = None
        if distributed.is_rank_zero():
            decision = decide_after_discovery(
                infos,
                self.planning,
                self.mode,
                self._given_plan,
                self.save_dir,
                self.profile.to_csv_text() if self.profile is not None else None,
            )
        self._follow(distributed.broadcast_object(decision))

    def _after_profiling(self) -> None:
        profiler = self._profiler_for()
        result = RankProfile(self.stage or 0, profiler.rows(), profiler.blocking_power_w())
        results = distributed.all_gather_object(result)
        decision = None
        if distributed.is_rank_zero():
            decision = decide_after_profiling(self._infos, results, self.planning, self.save_dir)
        self._follow(distributed.broadcast_object(decision))

    def _follow(self, decision: Decision) -> None:
        for note in decision.notes:
            console.warn(f"Perseus: {note}")
        if decision.error:
            raise ZeusProfileError(decision.error)
        if decision.plan is None:
            self._profiler = None  # a fresh profile for the pipeline as it is now
            log = logger.info if distributed.is_rank_zero() else logger.debug
            log("Stage %s: profiling %d clocks %s MHz.", self.stage, len(self._sweep_mhz), self._sweep_mhz)
            self._phase = ProfilingPhase(0, 0)
            return
        plan = FrequencyPlan.from_dict(decision.plan, source="broadcast plan")
        if decision.profile_csv:
            self.profile = InstructionProfile.from_csv_text(decision.profile_csv, source="broadcast profile")
        self._stage_plan = StagePlan(plan, schedule_of(self._infos), self.stage or 0, self._warned)
        self._phase = ApplyingPhase(plan)
        if distributed.is_rank_zero():
            logger.info(
                "Perseus plan %r (%s): %s%s\n%s",
                plan.label,
                decision.source,
                describe_plan(plan),
                " [simulated]" if plan.simulated else "",
                plan.to_text(),
            )


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
    from zeus_core.device._discovery import get_gpus

    gpus = get_gpus()
    for g in gpus:
        if g.index == gpu:
            return g
    raise ZeusDeviceNotFoundError(
        f"PerseusRuntime(gpu={gpu}): this process sees GPUs {[g.index for g in gpus]}. Pass the index of the "
        "GPU this stage runs on, or a GPU object (e.g. a SimulatedPipelineGPU on machines without GPUs)."
    )


def _load_given_plan(path: str | Path) -> FrequencyPlan | None:
    """A plan file the user passed; a corrupt one is reported and replaced by planning (``None``)."""
    try:
        return FrequencyPlan.load(path)
    except ZeusProfileError as exc:
        console.warn(f"Perseus: {exc} Ignoring it: planning from the saved profile, or profiling.")
        return None
