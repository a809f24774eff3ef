"""Perseus: per-instruction GPU frequency planning for pipeline-parallel training.

Planner (this package's data and algorithms):

* :mod:`.schedule`: pipeline schedules as data (:func:`synchronous_1f1b`, :func:`gpipe`,
  :func:`interleaved_1f1b`, :func:`zero_bubble_1f1b`);
* :mod:`.profile`: :class:`InstructionProfile`, time/energy per (stage, instruction, clock), CSV I/O;
* :mod:`.cost_model`: Pareto options, effective energy, convex cost models;
* :mod:`.dag`: the iteration's DAG; :mod:`.solver`: Phillips–Dessouky min-cut frontier;
* :mod:`.frontier`: :func:`plan_frontier` and :class:`Frontier` (zero-slowdown, deadline and
  least-energy plans); :mod:`.point_plan`: :func:`plan_at_time` (one target time, no frontier);
  :mod:`.plan`: :class:`FrequencyPlan` (JSON round trip); :mod:`.blocking_power`: idle power per GPU;
* :mod:`.plots`: frontier and timeline plots.

In training:

* :mod:`.profiler`: :class:`InstructionProfiler` (time and energy per instruction at a sweep of clocks);
* :mod:`.controller`: :class:`FrequencyController` (sets locked SM clocks off the training thread);
* :mod:`.runtime`: :class:`PerseusRuntime` (profile, plan on rank 0, broadcast, apply; reuse on restart),
  with :mod:`.plan_settings`, :mod:`.observed_pipeline`, :mod:`.plan_store` and :mod:`.decisions`;

Names load lazily, so importing this package does not import scipy or matplotlib; they are listed
once, in ``__init__.pyi``.
"""

from zeus_core._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__, globals())
