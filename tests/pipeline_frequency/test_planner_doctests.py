"""The runnable examples in Perseus's docstrings (planner, runtime, data, faces and support code)."""

from __future__ import annotations

import doctest
import importlib
import inspect
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

P = "zeus_core.optimizer.pipeline_frequency"
MODULES = [
    P,
    f"{P}._schedule",
    f"{P}._profile",
    f"{P}._frequency_plan",
    f"{P}.planner",
    f"{P}.planner._blocking_power",
    f"{P}.planner._cost_model",
    f"{P}.planner._dag",
    f"{P}.planner._max_flow",
    f"{P}.planner._frontier_solver",
    f"{P}.planner._frontier",
    f"{P}.planner._real_time",
    f"{P}.planner._plan_at_time",
    f"{P}.planner._plots",
    f"{P}.runtime",
    f"{P}.runtime._controller",
    f"{P}.runtime._phases",
    f"{P}.runtime._records",
    f"{P}.runtime._plan_target",
    f"{P}.runtime._profiler",
    f"{P}.runtime._perseus_runtime",
    f"{P}.runtime._observed_schedule",
    f"{P}.runtime._rank_zero_decisions",
    f"{P}.runtime._save_dir",
    "zeus_core.testing._pipeline_profiles",
    "zeus_core.testing._pipeline_gpu",
]
#: Internal modules with no public name, hence no example to run.
WITHOUT_EXAMPLES = {
    f"{P}.planner._frontier_solver",
    f"{P}.runtime._observed_schedule",
    f"{P}.runtime._rank_zero_decisions",
    f"{P}.runtime._save_dir",
}


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    if name.endswith("_plots"):
        pytest.importorskip("matplotlib")
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0 or name in WITHOUT_EXAMPLES


def test_integration_docstring_examples_run() -> None:
    pytest.importorskip("torch")
    module = importlib.import_module("zeus_integrations.pipeline.torch_pipelining")
    assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0


@pytest.mark.parametrize("name", ["emulation", "cpu_shims"])
def test_example_support_docstring_examples_run(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(Path(REPO_ROOT) / "examples"))  # as when an example runs
    module = importlib.import_module(f"_support.{name}")
    assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0


@pytest.mark.parametrize("face", [P, f"{P}.planner", f"{P}.runtime"])
def test_every_public_class_and_function_has_an_example(face: str) -> None:
    module = importlib.import_module(face)
    missing = [
        name
        for name in module.__all__
        if inspect.isclass(obj := getattr(module, name)) or inspect.isfunction(obj)
        if "Example" not in (inspect.getdoc(obj) or "")
    ]
    assert not missing, f"{face}: add an Example to the docstrings of {missing}"
