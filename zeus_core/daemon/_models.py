"""Validated request parameters: zeusd's query strings as pydantic models (unknown fields refused).

zeusd takes every parameter in the query string (also on POST) and refuses unknown ones
(``serde(deny_unknown_fields)``); booleans are ``true``/``false``, ids are comma-separated indices,
power in mW and clocks in MHz as unsigned 32-bit integers. A malformed request is a 400 whose
message names each bad parameter and what it got.
"""

from __future__ import annotations

from typing import Annotated, Any, Mapping, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from zeus_core.daemon._policy import Refusal

__all__ = [
    "WriteQuery",
    "SetPowerLimit",
    "SetPersistence",
    "SetClocks",
    "GpuReadQuery",
    "CpuReadQuery",
    "CpuEnergyQuery",
    "parse_query",
    "parse_ids",
    "resolve_ids",
]

M = TypeVar("M", bound=BaseModel)


def _flag(value: Any) -> Any:
    if isinstance(value, str):
        if value not in ("true", "false"):
            raise ValueError(f"must be 'true' or 'false', got {value!r}")
        return value == "true"
    return value


def _digits(value: Any) -> Any:
    if isinstance(value, str) and not value.isdigit():
        raise ValueError(f"must be a whole number (no sign, no decimals), got {value!r}")
    return value


Flag = Annotated[bool, BeforeValidator(_flag)]
U32 = Annotated[int, BeforeValidator(_digits), Field(ge=0, le=2**32 - 1)]


class _Query(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WriteQuery(_Query):
    """Every GPU write: ``gpu_ids`` (required) and ``block``."""

    gpu_ids: str
    block: Flag


class SetPowerLimit(WriteQuery):
    """``POST /gpu/set_power_limit``."""

    power_limit_mw: U32


class SetPersistence(WriteQuery):
    """``POST /gpu/set_persistence_mode``."""

    enabled: Flag


class SetClocks(WriteQuery):
    """``POST /gpu/set_{gpu,mem}_locked_clocks``."""

    min_clock_mhz: U32
    max_clock_mhz: U32


class GpuReadQuery(_Query):
    """GPU reads: ``gpu_ids`` optional (all GPUs)."""

    gpu_ids: str | None = None


class CpuReadQuery(_Query):
    """CPU reads: ``cpu_ids`` optional (all packages)."""

    cpu_ids: str | None = None


class CpuEnergyQuery(CpuReadQuery):
    """``GET /cpu/get_cumulative_energy``: ``cpu`` and ``dram`` both required."""

    cpu: Flag
    dram: Flag


def parse_query(model: type[M], query: Mapping[str, str], keys: list[str]) -> M:
    """``query`` as ``model``.

    Args:
        model: The parameter model.
        query: The query parameters (last value of each key).
        keys: Every key as sent, to refuse repeated ones.

    Raises:
        Refusal: 400 naming every bad, missing, repeated or unknown parameter.
    """
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise Refusal(400, f"Invalid request: repeated parameter(s) {repeated}; give each once.")
    try:
        return model.model_validate(dict(query))
    except ValidationError as e:
        problems = []
        for err in e.errors():
            name = ".".join(str(p) for p in err["loc"])
            if err["type"] == "missing":
                problems.append(f"missing parameter `{name}`")
            elif err["type"] == "extra_forbidden":
                problems.append(f"unknown parameter `{name}`")
            else:
                message = str(err["msg"]).removeprefix("Value error, ")
                problems.append(f"`{name}` {message} (got {err.get('input')!r})")
        raise Refusal(400, f"Invalid request: {'; '.join(problems)}.") from None


def parse_ids(raw: str, device: str) -> list[int]:
    """A comma-separated list of indices, sorted and deduplicated (zeusd's rules and words).

    Raises:
        Refusal: 400 for an empty list, an empty entry or a non-integer.
    """
    param = f"{device.lower()}_ids"
    if not raw.strip():
        raise Refusal(400, f"{param} must contain at least one {device} index")
    ids = set()
    for part in raw.split(","):
        item = part.strip()
        if not item:
            raise Refusal(400, f"{param} contains an empty {device} index")
        if not item.isdigit():
            raise Refusal(400, f"Invalid {device} index: {item}")
        ids.add(int(item))
    return sorted(ids)


def resolve_ids(raw: str | None, available: list[int], device: str, required: bool = False) -> list[int]:
    """The ids a request names (``None``: all, unless ``required``), each checked to exist.

    Raises:
        Refusal: 400 for a malformed list or an index the daemon does not serve.
    """
    if raw is None:
        if required:
            raise Refusal(400, f"Invalid request: missing parameter `{device.lower()}_ids`.")
        return list(available)
    ids = parse_ids(raw, device)
    for i in ids:
        if i not in available:
            raise Refusal(400, f"{device} index {i} does not exist (available: {available}).")
    return ids
