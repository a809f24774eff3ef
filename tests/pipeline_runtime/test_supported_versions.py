"""The declared framework ranges agree: pyproject's `pipeline` extra, SUPPORTED_VERSIONS, .ci/versions.

SUPPORTED_VERSIONS is what the attach-time seam check quotes; ``.ci/versions`` pins the low ends.
"""

from __future__ import annotations

import re
import shlex

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tests.conftest import REPO_ROOT
from zeus_integrations.pipeline import SUPPORTED_VERSIONS

CI_SCRIPT = REPO_ROOT / ".ci" / "versions"


def _declared() -> dict[str, SpecifierSet]:
    """Distribution -> range, for the frameworks in pyproject's `pipeline` extra."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    reqs = [Requirement(r) for r in config["project"]["optional-dependencies"]["pipeline"]]
    frameworks = {dist for dist, _ in SUPPORTED_VERSIONS.values()}
    return {r.name: r.specifier for r in reqs if r.name in frameworks}


def _lower_bound(spec: SpecifierSet) -> Version:
    (low,) = [s.version for s in spec if s.operator == ">="]
    return Version(low)


def _bash_array(name: str) -> list[str]:
    """The words of ``NAME=(...)`` in .ci/versions."""
    match = re.search(rf"^{name}=\((.*)\)$", CI_SCRIPT.read_text(encoding="utf-8"), re.MULTILINE)
    assert match, f".ci/versions: no {name}=(...) line"
    return shlex.split(match.group(1))


def test_pyproject_extra_and_supported_versions_declare_the_same_ranges() -> None:
    declared = _declared()
    assert set(declared) == {dist for dist, _ in SUPPORTED_VERSIONS.values()}, (
        "pyproject.toml's pipeline extra and zeus_integrations.pipeline.SUPPORTED_VERSIONS name different "
        "frameworks"
    )
    for framework, (dist, spec) in SUPPORTED_VERSIONS.items():
        assert SpecifierSet(spec) == declared[dist], (
            f"{framework}: SUPPORTED_VERSIONS says {dist}{spec}, pyproject.toml says {dist}{declared[dist]}; "
            "change both together"
        )


def test_ci_versions_pins_exactly_the_declared_lower_bounds() -> None:
    declared = _declared()
    pins = [Requirement(p) for p in _bash_array("PINS")]
    untested = [Requirement(u) for u in _bash_array("UNTESTED_LOWER_BOUNDS")]
    covered = [r.name for r in pins + untested]
    assert sorted(covered) == sorted(declared), (
        f".ci/versions covers {sorted(covered)}; each of {sorted(declared)} must be pinned (PINS) or listed "
        "in UNTESTED_LOWER_BOUNDS, once"
    )
    for pin in pins:
        (exact,) = [s.version for s in pin.specifier if s.operator == "=="]
        assert Version(exact) == _lower_bound(declared[pin.name]), (
            f".ci/versions pins {pin}, but pyproject.toml declares {pin.name}{declared[pin.name]}"
        )
    for req in untested:
        assert _lower_bound(req.specifier) == _lower_bound(declared[req.name]), (
            f".ci/versions lists {req} as untested; pyproject.toml declares {req.name}{declared[req.name]}"
        )


def test_ci_versions_torch_is_in_range_and_runs_after_make_test() -> None:
    (torch_line,) = re.findall(r"^TORCH=(\S+)$", CI_SCRIPT.read_text(encoding="utf-8"), re.MULTILINE)
    torch = Requirement(torch_line)
    (exact,) = [s.version for s in torch.specifier if s.operator == "=="]
    assert torch.name == "torch" and exact in _declared()["torch"]
    run = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert run.index("bash .ci/versions") > run.index("make test")
