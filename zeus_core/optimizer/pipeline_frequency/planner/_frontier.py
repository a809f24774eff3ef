"""The Perseus planner: the iteration time–energy frontier of a pipeline, and the plans on it.

How the frontier is solved and how plans for a target time are made in real time:
docs/optimizers/perseus.md ("Planning").
"""

from __future__ import annotations

import copy
import csv
import importlib.util
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.pipeline_frequency._frequency_plan import FrequencyPlan
from zeus_core.optimizer.pipeline_frequency._profile import InstructionProfile
from zeus_core.optimizer.pipeline_frequency._schedule import InstructionKind, PipelineSchedule
from zeus_core.optimizer.pipeline_frequency.planner._blocking_power import resolve_blocking_power
from zeus_core.optimizer.pipeline_frequency.planner._cost_model import (
    COST_MODELS,
    CostModel,
    ExecutionOption,
    InstructionOptions,
    TimeRounding,
)
from zeus_core.optimizer.pipeline_frequency.planner._dag import PipelineDAG
from zeus_core.optimizer.pipeline_frequency.planner._frontier_solver import (
    IntegerCostTable,
    SolverResult,
    solve_frontier,
)
from zeus_core.optimizer.pipeline_frequency.planner._max_flow import FlowBackend
from zeus_core.optimizer.pipeline_frequency.planner._plan_at_time import replay_options
from zeus_core.optimizer.pipeline_frequency.planner._real_time import lp_plan, reclaim_slack, repair_to_time

__all__ = ["Replay", "Frontier", "plan_frontier"]

logger = logging.getLogger(__name__)

_TIME_RTOL = 1e-9
_REPLAY_BATCH = 1 << 21  # instruction durations replayed per vectorised batch (memory bound)


@dataclass(frozen=True)
class Replay:
    """Real-time prediction of one plan.

    Attributes:
        iteration_time_s: Longest path of the DAG with the clocks' measured durations, s.
        energy_j: All GPUs of the pipeline over ``iteration_time_s``, J (instruction energy plus
            blocking power while not computing).
        compute_energy_j: Energy of the instructions alone, J.

    Example:
        >>> from zeus_core.optimizer.pipeline_frequency import synchronous_1f1b
        >>> from zeus_core.testing import physical_instruction_profile
        >>> fr = plan_frontier(synchronous_1f1b(2, 2), physical_instruction_profile("a40", 2))
        >>> rep = fr.replay_plan(fr.max_frequency_plan())
        >>> rep.energy_j > rep.compute_energy_j   # blocked time is charged too
        True
    """

    iteration_time_s: float
    energy_j: float
    compute_energy_j: float


class Frontier:
    """The planned time–energy frontier; point 0 is the all-slowest plan, the last the fastest.

    Built by :func:`plan_frontier`; its plans are replayed in real time. Per-point arrays (index
    ``i`` = frontier point):

    Attributes:
        quant_times: Iteration time, quanta.
        times_s: Iteration time, s (``quant_times × unit_time_s``).
        effective_energy_j: Sum of the chosen options' effective energies, J.
        energy_j: ``effective_energy_j + blocking_power_w × num_stages × times_s``, J: the energy
            of all GPUs if the iteration takes ``times_s``.
        model_energy_j: The same with the cost model's effective energies (what the planner
            minimised), J.
        solver: Raw solver output (steps, flows, timing).

    Example:
        >>> from zeus_core.optimizer.pipeline_frequency import synchronous_1f1b
        >>> from zeus_core.testing import physical_instruction_profile
        >>> frontier = plan_frontier(synchronous_1f1b(2, 4), physical_instruction_profile("a100", 2),
        ...                          blocking_power_w=80.0)
        >>> fast, base = frontier.zero_slowdown_plan(), frontier.max_frequency_plan()
        >>> fast.iteration_time_s <= base.iteration_time_s and fast.energy_j < base.energy_j
        True
    """

    def __init__(
        self,
        schedule: PipelineSchedule,
        profile: InstructionProfile,
        dag: PipelineDAG,
        options: dict[tuple[int, InstructionKind], InstructionOptions],
        models: dict[tuple[int, InstructionKind], CostModel],
        types: np.ndarray,
        keys: list[tuple[int, InstructionKind]],
        table: IntegerCostTable,
        solver: SolverResult,
        settings: dict[str, Any],
    ) -> None:
        self.schedule, self.profile, self.dag = schedule, profile, dag
        self.options, self.models, self.solver, self.settings = options, models, solver, settings
        self.unit_time_s = float(settings["unit_time_s"])
        self.blocking_power_w = float(settings["blocking_power_w"])
        self._types, self._keys, self._table = types, keys, table
        self._plan_cache: dict[tuple[float, str], FrequencyPlan] = {}
        self._points_per_step = np.array([s.length for s in solver.steps], dtype=np.int64)
        self._step_first = np.concatenate([[1], 1 + np.cumsum(self._points_per_step)])
        # Per type, the option used at each duration, flattened: _flat[field][_eff_off[t] + q - min_q[t]].
        ladders = [
            [
                options[k].option_for_duration(q)
                for q in range(options[k].min_quant_time, options[k].max_quant_time + 1)
            ]
            for k in keys
        ]
        self._eff_off = np.concatenate([[0], np.cumsum([len(t) for t in ladders])[:-1]]).astype(np.int64)
        self._eff_flat = np.array([o.effective_energy_j for t in ladders for o in t])
        self._time_flat = np.array([o.time_s for t in ladders for o in t])
        self._energy_flat = np.array([o.energy_j for t in ladders for o in t])
        self._real: tuple[np.ndarray, np.ndarray] | None = None
        self._build_point_arrays()

    def _build_point_arrays(self) -> None:
        s = self.solver
        n_pts = 1 + int(self._points_per_step.sum())
        quant = np.empty(n_pts, dtype=np.int64)
        model = np.empty(n_pts, dtype=np.int64)
        eff = np.empty(n_pts, dtype=float)
        d = s.initial_durations.copy()
        base = self._eff_off[self._types] - self._table.min_q[self._types]  # flat index = base + q
        quant[0] = s.steps[0].start_time if s.steps else int(self.dag.longest_path(d))
        model[0] = s.initial_cost
        eff[0] = float(self._eff_flat[base + d].sum())
        i = 1
        for step in s.steps:
            j = np.arange(1, step.length + 1)
            ops, a = step.ops, step.direction
            before = self._eff_flat[base[ops] + d[ops]]
            after = self._eff_flat[base[ops][None, :] + d[ops][None, :] - j[:, None] * a[None, :]]
            quant[i : i + step.length] = step.start_time - j
            model[i : i + step.length] = model[i - 1] + j * step.slope
            eff[i : i + step.length] = eff[i - 1] + (after - before[None, :]).sum(axis=1)
            d[ops] -= step.length * a
            i += step.length
        self.quant_times = quant
        self.times_s = quant * self.unit_time_s
        stages = self.schedule.num_stages
        self.effective_energy_j = eff
        self.energy_j = eff + self.blocking_power_w * stages * self.times_s
        self.model_energy_j = (
            self._table.cost_j(self._types, model) + self.blocking_power_w * stages * self.times_s
        )

    def __len__(self) -> int:
        return len(self.quant_times)

    # ----------------------------------------------------------------- real time and energy
    def _replay_durations(self, durations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Real iteration times (s) and energies (J) of plans given as quantised durations ``(plans, n)``."""
        flat = (self._eff_off[self._types] - self._table.min_q[self._types])[None, :] + durations
        times = self._time_flat[flat]
        t = self.dag.longest_paths(times)
        idle = self.schedule.num_stages * t - times.sum(axis=1)
        return t, self._energy_flat[flat].sum(axis=1) + self.blocking_power_w * idle

    def replay_points(self, indices: np.ndarray | list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Real iteration time (s) and energy (J) of frontier points ``indices``.

        Each point's clocks are replayed through the DAG with their measured durations, which
        are up to one quantum longer than the quantised ones the solver worked on (see
        :attr:`times_s`), so these are the figures a run at that point would show.
        """
        idx = np.asarray(indices, dtype=np.int64)
        if self._real is not None:
            return self._real[0][idx], self._real[1][idx]
        times, energies = np.empty(len(idx)), np.empty(len(idx))
        batch = max(1, _REPLAY_BATCH // max(1, self.dag.num_nodes))
        for a in range(0, len(idx), batch):
            block = np.stack([self.durations(int(i)) for i in idx[a : a + batch]])
            times[a : a + batch], energies[a : a + batch] = self._replay_durations(block)
        return times, energies

    @property
    def real_times_s(self) -> np.ndarray:
        """Real iteration time of every point, s (see :meth:`replay_points`)."""
        return self._all_real()[0]

    @property
    def real_energy_j(self) -> np.ndarray:
        """Real energy of every point (all GPUs, blocking power included), J."""
        return self._all_real()[1]

    def _all_real(self) -> tuple[np.ndarray, np.ndarray]:
        if self._real is None:
            self._real = self.replay_points(np.arange(len(self)))
        return self._real

    # ----------------------------------------------------------------- points and plans
    def durations(self, index: int) -> np.ndarray:
        """Planned duration of every instruction at point ``index``, quanta (``dag.instructions`` order)."""
        if not -len(self) <= index < len(self):
            raise ZeusConfigError(f"Frontier has {len(self)} points; index {index} is out of range.")
        index %= len(self)
        if index == 0:
            return self.solver.initial_durations.copy()
        step = int(np.searchsorted(self._step_first, index, side="right")) - 1
        return self.solver.durations_after(step, index - int(self._step_first[step]) + 1)

    def _chosen(self, durations: np.ndarray) -> list[ExecutionOption]:
        return [
            self.options[self._keys[t]].option_for_duration(q)
            for t, q in zip(self._types.tolist(), durations.tolist())
        ]

    def replay(self, chosen: list[ExecutionOption]) -> Replay:
        """Real iteration time and energy of per-instruction options (``dag.instructions`` order)."""
        t, total = replay_options(self.dag, chosen, self.blocking_power_w)
        return Replay(t, total, float(sum(o.energy_j for o in chosen)))

    def replay_plan(self, plan: FrequencyPlan) -> Replay:
        """Real iteration time and energy of any plan (e.g. one from another planner).

        Raises:
            ZeusProfileError: The plan's shape differs from the schedule, or it uses a clock the
                profile has no measurement for (the plan is printed with those cells marked).
        """
        return self.replay(self.measured_options(plan))

    def measured_options(self, plan: FrequencyPlan) -> list[ExecutionOption]:
        """The profiled option of each instruction's planned clock (``dag.instructions`` order).

        Raises:
            ZeusProfileError: As :meth:`replay_plan`.
        """
        plan.check_matches(self.schedule)
        table = {k: {m.frequency_mhz: m for m in self.profile.get(*k)} for k in self.options}
        plan.validate({k: set(v) for k, v in table.items()})
        chosen = []
        for inst in self.dag.instructions:
            m = table[(inst.stage, inst.kind)][plan.frequencies[inst]]
            chosen.append(
                ExecutionOption(
                    m.frequency_mhz, m.time_s, m.energy_j, m.energy_j - self.blocking_power_w * m.time_s, 0
                )
            )
        return chosen

    def _plan(self, chosen: list[ExecutionOption], label: str, **meta: Any) -> FrequencyPlan:
        rep = self.replay(chosen)
        metadata = {"planner": dict(self.settings), **meta}
        return FrequencyPlan(
            self.schedule.name,
            self.schedule.num_stages,
            self.schedule.num_microbatches,
            {inst: o.frequency_mhz for inst, o in zip(self.dag.instructions, chosen)},
            self.schedule.num_chunks,
            label,
            rep.iteration_time_s,
            rep.energy_j,
            self.profile.simulated,
            metadata,
        )

    def plan(self, index: int, label: str = "") -> FrequencyPlan:
        """The plan at frontier point ``index`` (replayed; not repaired)."""
        d = self.durations(index)
        return self._plan(
            self._chosen(d),
            label or f"point-{index % len(self)}",
            quant_time=int(self.quant_times[index]),
            frontier_index=index % len(self),
        )

    def max_frequency_plan(self) -> FrequencyPlan:
        """Baseline: every instruction at its highest profiled clock."""
        chosen = []
        for inst in self.dag.instructions:
            m = self.profile.get(inst.stage, inst.kind)[0]  # highest clock first
            chosen.append(
                ExecutionOption(
                    m.frequency_mhz, m.time_s, m.energy_j, m.energy_j - self.blocking_power_w * m.time_s, 0
                )
            )
        return self._plan(chosen, "max-frequency")

    def zero_slowdown_plan(self) -> FrequencyPlan:
        """Least energy with no slowdown versus :meth:`max_frequency_plan` (Perseus's default plan)."""
        return self._plan_within(self.max_frequency_plan().prediction()[0], "zero-slowdown")

    def plan_for_time(self, time_s: float, label: str = "deadline") -> FrequencyPlan:
        """The least-energy plan for an iteration allowed to take ``time_s`` (s).

        GPUs that finish early block until ``time_s`` (a deadline, or a straggling pipeline that
        everyone waits for), so the plan is the frontier point with the longest time that fits.

        Raises:
            ZeusConfigError: ``time_s`` is shorter than the all-maximum-clock iteration.
        """
        fastest = self.max_frequency_plan().prediction()[0]
        if time_s < fastest * (1 - _TIME_RTOL):
            raise ZeusConfigError(
                f"plan_for_time({time_s:.6g} s): the pipeline needs at least {fastest:.6g} s per iteration "
                "even at the highest clocks; pass a longer time."
            )
        return self._plan_within(float(time_s), label, requested_time_s=float(time_s))

    def least_energy_plan(self) -> FrequencyPlan:
        """The frontier point with the least real total energy, at whatever iteration time it takes.

        Instructions are then slowed into any slack left at the point's real iteration time,
        which only lowers the energy.
        """
        index = int(np.argmin(self.real_energy_j))
        chosen = self._chosen(self.durations(index))
        chosen = reclaim_slack(self.dag, self._ladders(), chosen, self.replay(chosen).iteration_time_s)
        return self._plan(
            chosen, "least-energy", frontier_index=index, quant_time=int(self.quant_times[index])
        )

    def _ladders(self) -> list[list[ExecutionOption]]:
        return [self.options[(i.stage, i.kind)].all_pareto for i in self.dag.instructions]

    def _best_point_within(self, limit_s: float) -> int | None:
        """The frontier point with the least real energy among those whose real time is <= ``limit_s``."""
        if TimeRounding(self.settings["rounding"]) is TimeRounding.FLOOR:
            # Floored durations never exceed real ones, so longer quantised times cannot fit.
            indices = np.flatnonzero(self.quant_times * self.unit_time_s <= limit_s)
        else:
            indices = np.arange(len(self))
        if not len(indices):
            return None
        times, energies = self.replay_points(indices)
        fits = times <= limit_s
        if not fits.any():
            return None
        return int(indices[fits][np.argmin(energies[fits])])

    def _plan_within(self, time_s: float, label: str, **meta: Any) -> FrequencyPlan:
        """Least-energy plan whose real iteration time is at most ``time_s`` (cached per time).

        The candidates (best frontier point with its slack reclaimed, the real-time LP, or a
        repaired point) are listed in docs/optimizers/perseus.md; the least replayed energy wins.
        """
        key = (round(time_s, 12), label)
        if key in self._plan_cache:
            return copy.deepcopy(self._plan_cache[key])
        limit = time_s * (1 + _TIME_RTOL)
        ladders = self._ladders()
        use_lp = bool(self.settings.get("use_lp", True)) and importlib.util.find_spec("scipy") is not None
        candidates = []
        best = self._best_point_within(limit)
        index = len(self) - 1 if best is None else best
        chosen, changes = None, 0
        if best is not None:
            chosen = self._chosen(self.durations(best))
        elif not use_lp:
            chosen, changes = self._repair(self._chosen(self.durations(index)), time_s)
        if chosen is not None:
            info = {
                "frontier_index": int(index),
                "quant_time": int(self.quant_times[index]),
                "repaired_instructions": changes,
            }
            own_time = self.replay(chosen).iteration_time_s
            for target in {own_time, time_s}:
                candidates.append((reclaim_slack(self.dag, ladders, chosen, target), "frontier", info))
        if use_lp:
            lp_chosen, lp_changes = self._repair(lp_plan(self.dag, ladders, time_s), time_s)
            candidates.append(
                (
                    reclaim_slack(self.dag, ladders, lp_chosen, time_s),
                    "lp",
                    {"repaired_instructions": lp_changes},
                )
            )
        plans = [self._plan(c, label, method=method, **info, **meta) for c, method, info in candidates]
        best_plan = min(plans, key=lambda p: float(p.energy_j or 0.0))
        self._plan_cache[key] = best_plan
        return copy.deepcopy(best_plan)

    def pareto_indices(self) -> np.ndarray:
        """Points not dominated in real (time, energy): from the shortest time up to the least energy.

        Returned in frontier order (longest quantised time first).
        """
        times, energies = self._all_real()
        keep = []
        best = np.inf
        for i in np.lexsort((energies, times)).tolist():  # shortest real time first
            if energies[i] < best:
                keep.append(i)
                best = energies[i]
        return np.array(sorted(keep), dtype=np.int64)

    def _repair(self, chosen: list[ExecutionOption], deadline_s: float) -> tuple[list[ExecutionOption], int]:
        return repair_to_time(self.dag, self._ladders(), chosen, deadline_s, self.settings.get("backend"))

    # ----------------------------------------------------------------- reporting
    def summary(self) -> dict[str, Any]:
        """Headline numbers: times (s), energies (J), savings (fraction), solver statistics."""
        base, fast, least = self.max_frequency_plan(), self.zero_slowdown_plan(), self.least_energy_plan()
        return {
            "points": len(self),
            "pareto_points": int(len(self.pareto_indices())),
            "longest_time_s": float(self.times_s[0]),
            "shortest_time_s": float(self.times_s[-1]),
            "max_frequency_time_s": base.iteration_time_s,
            "max_frequency_energy_j": base.energy_j,
            "zero_slowdown_time_s": fast.iteration_time_s,
            "zero_slowdown_energy_j": fast.energy_j,
            "zero_slowdown_saving": 1.0 - fast.prediction()[1] / base.prediction()[1],
            "least_energy_time_s": least.iteration_time_s,
            "least_energy_energy_j": least.energy_j,
            "solve_time_s": self.solver.solve_time_s,
            "solver_steps": len(self.solver.steps),
            "max_flows": self.solver.flows,
            "simulated": self.profile.simulated,
        }

    def to_csv(self, path: str | Path) -> None:
        """Write one row per frontier point.

        Columns: ``index``; ``time_s`` and ``energy_j``, the point's *real* iteration time (s)
        and energy of all GPUs (J), replayed with measured durations; ``quantised_time_s`` and
        ``quantised_energy_j``, the solver's view (durations rounded to ``unit_time_s``);
        ``effective_energy_j`` and ``model_energy_j`` (what the solver minimised, J);
        ``quant_time`` (quanta); ``pareto`` (1: not dominated in real time and energy).
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        pareto = set(self.pareto_indices().tolist())
        real_t, real_e = self._all_real()
        header = [
            "index",
            "time_s",
            "energy_j",
            "quantised_time_s",
            "quantised_energy_j",
            "effective_energy_j",
            "model_energy_j",
            "quant_time",
            "pareto",
        ]
        with path.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(header)
            for i in range(len(self)):
                w.writerow(
                    [
                        i,
                        *(
                            repr(float(a[i]))
                            for a in (
                                real_t,
                                real_e,
                                self.times_s,
                                self.energy_j,
                                self.effective_energy_j,
                                self.model_energy_j,
                            )
                        ),
                        int(self.quant_times[i]),
                        int(i in pareto),
                    ]
                )


def plan_frontier(
    schedule: PipelineSchedule,
    profile: InstructionProfile,
    *,
    unit_time_s: float = 1e-3,
    blocking_power_w: float | None = None,
    cost_model: str = "hull",
    rounding: TimeRounding | str = TimeRounding.FLOOR,
    backend: FlowBackend | None = None,
    stop_at_time_s: float | None = None,
    check_invariants: bool = False,
) -> Frontier:
    """Plan the time–energy frontier of one pipeline iteration (Phillips–Dessouky min cuts).

    Args:
        schedule: Pipeline schedule (e.g. ``synchronous_1f1b(4, 8)``).
        profile: Time and energy per (stage, instruction type) and clock.
        unit_time_s: Time quantum, s. Smaller is more precise; planning time grows with the
            number of distinct slopes, not with ``1 / unit_time_s`` alone.
        blocking_power_w: GPU power while blocked on communication, W; ``None``: the
            profile's measured value, else its GPU's documented idle power
            (``resolve_blocking_power``; an error if neither is known).
        cost_model: ``"hull"`` (convex hull, exact at the options) or ``"exponential"``.
        rounding: ``"floor"`` (as lowtime; default) or ``"ceil"`` (a frontier point's real time
            never exceeds its quantised time). Plans for a target time are checked in real time
            and repaired either way.
        backend: Max-flow back end, ``"scipy"`` or ``"networkx"`` (default: scipy if installed).
        stop_at_time_s: Stop once the iteration time reaches this (s): enough for
            :meth:`Frontier.plan_for_time` at that time, and faster than the whole frontier.
        check_invariants: Verify the optimality certificate at every step (tests).

    Returns:
        The :class:`Frontier`.

    Raises:
        ZeusConfigError: A bad setting, or the blocking power is unknown.
        ZeusProfileError: The profile does not cover the schedule.

    Example:
        >>> from zeus_core import data
        >>> from zeus_core.optimizer.pipeline_frequency import InstructionProfile, synchronous_1f1b
        >>> profile = InstructionProfile.from_csv(data.path("perseus/a100_4stage_profile.csv"))
        >>> frontier = plan_frontier(synchronous_1f1b(4, 8), profile, blocking_power_w=80.0)
        >>> len(frontier), round(frontier.zero_slowdown_plan().energy_j, 1)
        (421, 723.2)
    """
    if blocking_power_w is not None and blocking_power_w < 0:
        raise ZeusConfigError(f"plan_frontier: blocking_power_w={blocking_power_w} W must be >= 0.")
    blocking_power_w, blocking_source = resolve_blocking_power(
        blocking_power_w, profile.blocking_power_w, profile.gpu_name
    )
    if cost_model not in COST_MODELS:
        raise ZeusConfigError(
            f"plan_frontier: unknown cost_model {cost_model!r}; use one of {sorted(COST_MODELS)}."
        )
    profile.check_covers(schedule)
    dag = PipelineDAG(schedule)
    keys = sorted({(i.stage, i.kind) for i in dag.instructions}, key=lambda k: (k[0], k[1].value))
    options = {
        k: InstructionOptions(
            profile.get(*k), unit_time_s, blocking_power_w, rounding, f"stage {k[0]} {k[1].value}"
        )
        for k in keys
    }
    models = {k: COST_MODELS[cost_model](options[k]) for k in keys}
    kidx = {k: i for i, k in enumerate(keys)}
    types = np.array([kidx[(i.stage, i.kind)] for i in dag.instructions], dtype=np.int64)
    table = IntegerCostTable.from_float(
        [options[k].min_quant_time for k in keys],
        [options[k].max_quant_time for k in keys],
        [models[k].savings() for k in keys],
        [models[k](options[k].max_quant_time) for k in keys],
        np.bincount(types, minlength=len(keys)).tolist(),
    )
    stop = None if stop_at_time_s is None else int(np.floor(stop_at_time_s / unit_time_s * (1 + _TIME_RTOL)))
    result = solve_frontier(
        dag, types, table, backend=backend, check_invariants=check_invariants, stop_at=stop
    )
    settings = {
        "unit_time_s": unit_time_s,
        "blocking_power_w": blocking_power_w,
        "blocking_power_source": blocking_source,
        "cost_model": cost_model,
        "rounding": TimeRounding(rounding).value,
        "schedule": schedule.name,
        "backend": backend,
    }
    logger.info(
        "Planned %s %dx%d: %d frontier points in %.3f s (%d steps, %d max flows)%s",
        schedule.name,
        schedule.num_stages,
        schedule.num_microbatches,
        1 + sum(s.length for s in result.steps),
        result.solve_time_s,
        len(result.steps),
        result.flows,
        " [simulated profile]" if profile.simulated else "",
    )
    return Frontier(schedule, profile, dag, options, models, types, keys, table, result, settings)
