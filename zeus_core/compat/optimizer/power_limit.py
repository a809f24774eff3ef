"""Zeus's ``zeus.optimizer.power_limit``: the suite's power-limit optimizer under Zeus's names.

:class:`GlobalPowerLimitOptimizer` takes Zeus's arguments in Zeus's order with Zeus's defaults
(``ZeusCost(eta_knob=0.5)``, ``warmup_steps=10``, ``profile_steps=40``, ``pl_step=25``) and runs
in Zeus's loop (no ``on_train_begin`` needed); the selectors are the suite's. Under
``torch.distributed`` it takes Zeus's two documented set-ups: one optimizer per rank over that
rank's GPU (job-wide decisions), or one rank's optimizer over several GPUs (rank-local: the other
ranks need not build one), and, as Zeus allows, ranks sharing a GPU.
:class:`HFGlobalPowerLimitOptimizer` (Hugging Face ``Trainer``) loads ``transformers`` on first use.

Example:
    >>> from zeus_core.compat.optimizer.power_limit import MaxSlowdownConstraint
    >>> MaxSlowdownConstraint(factor=1.1).factor
    1.1
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zeus_core import _distributed as distributed
from zeus_core import console
from zeus_core.optimizer import power_limit as _suite
from zeus_core.optimizer.power_limit import (
    Energy,
    MaxSlowdownConstraint,
    OptimumSelector,
    PowerLimitMeasurement,
    Time,
    ZeusCost,
)

__all__ = [
    "GlobalPowerLimitOptimizer",
    "HFGlobalPowerLimitOptimizer",  # noqa: F822 - loaded on first use (module __getattr__)
    "OptimumSelector",
    "Energy",
    "Time",
    "ZeusCost",
    "MaxSlowdownConstraint",
    "PowerLimitMeasurement",
]


class GlobalPowerLimitOptimizer(_suite.GlobalPowerLimitOptimizer):
    """Zeus's ``GlobalPowerLimitOptimizer``: the suite's optimizer with Zeus's arguments and set-ups.

    Not distributed, or one optimizer per rank over that rank's GPU (Zeus's
    ``ZeusMonitor(gpu_indices=[local_rank])``): measurements are reduced across ranks and every
    rank sets the same limit, as in Zeus. A monitor of several GPUs under ``torch.distributed``
    (Zeus's "rank 0 optimizes all GPUs"): the optimizer is rank-local, so ranks that build none are
    not waited for. Ranks sharing a GPU (Zeus measures it on each): at the first event every rank
    learns which; the lowest rank of each GPU optimizes it rank-locally, the others leave it alone.

    Args:
        monitor: The :class:`zeus_core.compat.monitor.ZeusMonitor` whose GPUs are optimized.
        optimum_selector: Which limit is best; default ``ZeusCost(eta_knob=0.5)``.
        wait_steps: Steps before profiling starts.
        warmup_steps: Steps discarded after each limit change.
        profile_steps: Steps measured per limit.
        pl_step: Gap between profiled limits, W.
        profile_path: JSON file of the profile, reused on the next run.
        **suite_options: The suite's keyword options (see
            :class:`zeus_core.optimizer.power_limit.GlobalPowerLimitOptimizer`).

    Example:
        >>> from zeus_core.compat.monitor import ZeusMonitor
        >>> from zeus_core.compat.optimizer.power_limit import GlobalPowerLimitOptimizer
        >>> from zeus_core.testing import simulated_gpu
        >>> plo = GlobalPowerLimitOptimizer(ZeusMonitor(gpus=[simulated_gpu("a40")]))
        >>> plo.on_epoch_begin(); plo.on_step_begin(); plo.on_step_end(); plo.close()
    """

    def __init__(
        self,
        monitor: Any,
        optimum_selector: OptimumSelector | None = None,
        wait_steps: int = 1,
        warmup_steps: int = 10,
        profile_steps: int = 40,
        pl_step: float = 25,
        profile_path: str | Path | None = None,
        **suite_options: Any,
    ) -> None:
        super().__init__(
            monitor,
            optimum_selector,
            wait_steps,
            warmup_steps,
            profile_steps,
            pl_step,
            profile_path,
            **suite_options,
        )
        self._scope: str | None = None  # "job", "rank" (rank-local) or "follow" (another rank owns the GPU)
        if distributed.world_size() <= 1:
            self._scope = "job"
        elif len(monitor.gpus) > 1:
            self._scope = "rank"
            console.warn(
                f"GlobalPowerLimitOptimizer: {len(monitor.gpus)} GPUs monitored under torch.distributed: "
                "this rank optimizes them on its own (for job-wide decisions, one GPU per rank: "
                "ZeusMonitor(gpu_indices=[local_rank]))."
            )

    def _decide_scope(self) -> str:
        """At the first event, on every rank: which GPUs other ranks also monitor (one all-gather)."""
        mine = [g.uuid for g in self.monitor.gpus]
        ranks = distributed.all_gather_object(mine)
        owner: dict[str, int] = {}
        for r, uuids in enumerate(ranks):
            for u in uuids:
                owner.setdefault(u, r)
        shared = sorted({u for r, uuids in enumerate(ranks) for u in uuids if owner[u] != r})
        if not shared:
            return "job"
        if distributed.is_rank_zero():
            console.warn(
                f"GlobalPowerLimitOptimizer: ranks share GPU(s) {', '.join(shared)} (each rank reads the "
                "same counter, as in Zeus); the lowest rank of each GPU optimizes it alone."
            )
        me = distributed.rank()
        return "rank" if all(owner[u] == me for u in mine) else "follow"

    def _event(self, name: str, *args: Any) -> Any:
        if self._scope is None:
            self._scope = self._decide_scope()
        if self._scope == "follow":
            return None
        event = getattr(_suite.GlobalPowerLimitOptimizer, name)
        if self._scope == "rank":
            with distributed.rank_local():
                return event(self, *args)
        return event(self, *args)

    def on_train_begin(self) -> None:
        """Begin training (optional: Zeus's loop begins with its first epoch or step event)."""
        self._event("on_train_begin")

    def on_epoch_begin(self) -> None:
        """Begin an epoch."""
        self._event("on_epoch_begin")

    def on_step_begin(self) -> None:
        """Begin a step: count down, set limits, open or close measurements."""
        self._event("on_step_begin")

    def on_step_end(self) -> None:
        """End a step."""
        self._event("on_step_end")

    def on_epoch_end(self) -> None:
        """End an epoch (a measurement pauses until the next one)."""
        self._event("on_epoch_end")

    def on_train_end(self) -> None:
        """Restore the GPUs' original power limits."""
        self._event("on_train_end")

    def close(self) -> None:
        """Restore the GPUs' original power limits now."""
        if self._scope is not None:  # nothing was begun otherwise: no collective to start
            self._event("close")
        else:
            with distributed.rank_local():
                _suite.GlobalPowerLimitOptimizer.close(self)


def __getattr__(name: str) -> Any:
    if name == "HFGlobalPowerLimitOptimizer":  # imports transformers: only when asked for
        from zeus_integrations.huggingface import HFGlobalPowerLimitOptimizer

        return HFGlobalPowerLimitOptimizer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
