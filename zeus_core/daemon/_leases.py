"""Leases: every change belongs to the process (or TCP session) that asked for it, undone when it ends.

A *lease* is one setting of one GPU (:class:`~zeus_core.daemon._config.Knob`) changed away from the
value it had (``original``), with the *holders* that asked for the current value. Rules (the full
description is docs/daemon.md, "Leases"):

- the first change of a setting by a holder opens a lease, journaled (fsync'd) before the write;
- a holder changing it again writes nothing to the journal; setting it back to ``original`` (what
  a :class:`~zeus_core.settings.SettingsGuard` does on exit) closes the lease;
- another live holder asking for the *same* value joins the lease; a *different* value gets 409
  naming the holders, unless the config shares that GPU; a co-holder asking for ``original`` leaves
  the lease (the others keep their value);
- when the last holder ends (a process: its pidfd turns readable; a TCP session: missed heartbeats),
  ``original`` is written back and the lease is closed in the journal;
- at start, leases left open by a killed daemon are taken over: live holders keep them, dead ones
  are dropped, and a lease without holders is restored before the daemon serves anything.

Locked clocks cannot be read through NVML, so their ``original`` is "unlocked" (restored by a reset),
as :mod:`zeus_core.settings` does.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Callable, Coroutine

from zeus_core.daemon._config import DaemonConfig, Knob
from zeus_core.daemon._hardware import Hardware, show_value, status_of
from zeus_core.daemon._journal import HolderRow, Journal
from zeus_core.daemon._peers import PeerProcess, ProcessWatch, open_pidfd, pidfd_alive, process_starttime
from zeus_core.daemon._policy import Value
from zeus_core.exceptions import ZeusError

__all__ = ["Holder", "Lease", "Change", "RequestErrors", "LeaseBook", "UNKNOWN", "normalize"]

audit = logging.getLogger("zeus_core.daemon.audit")
logger = logging.getLogger(__name__)


class _Unknown:
    def __repr__(self) -> str:
        return "unknown"


UNKNOWN: Any = _Unknown()
"""A lease's current value after a restart when the device cannot report it (never equal to a request)."""


def normalize(knob: Knob, value: Any) -> Value:
    """A value in its one comparable form: int mW, ``(min, max)`` tuple or None, bool."""
    if knob in (Knob.GPU_LOCKED_CLOCKS, Knob.MEM_LOCKED_CLOCKS):
        return None if value is None else (int(value[0]), int(value[1]))
    if knob is Knob.PERSISTENCE_MODE:
        return bool(value)
    return int(value)


@dataclass
class Holder:
    """A process (Unix socket) or TCP session that holds leases."""

    key: str
    kind: str  # "process" or "session"
    who: str
    pid: int | None = None
    starttime: int | None = None
    uid: int | None = None
    since: float = field(default_factory=time.time)
    deadline: float | None = None  # sessions: time.monotonic() after which the leases end
    watch: ProcessWatch | None = None

    def row(self) -> HolderRow:
        """The journal's record of this holder."""
        return HolderRow(self.key, self.kind, self.pid, self.starttime, self.uid, self.who, self.since)


@dataclass
class Lease:
    """One changed setting of one GPU: what to restore, the value now, and who holds it."""

    id: int
    gpu: int
    knob: Knob
    original: Value
    original_known: bool
    value: Value
    holders: dict[str, Holder]
    opened_at: float = field(default_factory=time.time)

    def describe(self) -> str:
        """E.g. ``"GPU 0's power limit is held by pid 42 (...) at 150000 mW since 12:00:01"``."""
        who = "; ".join(h.who for h in self.holders.values()) or "no live process"
        since = time.strftime("%H:%M:%S", time.localtime(self.opened_at))
        value = show_value(self.knob, self.value)
        return f"GPU {self.gpu}'s {self.knob.label} is held by {who} at {value} since {since}"


@dataclass(frozen=True)
class Change:
    """One requested change: GPU id, setting and value (normalized)."""

    gpu: int
    knob: Knob
    value: Value


class RequestErrors(Exception):
    """Per-GPU failures of a request: ``{gpu: (status, message)}``; zeusd aggregates them."""

    def __init__(self, errors: dict[int, tuple[int, str]]) -> None:
        super().__init__("; ".join(m for _, m in errors.values()))
        self.errors = errors


@dataclass
class _Step:
    change: Change
    lease: Lease | None
    action: str  # open | plain | sole | update | join | leave | noop
    write: bool
    original: Value = None
    original_known: bool = True


class LeaseBook:
    """The open leases, their holders and journal, and the one place settings are changed and restored.

    Args:
        hardware: The devices.
        journal: The lease journal.
        config: For sharing and the TCP heartbeat.
    """

    def __init__(self, hardware: Hardware, journal: Journal, config: DaemonConfig) -> None:
        self.hardware = hardware
        self.journal = journal
        self.config = config
        self._locks = {g.id: asyncio.Lock() for g in hardware.gpus}
        self._gpus = {g.id: g for g in hardware.gpus}
        self._leases: dict[tuple[int, Knob], Lease] = {}
        self._holders: dict[str, Holder] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- holders --------------------------------------------------------------------------------
    def process_holder(self, peer: PeerProcess, describe: Callable[[], str]) -> Holder:
        """The holder for a Unix-socket peer (takes over ``peer.pidfd``: watched, or closed if known).

        ``describe()`` names a new holder for messages (``"pid 42 (alice, uid 1000: python train.py)"``).
        """
        holder = self._holders.get(peer.key)
        if holder is not None:
            os.close(peer.pidfd)
            return holder
        holder = Holder(peer.key, "process", describe(), peer.creds.pid, peer.starttime, peer.creds.uid)
        holder.watch = ProcessWatch(asyncio.get_running_loop(), peer.pidfd, lambda: self._on_exit(peer.key))
        self._holders[peer.key] = holder
        return holder

    def session_holder(self, subject: str, session: str, who: str) -> Holder:
        """The holder for a TCP session (its heartbeat deadline is renewed by this call)."""
        key = f"session:{subject}:{session}"
        holder = self._holders.get(key)
        if holder is None:
            holder = self._holders[key] = Holder(key, "session", who)
        holder.deadline = time.monotonic() + self.config.lease_ttl_s
        return holder

    def heartbeat(self, subject: str, session: str) -> bool:
        """Renew a TCP session's leases; whether it holds any."""
        holder = self._holders.get(f"session:{subject}:{session}")
        if holder is None:
            return False
        holder.deadline = time.monotonic() + self.config.lease_ttl_s
        return True

    def _on_exit(self, key: str) -> None:
        self._spawn(self.release(key, "ended"))

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def restores(self, holder: Holder | None, change: Change) -> bool:
        """Whether ``change`` puts back the original value of a lease ``holder`` holds (always allowed)."""
        lease = self._leases.get((change.gpu, change.knob))
        return (
            holder is not None
            and lease is not None
            and holder.key in lease.holders
            and change.value == lease.original
        )

    def forget_if_idle(self, holder: Holder | None) -> None:
        """Stop watching ``holder`` if it holds no lease (after a refused request)."""
        if holder is not None:
            self._forget_if_idle(holder.key)

    def _forget_if_idle(self, key: str) -> None:
        holder = self._holders.get(key)
        if holder is None or any(key in lease.holders for lease in self._leases.values()):
            return
        if holder.kind == "process" and holder.watch is not None:
            holder.watch.close()
        del self._holders[key]

    # -- locks ----------------------------------------------------------------------------------
    async def _acquire(self, gpus: list[int]) -> None:
        taken: list[int] = []
        try:
            for gpu in gpus:  # in id order: no deadlock between multi-GPU requests
                await self._locks[gpu].acquire()
                taken.append(gpu)
        except BaseException:
            self._release_locks(taken)
            raise

    def _release_locks(self, gpus: list[int]) -> None:
        for gpu in gpus:
            self._locks[gpu].release()

    # -- changes --------------------------------------------------------------------------------
    async def change(self, holder: Holder | None, changes: list[Change], block: bool, actor: str) -> None:
        """Apply ``changes`` for ``holder`` (``None``: an unleased TCP change, as zeusd makes).

        All conflicts are found before anything is written; the journal is fsync'd before any
        write; with ``block=False`` the writes happen after this returns, in order per GPU.

        Raises:
            RequestErrors: 409 conflicts (nothing changed), or device failures (``block=True``).
        """
        gpus = sorted({c.gpu for c in changes})
        await self._acquire(gpus)
        handed_over = False
        try:
            await self._reap(gpus)
            steps = await self._plan_all(holder, changes)
            self._journal_steps(holder, steps)
            if block:
                errors = await self._write(steps, holder, actor)
                if errors:
                    raise RequestErrors(errors)
            else:
                self._spawn(self._write_and_unlock(steps, holder, actor, gpus))
                handed_over = True
        finally:
            if not handed_over:
                self._release_locks(gpus)
            if holder is not None and holder.watch is not None and holder.watch.exited():
                self._spawn(self.release(holder.key, "ended"))  # it died while its request was handled
            elif holder is not None:
                self._forget_if_idle(holder.key)

    async def _write_and_unlock(
        self, steps: list[_Step], holder: Holder | None, actor: str, gpus: list[int]
    ) -> None:
        try:
            errors = await self._write(steps, holder, actor)
            for gpu, (_, message) in errors.items():
                logger.error("Non-blocking change on GPU %d failed: %s", gpu, message)
        finally:
            self._release_locks(gpus)
            if holder is not None:
                self._forget_if_idle(holder.key)

    async def _plan_all(self, holder: Holder | None, changes: list[Change]) -> list[_Step]:
        steps: list[_Step] = []
        errors: dict[int, tuple[int, str]] = {}
        for change in changes:
            step = self._plan(holder, change)
            if isinstance(step, str):
                errors[change.gpu] = (409, step)
            else:
                steps.append(step)
        if errors:
            raise RequestErrors(errors)
        for step in steps:
            if step.action != "open":
                continue
            gpu = self._gpus[step.change.gpu]
            try:
                step.original, step.original_known = await gpu.call(gpu.read, step.change.knob)
            except ZeusError as e:
                raise RequestErrors({gpu.id: (status_of(e), str(e))}) from e
            step.original = normalize(step.change.knob, step.original)
            if step.original == step.change.value:  # already so: nothing to lease
                step.action = "plain"
        return steps

    def _plan(self, holder: Holder | None, change: Change) -> _Step | str:
        """What to do for one change, or the 409 message."""
        lease = self._leases.get((change.gpu, change.knob))
        if lease is None:
            return _Step(change, None, "open" if holder is not None else "plain", True)
        share = self.config.shares(change.gpu)
        mine = holder is not None and holder.key in lease.holders
        if mine and len(lease.holders) == 1:
            return _Step(change, lease, "sole", True)
        if mine and change.value == lease.original:
            return _Step(change, lease, "leave", False)
        if change.value == lease.value:
            return _Step(change, lease, "join" if holder is not None and not mine else "noop", False)
        if share:
            return _Step(change, lease, "join" if holder is not None and not mine else "update", True)
        return (
            f"{lease.describe()}; it returns to {show_value(lease.knob, lease.original)} when "
            f"{'that process ends' if len(lease.holders) == 1 else 'they end'}. Ask for "
            f"{show_value(lease.knob, lease.value)}, wait, or have the administrator allow sharing "
            "(share = true in the daemon config)."
        )

    def _journal_steps(self, holder: Holder | None, steps: list[_Step]) -> None:
        """Journal (one fsync'd transaction) and record in memory the openings, joins and leaves."""
        if holder is None or all(step.action not in ("open", "join", "leave") for step in steps):
            return  # nothing to journal: a holder changing its own value again, or an unleased change
        with self.journal.transaction():
            for step in steps:
                c = step.change
                if step.action == "open" and holder is not None:
                    lease_id = self.journal.open_lease(
                        c.gpu, c.knob.value, step.original, step.original_known
                    )
                    self.journal.add_holder(lease_id, holder.row())
                    step.lease = Lease(
                        lease_id, c.gpu, c.knob, step.original, step.original_known, step.original, {}
                    )
                    step.lease.holders[holder.key] = holder
                    self._leases[(c.gpu, c.knob)] = step.lease
                elif step.action == "join" and holder is not None and step.lease is not None:
                    self.journal.add_holder(step.lease.id, holder.row())
                    step.lease.holders[holder.key] = holder
                elif step.action == "leave" and holder is not None and step.lease is not None:
                    self.journal.remove_holder(step.lease.id, holder.key)
                    del step.lease.holders[holder.key]
                    audit.info(
                        "GPU %d %s: %s left the lease (others hold %s)",
                        c.gpu,
                        c.knob.label,
                        holder.who,
                        show_value(c.knob, step.lease.value),
                    )

    async def _write(
        self, steps: list[_Step], holder: Holder | None, actor: str
    ) -> dict[int, tuple[int, str]]:
        """Write every step that writes (GPUs in parallel), then update the leases; the per-GPU errors."""
        todo = [s for s in steps if s.write]
        results = await asyncio.gather(
            *(
                self._gpus[s.change.gpu].call(self._gpus[s.change.gpu].write, s.change.knob, s.change.value)
                for s in todo
            ),
            return_exceptions=True,
        )
        errors: dict[int, tuple[int, str]] = {}
        for step, result in zip(todo, results):
            if isinstance(result, BaseException):
                if not isinstance(result, ZeusError):
                    raise result
                errors[step.change.gpu] = (status_of(result), str(result))
                self._failed(step, holder)
            else:
                self._done(step, holder, actor)
        return errors

    def _done(self, step: _Step, holder: Holder | None, actor: str) -> None:
        c, lease = step.change, step.lease
        note = "unleased" if lease is None else f"lease {lease.id}"
        if lease is not None:
            lease.value = c.value
            if step.action == "open":
                note += f" opened, restores {show_value(c.knob, lease.original)}"
            if step.action == "sole" and c.value == lease.original:
                self.journal.close_lease(lease.id, "released by its holder")
                del self._leases[(c.gpu, c.knob)]
                note += " closed (back to its original value)"
        audit.info(
            "GPU %d %s -> %s by %s [%s]", c.gpu, c.knob.label, show_value(c.knob, c.value), actor, note
        )

    def _failed(self, step: _Step, holder: Holder | None) -> None:
        lease = step.lease
        if step.action == "open" and lease is not None:  # nothing changed: no lease
            self.journal.close_lease(lease.id, "the write failed")
            self._leases.pop((lease.gpu, lease.knob), None)

    # -- ends -----------------------------------------------------------------------------------
    async def release(self, key: str, why: str) -> None:
        """Holder ``key`` is gone: drop it from its leases and restore those it held alone.

        Repeated until it holds none: a request it sent just before it ended may open a lease while
        this waits for the GPU locks.
        """
        try:
            while leases := [lease for lease in self._leases.values() if key in lease.holders]:
                gpus = sorted({lease.gpu for lease in leases})
                await self._acquire(gpus)
                try:
                    for lease in leases:
                        await self._drop(lease, key, why)
                finally:
                    self._release_locks(gpus)
        finally:
            self._forget_if_idle(key)

    async def _drop(self, lease: Lease, key: str, why: str) -> None:
        """(GPU lock held) Drop holder ``key`` from ``lease``; restore it if no holder is left."""
        holder = lease.holders.pop(key, None)
        if holder is None:
            return
        if lease.holders:
            self.journal.remove_holder(lease.id, key)
            audit.info("GPU %d %s: %s %s; still held by others", lease.gpu, lease.knob.label, holder.who, why)
            return
        await self._restore(lease, f"{holder.who} {why}")

    async def _restore(self, lease: Lease, cause: str) -> bool:
        """(GPU lock held) Write ``lease.original`` back and close the lease; whether it worked."""
        gpu = self._gpus[lease.gpu]
        try:
            await gpu.call(gpu.write, lease.knob, lease.original)
        except ZeusError as e:
            logger.error(
                "Could not restore GPU %d %s to %s after %s: %s (retried on the next request and at start)",
                lease.gpu,
                lease.knob.label,
                show_value(lease.knob, lease.original),
                cause,
                e,
            )
            with self.journal.transaction():
                for key in list(lease.holders):
                    self.journal.remove_holder(lease.id, key)
            lease.holders.clear()
            return False
        self.journal.close_lease(lease.id, "restored")
        self._leases.pop((lease.gpu, lease.knob), None)
        audit.info(
            "GPU %d %s restored to %s: %s [lease %d closed]",
            lease.gpu,
            lease.knob.label,
            show_value(lease.knob, lease.original),
            cause,
            lease.id,
        )
        return True

    async def _reap(self, gpus: list[int]) -> None:
        """(GPU locks held) Holders on these GPUs that ended before the loop said so, and orphan leases."""
        now = time.monotonic()
        for lease in [lease for lease in self._leases.values() if lease.gpu in gpus]:
            for key, holder in list(lease.holders.items()):
                ended = holder.watch is not None and holder.watch.exited()
                expired = holder.deadline is not None and holder.deadline < now
                if ended or expired:
                    await self._drop(lease, key, "ended" if ended else "missed its heartbeats")
            if not lease.holders and (lease.gpu, lease.knob) in self._leases:
                if not await self._restore(lease, "a restore that had failed before"):
                    raise RequestErrors(
                        {
                            lease.gpu: (
                                500,
                                f"GPU {lease.gpu}'s {lease.knob.label} could not be restored; "
                                "see the daemon log.",
                            )
                        }
                    )

    async def expire_sessions(self) -> None:
        """Forever: end TCP sessions that missed their heartbeats."""
        period = min(1.0, self.config.heartbeat_s / 2)
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for holder in list(self._holders.values()):
                if holder.deadline is not None and holder.deadline < now:
                    holder.deadline = None
                    self._spawn(self.release(holder.key, "missed its heartbeats"))

    # -- start and status -----------------------------------------------------------------------
    async def recover(self) -> None:
        """Take over the journal's open leases: keep live holders, restore what dead ones left."""
        for row in self.journal.open_leases():
            knob = Knob(row.knob)
            if row.gpu not in self._gpus:
                logger.error(
                    "Journal lease %d names GPU %d, which this daemon does not serve.", row.id, row.gpu
                )
                continue
            original = normalize(knob, row.original)
            lease = Lease(row.id, row.gpu, knob, original, row.original_known, UNKNOWN, {}, row.opened_at)
            for h in row.holders:
                holder = self._adopt(h)
                if holder is None:
                    self.journal.remove_holder(row.id, h.key)
                else:
                    lease.holders[holder.key] = holder
            self._leases[(row.gpu, knob)] = lease
            if lease.holders:
                gpu = self._gpus[row.gpu]
                with suppress(ZeusError):
                    value, known = await gpu.call(gpu.read, knob)
                    lease.value = normalize(knob, value) if known else UNKNOWN
                logger.info("Took over lease %d: %s.", row.id, lease.describe())
            else:
                await self._restore(lease, "its holders ended while the daemon was down")

    def _adopt(self, row: HolderRow) -> Holder | None:
        if row.key in self._holders:
            return self._holders[row.key]
        if row.kind == "session":
            holder = Holder(row.key, "session", row.who, since=row.since)
            holder.deadline = time.monotonic() + self.config.lease_ttl_s
        else:
            if row.pid is None or process_starttime(row.pid) != row.starttime:
                return None
            pidfd = open_pidfd(row.pid)
            if pidfd is None:
                return None
            if process_starttime(row.pid) != row.starttime or not pidfd_alive(pidfd):
                os.close(pidfd)
                return None
            holder = Holder(row.key, "process", row.who, row.pid, row.starttime, row.uid, since=row.since)
            holder.watch = ProcessWatch(asyncio.get_running_loop(), pidfd, lambda: self._on_exit(row.key))
        self._holders[row.key] = holder
        return holder

    def snapshot(self) -> list[dict[str, Any]]:
        """The open leases as JSON (``GET /leases``)."""
        return [
            {
                "id": lease.id,
                "gpu_id": lease.gpu,
                "setting": lease.knob.value,
                "value": show_value(lease.knob, lease.value) if lease.value is not UNKNOWN else "unknown",
                "restores_to": show_value(lease.knob, lease.original),
                "holders": [h.who for h in lease.holders.values()],
                "since": lease.opened_at,
            }
            for lease in sorted(self._leases.values(), key=lambda lease: lease.id)
        ]

    async def close(self) -> None:
        """Stop the background tasks and watches; open leases stay in the journal for the next start."""
        for task in list(self._tasks):
            task.cancel()
        for holder in self._holders.values():
            if holder.watch is not None:
                holder.watch.close()
