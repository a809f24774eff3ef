"""The runnable examples in the planner's docstrings."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "schedule",
    "profile",
    "cost_model",
    "dag",
    "mincut",
    "solver",
    "frontier",
    "refine",
    "plan",
    "plots",
    "zeus_core.testing._pipeline_profiles",
    "blocking_power",
    "zeus_core.testing._pipeline_gpu",
    "point_plan",
    "plan_settings",
    "profiler",
    "runtime",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    if name == "plots":
        pytest.importorskip("matplotlib")
    module = importlib.import_module(
        name if "." in name else f"zeus_core.optimizer.pipeline_frequency.{name}"
    )
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0 or name == "solver"


@pytest.mark.parametrize("name", ["emulation", "cpu_shims", "torch_pipelining"])
def test_integration_docstring_examples_run(name: str) -> None:
    pytest.importorskip("torch")
    module = importlib.import_module(f"zeus_integrations.pipeline.{name}")
    assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0
