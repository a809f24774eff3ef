"""States of the power-limit profiling state machine: small frozen values.

Profiling has two phases. The *sweep* measures limits from the highest down; with early
stopping each limit gets ``min_steps`` measured steps and the sweep ends as soon as no lower
limit can win. The *refinement* then measures the contenders (limits that could still be the
choice) again, until one is left or all are tight. States of the refinement carry
``refine=True``.

Transitions (all made by ``GlobalPowerLimitOptimizer._transition``; "step" means an
``on_step_begin``)::

    Ready(limit, steps_left)   --steps_left-th step-->  Warmup(limit) | Profiling(limit)  [sets the limit]
    Warmup(limit, steps_left)  --steps_left-th step-->  Profiling(limit)                  [opens the window]
    Profiling(limit)           --on_epoch_end-->        Profiling(limit, paused=True)     [keeps the samples]
    Profiling(paused=True)     --next step-->           Profiling(limit)                  [reopens the window]
    Profiling(limit)           --measurement done-->    Warmup | Profiling (next limit: lower in the
                                                        sweep, or a contender) | Done
    any but Done               --budget spent-->        Done

A measurement is done after ``profile_steps`` steps (a refinement visit: at the cap of
:func:`~zeus_core.optimizer.power_limit.planner.visit_cap`), or earlier when the early-stopping rules
say so (see :class:`~zeus_core.optimizer.power_limit.optimizer.GlobalPowerLimitOptimizer`); it
can only end where a sample ends (:mod:`~zeus_core.optimizer.power_limit.sampling`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Union

from zeus_core.exceptions import ZeusProfileError

__all__ = ["Ready", "Warmup", "Profiling", "Done", "State", "state_to_dict", "state_from_dict"]


@dataclass(frozen=True)
class Ready:
    """Waiting to start on a limit (at training start, or after an epoch cut a profile short).

    Attributes:
        next_power_limit_w: The limit to profile next, W.
        steps_left: ``on_step_begin`` calls until that limit is set (the last one sets it).
        refine: Whether the limit is a contender measured again.
    """

    next_power_limit_w: float
    steps_left: int
    refine: bool = False


@dataclass(frozen=True)
class Warmup:
    """Running at a limit before measuring it.

    Attributes:
        power_limit_w: The limit set on every GPU, W.
        steps_left: ``on_step_begin`` calls until measuring starts.
        refine: Whether the limit is a contender measured again.
    """

    power_limit_w: float
    steps_left: int
    refine: bool = False


@dataclass(frozen=True)
class Profiling:
    """Measuring a limit; the job-wide samples gathered so far.

    A sample is a group of consecutive steps read once from the energy counter (see
    :mod:`~zeus_core.optimizer.power_limit.sampling`).

    Attributes:
        power_limit_w: The limit set on every GPU, W.
        steps: Steps measured so far in this visit.
        times_s: Job time of each sample already reduced across ranks, s.
        energies_j: Job GPU energy of each such sample, J.
        refine: Whether the limit is a contender measured again (the samples add to its
            earlier measurement).
        sample_steps: Steps in each such sample.
        steps_per_sample: Steps per sample agreed by every rank (0 until the first sample of
            the visit has ended).
        paused: An epoch ended mid-measurement; the measurement continues at the next step.
    """

    power_limit_w: float
    steps: int = 0
    times_s: tuple[float, ...] = ()
    energies_j: tuple[float, ...] = ()
    refine: bool = False
    sample_steps: tuple[int, ...] = ()
    steps_per_sample: int = 0
    paused: bool = False


@dataclass(frozen=True)
class Done:
    """Profiling is over; the optimal limit is set for the rest of training.

    Attributes:
        optimal_power_limit_w: The chosen limit, W.
        reason: Why profiling ended where it did.
    """

    optimal_power_limit_w: float
    reason: str = ""


State = Union[Ready, Warmup, Profiling, Done]
"""Any state of the machine."""

_KINDS = ("ready", "warmup", "profiling", "done")


def state_to_dict(state: State) -> dict[str, Any]:
    """JSON-safe form of a state, tagged with its ``kind`` (a ``Profiling`` state without samples)."""
    match state:
        case Ready(next_power_limit_w=limit, steps_left=left, refine=refine):
            return {"kind": "ready", "next_power_limit_w": limit, "steps_left": left, "refine": refine}
        case Warmup(power_limit_w=limit, steps_left=left, refine=refine):
            return {"kind": "warmup", "power_limit_w": limit, "steps_left": left, "refine": refine}
        case Profiling(power_limit_w=limit, steps=steps, refine=refine):
            return {"kind": "profiling", "power_limit_w": limit, "steps": steps, "refine": refine}
        case Done(optimal_power_limit_w=limit, reason=reason):
            return {"kind": "done", "optimal_power_limit_w": limit, "reason": reason}
    raise TypeError(f"state_to_dict: {state!r} is not a power-limit optimizer state.")


def state_from_dict(data: Mapping[str, Any]) -> State:
    """Inverse of :func:`state_to_dict` (a ``Profiling`` state comes back without its samples).

    Raises:
        ZeusProfileError: Unknown kind or missing fields.
    """
    kind = data.get("kind")
    try:
        refine = bool(data.get("refine", False))
        match kind:
            case "ready":
                return Ready(float(data["next_power_limit_w"]), int(data["steps_left"]), refine)
            case "warmup":
                return Warmup(float(data["power_limit_w"]), int(data["steps_left"]), refine)
            case "profiling":
                return Profiling(float(data["power_limit_w"]), int(data.get("steps", 0)), refine=refine)
            case "done":
                return Done(float(data["optimal_power_limit_w"]), str(data.get("reason", "")))
    except (KeyError, TypeError, ValueError) as e:
        raise ZeusProfileError(f"Power-limit optimizer state {dict(data)!r} is malformed: {e!r}.") from e
    raise ZeusProfileError(f"Power-limit optimizer state has kind {kind!r}; expected one of {list(_KINDS)}.")
