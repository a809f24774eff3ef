"""The profile file and the job's GPUs: docs/optimizers/power-limit.md ("Ranks, restore, profile file")."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from zeus_core import _distributed as distributed
from zeus_core._files import read_text, write_atomic
from zeus_core.device._base import GPU, PowerLimitConstraints
from zeus_core.exceptions import ZeusConfigError, ZeusPermissionError, ZeusProfileError
from zeus_core.optimizer.power_limit._measurement import PowerLimitMeasurement

__all__ = ["JobGPUs", "PowerLimitProfile", "check_gpus", "gather_job_gpus"]

_VERSION = 2
_KIND = "zeus-suite/power-limit-profile"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a profile may hold")


@dataclass(frozen=True)
class JobGPUs:
    """The GPUs of a whole job that a power-limit profile applies to.

    Attributes:
        gpu_model: Product name shared by every GPU (e.g. ``"NVIDIA A40"``).
        gpu_uuids: UUID of every monitored GPU, rank by rank.
        world_size: Number of processes.
        min_w: Lowest settable limit, W.
        max_w: Highest settable limit, W.
        simulated: Whether the GPUs are simulated.

    Example:
        >>> JobGPUs("NVIDIA A40", ("GPU-0", "GPU-1"), 1, 100.0, 300.0).num_gpus
        2
    """

    gpu_model: str
    gpu_uuids: tuple[str, ...]
    world_size: int = 1
    min_w: float = 0.0
    max_w: float = 0.0
    simulated: bool = False

    @property
    def num_gpus(self) -> int:
        """GPUs in the job."""
        return len(self.gpu_uuids)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {**asdict(self), "gpu_uuids": list(self.gpu_uuids)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "JobGPUs":
        """Inverse of :meth:`to_dict`.

        Raises:
            ZeusProfileError: Required keys are missing.
        """
        try:
            return cls(
                gpu_model=str(data["gpu_model"]),
                gpu_uuids=tuple(str(u) for u in data["gpu_uuids"]),
                world_size=int(data.get("world_size", 1)),
                min_w=float(data.get("min_w", 0.0)),
                max_w=float(data.get("max_w", 0.0)),
                simulated=bool(data.get("simulated", False)),
            )
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as e:
            raise ZeusProfileError(f"Profile hardware {data!r} is malformed: {e!r}.") from e


@dataclass(frozen=True)
class PowerLimitProfile:
    """Measurements of a power-limit sweep and the decision made from them.

    Attributes:
        hardware: The GPUs the measurements were taken on.
        measurements: One per profiled limit, highest limit first.
        optimal_power_limit_w: The chosen limit, W, or ``None`` while the sweep is unfinished.
        selector: Text form of the selector that decided (for the record).
        reason: Why the sweep ended where it did.
        extra: Further top-level keys (the visits' samples).

    Example:
        >>> job = JobGPUs("NVIDIA A40", ("GPU-0",), 1, 100.0, 300.0)
        >>> p = PowerLimitProfile(job, (PowerLimitMeasurement(300, 40, 0.2, 60.0),), 300.0, "Energy()")
        >>> PowerLimitProfile.from_dict(p.to_dict()) == p
        True
    """

    hardware: JobGPUs
    measurements: tuple[PowerLimitMeasurement, ...] = ()
    optimal_power_limit_w: float | None = None
    selector: str = ""
    reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (the profile file's format, docs/optimizers/power-limit.md)."""
        return {
            "version": _VERSION,
            "kind": _KIND,
            "hardware": self.hardware.to_dict(),
            "selector": self.selector,
            "measurements": [m.to_dict() for m in self.measurements],
            "optimal_power_limit_w": self.optimal_power_limit_w,
            "reason": self.reason,
            **self.extra,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "profile") -> "PowerLimitProfile":
        """Inverse of :meth:`to_dict`.

        Raises:
            ZeusProfileError: Not a power-limit profile, a newer version, or malformed content.
        """
        if not isinstance(data, Mapping) or data.get("kind") != _KIND:
            raise ZeusProfileError(
                f'{source} is not a Zeus Suite power-limit profile (no "kind": {_KIND!r}). Point '
                "profile_path at a file written by GlobalPowerLimitOptimizer, or at a new path."
            )
        version = data.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version > _VERSION:
            raise ZeusProfileError(
                f"{source} has profile version {version!r}; this Zeus Suite reads version <= {_VERSION}. "
                "Upgrade zeus-suite or re-profile with a new profile_path."
            )
        if not isinstance(data.get("hardware"), Mapping):
            raise ZeusProfileError(
                f'{source}: field "hardware" is missing or not an object, so the GPUs it was measured on '
                "cannot be checked; re-profile with a new profile_path."
            )
        known = {"version", "kind", "hardware", "selector", "measurements", "optimal_power_limit_w", "reason"}
        field = "hardware"
        try:
            hardware = JobGPUs.from_dict(data["hardware"])
            field, items = "measurements", data.get("measurements", [])
            if not isinstance(items, list):
                raise TypeError("not a list")
            measurements = []
            for i, item in enumerate(items):
                field = f"measurements[{i}]"
                measurements.append(PowerLimitMeasurement.from_dict(item))
            field, optimal = "optimal_power_limit_w", data.get("optimal_power_limit_w")
            number = isinstance(optimal, (int, float)) and not isinstance(optimal, bool)
            if optimal is not None and not (number and math.isfinite(optimal) and optimal > 0):
                raise ValueError(f"{optimal!r} is not a positive, finite number of watts")
            return cls(
                hardware=hardware,
                measurements=tuple(measurements),
                optimal_power_limit_w=None if optimal is None else float(optimal),
                selector=str(data.get("selector", "")),
                reason=str(data.get("reason", "")),
                extra={k: v for k, v in data.items() if k not in known},
            )
        except (ZeusProfileError, TypeError, ValueError, AttributeError, KeyError, OverflowError) as e:
            raise ZeusProfileError(
                f"{source}: field {field!r} is malformed ({e}); re-profile with a new profile_path."
            ) from e

    def save(self, path: str | Path) -> None:
        """Write the profile as JSON atomically: no reader sees half a file; no symlink is followed."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "PowerLimitProfile":
        """Read a profile written by :meth:`save`.

        Raises:
            ZeusProfileError: The file cannot be read, is not valid JSON or not a power-limit profile.
        """
        path = Path(path)
        text = read_text(path, what="power-limit profile")  # bounded: a huge file is refused, not read
        try:
            data = json.loads(text, parse_constant=_no_constant)
        except (ValueError, RecursionError) as e:  # bad JSON, encoding, NaN/Infinity, deep nesting
            raise ZeusProfileError(
                f"Power-limit profile {str(path)!r} is not valid JSON ({type(e).__name__}: {str(e)[:200]}). "
                "Delete it to re-profile, or pass another profile_path."
            ) from e
        return cls.from_dict(data, source=f"Power-limit profile {str(path)!r}")

    def check(self, job: JobGPUs, source: str = "profile") -> None:
        """Refuse a profile measured on other hardware.

        Raises:
            ZeusProfileError: GPU model, number of GPUs, the GPUs themselves or the limit range differ.
        """
        saved = self.hardware
        if saved.gpu_model != job.gpu_model:
            problem = f"was measured on {saved.gpu_model!r} GPUs, but this job runs on {job.gpu_model!r}"
        elif saved.num_gpus != job.num_gpus:
            problem = f"was measured on {saved.num_gpus} GPU(s), but this job uses {job.num_gpus}"
        elif sorted(saved.gpu_uuids) != sorted(job.gpu_uuids):
            missing = sorted(set(saved.gpu_uuids) - set(job.gpu_uuids))
            problem = (
                f"was measured on another set of GPUs ({list(saved.gpu_uuids)}); this job's GPUs are "
                f"{list(job.gpu_uuids)} (not present: {missing})"
            )
        elif (saved.min_w, saved.max_w) != (job.min_w, job.max_w):
            problem = (
                f"assumes power limits {saved.min_w:g}–{saved.max_w:g} W, but this job's GPUs allow "
                f"{job.min_w:g}–{job.max_w:g} W"
            )
        else:
            return
        raise ZeusProfileError(
            f"{source} {problem}. Delete the file (or pass a new profile_path) to profile this job's GPUs."
        )


def gather_job_gpus(gpus: Sequence[GPU]) -> JobGPUs:
    """The GPUs of the whole job, from this rank's ``gpus`` (every rank calls this; one all-gather).

    Raises:
        ZeusConfigError: Ranks monitor different GPU models or limit ranges, or one real GPU twice.
    """
    c = gpus[0].power_limit_constraints()
    mine = tuple(g.uuid for g in gpus)
    local = JobGPUs(gpus[0].name, mine, 1, c.min_w, c.max_w, any(g.simulated for g in gpus))
    ranks = distributed.all_gather_object(local) if distributed.world_size() > 1 else [local]
    if len({(r.gpu_model, r.min_w, r.max_w) for r in ranks}) > 1:
        raise ZeusConfigError(
            "GlobalPowerLimitOptimizer: ranks monitor different GPUs "
            f"({[f'rank {i}: {r.gpu_model} {r.min_w:g}-{r.max_w:g} W' for i, r in enumerate(ranks)]}); one "
            "limit can only be set on one GPU model with one limit range."
        )
    owners: dict[str, int] = {}
    for i, r in enumerate(ranks):
        for u in r.gpu_uuids:
            if u in owners and not r.simulated:  # simulated GPUs of different processes are distinct objects
                raise ZeusConfigError(
                    f"GlobalPowerLimitOptimizer: GPU {u} is monitored by ranks {owners[u]} and {i}, so its "
                    "energy would count twice. Give each rank its own GPU, e.g. "
                    "ZeusMonitor(gpu_indices=[local_rank])."
                )
            owners[u] = i
    uuids = tuple(u for r in ranks for u in r.gpu_uuids)
    return replace(local, gpu_uuids=uuids, world_size=len(ranks), simulated=any(r.simulated for r in ranks))


def check_gpus(gpus: Sequence[GPU]) -> PowerLimitConstraints:
    """The GPUs' common limit range; they must be one model and this process may set their limits.

    Raises:
        ZeusConfigError: Different models or limit ranges.
        ZeusPermissionError: This process may not set power limits (the message says how to).
    """
    constraints = {g.power_limit_constraints() for g in gpus}
    if len({g.name for g in gpus}) > 1 or len(constraints) > 1:
        raise ZeusConfigError(
            "GlobalPowerLimitOptimizer sets one power limit on every monitored GPU, so they must be "
            f"the same model with the same limit range; got {[g.describe() for g in gpus]} with ranges "
            f"{sorted((c.min_w, c.max_w) for c in constraints)}. Monitor one kind of GPU "
            "(ZeusMonitor(gpu_indices=[...]))."
        )
    for gpu in gpus:
        try:
            gpu.check_control_permission()
        except ZeusPermissionError as e:
            raise ZeusPermissionError(
                f"GlobalPowerLimitOptimizer must set power limits on {gpu.describe()}, and this process "
                f"may not: {e}"
            ) from e
    return next(iter(constraints))
