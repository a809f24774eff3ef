"""Perseus on torch's multi-stage schedules, for real: 2 gloo processes, simulated A40s.

``scripts/torch_schedules.py`` runs ScheduleInterleaved1F1B (2 model chunks per rank),
ScheduleZBVZeroBubble (a V of 2 chunks per rank, backward split into input and weight parts) and
ScheduleInterleavedZeroBubble (2 looped chunks per rank, backward split), each through discovery,
profiling, planning and applying. Virtual stages 1 and 3 do twice the work of 0 and 2. On a torch
without a zero-bubble schedule (ZBV < 2.6, interleaved zero bubble < 2.5) its cases skip, saying why.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pipeline_runtime._helpers import check_changes, report, run_two_ranks
from zeus_core.exceptions import ZeusNotSupportedError

pytestmark = pytest.mark.slow

PHASES = ["discovering", "profiling", "profiling", "applying", "applying"]


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("torch_schedules")
    run_two_ranks("torch_schedules.py", folder)
    return folder


def _missing(name: str) -> str | None:
    """Why this torch lacks a zero-bubble schedule (ZBV: torch 2.6, interleaved: 2.5); None if it has it."""
    from zeus_integrations.pipeline.torch_pipelining import schedule_class

    try:
        schedule_class(name)
    except ZeusNotSupportedError as exc:
        return str(exc)
    return None


def _planned(plan: dict, stage: int, chunk_of: dict[int, int], instructions: list) -> list[int]:
    rows = {(r["stage"], r["chunk"]): r for r in plan["frequencies_mhz"]}
    return [rows[(stage, chunk_of[v])][kind][mb] for kind, mb, _, v in instructions]


@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize(
    ("phase", "virtual", "kinds"),
    [
        ("interleaved", lambda r: [r, r + 2], {"forward", "backward"}),
        ("zbv", lambda r: sorted([r, 3 - r]), {"forward", "backward_input", "backward_weight"}),
        ("interleaved-zb", lambda r: [r, r + 2], {"forward", "backward_input", "backward_weight"}),
    ],
)
def test_multi_stage_schedules_profile_plan_and_apply(
    out: Path, rank: int, phase: str, virtual, kinds
) -> None:
    name = {"zbv": "zbv", "interleaved-zb": "interleaved-zero-bubble"}.get(phase)
    if name is not None and (why := _missing(name)):
        pytest.skip(why)
    rep = report(out, phase, rank)
    its = rep["iterations"]
    assert [i["phase"] for i in its] == PHASES
    last = its[-1]["instructions"]
    # Every instruction of both chunks is seen, with its virtual stage and (zero bubble) split kinds.
    assert {v for *_, v in last} == set(virtual(rank))
    assert {k for k, *_ in last} == kinds
    assert len(last) == len(kinds) * 2 * 4  # kinds x chunks x microbatches
    plan = rep["plan"]
    assert plan["num_chunks"] == 2 and plan["num_stages"] == 2 and plan["num_microbatches"] == 4
    assert set(plan["frequencies_mhz"][0]) - {"stage", "chunk"} == kinds
    # The clocks applied are the plan's, instruction by instruction (chunk c = c-th virtual stage).
    chunk_of = {v: c for c, v in enumerate(virtual(rank))}
    for it in its[-2:]:
        assert [mhz for _, _, mhz, _ in it["instructions"]] == _planned(
            plan, rank, chunk_of, it["instructions"]
        )
    check_changes(rep)
    assert rep["locked_after_close"] is None


def test_interleaved_plan_slows_the_light_chunks(out: Path) -> None:
    light = report(out, "interleaved", 0)  # virtual stages 0 and 2: half the work of 1 and 3
    heavy = report(out, "interleaved", 1)
    slow_light = sum(mhz < 1740 for _, _, mhz, _ in light["iterations"][-1]["instructions"])
    slow_heavy = sum(mhz < 1740 for _, _, mhz, _ in heavy["iterations"][-1]["instructions"])
    assert slow_light >= 8 and slow_light > slow_heavy
