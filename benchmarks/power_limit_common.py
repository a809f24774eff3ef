"""What the power-limit benchmarks share: the selectors, scoring against the truth, Zeus 0.16 on a fake NVML.

Both benchmarks (``power_limit_replay.py``: measured profiles in real time; ``power_limit_generated.py``:
generated profiles on a virtual clock) run our ``GlobalPowerLimitOptimizer`` and ``zeus==0.16.0``'s
through Zeus's documented loop on the same fake NVML GPUs, and score every decision against the
noise-free profile the steps were drawn from:

* *within 1 %*: the chosen limit's selector cost is within 1 % of the optimum's (for
  MaxSlowdown(1.1): energy within 1 % and time within 1 % of the allowed slowdown);
* *bound broken* (MaxSlowdown only): the chosen limit is truly slower than 1.1 × the highest
  limit's time;
* *waste*: the selector cost of every step run before the decision minus the same steps at the
  optimal limit, in optimal steps (for MaxSlowdown each step's larger relative excess of energy or
  time, so steps that break the bound count too).
"""

from __future__ import annotations

import sys
import types
from typing import Any, Callable

from zeus_core.optimizer.power_limit import Energy, MaxSlowdownConstraint, OptimumSelector, Time, ZeusCost

__all__ = [
    "SELECTORS",
    "TOLERANCE",
    "zeus_selector",
    "optimal",
    "excess",
    "bound_broken",
    "waste",
    "informed_choice",
    "ideal_slowdown_choice",
    "bind_zeus",
]

TOLERANCE = 0.01
SLOWDOWN = 1.1
SELECTORS: dict[str, Callable[[], OptimumSelector]] = {
    "Time": Time,
    "Energy": Energy,
    "ZeusCost(0.5)": lambda: ZeusCost(0.5),
    "MaxSlowdown(1.1)": lambda: MaxSlowdownConstraint(SLOWDOWN),
}

Truth = dict[float, tuple[float, float]]
"""Noise-free (time per step s, job GPU energy per step J) at each limit, W."""


def zeus_selector(label: str, world_size: int = 1) -> Any:
    """The published zeus's selector for one of :data:`SELECTORS`' labels."""
    from zeus.optimizer import power_limit as z

    return {
        "Time": z.Time,
        "Energy": z.Energy,
        "ZeusCost(0.5)": lambda: z.ZeusCost(0.5, world_size=world_size),
        "MaxSlowdown(1.1)": lambda: z.MaxSlowdownConstraint(SLOWDOWN),
    }[label]()


def _costs(label: str, truth: Truth, gpus: int, top_w: float | None = None) -> dict[float, float]:
    """Selector cost of one step at each limit (Time, Energy, ZeusCost; ``top_w``: the highest limit, W)."""
    if label == "Time":
        return {w: t for w, (t, _) in truth.items()}
    if label == "Energy":
        return {w: e for w, (_, e) in truth.items()}
    max_power = (top_w or max(truth)) * gpus
    return {w: 0.5 * e + 0.5 * max_power * t for w, (t, e) in truth.items()}


def optimal(label: str, truth: Truth, gpus: int = 1) -> float:
    """The best limit by the noise-free profile itself, W (ties: the higher limit)."""
    if label.startswith("MaxSlowdown"):
        allowed = SLOWDOWN * truth[max(truth)][0]
        return min((w for w, (t, _) in truth.items() if t <= allowed), key=lambda w: (truth[w][1], -w))
    cost = _costs(label, truth, gpus)
    return min(cost, key=lambda w: (cost[w], -w))


def excess(label: str, truth: Truth, chosen: float, gpus: int = 1) -> float:
    """How much worse ``chosen`` is than the optimum, as a fraction (0: the optimum)."""
    best = optimal(label, truth, gpus)
    if chosen == best:
        return 0.0
    if label.startswith("MaxSlowdown"):
        allowed = SLOWDOWN * truth[max(truth)][0]
        return max(truth[chosen][1] / truth[best][1] - 1, truth[chosen][0] / allowed - 1)
    cost = _costs(label, truth, gpus)
    return cost[chosen] / cost[best] - 1


def bound_broken(label: str, truth: Truth, chosen: float | None) -> bool:
    """Whether a MaxSlowdown choice is truly slower than the bound (always ``False`` for the others)."""
    if chosen is None or not label.startswith("MaxSlowdown"):
        return False
    return truth[chosen][0] > SLOWDOWN * truth[max(truth)][0] * (1 + 1e-9)


def informed_choice(
    label: str, truth: Truth, draw: Callable[[float], tuple[float, float]], budget: int, warmup: int = 10
) -> float:
    """What the noise alone allows within ``budget`` steps: a choice that knows where to look, W.

    It knows the optimum (from ``truth``), so it measures only the limits the choice hinges on: the
    optimum, the limits on either side of it and, for MaxSlowdown, the highest limit (the reference).
    Each gets one visit: ``warmup`` steps drawn and dropped, then an equal share of the rest of
    the budget (one step is Zeus's wait). ``draw(limit)`` gives one step's busy time (s) and power (W);
    a stall's idle time is not part of it, so stalls are dropped exactly. From these measurements it
    chooses as the selector would. It is not an optimizer (it needs the answer to know where to look):
    it shows how often noise alone misleads a choice made within Zeus's budget. Nor is it a strict
    bound: it splits the budget evenly, so an optimizer that adapts can beat it on some seeds.
    """
    limits = sorted(truth, reverse=True)
    i = limits.index(optimal(label, truth))
    watch = limits[max(0, i - 1) : i + 2]
    if label.startswith("MaxSlowdown") and limits[0] not in watch:
        watch.insert(0, limits[0])
    measured = _measure(watch, draw, budget, warmup)
    if label.startswith("MaxSlowdown"):
        allowed = SLOWDOWN * measured[limits[0]][0]
        feasible = [w for w in watch if measured[w][0] <= allowed] or [limits[0]]
        return min(feasible, key=lambda w: (measured[w][1], -w))
    cost = _costs(label, measured, 1, top_w=limits[0])
    return min(cost, key=lambda w: (cost[w], -w))


def ideal_slowdown_choice(
    truth: Truth, draw: Callable[[float], tuple[float, float]], budget: int, warmup: int = 10
) -> float:
    """MaxSlowdown's choice with the whole budget on the two limits it hinges on, W.

    It knows the optimum, so it measures only the optimum and the highest limit (the reference):
    one visit each, as :func:`informed_choice` does, the budget split between the two. It chooses
    the optimum when it measures within the bound, else the next higher limit. Where even this
    misses, the optimum's margin to the bound is within the noise of what the budget can measure.
    """
    limits = sorted(truth, reverse=True)
    best = optimal("MaxSlowdown", truth)
    if best == limits[0]:
        return best
    measured = _measure([limits[0], best], draw, budget, warmup)
    within = measured[best][0] <= SLOWDOWN * measured[limits[0]][0]
    return best if within else limits[limits.index(best) - 1]


def _measure(
    limits: list[float], draw: Callable[[float], tuple[float, float]], budget: int, warmup: int
) -> Truth:
    """One visit to each limit: ``warmup`` steps dropped, then an equal share of the rest of the budget."""
    per = max(1, (budget - 1 - warmup * len(limits)) // len(limits))
    measured: Truth = {}
    for w in limits:
        for _ in range(warmup):
            draw(w)
        steps = [draw(w) for _ in range(per)]
        measured[w] = (sum(t for t, _ in steps) / per, sum(t * p for t, p in steps) / per)
    return measured


def waste(label: str, truth: Truth, steps_at: dict[float, int], gpus: int = 1) -> float:
    """The selector's cost of the steps before the decision beyond the optimum's, in optimal steps."""
    best = optimal(label, truth, gpus)
    total = 0.0
    for w, n in steps_at.items():
        if w not in truth:
            continue
        if label.startswith("MaxSlowdown"):
            (t, e), (t0, e0) = truth[w], truth[best]
            total += n * max(e / e0 - 1, t / t0 - 1, 0.0)
        else:
            cost = _costs(label, truth, gpus)
            total += n * (cost[w] / cost[best] - 1)
    return total


def bind_zeus(fake: types.ModuleType, clock: Callable[[], float] | None = None) -> None:
    """Make ``zeus==0.16.0`` run on ``fake`` (put in ``sys.modules["pynvml"]`` for good).

    The published zeus binds ``pynvml`` once, at import, so one fake serves every run (replace its
    GPUs between runs and call :func:`reset_zeus_gpus`). Persistence mode, which the fake does not
    model, reads as on; RAPL as absent; execution sync and the exit hook that resets a limit on a
    GPU the next run has replaced are no-ops. ``clock`` replaces the published monitor's clock.
    """
    fake.nvmlDeviceGetPersistenceMode = lambda handle: fake.NVML_FEATURE_ENABLED  # type: ignore[attr-defined]
    sys.modules["pynvml"] = fake
    import zeus.device.cpu as zeus_cpu
    import zeus.device.gpu.nvidia as zeus_nvidia

    zeus_nvidia.pynvml = fake  # type: ignore[attr-defined]  # bound at import, if zeus came in before us
    import zeus.monitor.energy as zeus_energy
    import zeus.optimizer.power_limit as zeus_plo

    zeus_cpu.rapl_is_available = lambda: False
    zeus_energy.sync_execution_fn = lambda *a, **k: None
    if clock is not None:
        zeus_energy.time = clock  # type: ignore[assignment]
    zeus_plo.atexit = types.SimpleNamespace(register=lambda *a, **k: None)  # type: ignore[attr-defined]


def reset_zeus_gpus() -> None:
    """Make the published zeus rebuild its GPU list (after the fake's GPUs were replaced)."""
    import zeus.device.gpu as zeus_gpu

    zeus_gpu._gpus = None
