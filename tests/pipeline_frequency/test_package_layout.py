"""Perseus in two: the shared data at the bottom, a pure planner above it, the runtime on top.

The data (schedules, profiles, plans) stands on the exception tree alone; the planner on the data
(no devices, no ranks, no runtime); only the runtime touches GPUs, monitors and collectives.
"""

from __future__ import annotations

import pytest

from tests.core.import_graph import import_edges

P = "zeus_core.optimizer.pipeline_frequency"
DATA = (f"{P}._schedule", f"{P}._profile", f"{P}._frequency_plan")
EDGES = import_edges()


def _part(module: str) -> str | None:
    if module in DATA:
        return "data"
    for part in ("planner", "runtime"):
        if module == f"{P}.{part}" or module.startswith(f"{P}.{part}."):
            return part
    return None


@pytest.mark.parametrize(
    ("part", "may_import"),
    [
        ("data", {"data", "zeus_core.exceptions", "zeus_core._files"}),  # _files: on the exceptions alone
        # _arg_types: the plan command's flag types (foundation, imports nothing)
        ("planner", {"data", "planner", "zeus_core.exceptions", "zeus_core._files", "zeus_core._arg_types"}),
    ],
)
def test_the_lower_parts_import_only_what_lies_below_them(part: str, may_import: set[str]) -> None:
    bad = [
        e.describe()
        for e in EDGES
        if _part(e.importer) == part
        and e.imported.startswith("zeus_core")
        and (_part(e.imported) or e.imported) not in may_import
    ]
    assert not bad, f"Perseus's {part} imports more than {sorted(may_import)}:\n" + "\n".join(bad)


def test_the_planner_and_the_data_are_found() -> None:
    importers = {_part(e.importer) for e in EDGES}
    assert {"data", "planner", "runtime"} <= importers
