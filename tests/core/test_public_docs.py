"""Every public name has a docstring with an example, and every example runs.

The public names are each package face's ``__all__`` and the lazy stubs' exports
(``tests/core/public_api.py``). Examples run with :mod:`doctest` in a fresh interpreter (some change
process-wide state, e.g. ``console.set_enabled``), so they cannot rot.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import REPO_ROOT
from tests.core.public_api import PublicName, docstring_of, public_names

# Faces other helpers are reworking in parallel (issue 27): their names get examples with their
# change; the lead removes each line when it lands.
PENDING: dict[str, str] = {}


def _checked() -> list[PublicName]:
    unique: dict[tuple[str, str], PublicName] = {}
    for entry in public_names():
        if not any(entry.module == p or entry.module.startswith(p + ".") for p in PENDING):
            unique.setdefault((entry.module, entry.name), entry)
    return sorted(unique.values(), key=lambda e: (e.module, e.name))


CHECKED = _checked()


def test_the_public_names_are_found() -> None:
    names = {e.name for e in CHECKED}
    assert {
        "ZeusMonitor",
        "ZeusCallback",
        "SimulatedGPU",
        "get_gpus",
        "TrainingOptions",
        "zeus_cost",
    } <= names
    assert len(CHECKED) > 100


def test_every_public_name_has_a_docstring_with_an_example() -> None:
    missing = [
        f"{e.qualified} (defined in {e.module})" for e in CHECKED if ">>>" not in (docstring_of(e) or "")
    ]
    assert not missing, (
        "public names without an example in their docstring:\n  " + "\n  ".join(missing) + "\nAdd an "
        "'Example:' section with a runnable >>> session (one to three sentences of what and why first)."
    )


_RUNNER = textwrap.dedent(
    """
    import doctest, importlib, sys
    from tests.core.public_api import PublicName, docstring_of
    failures = 0
    for module, name in {pairs!r}:
        entry = PublicName(module, name, module)
        text = docstring_of(entry) or ""
        globs = dict(vars(importlib.import_module(module)))
        test = doctest.DocTestParser().get_doctest(text, globs, f"{{module}}.{{name}}", module, 0)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        runner.run(test, out=sys.stdout.write)
        failures += runner.failures
    sys.exit(1 if failures else 0)
    """
)


def test_every_public_example_runs() -> None:
    pairs = [(e.module, e.name) for e in CHECKED]
    env_script = _RUNNER.format(pairs=pairs)
    out = subprocess.run(
        [sys.executable, "-c", env_script], capture_output=True, text=True, cwd=REPO_ROOT, timeout=600
    )
    assert out.returncode == 0, f"failing examples:\n{out.stdout[-8000:]}\n{out.stderr[-3000:]}"
