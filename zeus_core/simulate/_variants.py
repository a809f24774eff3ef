"""Generated variants of the NSDI'23 traces: other GPUs that were never measured.

Policies are tuned on these and checked on the measured A40 and V100 traces, so that what they
learn is how training jobs behave, not the two GPUs. A variant keeps the workload and its
training trace (epochs to reach the target are a property of the training run, not of the GPU),
and changes what differs across GPUs, within the ranges the A40 and V100 traces span:

* time per epoch, scaled by ``exp(a + s·log2(b / b0) + e_b)`` for batch size ``b`` (default
  ``b0``): a in [-0.3, 0.3], a slope s in [-0.2, 0.2] per doubling (the V100's time relative to
  the A40's changes by -0.15 to +0.16 per doubling across the workloads), and 5 % noise per batch
  size, so the cost curve gets bumps;
* average power, scaled likewise (a in [-0.4, 0.1], s in [-0.1, 0.1], 3 % noise) and capped at the
  power limit;
* how much a lower power limit slows an epoch down: the measured slowdown raised to a power k in
  [0.3, 1.3] (the V100 slows about as much as the A40 does to the power 0.5);
* run-to-run noise: each run's epochs to the target times ``exp(N(0, 0.05))``, rounded (the
  default batch size keeps converging in every run, as in the measured traces);
* memory: with probability 0.3 the largest batch size does not fit (the default moves down
  when it was that one).

Example:
    >>> from zeus_core.simulate import generate_variant, load_nsdi23_traces  # doctest: +SKIP
    >>> variant = generate_variant(load_nsdi23_traces("a40")[0], seed=1001)  # doctest: +SKIP
    >>> variant.gpu                                                           # doctest: +SKIP
    'a40~1001'
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from zeus_core.simulate._traces import EpochProfile, WorkloadTrace

__all__ = ["generate_variant"]


def generate_variant(trace: WorkloadTrace, seed: int) -> WorkloadTrace:
    """A trace of the same workload on a GPU that was never measured (see the module docs).

    Args:
        trace: A measured trace.
        seed: Seeds every random parameter; the same (trace, seed) gives the same variant.

    Returns:
        The variant; its ``gpu`` is ``"<gpu>~<seed>"``.

    Example:
        >>> from zeus_core.simulate import load_nsdi23_traces
        >>> variant = generate_variant(load_nsdi23_traces("a40")[0], seed=1001)
        >>> variant.gpu, variant.workload.name
        ('a40~1001', 'cifar100/shufflenetv2')
    """
    rng = np.random.default_rng(seed)
    sizes = trace.batch_sizes
    b0 = trace.workload.default_batch_size
    a_t, s_t = rng.uniform(-0.3, 0.3), rng.uniform(-0.2, 0.2)
    a_p, s_p = rng.uniform(-0.4, 0.1), rng.uniform(-0.1, 0.1)
    k = rng.uniform(0.3, 1.3)
    time_noise = {b: rng.normal(0.0, 0.05) for b in sizes}
    power_noise = {b: rng.normal(0.0, 0.03) for b in sizes}
    epochs: dict[tuple[int, int], EpochProfile] = {}
    for b in sizes:
        x = math.log2(b / b0)
        top = trace.epochs[(b, max(trace.power_limits_for(b)))]
        time_at_top = top.time_s * math.exp(a_t + s_t * x + time_noise[b])
        power_scale = math.exp(a_p + s_p * x + power_noise[b])
        for pl in trace.power_limits_for(b):
            e = trace.epochs[(b, pl)]
            epochs[(b, pl)] = EpochProfile(
                time_at_top * (e.time_s / top.time_s) ** k, min(float(pl), e.power_w * power_scale)
            )
    workload = trace.workload
    target = {
        b: tuple(
            None if e is None else max(1, round(e * math.exp(rng.normal(0.0, 0.05))))
            for e in trace.target_epochs[b]
        )
        for b in sizes
    }
    default = b0
    kept = list(sizes)
    if rng.uniform() < 0.3 and len(kept) > 3:
        kept = kept[:-1]
        default = min(default, kept[-1])
    target[default] = tuple(None if e is None else min(e, workload.max_epochs) for e in target[default])
    return replace(
        trace,
        workload=replace(workload, default_batch_size=default),
        gpu=f"{trace.gpu}~{seed}",
        batch_sizes=tuple(kept),
        power_limits=tuple(sorted({pl for b, pl in epochs if b in kept})),
        target_epochs={b: target[b] for b in kept},
        epochs={key: value for key, value in epochs.items() if key[0] in kept},
    )
