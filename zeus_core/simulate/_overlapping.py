"""Trace-driven simulation of a recurring job whose submissions overlap in time (Zeus's Alibaba study).

Zeus (NSDI'23 §6) replays recurring-job groups of the Alibaba GPU cluster trace: each submission
starts and ends at its trace times, so a job may be submitted while earlier ones still run. The
rules are the published simulator's (``zeus._legacy.simulate.Simulator.simulate_one_alibaba_group``):

* a submission made while no job of the group runs takes the policy's batch size; one made while
  others run takes the batch size of the cheapest converged trial so far (the default batch size
  before any converged), since the policy has not yet seen what is in flight;
* each trial is run as :func:`~zeus_core.simulate.simulate` runs it (run draw, just-in-time power
  limit, the policy's early stopping decided at submission) and observed by the policy when its
  submission ends, in order of end time;
* a trial that misses the target is retried when it ends, for the same duration as the submission.

Every trial's energy and time are the trace's for the whole job; the caller scales them by the
submission's runtime ratio where the trace gives one.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from zeus_core.exceptions import ZeusConfigError
from zeus_core.simulate._policies import Policy, TrialOutcome
from zeus_core.simulate._simulator import SimulationResult, TrialRecord, _run_trial, jit_power_limit
from zeus_core.simulate._traces import WorkloadTrace

__all__ = ["simulate_overlapping"]


def simulate_overlapping(
    trace: WorkloadTrace,
    policy: Policy,
    submissions: Sequence[tuple[float, float]],
    *,
    seed: int,
    eta_knob: float = 0.5,
    max_tries: int = 20,
) -> SimulationResult:
    """Replay submissions ``(start s, end s)``, sorted by start, of one job under ``policy``.

    Args:
        trace: The workload's traces.
        policy: Picks batch sizes and early-stops trials; it is mutated (use a fresh one per call).
        submissions: Each submission's start and end time, s, sorted by start.
        seed: Seeds the run draws (as :func:`~zeus_core.simulate.simulate` draws them).
        eta_knob: Weight of energy in the Zeus cost.
        max_tries: Trials per submission before the target is declared unreachable.

    Returns:
        Every trial in the order the trials ended; ``recurrence`` is the submission's index.

    Raises:
        ZeusConfigError: Unsorted submissions, or one that did not converge within ``max_tries``.

    Example:
        >>> from zeus_core.simulate import DefaultPolicy, load_nsdi23_traces
        >>> trace = load_nsdi23_traces("v100")[4]
        >>> result = simulate_overlapping(trace, DefaultPolicy(trace), [(0, 10), (5, 15)], seed=1)
        >>> [t.recurrence for t in result.trials if t.converged]
        [0, 1]
    """
    starts = [s for s, _ in submissions]
    if starts != sorted(starts) or any(e < s for s, e in submissions):
        raise ZeusConfigError("simulate_overlapping: submissions must be sorted by start, each ending after.")
    maxp = trace.max_power_w
    rng = np.random.default_rng(seed)
    profiled: dict[int, int] = {}
    trials: list[TrialRecord] = []
    running: list[tuple[float, float, TrialRecord]] = []  # (start s, end s, its trial)
    tries = [0] * len(submissions)
    best: tuple[float, int] | None = None  # (cost J, batch size) of the cheapest converged trial

    def launch(recurrence: int, start: float, end: float) -> None:
        tries[recurrence] += 1
        if tries[recurrence] > max_tries:
            raise ZeusConfigError(
                f"simulate_overlapping: {trace.workload.name} on {trace.gpu} under {policy.name} did not "
                f"reach the target in {max_tries} tries at submission {recurrence}."
            )
        number = len(trials) + len(running) + 1
        if running:
            bs = trace.workload.default_batch_size if best is None else best[1]
        else:
            bs = policy.choose(number).batch_size
        profile = bs not in profiled
        pl = profiled.setdefault(bs, jit_power_limit(trace, bs, eta_knob))
        runs = trace.target_epochs[bs]
        target = runs[int(rng.choice(len(runs), size=1, replace=False)[0])]
        record = _run_trial(trace, policy, recurrence, number, bs, pl, profile, target, eta_knob, maxp)
        running.append((start, end, record))

    def reap(now: float) -> None:
        nonlocal best
        while True:
            done = sorted((job for job in running if job[1] <= now), key=lambda job: job[1])
            if not done:
                return
            for job in done:
                start, end, t = job
                running.remove(job)
                policy.observe(
                    TrialOutcome(t.batch_size, t.power_limit_w, t.cost_j, t.converged, t.overhead_j, t.epochs)
                )
                trials.append(t)
                if t.converged:
                    if best is None or t.cost_j < best[0]:
                        best = (t.cost_j, t.batch_size)
                else:  # retried now, for as long; it may end before the others: scan again
                    launch(t.recurrence, end, end + (end - start))
                    break

    for i, (start, end) in enumerate(submissions):
        reap(start)
        launch(i, start, end)
    reap(float("inf"))
    return SimulationResult(
        trace.workload.name, trace.gpu, policy.name, seed, eta_knob, len(submissions), tuple(trials)
    )
