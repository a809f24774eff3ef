"""Selectors (``_selectors.py``): the built-in four, Zeus-style ``select`` selectors, and custom ones."""

from __future__ import annotations

import re

import pytest

from tests.conftest import REPO_ROOT
from tests.optimizer.plo_support import make_gpus, monitor_of, run_steps
from zeus_core.exceptions import ZeusConfigError
from zeus_core.optimizer.power_limit import (
    Energy,
    GlobalPowerLimitOptimizer,
    MaxSlowdownConstraint,
    OptimumSelector,
    PowerLimitMeasurement,
    Time,
    ZeusCost,
)

M = PowerLimitMeasurement
MS = [
    M(300, energy=60.0, time=0.20, steps=40),
    M(250, energy=50.0, time=0.20, steps=40),
    M(200, energy=45.0, time=0.225, steps=40),
    M(150, energy=54.0, time=0.36, steps=40),
]


def test_each_selector_picks_its_optimum() -> None:
    assert Time().select(MS) == 300  # ties: the higher limit
    assert Energy().select(MS) == 200
    assert ZeusCost(0.5).select(MS) == 250  # 0.5·E + 0.5·300 W·T
    assert ZeusCost(0.0).select(MS) == 300 and ZeusCost(1.0).select(MS) == 200
    assert MaxSlowdownConstraint(1.1).select(MS) == 250  # 200 W is 12.5 % slower
    assert MaxSlowdownConstraint(1.13).select(MS) == 200


def test_zeus_cost_uses_the_metric_and_the_job_gpu_count() -> None:
    two = [M(300, energy=120.0, time=0.2, num_gpus=2), M(250, energy=100.0, time=0.23, num_gpus=2)]
    # MaxPower = 300 W × 2 GPUs: 0.5·100 + 0.5·600·0.23 = 119 < 0.5·120 + 0.5·600·0.2 = 120.
    assert ZeusCost(0.5).select(two) == 250
    assert ZeusCost(0.5, world_size=1).select(two) == 250
    assert ZeusCost(0.5, world_size=8).select(two) == 300  # time priced at 8 GPUs' power


def test_slowdown_is_relative_to_the_highest_limit_with_its_tolerance() -> None:
    ms = [
        M(300, energy=60.0, time=0.20),
        M(275, energy=58.0, time=0.19),
        M(250, energy=50.0, time=0.2205),
    ]  # 250 W: 10.25 % slower than 300 W
    assert MaxSlowdownConstraint(1.1).select(ms) == 275  # Zeus's strict bound (the default)
    assert MaxSlowdownConstraint(1.1, tolerance=0.005).select(ms) == 250  # within 1.1 × (1 + 0.5 %)


@pytest.mark.parametrize(
    ("make", "text"),
    [
        (lambda: ZeusCost(1.5), "eta_knob must be within"),
        (lambda: ZeusCost(0.5, world_size=0), "world_size"),
        (lambda: MaxSlowdownConstraint(0.9), ">= 1.0"),
        (lambda: MaxSlowdownConstraint(1.1, tolerance=0.2), "tolerance=0.2"),
    ],
)
def test_bad_arguments_are_refused_with_the_value(make, text: str) -> None:
    with pytest.raises(ZeusConfigError, match=text):
        make()


def test_selecting_from_nothing_or_with_nothing_defined_says_what_to_do() -> None:
    with pytest.raises(ZeusConfigError, match="profile at least one limit"):
        Energy().select([])
    with pytest.raises(ZeusConfigError, match="defines neither select\\(\\) nor cost\\(\\)"):
        OptimumSelector().select(MS)
    assert repr(MaxSlowdownConstraint(1.1)) == "MaxSlowdownConstraint(factor=1.1, tolerance=0.0)"


def test_a_zeus_style_selector_runs_unchanged_and_gets_zeus_sweep() -> None:
    ZeusStyle = docs_selector("LeastEnergyDelay")  # written as Zeus's docs show: select() only
    gpus = make_gpus(1)
    plo = GlobalPowerLimitOptimizer(
        monitor_of(gpus), ZeusStyle(), warmup_steps=2, profile_steps=4, pl_step=50
    )
    plo.on_train_begin()
    run_steps(plo, gpus, 40)
    # Every limit measured for profile_steps (no cost: no early stopping), the choice its select's.
    assert [(m.power_limit, m.steps) for m in plo.measurements] == [(w, 4) for w in (300, 250, 200, 150, 100)]
    assert plo.optimal_power_limit_w == ZeusStyle().select(list(plo.measurements)) == 250  # least E·T
    plo.on_train_end()


def docs_selector(name: str) -> type:
    """A selector class as printed in docs/optimizers/power-limit.md (its code block, run)."""
    text = (REPO_ROOT / "docs" / "optimizers" / "power-limit.md").read_text(encoding="utf-8")
    (code,) = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if f"class {name}(" in b]
    namespace: dict = {}
    exec(compile(code, "power-limit.md", "exec"), namespace)
    return namespace[name]


def test_the_docs_custom_selector_is_short_stops_early_and_keeps_its_constraint() -> None:
    PowerCap = docs_selector("PowerCap")
    text = (REPO_ROOT / "docs" / "optimizers" / "power-limit.md").read_text(encoding="utf-8")
    assert len(text.split("class PowerCap(")[1].split("```")[0].strip().splitlines()) + 1 <= 20
    gpus = make_gpus(2, noise=0.02)
    plo = GlobalPowerLimitOptimizer(monitor_of(gpus), PowerCap(230), warmup_steps=2, pl_step=25)
    plo.on_train_begin()
    run_steps(plo, gpus, 600)
    # The synthetic profile draws its limit: 225 W is the fastest under a 230 W cap.
    assert plo.optimal_power_limit_w == 225
    assert plo.steps_used < plo.budget_steps and 100 not in {m.power_limit for m in plo.measurements}
    plo.on_train_end()
