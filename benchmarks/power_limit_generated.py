"""GlobalPowerLimitOptimizer vs ``zeus==0.16.0``'s on generated profiles, through their public loops.

Both optimizers run Zeus's documented loop (``on_epoch_begin``; per step ``on_step_begin`` /
``on_step_end``; ``on_epoch_end``) on the same fake NVML GPU (``zeus_core/testing/_fake_nvml.py``)
whose energy counter advances with the power the generated workload draws under the limit each
optimizer sets, on one virtual clock (so the run takes CPU time only). Between epochs the GPU runs
an "evaluation" at the current limit for a few steps' time, outside any training step.

Workloads come from :mod:`zeus_core.testing._power_limit_generator` (V100, A100, H100,
RTX 6000, A40 and L4 limit ranges; random DVFS knees, memory-bound shares, plateaus); noise is
none, or 5 % jitter + 2 % stalls (3×) + a 3-step warm-up transient after every limit change.
Grid: profiles × selectors (Time, Energy, ZeusCost η=0.5, MaxSlowdown 1.1) × noise × epoch
lengths (32, 100, 1000 steps). Both optimizers get Zeus's defaults (wait 1, warm-up 10,
profile 40 steps) and the GPU's limit step; ours otherwise runs with its defaults.

Reported, per optimizer:

* *decided within budget*: the limit was chosen within Zeus's exhaustive sweep length
  (wait + (warm-up + profile) × limits steps). Runs are cut at 3 × that; Zeus cannot finish a
  limit inside an epoch shorter than warm-up + profile steps, so with 32-step epochs it never decides;
* *within 1 %*: the chosen limit's selector cost is within 1 % of the optimum's (noise-free
  profile; for MaxSlowdown, energy within 1 % and time within 1 % of the allowed slowdown);
* *extra cost*: the selector cost of every step run before the decision (or the cut) minus the
  same steps at the optimal limit, in units of one optimal step, summed (for MaxSlowdown, each
  step's larger relative excess of energy or time, so steps that break the bound count too);
  reported as ours / Zeus's, over all cases and over the cases where Zeus decided;
* *deterministic*: our optimizer run twice on each case gives the same decision;
* *informed* (within 1 %): what the noise alone allows within the budget: a choice that knows the
  optimum, so it measures only the limits around it (and the highest, for MaxSlowdown), one visit
  each with Zeus's warm-up, the budget split among them, stalls dropped exactly
  (:func:`benchmarks.power_limit_common.informed_choice`). Not an optimizer, and not a strict
  bound either: it does not adapt, so an optimizer that does can beat it on a seed.

Usage::

    python benchmarks/power_limit_generated.py                 # 48 profiles (about 2-4 minutes)
    python benchmarks/power_limit_generated.py --profiles 200  # the full grid
    python benchmarks/power_limit_generated.py --seeds 20      # 20 seeds pooled (as on the docs page, 30 min)
    python benchmarks/power_limit_generated.py   # --a40 DIR for other measured profiles
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.power_limit_common import (  # noqa: E402
    SELECTORS,
    bind_zeus,
    excess,
    informed_choice,
    optimal,
    reset_zeus_gpus,
    waste,
    zeus_selector,
)
from zeus_core import console, data  # noqa: E402
from zeus_core.testing import MeasuredProfile, VirtualClock  # noqa: E402
from zeus_core.testing._fake_nvml import FakeDevice, FakeGPUSpec, FakeNVML  # noqa: E402
from zeus_core.testing._power_limit_generator import GPUS, GpuModel, NoisyRun, StepNoise, generate  # noqa: E402

__all__ = ["Case", "Outcome", "case_seed", "noise_free_truth", "run_grid", "summarize", "main"]

EPOCHS = (32, 100, 1000)
NOISES = {"none": StepNoise.none(), "5% jitter + stalls": StepNoise.realistic()}
TOLERANCE = 0.01
EVAL_STEPS = 5
"""Evaluation between epochs lasts this many steps' time, at the limit in force."""
DATA = data.path("power_limit_profiles")  # the measured A40 profiles bundled in the package


class Behavior(Protocol):
    """What a workload must answer: its GPU and the noise-free step at a limit."""

    gpu: GpuModel
    idle_w: float

    def step(self, limit_w: float) -> tuple[float, float]: ...


@dataclass(frozen=True)
class MeasuredWorkload:
    """A measured profile (GPU 0 of a Zeus profile CSV) in the generator's interface."""

    gpu: GpuModel
    profile: MeasuredProfile
    idle_w: float = 60.0

    def step(self, limit_w: float) -> tuple[float, float]:
        """Time per step s and power W at ``limit_w`` (linear between measured limits)."""
        return self.profile.step(limit_w, None)


@dataclass(frozen=True)
class Outcome:
    """One optimizer's run on one case.

    Attributes:
        chosen_w: The decision, W (``None``: none before the cut).
        steps: Steps before the decision (or the cut).
        ok: The decision is within 1 % of the optimum's cost.
        extra: Extra selector cost of those steps, in optimal steps.
    """

    chosen_w: float | None
    steps: int
    ok: bool
    extra: float


@dataclass
class Case:
    """One workload × selector × noise × epoch length, with both optimizers' outcomes."""

    profile: str
    gpu: str
    selector: str
    noise: str
    epoch: int
    budget: int
    optimal_w: float
    ours: Outcome
    zeus: Outcome
    repeat_same: bool
    informed_ok: bool
    """The informed reference's choice (:func:`informed_choice`) is within 1 % of the optimum."""
    extra: dict[str, Any] = field(default_factory=dict)


def noise_free_truth(w: Behavior) -> dict[float, tuple[float, float]]:
    """Noise-free (time per step s, energy per step J) at each limit of the sweep."""
    return {lim: (t, t * p) for lim, (t, p) in ((lim, w.step(lim)) for lim in w.gpu.limits())}


class Bench:
    """One fake NVML GPU on one virtual clock, shared by every run (published zeus binds ``pynvml`` once)."""

    def __init__(self) -> None:
        self.clock = VirtualClock(1000.0)  # the start the fake NVML clock had (same figures)
        self.fake = FakeNVML([FakeGPUSpec.a40()], clock=self.clock, root=True)
        bind_zeus(self.fake, clock=self.clock)  # the published monitor's clock: the virtual one
        from zeus_core.device import _base as base

        base.wall_clock = self.clock  # our monitor's clock: the virtual one

    @classmethod
    def shared(cls) -> "Bench":
        """The one bench of this process (published zeus keeps the first ``pynvml`` it imported)."""
        global _BENCH
        if _BENCH is None:
            _BENCH = cls()
        return _BENCH

    def reset(self, gpu: GpuModel) -> FakeDevice:
        """A fresh fake GPU of the model, at its top limit."""
        spec = FakeGPUSpec(
            name=gpu.name, min_limit_w=gpu.min_w, max_limit_w=gpu.max_w, default_limit_w=gpu.max_w
        )
        self.fake.devices = [FakeDevice(spec, 0, self.clock())]
        reset_zeus_gpus()
        return self.fake.devices[0]

    def ours(self, label: str, pl_step: float) -> tuple[Any, Callable[[], float | None]]:
        from zeus_core.device._nvidia import nvidia_gpus
        from zeus_core.monitor._energy import ZeusMonitor
        from zeus_core.optimizer.power_limit import GlobalPowerLimitOptimizer

        monitor = ZeusMonitor(gpus=nvidia_gpus(environ={}), cpu_indices=[], sync_execution_with=None)
        plo = GlobalPowerLimitOptimizer(monitor, SELECTORS[label](), pl_step=pl_step)
        return plo, lambda: plo.optimal_power_limit_w

    def zeus(self, label: str, pl_step: float) -> tuple[Any, Callable[[], float | None]]:
        from zeus.monitor import ZeusMonitor
        from zeus.optimizer.power_limit import Done, GlobalPowerLimitOptimizer

        monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[], sync_execution_with="torch")
        plo = GlobalPowerLimitOptimizer(monitor, zeus_selector(label), pl_step=int(pl_step))

        def decided() -> float | None:
            return plo.state.optimal_power_limit // 1000 if isinstance(plo.state, Done) else None

        return plo, decided

    def drive(
        self, plo: Any, decided: Callable[[], float | None], run: NoisyRun, epoch: int, cap: int
    ) -> tuple[float | None, dict[float, int]]:
        """Zeus's loop until a decision or ``cap`` steps; returns the decision and steps per limit."""
        dev = self.fake.devices[0]
        steps_at: dict[float, int] = {}
        plo.on_epoch_begin()
        for i in range(cap):
            if i and i % epoch == 0:
                plo.on_epoch_end()
                self._evaluate(run, dev)
                plo.on_epoch_begin()
            plo.on_step_begin()
            if decided() is not None:
                break
            limit = dev.power_limit_mw / 1000
            steps_at[limit] = steps_at.get(limit, 0) + 1
            busy_s, power_w, idle_s = run.step(limit)
            self.fake.set_power(0, power_w)
            self.clock.advance(busy_s)
            if idle_s:
                self.fake.set_power(0, run.workload.idle_w)
                self.clock.advance(idle_s)
            plo.on_step_end()
        return decided(), steps_at

    def _evaluate(self, run: NoisyRun, dev: FakeDevice) -> None:
        busy_s, power_w = run.workload.step(dev.power_limit_mw / 1000)
        self.fake.set_power(0, power_w)
        self.clock.advance(EVAL_STEPS * busy_s)


_BENCH: Bench | None = None


def _outcome(
    label: str, truth: dict[float, tuple[float, float]], chosen: float | None, steps_at: dict[float, int]
) -> Outcome:
    ok = chosen is not None and excess(label, truth, chosen) <= TOLERANCE
    return Outcome(chosen, sum(steps_at.values()), ok, waste(label, truth, steps_at))


def run_case(
    bench: Bench, name: str, workload: Behavior, label: str, noise: str, epoch: int, seed: int
) -> Case:
    """Both optimizers (ours twice) on one case."""
    gpu = workload.gpu
    truth = noise_free_truth(workload)
    best = optimal(label, truth)
    budget = 1 + 50 * len(gpu.limits())
    cap = 3 * budget
    results = []
    for which in ("ours", "ours", "zeus"):
        bench.reset(gpu)
        plo, decided = (
            bench.ours(label, gpu.pl_step_w) if which == "ours" else bench.zeus(label, gpu.pl_step_w)
        )
        run = NoisyRun(workload, NOISES[noise], seed)
        try:
            chosen, steps_at = bench.drive(plo, decided, run, epoch, cap)
        finally:
            if which == "ours":
                plo.on_train_end()
        results.append(_outcome(label, truth, chosen, steps_at))
    ours, again, zeus = results
    run = NoisyRun(workload, NOISES[noise], seed)
    informed = informed_choice(label, truth, lambda w: run.step(w)[:2], budget)
    return Case(
        name, gpu.name, label, noise, epoch, budget, best, ours, zeus, ours.chosen_w == again.chosen_w,
        excess(label, truth, informed) <= TOLERANCE,
    )  # fmt: skip


def case_seed(seed: int, profile: int) -> int:
    """The noise seed of the grid's cases of one profile (its index among the seed's profiles)."""
    return seed * 100_003 + profile


def run_grid(
    workloads: Sequence[tuple[str, Behavior]],
    selectors: Sequence[str] = tuple(SELECTORS),
    noises: Sequence[str] = tuple(NOISES),
    epochs: Sequence[int] = EPOCHS,
    seed: int = 0,
) -> list[Case]:
    """Every workload × selector × noise × epoch length."""
    bench = Bench.shared()
    cases = []
    for i, (name, w) in enumerate(workloads):
        for label in selectors:
            for noise in noises:
                for epoch in epochs:
                    cases.append(run_case(bench, name, w, label, noise, epoch, case_seed(seed, i)))
    return cases


def summarize(cases: Sequence[Case]) -> dict[str, float]:
    """The headline figures (see the module docstring)."""
    n = len(cases)
    decided_zeus = [c for c in cases if c.zeus.chosen_w is not None]
    ours_extra = sum(c.ours.extra for c in cases)
    zeus_extra = sum(c.zeus.extra for c in cases)
    ours_dz = sum(c.ours.extra for c in decided_zeus)
    zeus_dz = sum(c.zeus.extra for c in decided_zeus)
    return {
        "cases": n,
        "ours_in_budget": sum(c.ours.chosen_w is not None and c.ours.steps <= c.budget for c in cases) / n,
        "zeus_in_budget": sum(c.zeus.chosen_w is not None and c.zeus.steps <= c.budget for c in cases) / n,
        "zeus_decided": len(decided_zeus) / n,
        "ours_ok": sum(c.ours.ok for c in cases) / n,
        "zeus_ok": sum(c.zeus.ok for c in cases) / n,
        "informed_ok": sum(c.informed_ok for c in cases) / n,
        "extra_ratio": ours_extra / zeus_extra if zeus_extra else float("nan"),
        "extra_ratio_zeus_decided": ours_dz / zeus_dz if zeus_dz else float("nan"),
        "deterministic": sum(c.repeat_same for c in cases) / n,
    }


def _row(label: str, cases: Sequence[Case]) -> str:
    if not cases:
        return ""
    s = summarize(cases)
    return (
        f"{label:<26} {int(s['cases']):>5} | {s['ours_in_budget']:>7.1%} {s['zeus_in_budget']:>7.1%} | "
        f"{s['ours_ok']:>7.1%} {s['zeus_ok']:>7.1%} {s['informed_ok']:>8.1%} | {s['extra_ratio']:>7.1%} "
        f"{s['extra_ratio_zeus_decided']:>9.1%} | {s['deterministic']:>6.1%}"
    )


def report(cases: Sequence[Case]) -> str:
    """The table: overall, then per selector, noise, epoch length and GPU."""
    head = (
        f"{'cases':<26} {'n':>5} | {'in budget':^15} | {'within 1 %':^24} | {'extra cost ours/Zeus':^17} | "
        f"{'same':>6}\n{'':<26} {'':>5} | {'ours':>7} {'Zeus':>7} | "
        f"{'ours':>7} {'Zeus':>7} {'informed':>8} | {'all':>7} {'Zeus dec.':>9} | {'twice':>6}"
    )
    lines = [head, "-" * 107, _row("all", cases)]
    groups: list[tuple[str, Callable[[Case], Any]]] = [
        ("selector", lambda c: c.selector),
        ("noise", lambda c: c.noise),
        ("epoch", lambda c: c.epoch),
        ("gpu", lambda c: c.gpu),
    ]
    for title, key in groups:
        for value in dict.fromkeys(key(c) for c in cases):
            lines.append(_row(f"{title}={value}", [c for c in cases if key(c) == value]))
    return "\n".join(line for line in lines if line)


def measured_workloads(data: Path) -> list[tuple[str, Behavior]]:
    """The A40 profiles in ``data`` (GPU 0 of each), as workloads."""
    return [
        (p.stem, MeasuredWorkload(GPUS["A40"], MeasuredProfile.from_zeus_csv(p, gpu=0)))
        for p in sorted(data.glob("*.csv"))
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Print the comparison tables (generated profiles, then the measured A40 profiles if found)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", type=int, default=48, help="generated profiles (default 48; full: 200)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the profiles and the noise")
    parser.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="run the grid this many times, seeds --seed, --seed + 1, ... (new profiles and noise each); "
        "the tables pool them and the JSON keeps each seed's figures",
    )
    parser.add_argument("--a40", type=Path, default=DATA, help="folder of measured A40 profile CSVs")
    parser.add_argument("--epochs", type=int, nargs="*", default=list(EPOCHS), help="epoch lengths, steps")
    parser.add_argument(
        "--json", type=Path, default=None, metavar="PATH", help="also write the results as JSON"
    )
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    console.set_enabled(False)
    start = time.perf_counter()
    seeds = list(range(args.seed, args.seed + max(1, args.seeds)))
    measured = measured_workloads(args.a40) if args.a40.is_dir() else []
    by_seed: dict[int, tuple[list[Case], list[Case]]] = {}
    for seed in seeds:  # each seed: its own profiles and noise (the measured profiles: their noise)
        workloads = [(f"gen{i}", w) for i, w in enumerate(generate(args.profiles, seed))]
        by_seed[seed] = (
            run_grid(workloads, epochs=args.epochs, seed=seed),
            run_grid(measured, epochs=args.epochs, seed=seed) if measured else [],
        )
    cases = [c for gen, _ in by_seed.values() for c in gen]
    a40 = [c for _, m in by_seed.values() for c in m]
    print(
        f"Generated profiles: {args.profiles} workloads × {len(SELECTORS)} selectors × {len(NOISES)} noise "
        f"levels × epochs {args.epochs} × seeds {seeds}; ours vs zeus==0.16.0 on a fake NVML GPU\n"
    )
    print(report(cases))
    per_seed = {seed: summarize(gen) for seed, (gen, _) in by_seed.items()}
    if len(seeds) > 1:
        print("\nWithin 1 % per seed, ours / Zeus / informed:")
        for seed, s in per_seed.items():
            print(f"  seed {seed}: {s['ours_ok']:.2%} / {s['zeus_ok']:.2%} / {s['informed_ok']:.2%}")
    if measured:
        print(f"\nMeasured A40 profiles ({len(measured)}, {args.a40}):\n")
        print(report(a40))
    else:
        print(f"\n(no measured profiles at {args.a40}; pass --a40 to check them)")
    payload = {
        "benchmark": "power_limit_generated",
        "profiles": args.profiles,
        "seed": args.seed,
        "seeds": seeds,
        "epochs": args.epochs,
        "generated": _groups(cases),
        "generated_per_seed": {str(seed): s for seed, s in per_seed.items()},
        "measured_a40": _groups(a40) if a40 else None,
        "misses": [
            {"seed": seed, **_miss(c)} for seed, (gen, m) in by_seed.items() for c in gen + m if not c.ours.ok
        ],
    }
    print(f"\n({time.perf_counter() - start:.0f} s)")
    if args.json:
        from benchmarks._results import write_json

        write_json(args.json, __file__, list(sys.argv[1:] if argv is None else argv), payload)
    return 0


def _groups(cases: Sequence[Case]) -> dict[str, Any]:
    """The summary overall and by selector, noise, epoch length and GPU (as the printed table)."""
    out: dict[str, Any] = {"all": summarize(cases)}
    for title, key in (("selector", "selector"), ("noise", "noise"), ("epoch", "epoch"), ("gpu", "gpu")):
        for value in dict.fromkeys(getattr(c, key) for c in cases):
            out[f"{title}={value}"] = summarize([c for c in cases if getattr(c, key) == value])
    return out


def _miss(c: Case) -> dict[str, Any]:
    return {"profile": c.profile, "selector": c.selector, "noise": c.noise, "epoch": c.epoch,
            "chosen_w": c.ours.chosen_w, "optimal_w": c.optimal_w}  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
