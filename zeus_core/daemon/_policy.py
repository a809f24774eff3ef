"""Who may do what: the caller of a request (:class:`Principal`) and the config's grants (:class:`Policy`).

A Unix-socket caller is known by its peer credentials (uid, gid and the supplementary groups of
its process); a TCP caller by its bearer token (subject and scopes). Every refusal is a
:class:`Refusal` with the HTTP status and a message that names the caller, the reason and the fix.
"""

from __future__ import annotations

import pwd
from dataclasses import dataclass, field
from typing import Any, Literal

from zeus_core.daemon._config import ApiGroup, DaemonConfig, Grant, Knob

__all__ = ["Principal", "Refusal", "Policy", "user_name", "Value"]

Value = Any
"""A setting's value: power limit ``int`` mW; locked clocks ``(min_mhz, max_mhz)`` or ``None``
(unlocked, i.e. reset); persistence mode ``bool``."""


def user_name(uid: int) -> str:
    """The user name of ``uid``, or the number as text when the user database has none."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@dataclass(frozen=True)
class Principal:
    """Who sent a request.

    Attributes:
        via: ``"unix"`` (peer credentials) or ``"tcp"`` (bearer token).
        uid, gid, gids: Unix callers: user id, primary group and every group of the process.
        pid: Unix callers: the process id (as the daemon's PID namespace sees it).
        subject: TCP callers: the token's ``sub``.
        scopes: TCP callers: the token's scopes.
        remote: TCP callers: the peer address, for logs.
        exp: TCP callers: the token's expiry, Unix s (None: never).
    """

    via: Literal["unix", "tcp"]
    uid: int | None = None
    gid: int | None = None
    gids: frozenset[int] = field(default_factory=frozenset)
    pid: int | None = None
    subject: str | None = None
    scopes: frozenset[ApiGroup] = field(default_factory=frozenset)
    remote: str = ""
    exp: int | None = None

    def describe(self) -> str:
        """For messages and the audit log, never a token: ``"alice (uid 1000, pid 42)"``."""
        if self.via == "unix":
            return f"{user_name(self.uid or 0)} (uid {self.uid}, pid {self.pid})"
        return f"token subject {self.subject!r}" + (f" from {self.remote}" if self.remote else "")


class Refusal(Exception):
    """A request refused: ``status`` (HTTP) and a message naming the reason and the fix."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


_RANGE_FIELD = {
    Knob.POWER_LIMIT: ("power_limit_w", "W", 1000.0),
    Knob.GPU_LOCKED_CLOCKS: ("gpu_clock_mhz", "MHz", 1.0),
    Knob.MEM_LOCKED_CLOCKS: ("mem_clock_mhz", "MHz", 1.0),
}


def _in_range(grant: Grant, knob: Knob, value: Value) -> bool:
    spec = _RANGE_FIELD.get(knob)
    bounds = getattr(grant, spec[0]) if spec else None
    if bounds is None or value is None:  # no range, or a reset (always back to the driver's choice)
        return True
    scale = spec[2] if spec else 1.0
    values = value if isinstance(value, tuple) else (value,)
    return all(bounds[0] * scale <= v <= bounds[1] * scale for v in values)


def _knobs(grant: Grant) -> list[Knob]:
    return list(Knob) if grant.settings == "all" else list(grant.settings)


def _allowed_ranges(knob: Knob, grants: list[Grant]) -> Any:
    """``"any"``, or the ``[min, max]`` ranges the grants allow for ``knob``."""
    spec = _RANGE_FIELD.get(knob)
    ranges = [getattr(g, spec[0]) for g in grants] if spec else [None]
    bounded = [list(r) for r in ranges if r is not None]
    return "any" if len(bounded) < len(ranges) else bounded


def _show(knob: Knob, value: Value) -> str:
    if knob is Knob.POWER_LIMIT:
        return f"{value} mW"
    if knob is Knob.PERSISTENCE_MODE:
        return "enabled" if value else "disabled"
    return "unlocked" if value is None else f"{value[0]}-{value[1]} MHz"


class Policy:
    """Decides requests from the config's grants and the enabled API groups.

    Args:
        config: The daemon configuration.
        enabled: The API groups this daemon serves (``--enable``).
        source: Where the config came from, for messages.
    """

    def __init__(
        self, config: DaemonConfig, enabled: frozenset[ApiGroup], source: str = "the config"
    ) -> None:
        self.config = config
        self.enabled = enabled
        self.source = source
        self._gids = [g.group_ids() for g in config.grants]
        self.uses_groups = any(self._gids)
        """Whether any grant names groups (else a caller's supplementary groups need not be read)."""

    # -- matching -------------------------------------------------------------------------------
    def is_admin(self, who: Principal) -> bool:
        """Whether ``who`` may do everything: root (unless disabled), or anyone on an open daemon."""
        if who.via == "unix":
            return self.config.open or (self.config.root_is_admin and who.uid == 0)
        return False

    def grants_for(self, who: Principal) -> list[Grant]:
        """The grants that name ``who``."""
        out = []
        for grant, gids in zip(self.config.grants, self._gids):
            if who.via == "unix":
                names = {who.uid, user_name(who.uid or 0)}
                if names & set(grant.users) or gids & who.gids:
                    out.append(grant)
            elif who.subject in grant.subjects:
                out.append(grant)
        return out

    # -- decisions ------------------------------------------------------------------------------
    def check_group(self, who: Principal, group: ApiGroup) -> None:
        """Whether ``who`` may use API group ``group`` at all (the group is enabled).

        Raises:
            Refusal: 403 with who, what and the fix.
        """
        if who.via == "tcp":
            if group not in who.scopes:  # zeusd's message
                scopes = ", ".join(f"'{s.value}'" for s in sorted(who.scopes, key=lambda s: s.value))
                raise Refusal(
                    403,
                    f"Token for user '{who.subject}' lacks required scope '{group.value}'. "
                    f"Token scopes: [{scopes}]",
                )
            if not self.grants_for(who):  # a subject no grant names: the token's scopes decide
                return
        if self.is_admin(who):
            return
        grants = self.grants_for(who)
        if not grants:
            raise Refusal(403, self._no_grant(who))
        if not any(group in g.scopes for g in grants):
            raise Refusal(
                403,
                f"{who.describe()} may not use '{group.value}': the grants of {self.source} that name "
                f"them allow {sorted({s.value for g in grants for s in g.scopes})}. Ask the administrator "
                f"to add '{group.value}' to the scopes of a grant that names them.",
            )

    def control_grants(self, who: Principal) -> list[Grant] | None:
        """The grants letting ``who`` change settings; None: no limit (admin, or a token no grant names)."""
        if self.is_admin(who) or (who.via == "tcp" and not self.grants_for(who)):
            return None  # for a token, its scopes (checked before) are all there is, as with zeusd
        return [g for g in self.grants_for(who) if ApiGroup.GPU_CONTROL in g.scopes]

    def check_change(self, who: Principal, gpu: int, knob: Knob, value: Value) -> None:
        """Whether ``who`` may set ``knob`` of GPU ``gpu`` to ``value``.

        The grants that name ``who`` are narrowed by GPU, then setting, then range; the first
        condition that leaves none is the reason given.

        Raises:
            Refusal: 403 naming that condition and what the grants allow instead.
        """
        grants = self.control_grants(who)
        if grants is None:
            return
        if not grants:
            raise Refusal(403, self._no_grant(who))
        conditions = (
            (lambda g: g.allows_gpu(gpu), self._outside_gpus),
            (lambda g: g.allows_knob(knob), self._outside_settings),
            (lambda g: _in_range(g, knob, value), self._outside_range),
        )
        for keeps, refusal in conditions:
            narrowed = [g for g in grants if keeps(g)]
            if not narrowed:
                raise Refusal(403, refusal(who, grants, gpu, knob, value))
            grants = narrowed

    def _outside_gpus(self, who: Principal, grants: list[Grant], gpu: int, knob: Knob, value: Value) -> str:
        allowed = sorted({i for g in grants if g.gpus != "all" for i in g.gpus})
        return (
            f"GPU {gpu} is outside the GPUs granted to {who.describe()} (GPUs {allowed}). Use one of "
            f"those, or ask the administrator to grant GPU {gpu} in {self.source}."
        )

    def _outside_settings(
        self, who: Principal, grants: list[Grant], gpu: int, knob: Knob, value: Value
    ) -> str:
        allowed = sorted({k.value for g in grants for k in _knobs(g)})
        return (
            f"{who.describe()} may not change the {knob.label} of GPU {gpu}: their grants in {self.source} "
            f"allow {allowed}."
        )

    def _outside_range(self, who: Principal, grants: list[Grant], gpu: int, knob: Knob, value: Value) -> str:
        field_name, unit, _ = _RANGE_FIELD[knob]
        shown = ", ".join(f"{lo:g}-{hi:g} {unit}" for lo, hi in (getattr(g, field_name) for g in grants))
        return (
            f"{_show(knob, value)} is outside the {knob.label} range granted to {who.describe()} on "
            f"GPU {gpu} ({shown}). Ask for a value in that range."
        )

    def _no_grant(self, who: Principal) -> str:
        if who.via == "tcp":
            return f"{who.describe()} is named by no grant of {self.source}."
        return (
            f"{who.describe()} is in no grant of {self.source} (grants name: "
            f"{'; '.join(g.describe() for g in self.config.grants)}). Ask the administrator to add the "
            "user to a granted group (e.g. `sudo usermod -aG <group> <user>`, then log in again)."
        )

    # -- summaries ------------------------------------------------------------------------------
    def summary(self, who: Principal, gpus: list[int]) -> dict[str, Any]:
        """What ``who`` may do, as JSON: per API group yes/no and why, per GPU the settings and ranges."""
        groups: dict[str, Any] = {}
        for group in ApiGroup:
            if group not in self.enabled:
                groups[group.value] = {"allowed": False, "why": "not enabled on this daemon"}
                continue
            try:
                self.check_group(who, group)
                groups[group.value] = {"allowed": True, "why": ""}
            except Refusal as r:
                groups[group.value] = {"allowed": False, "why": r.message}
        control: dict[str, Any] = {}
        if groups[ApiGroup.GPU_CONTROL.value]["allowed"]:
            for gpu in gpus:
                control[str(gpu)] = self._gpu_summary(who, gpu)
        return {
            "who": who.describe(),
            "via": who.via,
            "admin": self.is_admin(who),
            "open": self.config.open,
            "api_groups": groups,
            "gpu_control": control,
        }

    def _gpu_summary(self, who: Principal, gpu: int) -> dict[str, Any]:
        grants = self.control_grants(who)
        if grants is None:
            return {k.value: "any" for k in Knob}
        on_gpu = [g for g in grants if g.allows_gpu(gpu)]
        return {
            k.value: _allowed_ranges(k, [g for g in on_gpu if g.allows_knob(k)])
            for k in Knob
            if any(g.allows_knob(k) for g in on_gpu)
        }
