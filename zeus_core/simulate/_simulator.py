"""Trace-driven simulation of a recurring training job (Zeus, NSDI'23 §6).

Each recurrence runs trials until one reaches the target (at most ``max_tries``). A trial with
batch size ``b`` and power limit ``p``:

* draws a run (seed) of ``b`` from the training trace; its epochs-to-target is what this trial
  needs (a run that never reached the target runs until stopped);
* spends ``time_per_epoch(b, p)`` s and ``time × average_power(b, p)`` J per epoch (power trace);
* when the policy asks for a just-in-time power limit and ``b`` was never profiled, spends its
  first epoch profiling: the epoch is split evenly over the traced power limits (time and energy
  are their means), and the limit with the lowest per-epoch Zeus cost
  ``(eta·P + (1 − eta)·MaxPower)·t`` is used from then on, as Zeus's ``ZeusCost`` selector does;
* stops when the policy says so, checked before every epoch with the recurring cost so far (the
  profiling epoch's extra cost over a normal epoch is a one-time overhead and is left out) and the
  cost of the next epoch at the chosen limit, which power profiling at the start of the first epoch
  reveals. So, as in the published simulator, a trial whose first epoch alone would cross the
  early-stop threshold is stopped before it runs (0 epochs, 0 J, not converged).

Every recurrence's cost is the Zeus cost of its trials' total energy and time. Runs are drawn as
the published simulator (``zeus._legacy.simulate``) draws them: one ``numpy.random.default_rng(seed)``
stream, one uniform draw among the batch size's runs (in trace order) per trial. So a simulation
is a pure function of its seed, and a policy that makes the same choices as the published one
sees the same runs.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from zeus_core._cost import zeus_cost
from zeus_core.exceptions import ZeusConfigError
from zeus_core.simulate._policies import Policy, TrialOutcome
from zeus_core.simulate._traces import WorkloadTrace

__all__ = [
    "TrialRecord",
    "SimulationResult",
    "simulate",
    "jit_power_limit",
    "expected_fixed_cost",
    "noise_free_cost",
    "oracle",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrialRecord:
    """One simulated trial.

    Attributes:
        recurrence: 0-based recurrence index.
        trial_number: 1-based trial number over the whole simulation.
        batch_size: Batch size.
        power_limit_w: Power limit after profiling, W.
        profiled_power: Whether the first epoch profiled power limits.
        epochs: Epochs run.
        energy_j: Energy, J.
        time_s: Time, s.
        cost_j: Zeus cost, J.
        overhead_j: Part of ``cost_j`` spent on power-limit profiling beyond a normal epoch, J.
        converged: Whether it reached the target.

    Example:
        >>> from zeus_core.simulate import DefaultPolicy, load_nsdi23_traces
        >>> trace = load_nsdi23_traces("v100")[4]
        >>> simulate(trace, DefaultPolicy(trace), seed=1, recurrences=1).trials[0].batch_size
        32
    """

    recurrence: int
    trial_number: int
    batch_size: int
    power_limit_w: int
    profiled_power: bool
    epochs: int
    energy_j: float
    time_s: float
    cost_j: float
    overhead_j: float
    converged: bool


@dataclass(frozen=True)
class SimulationResult:
    """All trials of a simulated recurring job under one policy and seed (simulated, not measured).

    Attributes:
        workload: ``dataset/network``.
        gpu: GPU name of the power trace.
        policy: Policy name.
        seed: Seed.
        eta_knob: Weight of energy in the cost.
        num_recurrences: Recurrences simulated.
        trials: Every trial in order.

    Example:
        >>> from zeus_core.simulate import DefaultPolicy, load_nsdi23_traces
        >>> trace = load_nsdi23_traces("v100")[4]
        >>> result = simulate(trace, DefaultPolicy(trace), seed=1, recurrences=3)
        >>> result.num_recurrences, len(result.recurrence_costs()), result.to_dict()["simulated"]
        (3, 3, True)
    """

    workload: str
    gpu: str
    policy: str
    seed: int
    eta_knob: float
    num_recurrences: int
    trials: tuple[TrialRecord, ...]

    @property
    def energy_j(self) -> float:
        """Cumulative energy to accuracy (ETA) over all recurrences, J."""
        return sum(t.energy_j for t in self.trials)

    @property
    def time_s(self) -> float:
        """Cumulative time to accuracy (TTA), s."""
        return sum(t.time_s for t in self.trials)

    @property
    def cost_j(self) -> float:
        """Cumulative Zeus cost, J."""
        return sum(t.cost_j for t in self.trials)

    def recurrence_costs(self) -> list[float]:
        """Zeus cost of each recurrence (its failed trials included), J."""
        costs = [0.0] * self.num_recurrences
        for t in self.trials:
            costs[t.recurrence] += t.cost_j
        return costs

    def cumulative_costs(self) -> list[float]:
        """Running total of :meth:`recurrence_costs`, J."""
        out, total = [], 0.0
        for c in self.recurrence_costs():
            total += c
            out.append(total)
        return out

    def chosen(self) -> list[tuple[int, int]]:
        """(batch size, power limit W) of each recurrence's converging trial."""
        return [(t.batch_size, t.power_limit_w) for t in self.trials if t.converged]

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form, totals included, marked ``simulated``."""
        out = asdict(self)
        out["trials"] = [asdict(t) for t in self.trials]
        out.update(simulated=True, energy_j=self.energy_j, time_s=self.time_s, cost_j=self.cost_j)
        return out


def jit_power_limit(trace: WorkloadTrace, batch_size: int, eta_knob: float) -> int:
    """The power limit (W) with the lowest per-epoch Zeus cost for ``batch_size``.

    Example:
        >>> from zeus_core.simulate import load_nsdi23_traces
        >>> trace = load_nsdi23_traces("v100")[4]
        >>> jit_power_limit(trace, 32, eta_knob=0.5) in trace.power_limits_for(32)
        True
    """
    maxp = trace.max_power_w

    def epoch_cost(pl: int) -> float:
        e = trace.epochs[(batch_size, pl)]
        return zeus_cost(e.energy_j, e.time_s, eta_knob, maxp)

    return min(trace.power_limits_for(batch_size), key=lambda pl: (epoch_cost(pl), -pl))


def simulate(
    trace: WorkloadTrace,
    policy: Policy,
    *,
    seed: int,
    recurrences: int | None = None,
    eta_knob: float = 0.5,
    max_tries: int = 20,
) -> SimulationResult:
    """Replay ``recurrences`` recurrences of a workload under ``policy``.

    Args:
        trace: The workload's traces.
        policy: Picks knobs and early-stops trials; it is mutated (use a fresh one per call).
        seed: Seeds the run draws.
        recurrences: Number of recurrences; default :meth:`WorkloadTrace.num_recurrences`.
        eta_knob: Weight of energy in the Zeus cost.
        max_tries: Trials per recurrence before the target is declared unreachable.

    Returns:
        Every trial, in order.

    Raises:
        ZeusConfigError: Bad arguments, or no trial of a recurrence converged within ``max_tries``.

    Example:
        >>> from zeus_core.simulate import DefaultPolicy, load_nsdi23_traces
        >>> trace = load_nsdi23_traces("v100")[4]
        >>> simulate(trace, DefaultPolicy(trace), seed=1, recurrences=2).num_recurrences
        2
    """
    n = trace.num_recurrences() if recurrences is None else recurrences
    if n < 1 or max_tries < 1:
        raise ZeusConfigError(f"simulate: recurrences={n} and max_tries={max_tries} must be >= 1.")
    maxp = trace.max_power_w
    rng = np.random.default_rng(seed)
    profiled: dict[int, int] = {}
    trials: list[TrialRecord] = []
    trial_number = 0
    for r in range(n):
        for attempt in range(max_tries):
            trial_number += 1
            choice = policy.choose(trial_number)
            bs = choice.batch_size
            if bs not in trace.target_epochs:
                raise ZeusConfigError(
                    f"simulate: policy {policy.name} chose batch size {bs}, not in the trace."
                )
            profile = choice.power_limit_w is None and bs not in profiled
            if choice.power_limit_w is None:
                pl = profiled.setdefault(bs, jit_power_limit(trace, bs, eta_knob))
            else:
                pl = choice.power_limit_w
            runs = trace.target_epochs[bs]
            target = runs[int(rng.choice(len(runs), size=1, replace=False)[0])]
            record = _run_trial(trace, policy, r, trial_number, bs, pl, profile, target, eta_knob, maxp)
            trials.append(record)
            policy.observe(
                TrialOutcome(bs, pl, record.cost_j, record.converged, record.overhead_j, record.epochs)
            )
            if record.converged:
                break
        else:
            raise ZeusConfigError(
                f"simulate: {trace.workload.name} on {trace.gpu} under {policy.name} did not reach the "
                f"target in {max_tries} tries at recurrence {r}; the target "
                f"{trace.workload.target_metric} may be unreachable."
            )
    return SimulationResult(trace.workload.name, trace.gpu, policy.name, seed, eta_knob, n, tuple(trials))


def _run_trial(
    trace: WorkloadTrace,
    policy: Policy,
    recurrence: int,
    trial_number: int,
    bs: int,
    pl: int,
    profile: bool,
    target: int | None,
    eta_knob: float,
    maxp: float,
) -> TrialRecord:
    steady = trace.epochs[(bs, pl)]
    steady_cost = zeus_cost(steady.energy_j, steady.time_s, eta_knob, maxp)
    if profile:
        limits = trace.power_limits_for(bs)
        first_e = sum(trace.epochs[(bs, p)].energy_j for p in limits) / len(limits)
        first_t = sum(trace.epochs[(bs, p)].time_s for p in limits) / len(limits)
    else:
        first_e, first_t = steady.energy_j, steady.time_s
    overhead = max(0.0, zeus_cost(first_e, first_t, eta_knob, maxp) - steady_cost)
    energy = time = cost = 0.0
    epoch = 0
    converged = False
    while not policy.should_stop(cost - (overhead if epoch else 0.0), epoch, steady_cost):
        energy += first_e if epoch == 0 else steady.energy_j
        time += first_t if epoch == 0 else steady.time_s
        epoch += 1
        cost = zeus_cost(energy, time, eta_knob, maxp)
        if target is not None and epoch >= target:
            converged = True
            break
    spent_overhead = overhead if epoch else 0.0
    return TrialRecord(
        recurrence, trial_number, bs, pl, profile, epoch, energy, time, cost, spent_overhead, converged
    )


def _converging_epochs(trace: WorkloadTrace, batch_size: int) -> list[int]:
    """Epochs-to-target of the batch size's runs that reach the target within ``max_epochs``."""
    max_epochs = trace.workload.max_epochs
    return [e for e in trace.target_epochs[batch_size] if e is not None and e <= max_epochs]


def expected_fixed_cost(
    trace: WorkloadTrace, batch_size: int, power_limit_w: int, eta_knob: float
) -> tuple[float, float, float] | None:
    """Expected (energy J, time s, Zeus cost J) of one recurrence at a fixed configuration.

    A run that misses the target within ``max_epochs`` costs ``max_epochs`` epochs and is retried,
    so with success probability ``q`` the recurrence expects ``(1 − q)/q`` failed runs.

    Returns:
        ``None`` when no run of ``batch_size`` reaches the target within ``max_epochs``.

    Example:
        >>> from zeus_core.simulate import load_nsdi23_traces
        >>> energy_j, time_s, cost_j = expected_fixed_cost(load_nsdi23_traces("v100")[4], 32, 250, 0.5)
        >>> cost_j > 0
        True
    """
    max_epochs = trace.workload.max_epochs
    runs = trace.target_epochs[batch_size]
    ok = _converging_epochs(trace, batch_size)
    if not ok:
        return None
    q = len(ok) / len(runs)
    epochs = sum(ok) / len(ok) + (1 - q) / q * max_epochs
    e = trace.epochs[(batch_size, power_limit_w)]
    energy, time = epochs * e.energy_j, epochs * e.time_s
    return energy, time, zeus_cost(energy, time, eta_knob, trace.max_power_w)


def noise_free_cost(trace: WorkloadTrace, result: SimulationResult) -> float:
    """A simulation's Zeus cost with the luck of its run draws taken out, J.

    Each converged trial's epochs-to-target is replaced by the mean over its batch size's runs
    that reach the target within ``max_epochs``; its profiling overhead and every failed or
    early-stopped trial keep their simulated cost. Two policies that face the same seed draw
    different runs as soon as they choose differently, so over a few seeds their costs differ by
    luck as well as by their choices; this figure compares the choices alone.

    Example:
        >>> from zeus_core.simulate import ZeusPolicy, load_nsdi23_traces
        >>> trace = load_nsdi23_traces("v100")[4]
        >>> result = simulate(trace, ZeusPolicy(trace, seed=1), seed=1, recurrences=5)
        >>> noise_free_cost(trace, result) > 0
        True
    """
    maxp = trace.max_power_w
    total = 0.0
    for t in result.trials:
        if not t.converged:
            total += t.cost_j
            continue
        ok = _converging_epochs(trace, t.batch_size)
        steady = trace.epochs[(t.batch_size, t.power_limit_w)]
        epoch_cost = zeus_cost(steady.energy_j, steady.time_s, result.eta_knob, maxp)
        total += t.overhead_j + epoch_cost * sum(ok) / len(ok)
    return total


def oracle(trace: WorkloadTrace, eta_knob: float) -> tuple[int, int, tuple[float, float, float]]:
    """The best fixed configuration in hindsight: (batch size, power limit W, expected per recurrence).

    Chosen by :func:`expected_fixed_cost` over every traced configuration, knowing all runs.

    Example:
        >>> from zeus_core.simulate import load_nsdi23_traces
        >>> trace = load_nsdi23_traces("v100")[4]
        >>> batch_size, power_limit_w, (energy_j, time_s, cost_j) = oracle(trace, 0.5)
        >>> batch_size in trace.batch_sizes
        True
    """
    best: tuple[int, int, tuple[float, float, float]] | None = None
    for bs, pl in sorted(trace.epochs):
        exp = expected_fixed_cost(trace, bs, pl, eta_knob)
        if exp is not None and (best is None or exp[2] < best[2][2]):
            best = (bs, pl, exp)
    if best is None:
        raise ZeusConfigError(f"oracle: no configuration of {trace.workload.name} ever reaches the target.")
    return best
