"""Our simulator against the published one (``zeus==0.16.0``, ``zeus._legacy.simulate``).

Driving the published policy through our simulator must give the published simulator's numbers
exactly (same seeds draw the same runs), and our Default must reproduce issue 5's reference cuts.
Skipped where the published package (a dev extra) is not installed.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from zeus_core.simulate import DefaultPolicy, PublishedZeusPolicy, load_nsdi23_traces, make_policy, simulate

pd = pytest.importorskip("pandas")
pytest.importorskip("zeus._legacy.simulate")

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "nsdi23.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("_nsdi23_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["_nsdi23_bench"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("gpu", "index", "seed"), [("v100", 2, 1), ("a40", 4, 2)])
def test_published_policy_in_our_simulator_matches_the_published_simulator(
    shared_data, bench, gpu, index, seed
):
    folder = shared_data / "zeus_nsdi23"
    trace = load_nsdi23_traces(gpu, folder)[index]
    train, power = pd.read_csv(folder / "summary_train.csv"), pd.read_csv(folder / f"summary_power_{gpu}.csv")
    published = bench.run_published(trace, train, power, seed, 0.5, 2.0)
    ours = simulate(trace, PublishedZeusPolicy(trace, seed, 2.0), seed=seed)
    assert ours.cost_j == pytest.approx(published["cost"], rel=1e-9)
    assert ours.energy_j == pytest.approx(published["energy"], rel=1e-9)


def test_default_reproduces_the_issue_reference_eta_cuts(shared_data, bench):
    folder = shared_data / "zeus_nsdi23"
    train, power = pd.read_csv(folder / "summary_train.csv"), pd.read_csv(folder / "summary_power_a40.csv")
    cuts = []
    for trace in load_nsdi23_traces("a40", folder):
        published = bench.run_published(trace, train, power, 1, 0.5, 2.0)
        default = simulate(trace, DefaultPolicy(trace), seed=1)
        cuts.append(round(100 * (1 - published["energy"] / default.energy_j), 1))
    assert cuts == list(bench._REFERENCE_ETA_CUT["a40"])


def test_reproduce_registers_the_published_policy(shared_data):
    trace = load_nsdi23_traces("v100", shared_data / "zeus_nsdi23")[4]
    policy = make_policy("zeus-0.16", trace, seed=3)
    assert isinstance(policy, PublishedZeusPolicy) and policy.name == "zeus-0.16"
    assert (
        simulate(trace, policy, seed=3).cost_j
        == simulate(trace, PublishedZeusPolicy(trace, 3), seed=3).cost_j
    )
