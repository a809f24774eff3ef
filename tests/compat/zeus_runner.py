"""Run one of Zeus's documented snippets (``tests/compat/zeus_snippets``) as a Zeus user runs it.

Usage: ``python tests/compat/zeus_runner.py SNIPPET [ARGS...]``.

The snippet is Zeus's code with only its ``zeus`` import lines rewritten; its header names what
stands in for what CI lacks: ``# gpus: N`` fake NVIDIA A40s (``pynvml`` replaced by the faithful
fake), ``# stand-ins: yes`` tiny CPU stand-ins for the names a docs fragment leaves to the reader
(``train_loader``, ``model``, ...; see ``zeus_standins.py``), ``# torchvision: fake`` a tiny
``torchvision`` (MNIST/ImageNet-shaped random data, small models), ``# services: pushgateway`` a
local Pushgateway on port 9091, ``# bso-server: HOST:PORT`` ``zeus-suite bso-server`` reached
under Zeus's address, ``# rapl: fake`` a RAPL powercap tree with one package and its
DRAM. ``# before: CODE; CODE``: what a
docs fragment leaves out (the page's import lines, rewritten; its ``# ...``). A ``...`` argument
(Zeus's "your arguments here", as in ``Trainer(..., callbacks=[plo])``) becomes the stand-in's
arguments (``__stand_in_arguments__``). ``# expect: NAME``: Zeus itself ends with exception ``NAME`` on such a machine (e.g.
``get_soc()`` without an SoC), and so must the snippet. Nothing in the snippet's own lines is changed.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

import zeus_standins  # noqa: E402

from zeus_core.testing import FakeGPUSpec, FakeNVML  # noqa: E402


def header(text: str) -> dict[str, str]:
    """The ``# key: value`` lines above ``# ---``."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# ---"):
            break
        key, _, value = line[2:].partition(":")
        out[key.strip()] = value.strip()
    return out


def run_command(line: str, ctrl_c_after_s: float) -> None:
    """Run ``python -m MODULE ARGS`` in this process; Ctrl-C (SIGINT) after ``ctrl_c_after_s`` if > 0."""
    import runpy
    import shlex
    import signal
    import threading

    python, flag, module, *args = shlex.split(line)
    assert (python, flag) == ("python", "-m"), line
    if ctrl_c_after_s > 0:
        threading.Timer(ctrl_c_after_s, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        if e.code not in (0, None):
            raise


def main() -> None:
    path, *args = sys.argv[1:]
    text = Path(path).read_text()
    meta = header(text)
    gpus = int(meta.get("gpus", "1"))
    sys.modules["pynvml"] = FakeNVML([FakeGPUSpec.a40() for _ in range(gpus)])  # type: ignore[assignment]
    zeus_standins.cuda_on_cpu(gpus)
    if meta.get("torchvision") == "fake":
        zeus_standins.install_fake_torchvision()
    if "pushgateway" in meta.get("services", ""):
        zeus_standins.start_pushgateway()
    if meta.get("bso-server"):
        zeus_standins.start_bso_server(meta["bso-server"])
    if meta.get("rapl") == "fake":
        zeus_standins.fake_rapl()
    if meta.get("jax") == "fake":
        zeus_standins.install_fake_jax()
    namespace: dict[str, object] = {"__name__": "__main__", "__file__": path}
    if meta.get("stand-ins") == "yes":
        namespace.update(zeus_standins.names())
    for line in meta.get("before", "").split(";"):  # the page's imports, or its elided `# ...` part
        exec(line.strip(), namespace)  # noqa: S102
    if path.endswith(".sh"):  # a module-style command: `python -m MODULE ARGS`, stopped by Ctrl-C
        run_command(text.split("# ---\n", 1)[1].strip(), float(meta.get("ctrl-c", "0")))
        return
    sys.argv = [path, *args]
    body = textwrap.dedent(text.split("# ---\n", 1)[1])
    tree = ast.parse(body, path)
    for node in ast.walk(tree):  # Zeus's `Trainer(..., callbacks=[...])`: `...` stands for the reader's arguments
        if isinstance(node, ast.Call) and any(isinstance(a, ast.Constant) and a.value is Ellipsis for a in node.args):
            node.args = [a for a in node.args if not (isinstance(a, ast.Constant) and a.value is Ellipsis)]
            node.keywords.append(ast.keyword(arg=None, value=ast.Name("__stand_in_arguments__", ast.Load())))
            namespace["__stand_in_arguments__"] = zeus_standins.trainer_arguments()
    ast.fix_missing_locations(tree)
    lines = [""] * (text.split("# ---\n", 1)[0].count("\n") + 1)  # keep the file's line numbers in tracebacks
    tree = ast.increment_lineno(tree, len(lines))
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT  # a notebook cell's `async for` runs as a notebook runs it
    code = compile(tree, path, "exec", flags=flags)
    expect = meta.get("expect")
    try:
        result = eval(code, namespace)  # noqa: S307 - the snippet under test
        if inspect.iscoroutine(result):
            asyncio.run(result)
    except Exception as e:
        if expect is None or type(e).__name__ != expect:
            raise
        print(f"[zeus_runner] raised {expect} as Zeus does: {e}", file=sys.stderr)
    else:
        if expect is not None:
            raise SystemExit(f"[zeus_runner] expected {expect}, as Zeus raises here; nothing was raised")
    sys.stdout.flush()
    os._exit(0) if meta.get("exit") == "hard" else None


if __name__ == "__main__":
    main()
