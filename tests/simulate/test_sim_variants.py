"""Generated variants of the NSDI'23 traces: what changes across GPUs changes, the rest does not."""

from __future__ import annotations

import math

import pytest

from zeus_core.simulate import (
    Choice,
    DefaultPolicy,
    FixedPolicy,
    ZeusPolicy,
    generate_variant,
    load_nsdi23_traces,
    simulate,
)


@pytest.fixture
def traces(shared_data):
    return [t for gpu in ("a40", "v100") for t in load_nsdi23_traces(gpu, shared_data / "zeus_nsdi23")]


def test_a_variant_is_a_pure_function_of_trace_and_seed(traces):
    a, b, c = (generate_variant(traces[0], s) for s in (1001, 1001, 1002))
    assert a == b and a != c
    assert a.gpu == "a40~1001" and a.workload.name == traces[0].workload.name


def test_a_variant_keeps_the_training_run_and_scales_the_gpu_within_range(traces):
    for i, trace in enumerate(traces):
        for seed in range(1000 + i, 1120, len(traces)):
            v = generate_variant(trace, seed)
            assert set(v.batch_sizes) <= set(trace.batch_sizes)
            assert len(v.batch_sizes) >= len(trace.batch_sizes) - 1  # at most the largest is dropped
            w = v.workload
            assert w.default_batch_size in v.batch_sizes
            assert all(e is not None and e <= w.max_epochs for e in v.target_epochs[w.default_batch_size])
            for b in v.batch_sizes:
                # Runs that never reach the target still never do; the others move by a few %.
                for old, new in zip(trace.target_epochs[b], v.target_epochs[b]):
                    assert (old is None) == (new is None)
                    if old is not None and b != w.default_batch_size:
                        assert abs(new - old) <= 1 or abs(math.log(new / old)) <= 0.3  # 5 % noise
                top = max(v.power_limits_for(b))
                scale = v.epochs[(b, top)].time_s / trace.epochs[(b, top)].time_s
                spread = 0.3 + 0.2 * abs(math.log2(b / trace.workload.default_batch_size)) + 0.3
                assert abs(math.log(scale)) <= spread
                assert all(v.epochs[(b, p)].power_w <= p for p in v.power_limits_for(b))


def test_ours_runs_on_variants(traces):
    v = generate_variant(traces[5], 1005)  # A40 sentiment140
    assert simulate(v, ZeusPolicy(v, 1), seed=1).num_recurrences == v.num_recurrences()


def test_on_some_variants_profiling_power_limits_alone_costs_more_than_default(traces):
    """Why 'ours <= Default on every generated pair' cannot hold for any policy that profiles limits.

    On v100~1034 (squad) the default batch size is the best one and the maximum power limit is the
    best limit: the default batch size with just-in-time power limits and no exploration at all
    already costs more than Default, by the profiling epoch. On the measured V100 squad it saves.
    """
    variant = generate_variant(traces[34 % 12], 1034)
    measured = traces[34 % 12]
    assert variant.gpu == "v100~1034" and measured.workload.name == "squad/bert_base_uncased"
    for trace, dearer in ((variant, True), (measured, False)):
        default_bs = trace.workload.default_batch_size
        jit = [simulate(trace, FixedPolicy(trace, default_bs, None), seed=s).cost_j for s in range(1, 5)]
        default = [simulate(trace, DefaultPolicy(trace), seed=s).cost_j for s in range(1, 5)]
        assert (sum(jit) > sum(default)) is dearer
    assert FixedPolicy(variant, 32, None).choose(1) == Choice(32, None)
