"""Run a pipeline on the CPU as if on GPUs: simulated GPU work, local ranks, a measured comparison.

Support code of the Perseus examples (``examples/perseus_*.py``) and their tests, not part of the
installed packages: :class:`GpuWork` keeps a ``SimulatedPipelineGPU`` busy for an instruction's
modelled work, :func:`spawn_local_ranks` starts the ranks of ``python examples/perseus_torch.py``,
and :func:`compare_with_max_clocks` measures the highest clocks against the applied plan.

Example:
    >>> import torch
    >>> from zeus_core.testing import InstructionWork, SimulatedPipelineGPU, VirtualClock
    >>> gpu = SimulatedPipelineGPU("a40", clock=VirtualClock())
    >>> layer = GpuWork(gpu, InstructionWork(0.010, 0.002))
    >>> x = torch.ones(2, requires_grad=True)
    >>> layer(x).sum().backward()
    >>> [round(t, 3) for t in layer.elapsed_s]      # forward, backward (2x), at the highest clock
    [0.012, 0.024]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Sequence

import torch
import torch.distributed as dist

from zeus_core import ZeusMonitor
from zeus_core.exceptions import ZeusError
from zeus_core.optimizer.pipeline_frequency import FrequencyPlan, PerseusRuntime
from zeus_core.testing import InstructionWork, SimulatedPipelineGPU

__all__ = [
    "GpuWork",
    "spawn_local_ranks",
    "measure_iterations",
    "IterationStats",
    "RunComparison",
    "compare_with_max_clocks",
    "run_example",
]


class _Run(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, layer: "GpuWork") -> torch.Tensor:  # noqa: D102
        ctx.layer = layer
        layer.clocks.append(layer.gpu.locked_sm_frequency)
        layer.elapsed_s.append(layer.gpu.run(layer.forward_work))
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # noqa: D102
        layer = ctx.layer
        layer.clocks.append(layer.gpu.locked_sm_frequency)
        layer.elapsed_s.append(layer.gpu.run(layer.backward_work))
        return grad, None


class GpuWork(torch.nn.Module):
    """Identity layer whose forward and backward keep a simulated GPU busy for their modelled work.

    Args:
        gpu: The stage's simulated GPU.
        forward: Work of one forward pass.
        backward: Work of one backward pass (default: ``forward.scaled(2.0)``).

    Attributes:
        elapsed_s: Duration of every forward and backward run so far, s.
        clocks: The locked SM clock (MHz, ``None``: unlocked) when each of them started.
    """

    def __init__(
        self, gpu: SimulatedPipelineGPU, forward: InstructionWork, backward: InstructionWork | None = None
    ) -> None:
        super().__init__()
        self.gpu = gpu
        self.forward_work = forward
        self.backward_work = backward if backward is not None else forward.scaled(2.0)
        self.elapsed_s: list[float] = []
        self.clocks: list[int | None] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return _Run.apply(x, self)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank_main(rank: int, fn: Callable[..., None], world_size: int, port: int, args: tuple) -> None:
    os.environ.update(
        {
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(world_size),
            "LOCAL_WORLD_SIZE": str(world_size),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        }
    )
    torch.set_num_threads(1)
    fn(rank, *args)


def spawn_local_ranks(fn: Callable[..., None], world_size: int = 2, args: Sequence[Any] = ()) -> None:
    """Run ``fn(rank, *args)`` in ``world_size`` fresh processes of this machine and wait for them.

    Each process gets the environment ``torch.distributed.init_process_group("gloo")`` (or a
    framework's own initialisation) reads. ``fn`` must be importable (a module-level function).

    Raises:
        torch.multiprocessing.ProcessRaisedException: A rank raised (its traceback is included).
    """
    torch.multiprocessing.start_processes(
        _rank_main, args=(fn, world_size, _free_port(), tuple(args)), nprocs=world_size, start_method="spawn"
    )


@dataclass(frozen=True)
class IterationStats:
    """Whole-pipeline figures of a run, medians over its measured iterations.

    Attributes:
        time_s: Iteration time, s.
        energy_j: Energy of all the pipeline's GPUs over the iteration (idle time included), J.
        iterations: Iterations measured.
        simulated: Whether the GPUs are simulated.
    """

    time_s: float
    energy_j: float
    iterations: int
    simulated: bool


def _all_reduce(value: float, op: Any) -> float:
    """``value`` reduced over all ranks with ``op`` (a ``torch.distributed.ReduceOp``)."""
    device = "cuda" if dist.get_backend() == "nccl" else "cpu"
    tensor = torch.tensor([float(value)], dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=op)
    return float(tensor.item())


def measure_iterations(
    step: Callable[[], None], gpu: Any, iterations: int, name: str, warmup: int = 3
) -> IterationStats:
    """Run ``step`` ``iterations`` times on every rank and measure each iteration over all ranks.

    A barrier before and after every iteration makes each rank's window span the whole
    iteration, so energy counts each GPU's idle time too (as the planner does). Every rank must
    call this together.

    Args:
        step: One training iteration on this rank.
        gpu: This rank's GPU.
        iterations: Iterations to measure.
        name: Window name (unique per call).
        warmup: Iterations run first and not measured (connection set-up, caches).

    Returns:
        Medians of the iteration time (the slowest rank's) and of the energy summed over ranks.
    """
    monitor = ZeusMonitor(gpus=[gpu], cpu_indices=[])
    times, energies = [], []
    for _ in range(warmup):
        step()
    try:
        for i in range(iterations):
            dist.barrier()  # every rank starts and ends together
            monitor.begin_window(f"{name}{i}")
            step()
            dist.barrier()
            m = monitor.end_window(f"{name}{i}")
            times.append(_all_reduce(m.time, dist.ReduceOp.MAX))
            energies.append(_all_reduce(m.gpu_total_energy, dist.ReduceOp.SUM))
    finally:
        monitor.close()
    return IterationStats(statistics.median(times), statistics.median(energies), iterations, gpu.simulated)


@dataclass(frozen=True)
class RunComparison:
    """A Perseus plan versus the highest clocks: predicted by the planner and measured.

    Attributes:
        plan: The plan that ran (its ``iteration_time_s`` / ``energy_j`` are the prediction).
        baseline: Measured at the highest clocks.
        planned: Measured with the plan.
        iterations_to_plan: Training iterations run before the plan was applied (discovery and
            profiling), or ``None`` if not recorded.
    """

    plan: FrequencyPlan
    baseline: IterationStats
    planned: IterationStats
    iterations_to_plan: int | None = None

    @property
    def time_change(self) -> float:
        """Measured iteration-time change versus the highest clocks (0.004 = 0.4 % slower)."""
        return self.planned.time_s / self.baseline.time_s - 1.0

    @property
    def energy_change(self) -> float:
        """Measured energy change versus the highest clocks (-0.123 = 12.3 % less)."""
        return self.planned.energy_j / self.baseline.energy_j - 1.0

    def summary_line(self) -> str:
        """``perseus: plan zero-slowdown: time +0.4 % energy -12.3 % vs max clocks [simulated]``."""
        sim = " [simulated]" if self.planned.simulated or self.plan.simulated else ""
        return (
            f"perseus: plan {self.plan.label}: time {100 * self.time_change:+.1f} % "
            f"energy {100 * self.energy_change:+.1f} % vs max clocks{sim}"
        )

    def report(self) -> str:
        """The plan, predicted and measured time and energy per iteration, and :meth:`summary_line`."""
        meta = self.plan.metadata.get("runtime", {})
        rows = [
            ("max clocks", meta.get("baseline_time_s"), meta.get("baseline_energy_j"), self.baseline),
            (f"plan {self.plan.label}", self.plan.iteration_time_s, self.plan.energy_j, self.planned),
        ]
        lines = [self.plan.to_text(), ""]
        if self.iterations_to_plan is not None:
            lines.append(
                f"plan ready after {self.iterations_to_plan} training iterations (discovery, profiling)"
            )
        lines.append(f"{'per iteration':<24} {'predicted':>20} {'measured':>20}")
        for label, t, e, measured in rows:
            predicted = f"{t:.4f} s {e:7.1f} J" if t is not None and e is not None else "-"
            lines.append(
                f"{label:<24} {predicted:>20} {f'{measured.time_s:.4f} s {measured.energy_j:7.1f} J':>20}"
            )
        lines.append(self.summary_line())
        return "\n".join(lines)


def compare_with_max_clocks(
    step: Callable[[], None],
    gpu: Any,
    runtime: PerseusRuntime,
    attach: Callable[[], ContextManager[Any]],
    iterations: int,
    max_iterations_to_plan: int = 50,
) -> RunComparison:
    """Measure ``step`` at the highest clocks, then with Perseus attached once its plan is applied.

    Every rank calls this together.

    Args:
        step: One training iteration on this rank.
        gpu: This rank's GPU.
        runtime: This rank's runtime (not started).
        attach: Attaches the framework hook to ``runtime`` (a context manager that detaches).
        iterations: Iterations measured in each run.
        max_iterations_to_plan: Give up if no plan is applied after this many iterations.

    Raises:
        ZeusError: No plan after ``max_iterations_to_plan`` iterations.
    """
    baseline = measure_iterations(step, gpu, iterations, "max-clocks")
    with runtime, attach():
        while runtime.plan is None:  # discovery and profiling
            if len(runtime.iterations) >= max_iterations_to_plan:
                raise ZeusError(f"Perseus made no plan in {max_iterations_to_plan} iterations.")
            step()
        to_plan = len(runtime.iterations)
        planned = measure_iterations(step, gpu, iterations, "plan")
        plan = runtime.plan
    assert plan is not None
    return RunComparison(plan, baseline, planned, to_plan)


def run_example(
    rank_main: Callable[[int, argparse.Namespace], None],
    description: str,
    argv: list[str] | None,
    add_options: Callable[[argparse.ArgumentParser], None] | None = None,
) -> None:
    """Parse the Perseus examples' options and run ``rank_main(rank, args)`` on 2 local ranks.

    Options: ``--microbatches`` (default 4), ``--iterations`` measured per run (default 6) and
    ``--save-dir`` (Perseus's files; default: a temporary folder); ``add_options`` adds an
    example's own.
    """
    parser = argparse.ArgumentParser(description=description)
    if add_options is not None:
        add_options(parser)
    parser.add_argument("--microbatches", type=int, default=4, help="microbatches per iteration (default 4)")
    parser.add_argument("--iterations", type=int, default=6, help="iterations measured per run (default 6)")
    parser.add_argument(
        "--save-dir", default=None, help="Perseus profile and plan folder (default: temporary)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="perseus-") as tmp:
        args.save_dir = args.save_dir or tmp
        spawn_local_ranks(rank_main, 2, (args,))
