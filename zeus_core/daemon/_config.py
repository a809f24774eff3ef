"""The daemon's configuration file: who may do what, whether processes may share a GPU, heartbeats.

The file is TOML (``/etc/zeus-suite/daemon.toml`` by default). Top-level keys are
:class:`DaemonConfig`'s fields; each ``[[grant]]`` table is a :class:`Grant`. Without a file, or with
no grant, the daemon is *open*: anyone who can connect to the Unix socket may use every enabled API
group (zeusd's behaviour; the socket's owner, group and mode decide who can connect). See
docs/daemon.md for the full description and examples.

Example:
    >>> from zeus_core.daemon import parse_config
    >>> config = parse_config('''
    ... share = false
    ... [[grant]]
    ... groups = ["zeus"]
    ... settings = ["power_limit"]
    ... power_limit_w = [150, 300]
    ... ''')
    >>> config.grants[0].power_limit_w
    (150.0, 300.0)
"""

from __future__ import annotations

import enum
import grp
import importlib
import sys
from pathlib import Path
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from zeus_core.exceptions import ZeusConfigError

__all__ = [
    "ApiGroup",
    "Knob",
    "Grant",
    "DaemonConfig",
    "parse_config",
    "load_config",
    "DEFAULT_CONFIG_PATH",
]

DEFAULT_CONFIG_PATH = Path("/etc/zeus-suite/daemon.toml")
"""Where ``zeus-suite daemon`` reads its configuration when ``--config`` is not given (if it exists)."""


class ApiGroup(str, enum.Enum):
    """zeusd's API groups (``--enable``), also the scopes of a token."""

    GPU_CONTROL = "gpu-control"
    GPU_READ = "gpu-read"
    CPU_READ = "cpu-read"


class Knob(str, enum.Enum):
    """A GPU setting the daemon changes, leases and restores."""

    POWER_LIMIT = "power_limit"
    GPU_LOCKED_CLOCKS = "gpu_locked_clocks"
    MEM_LOCKED_CLOCKS = "mem_locked_clocks"
    PERSISTENCE_MODE = "persistence_mode"

    @property
    def label(self) -> str:
        """Words for messages, e.g. ``"power limit"``."""
        return self.value.replace("_", " ")


_Range = tuple[float, float]
_Ids = Union[list[int], Literal["all"]]


class Grant(BaseModel):
    """One ``[[grant]]``: some users, groups or token subjects may do some things on some GPUs.

    A request is allowed when at least one grant that names the caller allows all of it.

    Attributes:
        users: User names or uids (Unix socket callers).
        groups: Group names or gids; a caller in any of them matches (primary or supplementary).
        subjects: Token subjects (the ``sub`` claim, ``--user`` of ``--issue-token``), over TCP.
        scopes: The API groups granted.
        gpus: GPU indices (the daemon's, i.e. NVML's) that may be changed, or ``"all"``.
        settings: The settings that may be changed (:class:`Knob` names), or ``"all"``.
        power_limit_w: Allowed power-limit range ``[min, max]``, W (default: the GPU's own range).
        gpu_clock_mhz: Allowed locked SM clock range ``[min, max]``, MHz.
        mem_clock_mhz: Allowed locked memory clock range ``[min, max]``, MHz.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    users: tuple[Union[str, int], ...] = ()
    groups: tuple[Union[str, int], ...] = ()
    subjects: tuple[str, ...] = ()
    scopes: tuple[ApiGroup, ...] = tuple(ApiGroup)
    gpus: _Ids = "all"
    settings: Union[list[Knob], Literal["all"]] = "all"
    power_limit_w: _Range | None = None
    gpu_clock_mhz: _Range | None = None
    mem_clock_mhz: _Range | None = None

    @field_validator("power_limit_w", "gpu_clock_mhz", "mem_clock_mhz")
    @classmethod
    def _ordered(cls, value: _Range | None) -> _Range | None:
        if value is not None and not 0 <= value[0] <= value[1]:
            raise ValueError(f"give [min, max] with 0 <= min <= max, got {list(value)}")
        return value

    @model_validator(mode="after")
    def _names_someone(self) -> "Grant":
        if not (self.users or self.groups or self.subjects):
            raise ValueError("a grant must name users, groups or subjects (whom it grants)")
        return self

    def group_ids(self) -> frozenset[int]:
        """The gids of :attr:`groups` (names resolved now; an unknown name raises ZeusConfigError)."""
        gids = set()
        for g in self.groups:
            if isinstance(g, int):
                gids.add(g)
                continue
            try:
                gids.add(grp.getgrnam(g).gr_gid)
            except KeyError:
                raise ZeusConfigError(
                    f"daemon config: group {g!r} does not exist on this machine. Create it "
                    f"(`sudo groupadd {g}`) or name an existing group."
                ) from None
        return frozenset(gids)

    def allows_gpu(self, gpu: int) -> bool:
        """Whether GPU ``gpu`` is within this grant."""
        return self.gpus == "all" or gpu in self.gpus

    def allows_knob(self, knob: Knob) -> bool:
        """Whether setting ``knob`` is within this grant."""
        return self.settings == "all" or knob in self.settings

    def describe(self) -> str:
        """Whom it names, e.g. ``"users ['alice'], groups ['zeus']"``."""
        parts = [f"{k} {list(v)}" for k, v in (("users", self.users), ("groups", self.groups)) if v]
        parts += [f"subjects {list(self.subjects)}"] if self.subjects else []
        return ", ".join(parts)


class DaemonConfig(BaseModel):
    """The daemon's configuration file (TOML); every field has a default.

    Attributes:
        share: Whether two live processes may hold *different* values of one setting on one GPU
            (``true``, or a list of GPU indices where they may). Default: no, the second gets 409.
        heartbeat_s: Over TCP, how often a client with a session heartbeats, s; its lease ends after
            ``missed_heartbeats`` intervals without one.
        missed_heartbeats: Intervals without a heartbeat after which a TCP session's leases end.
        root_is_admin: Whether uid 0 may do everything whatever the grants say.
        grants: The ``[[grant]]`` tables; none: open to whoever can connect to the Unix socket.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    share: Union[bool, list[int]] = False
    heartbeat_s: float = Field(default=10.0, gt=0)
    missed_heartbeats: int = Field(default=3, ge=1)
    root_is_admin: bool = True
    grants: tuple[Grant, ...] = Field(default=(), alias="grant")

    @property
    def open(self) -> bool:
        """No grants: whoever can connect to the Unix socket may use every enabled API group."""
        return not self.grants

    @property
    def lease_ttl_s(self) -> float:
        """How long a TCP session's lease lives without a heartbeat, s."""
        return self.heartbeat_s * self.missed_heartbeats

    def shares(self, gpu: int) -> bool:
        """Whether live processes may hold different values on GPU ``gpu``."""
        return self.share if isinstance(self.share, bool) else gpu in self.share


def _describe_errors(e: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}" for err in e.errors()
    )


def parse_config(text: str, source: str = "<config>") -> DaemonConfig:
    """Parse and validate a daemon configuration given as TOML text.

    Raises:
        ZeusConfigError: Not TOML, an unknown key, a bad value, or a group that does not exist.
    """
    tomllib: Any = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
    try:
        raw: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ZeusConfigError(f"daemon config {source}: not valid TOML ({e}).") from e
    try:
        config = DaemonConfig.model_validate(raw)
    except ValidationError as e:
        raise ZeusConfigError(
            f"daemon config {source}: {_describe_errors(e)}. See docs/daemon.md for the keys."
        ) from e
    for grant in config.grants:
        grant.group_ids()  # unknown group names fail at start, not at the first request
    return config


def load_config(path: str | Path | None) -> DaemonConfig:
    """Read the configuration at ``path`` (``None``: the default file if it exists, else an open daemon).

    Raises:
        ZeusConfigError: ``path`` was given and cannot be read, or its content is invalid.
    """
    if path is None:
        if not DEFAULT_CONFIG_PATH.exists():
            return DaemonConfig()
        path = DEFAULT_CONFIG_PATH
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ZeusConfigError(f"daemon config {path}: cannot read it ({e}). Fix --config.") from e
    return parse_config(text, str(path))
