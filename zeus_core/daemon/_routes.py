"""zeusd's GPU and CPU routes: same paths, parameters, units (mW, MHz, mJ, µJ) and replies.

Writes (``POST /gpu/set_*``, ``/gpu/reset_*``) check every GPU first (the GPU exists, the value fits
the GPU, the caller's grants allow it) so that a refused request changes nothing, then hand the
changes to the :class:`~zeus_core.daemon._leases.LeaseBook`, which owns the leases and the journal.
Reads fan out to the GPUs' worker threads and aggregate per-GPU errors as zeusd does.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

from aiohttp import web

from zeus_core.daemon._app import PRINCIPAL, STATE, DaemonState, errors, holder_for
from zeus_core.daemon._config import Knob
from zeus_core.daemon._hardware import ManagedGpu, status_of
from zeus_core.daemon._leases import Change, Holder, RequestErrors, normalize
from zeus_core.daemon._models import (
    CpuEnergyQuery,
    CpuReadQuery,
    GpuReadQuery,
    SetClocks,
    SetPersistence,
    SetPowerLimit,
    WriteQuery,
    parse_ids,
    parse_query,
    resolve_ids,
)
from zeus_core.daemon._policy import Principal, Refusal
from zeus_core.daemon._streams import stream_events, timestamp_ms
from zeus_core.exceptions import ZeusError

__all__ = ["add_routes", "WRITES"]

_Knobs = Callable[[Any], list[tuple[Knob, Any]]]

WRITES: dict[str, tuple[type[WriteQuery], _Knobs]] = {
    "set_power_limit": (SetPowerLimit, lambda q: [(Knob.POWER_LIMIT, q.power_limit_mw)]),
    "set_persistence_mode": (SetPersistence, lambda q: [(Knob.PERSISTENCE_MODE, q.enabled)]),
    "set_gpu_locked_clocks": (
        SetClocks,
        lambda q: [(Knob.GPU_LOCKED_CLOCKS, (q.min_clock_mhz, q.max_clock_mhz))],
    ),
    "reset_gpu_locked_clocks": (WriteQuery, lambda q: [(Knob.GPU_LOCKED_CLOCKS, None)]),
    "set_mem_locked_clocks": (
        SetClocks,
        lambda q: [(Knob.MEM_LOCKED_CLOCKS, (q.min_clock_mhz, q.max_clock_mhz))],
    ),
    "reset_mem_locked_clocks": (WriteQuery, lambda q: [(Knob.MEM_LOCKED_CLOCKS, None)]),
    "reset_locked_clocks": (
        WriteQuery,
        lambda q: [(Knob.GPU_LOCKED_CLOCKS, None), (Knob.MEM_LOCKED_CLOCKS, None)],
    ),
}
"""Each write route: its parameter model and the settings and values it changes."""


def _query(model: type[Any], request: web.Request) -> Any:
    return parse_query(model, request.query, list(request.query.keys()))


def _gpus(state: DaemonState) -> dict[int, ManagedGpu]:
    return {g.id: g for g in state.hardware.gpus}


def _write_handler(name: str) -> Callable[[web.Request], Any]:
    model, knobs = WRITES[name]

    async def handle(request: web.Request) -> web.StreamResponse:
        state = request.app[STATE]
        query = _query(model, request)
        gpus = _gpus(state)
        ids = parse_ids(query.gpu_ids, "GPU")
        for i in ids:
            if i not in gpus:
                raise Refusal(400, f"GPU index {i} does not exist.")
        who: Principal = request[PRINCIPAL]
        changes = [Change(i, knob, normalize(knob, value)) for i in ids for knob, value in knobs(query)]
        holder = await holder_for(request, who, state.book)
        try:
            _check(state, who, holder, changes)
        except (Refusal, RequestErrors):
            state.book.forget_if_idle(holder)
            raise
        await state.book.change(holder, changes, query.block, f"{who.describe()} via {who.via}")
        return web.Response()

    handle.__name__ = f"{name}_handler"
    return handle


def _check(state: DaemonState, who: Principal, holder: Holder | None, changes: list[Change]) -> None:
    """Refuse the whole request, before anything changes, if the grants or a GPU refuse any part.

    Putting back the value a caller's own lease restores is always allowed (it undoes the caller's change),
    even where the grant's range would not allow that value.
    """
    for c in changes:
        if not state.book.restores(holder, c):
            state.policy.check_change(who, c.gpu, c.knob, c.value)
    bad: dict[int, tuple[int, str]] = {}
    gpus = _gpus(state)
    for c in changes:
        try:
            gpus[c.gpu].check(c.knob, c.value)
        except ZeusError as e:
            bad.setdefault(c.gpu, (status_of(e), str(e)))
    if bad:
        raise RequestErrors(bad)


def _read_handler(read: Callable[[ManagedGpu], dict[str, Any]]) -> Callable[[web.Request], Any]:
    async def handle(request: web.Request) -> web.StreamResponse:
        state = request.app[STATE]
        gpus = _gpus(state)
        ids = resolve_ids(_query(GpuReadQuery, request).gpu_ids, sorted(gpus), "GPU")
        results = await asyncio.gather(*(gpus[i].call(read, gpus[i]) for i in ids), return_exceptions=True)
        return _collect(ids, results, lambda out: web.json_response({str(i): r for i, r in zip(ids, out)}))

    return handle


def _collect(ids: list[int], results: list[Any], ok: Callable[[list[Any]], web.Response]) -> web.Response:
    failed: dict[int, tuple[int, str]] = {}
    for i, r in zip(ids, results):
        if isinstance(r, BaseException):
            if not isinstance(r, ZeusError):
                raise r
            failed[i] = (status_of(r), str(r))
    return errors(failed) if failed else ok(results)


async def gpu_power(request: web.Request) -> web.Response:
    """``GET /gpu/get_power``: one snapshot, mW."""
    state = request.app[STATE]
    gpus = _gpus(state)
    ids = resolve_ids(_query(GpuReadQuery, request).gpu_ids, sorted(gpus), "GPU")
    results = await asyncio.gather(*(gpus[i].call(gpus[i].power_mw) for i in ids), return_exceptions=True)
    return _collect(
        ids,
        results,
        lambda out: web.json_response(
            {"timestamp_ms": timestamp_ms(), "power_mw": {str(i): p for i, p in zip(ids, out)}}
        ),
    )


async def gpu_stream(request: web.Request) -> web.StreamResponse:
    """``GET /gpu/stream_power``: SSE, one event per GPU per sample."""
    state = request.app[STATE]
    ids = resolve_ids(_query(GpuReadQuery, request).gpu_ids, [g.id for g in state.hardware.gpus], "GPU")
    return await stream_events(
        request, state.gpu_feed, ids, lambda ts, i, mw: {"timestamp_ms": ts, "gpu_id": i, "power_mw": mw}
    )


# -- CPUs ---------------------------------------------------------------------------------------------
async def cpu_energy(request: web.Request) -> web.Response:
    """``GET /cpu/get_cumulative_energy``: µJ per package, ``null`` where not asked or not metered."""
    state = request.app[STATE]
    query: CpuEnergyQuery = _query(CpuEnergyQuery, request)
    cpus = {c.id: c for c in state.hardware.cpus}
    ids = resolve_ids(query.cpu_ids, sorted(cpus), "CPU")
    results = await asyncio.gather(
        *(state.hardware.cpu_call(cpus[i].energy_uj, query.cpu, query.dram) for i in ids),
        return_exceptions=True,
    )
    return _collect(ids, results, lambda out: web.json_response({str(i): r for i, r in zip(ids, out)}))


async def read_cpu_energy(state: DaemonState, ids: list[int]) -> dict[int, dict[str, int | None]]:
    """Package and DRAM energy of ``ids``, µJ (failures left out)."""
    cpus = {c.id: c for c in state.hardware.cpus}
    results = await asyncio.gather(
        *(state.hardware.cpu_call(cpus[i].energy_uj) for i in ids), return_exceptions=True
    )
    return {i: r for i, r in zip(ids, results) if not isinstance(r, BaseException)}


def cpu_power_mw(
    first: dict[str, int | None], second: dict[str, int | None], elapsed_s: float
) -> dict[str, int | None]:
    """``{"cpu_mw", "dram_mw"}`` from two energy readings ``elapsed_s`` apart."""

    def mw(key: str) -> int | None:
        a, b = first.get(key), second.get(key)
        return None if a is None or b is None else max(0, int((b - a) / 1000 / max(elapsed_s, 1e-6)))

    return {"cpu_mw": mw("cpu_energy_uj"), "dram_mw": mw("dram_energy_uj")}


async def cpu_power(request: web.Request) -> web.Response:
    """``GET /cpu/get_power``: power from two energy reads one sampling period apart, mW."""
    state = request.app[STATE]
    ids = resolve_ids(_query(CpuReadQuery, request).cpu_ids, [c.id for c in state.hardware.cpus], "CPU")
    first = await read_cpu_energy(state, ids)
    start = time.monotonic()
    await asyncio.sleep(state.cpu_period_s)
    second = await read_cpu_energy(state, ids)
    elapsed = time.monotonic() - start
    missing = {
        i: (500, f"CPU {i} did not return the energy data required for power measurement.")
        for i in ids
        if i not in first or i not in second
    }
    if missing:
        return errors(missing)
    return web.json_response(
        {
            "timestamp_ms": timestamp_ms(),
            "power_mw": {str(i): cpu_power_mw(first[i], second[i], elapsed) for i in ids},
        }
    )


async def cpu_stream(request: web.Request) -> web.StreamResponse:
    """``GET /cpu/stream_power``: SSE, one event per package per sample."""
    state = request.app[STATE]
    ids = resolve_ids(_query(CpuReadQuery, request).cpu_ids, [c.id for c in state.hardware.cpus], "CPU")
    return await stream_events(
        request, state.cpu_feed, ids, lambda ts, i, p: {"timestamp_ms": ts, "cpu_id": i, **p}
    )


def add_routes(app: web.Application) -> None:
    """Register the GPU and CPU routes."""
    for name in WRITES:
        app.router.add_post(f"/gpu/{name}", _write_handler(name))
    app.router.add_get(
        "/gpu/get_power_limit", _read_handler(lambda g: {"power_limit_mw": g.power_limit_mw()})
    )
    app.router.add_get(
        "/gpu/get_power_limit_constraints",
        _read_handler(lambda g: dict(zip(("min_power_limit_mw", "max_power_limit_mw"), g.constraints_mw()))),
    )
    app.router.add_get(
        "/gpu/get_persistence_mode", _read_handler(lambda g: {"enabled": g.persistence_mode()})
    )
    app.router.add_get("/gpu/get_cumulative_energy", _read_handler(lambda g: {"energy_mj": g.energy_mj()}))
    app.router.add_get("/gpu/get_power", gpu_power)
    app.router.add_get("/gpu/stream_power", gpu_stream)
    app.router.add_get("/cpu/get_cumulative_energy", cpu_energy)
    app.router.add_get("/cpu/get_power", cpu_power)
    app.router.add_get("/cpu/stream_power", cpu_stream)
