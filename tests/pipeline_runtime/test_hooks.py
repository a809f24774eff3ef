"""The hook plumbing shared by the framework adapters: registration, undo, events, lazy imports."""

from __future__ import annotations

import subprocess
import sys
import types
from typing import Any

import pytest

from tests.conftest import REPO_ROOT
from zeus_core import console
from zeus_core.exceptions import ZeusConfigError, ZeusNotSupportedError
from zeus_core.optimizer.pipeline_frequency import InstructionKind
from zeus_integrations.pipeline import Attachment, patch_attribute, wrap_instruction, wrap_iteration


class Recorder:
    """An InstructionListener that records every event."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def set_pipeline(
        self, stage: int, num_stages: int, schedule: str | None = None, framework: str | None = None
    ) -> None:
        self.events.append(("pipeline", stage, num_stages, schedule))
        self.framework = framework

    def begin_iteration(self) -> None:
        self.events.append(("begin_iteration",))

    def end_iteration(self, failed: bool = False) -> None:
        self.events.append(("end_iteration", failed))

    def begin_instruction(
        self, kind: InstructionKind | str, microbatch: int | None = None, virtual_stage: int | None = None
    ) -> None:
        self.events.append(("begin", InstructionKind.parse(kind).value, microbatch))

    def end_instruction(
        self, kind: InstructionKind | str, microbatch: int | None = None, failed: bool = False
    ) -> None:
        self.events.append(("end", InstructionKind.parse(kind).value, microbatch, failed))


class Engine:
    def step(self, x: int) -> int:
        return x + 1


def test_patch_attribute_on_an_instance_and_a_module_undoes_cleanly() -> None:
    engine = Engine()
    undo = patch_attribute(engine, "step", lambda x: x * 10)
    assert engine.step(2) == 20 and "step" in vars(engine)
    undo()
    assert engine.step(2) == 3 and "step" not in vars(engine)
    module = types.ModuleType("fake_schedules")
    module.forward_step = lambda: "original"  # type: ignore[attr-defined]
    undo = patch_attribute(module, "forward_step", lambda: "wrapped")
    assert module.forward_step() == "wrapped"
    undo()
    assert module.forward_step() == "original"


def test_undo_leaves_a_later_replacement_alone(caplog: pytest.LogCaptureFixture) -> None:
    engine = Engine()
    undo = patch_attribute(engine, "step", lambda x: 0)
    engine.step = lambda x: -1  # type: ignore[method-assign]  # someone else wrapped after us
    undo()
    assert engine.step(5) == -1 and "replaced after Zeus attached" in caplog.text


def test_wrappers_report_boundaries_and_failures() -> None:
    rec = Recorder()
    calls: list[int] = []

    def forward(mb: int, fail: bool = False) -> int:
        calls.append(mb)
        if fail:
            raise RuntimeError("boom")
        return mb

    fwd = wrap_instruction(rec, InstructionKind.FORWARD, forward, lambda a, k: a[0])
    step = wrap_iteration(rec, lambda: [fwd(0), fwd(1)])
    assert step() == [0, 1]
    with pytest.raises(RuntimeError, match="boom"):
        wrap_iteration(rec, lambda: fwd(2, fail=True))()
    assert rec.events == [
        ("begin_iteration",),
        ("begin", "forward", 0),
        ("end", "forward", 0, False),
        ("begin", "forward", 1),
        ("end", "forward", 1, False),
        ("end_iteration", False),
        ("begin_iteration",),
        ("begin", "forward", 2),
        ("end", "forward", 2, True),
        ("end_iteration", True),
    ]
    assert fwd.__wrapped__ is forward and calls == [0, 1, 2]  # type: ignore[attr-defined]


def test_attachment_detaches_once_in_reverse_order() -> None:
    order: list[str] = []
    with Attachment("test", [lambda: order.append("a"), lambda: order.append("b")]) as att:
        assert att.attached
    att.detach()
    assert order == ["b", "a"] and not att.attached and "attached=False" in repr(att)


def test_torch_pipelining_rejects_unsupported_schedules_and_non_stages() -> None:
    pytest.importorskip("torch")
    from torch.distributed.pipelining import Schedule1F1B, ScheduleLoopedBFS

    from zeus_integrations.pipeline import torch_pipelining

    fake = object.__new__(ScheduleLoopedBFS)
    with pytest.raises(ZeusNotSupportedError, match="ScheduleLoopedBFS is not supported"):
        torch_pipelining.attach(Recorder(), object(), fake)
    with pytest.raises(ZeusConfigError, match="is not a PipelineStage"):
        torch_pipelining.attach(Recorder(), object(), object.__new__(Schedule1F1B))


def test_version_guard_names_the_supported_versions_when_a_seam_is_missing() -> None:
    pytest.importorskip("torch")
    from torch.distributed.pipelining import Schedule1F1B

    from zeus_integrations.pipeline import SUPPORTED_VERSIONS, check_seam, torch_pipelining

    class OldStage:  # a PipelineStage from a torch without the methods the hook wraps
        stage_index, group_rank, group_size = 0, 0, 2

        def forward_one_chunk(self, i: int) -> None: ...

    with pytest.raises(ZeusNotSupportedError, match=r"lacks PipelineStage\..*torch>=2\.4,<2\.14"):
        torch_pipelining.attach(Recorder(), OldStage(), object.__new__(Schedule1F1B))
    for framework, (dist, spec) in SUPPORTED_VERSIONS.items():
        with pytest.raises(ZeusNotSupportedError, match=f"Supported: {dist}{spec}"):
            check_seam(framework, "a seam", present=False)
    check_seam("torch", "a seam", present=True)  # the installed torch is in range: no error


def test_a_torch_2_4_stage_without_weight_backward_attaches_to_1f1b_but_not_to_zero_bubble() -> None:
    pytest.importorskip("torch")
    from torch.distributed.pipelining import Schedule1F1B, ScheduleZBVZeroBubble

    from zeus_integrations.pipeline import torch_pipelining

    class Stage24:  # torch 2.4's PipelineStage: no backward_weight_one_chunk, no full_backward
        stage_index, group_rank, group_size = 1, 1, 2

        def forward_one_chunk(self, fwd_chunk_id: int, args: tuple, kwargs: dict | None = None) -> int:
            return fwd_chunk_id

        def backward_one_chunk(self, bwd_chunk_id: int, loss: Any = None) -> None: ...

    stage, rec = Stage24(), Recorder()
    schedule = object.__new__(Schedule1F1B)  # its step: one microbatch through the stage's methods
    schedule.step = lambda: [stage.forward_one_chunk(0, ()), stage.backward_one_chunk(0, loss=None)]
    with torch_pipelining.attach(rec, stage, schedule):
        schedule.step()
    assert rec.events[1:] == [
        ("begin_iteration",),
        ("begin", "forward", 0),
        ("end", "forward", 0, False),
        ("begin", "backward", 0),
        ("end", "backward", 0, False),
        ("end_iteration", False),
    ]
    assert "forward_one_chunk" not in vars(stage)
    with pytest.raises(ZeusNotSupportedError, match="lacks PipelineStage.*backward_weight_one_chunk"):
        torch_pipelining.attach(Recorder(), stage, object.__new__(ScheduleZBVZeroBubble))


def test_a_schedule_this_torch_lacks_is_named_with_the_release_that_added_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("torch")
    import torch.distributed.pipelining as pipelining

    from zeus_integrations.pipeline import torch_pipelining

    assert torch_pipelining.schedule_class("zbv") is pipelining.ScheduleZBVZeroBubble
    monkeypatch.delattr(pipelining, "ScheduleZBVZeroBubble")  # as in torch 2.4 and 2.5
    with pytest.raises(ZeusNotSupportedError, match=r"has no ScheduleZBVZeroBubble \(added in torch 2\.6\)"):
        torch_pipelining.schedule_class("zbv")
    with pytest.raises(ZeusNotSupportedError, match="unknown schedule 'dualpipe'"):
        torch_pipelining.schedule_class("dualpipe")


def test_adapters_import_no_framework_and_name_the_extra_when_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code = (
        "import sys\n"
        "import zeus_integrations.pipeline, zeus_integrations.pipeline.torch_pipelining\n"
        "import zeus_integrations.pipeline.deepspeed, zeus_integrations.pipeline.megatron\n"
        "import zeus_core.optimizer.pipeline_frequency.runtime\n"
        "bad = [m for m in ('torch', 'deepspeed', 'megatron', 'scipy', 'matplotlib') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    from zeus_integrations.pipeline import deepspeed as zeus_ds
    from zeus_integrations.pipeline import megatron as zeus_megatron

    # Hide the frameworks, including submodules earlier tests may have imported.
    for name in [m for m in sys.modules if m.split(".")[0] in ("deepspeed", "megatron")] + [
        "deepspeed",
        "megatron",
    ]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'zeus-suite\[pipeline\]'"):
        zeus_ds.attach(Recorder(), object())
    with pytest.raises(ModuleNotFoundError, match=r"needs megatron"):
        zeus_megatron.attach(Recorder())


def test_megatron_needs_model_parallelism_or_an_explicit_stage() -> None:
    pytest.importorskip("megatron.core")
    from zeus_integrations.pipeline import megatron as zeus_megatron

    rec = Recorder()
    with pytest.raises(ZeusConfigError, match="initialize_model_parallel"):
        zeus_megatron.attach(rec)
    from megatron.core.pipeline_parallel import schedules

    original = schedules.forward_step
    with zeus_megatron.attach(rec, stage=1, num_stages=2):
        assert schedules.forward_step is not original
    assert schedules.forward_step is original and rec.events == [("pipeline", 1, 2, "1f1b")]


class ChunkRecorder(Recorder):
    """A Recorder that also records each instruction's virtual stage."""

    def begin_instruction(
        self, kind: InstructionKind | str, microbatch: int | None = None, virtual_stage: int | None = None
    ) -> None:
        self.events.append(("begin", InstructionKind.parse(kind).value, microbatch, virtual_stage))


def test_megatron_interleaved_names_each_backward_by_the_forward_that_made_its_output(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("megatron.core")
    from megatron.core.pipeline_parallel import schedules

    from zeus_integrations.pipeline import megatron as zeus_megatron

    # Megatron-core's seams with their real signatures; the schedule calls them as module globals.
    def forward_step(
        forward_step_func: Any,
        data_iterator: Any,
        model: Any,
        num_microbatches: int,
        input_tensor: Any,
        forward_data_store: Any,
        config: Any,
        cp_group_size: int,
        collect_non_loss_data: bool = False,
        checkpoint_activations_microbatch: Any = None,
        is_first_microbatch: bool = False,
        current_microbatch: int | None = None,
        vp_stage: int | None = None,
        is_last_stage: bool = True,
    ) -> tuple[Any, int]:
        return [f"out{current_microbatch}c{vp_stage}"], 1  # a fresh object per call, as a tensor is

    def backward_step(input_tensor: Any, output_tensor: Any, output_tensor_grad: Any, *rest: Any) -> str:
        return f"grad of {output_tensor[0]}"

    def interleaved(*, forward_only: bool = False, stranger: bool = False, **kwargs: Any) -> list[str]:
        if stranger:  # a backward whose forward the hook never saw
            return [schedules.backward_step(None, ["from before attaching"], None, None, None)]
        f = [
            schedules.forward_step(None, None, None, 2, None, [], None, 1, current_microbatch=mb, vp_stage=c)[
                0
            ]
            for mb, c in [(0, 0), (1, 0), (0, 1), (1, 1)]
        ]
        if forward_only:
            return []
        # Backwards run the chunks in reverse and name neither chunk nor microbatch.
        return [schedules.backward_step(None, f[i], None, None, None) for i in (2, 3, 0, 1)]

    monkeypatch.setattr(schedules, "forward_step", forward_step)
    monkeypatch.setattr(schedules, "backward_step", backward_step)
    monkeypatch.setattr(schedules, "forward_backward_pipelining_with_interleaving", interleaved)
    rec = ChunkRecorder()
    with zeus_megatron.attach(rec, stage=1, num_stages=2, num_chunks=2):
        original_1f1b = schedules.forward_backward_pipelining_without_interleaving
        assert not hasattr(original_1f1b, "__wrapped__")  # only the interleaved schedule is wrapped
        grads = schedules.forward_backward_pipelining_with_interleaving(forward_only=False)
        schedules.forward_backward_pipelining_with_interleaving(forward_only=True)
        warnings: list[str] = []
        monkeypatch.setattr(console, "warn", warnings.append)
        monkeypatch.setattr(console, "_seen", set())  # warn_once: as in a fresh process
        schedules.forward_backward_pipelining_with_interleaving(stranger=True)
    assert grads == ["grad of out0c1", "grad of out1c1", "grad of out0c0", "grad of out1c0"]
    assert schedules.forward_step is forward_step and schedules.backward_step is backward_step
    begins = [e[1:] for e in rec.events if e[0] == "begin"]
    # Virtual stage = chunk * S + stage: chunk 0 of stage 1 is 1, chunk 1 is 3.
    assert begins[:8] == [
        ("forward", 0, 1),
        ("forward", 1, 1),
        ("forward", 0, 3),
        ("forward", 1, 3),
        ("backward", 0, 3),
        ("backward", 1, 3),
        ("backward", 0, 1),
        ("backward", 1, 1),
    ]
    assert rec.events[0] == ("pipeline", 1, 2, "interleaved-1f1b")
    # Two training iterations; the forward-only call is not one.
    assert [e[0] for e in rec.events if "iteration" in e[0]] == ["begin_iteration", "end_iteration"] * 2
    # An unknown backward is counted on the current virtual rank (none set: chunk 0), with a warning.
    assert begins[-1] == ("backward", None, 1)
    assert len(warnings) == 1 and "forward_step was not seen" in warnings[0]
