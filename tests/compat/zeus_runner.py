"""Run one of Zeus's documented snippets (``tests/compat/zeus_snippets``) as a Zeus user runs it.

Usage: ``python tests/compat/zeus_runner.py SNIPPET [ARGS...]``, or
``--batch OUT_DIR PARALLEL TIMEOUT_S SNIPPET...`` to run many, each in a child forked after torch
and the library are imported once.

The snippet is Zeus's code with only its ``zeus`` import lines rewritten; its header names what
stands in for what CI lacks:

- ``# gpus: N``: fake NVIDIA A40s (``pynvml`` replaced by the faithful fake; CUDA calls on the CPU).
- ``# stand-ins: yes``: tiny CPU stand-ins for the names a docs fragment leaves to the reader
  (``train_loader``, ``model``, ...; see ``zeus_standins.py``).
- ``# torchvision: fake``: a tiny ``torchvision`` (MNIST/ImageNet-shaped random data, small models).
- ``# services: pushgateway``: a local Pushgateway on port 9091.
- ``# bso-server: HOST:PORT``: ``zeus-suite bso-server`` reached under Zeus's address.
- ``# rapl: fake``: a RAPL powercap tree with packages and their DRAM.
- ``# fsdp: cpu``: FSDP as FSDP2's ``fully_shard`` on a CPU mesh.
- ``# zeusd: ADDRESS...``: one ``zeus-suite daemon`` (4 fake A40s) reached under each ``host:port``
  and socket path; ``# stop-after: NAME N``: another thread calls ``NAME.stop()`` after N snapshots.
- ``# cuda-scale: F``: CUDA tensors F times smaller per side, on the CPU; ``# sleep-scale: F``:
  ``time.sleep(s)`` sleeps ``F * s``; ``# clock: accelerated F``: the GPUs' clock (the monitor's
  windows, the fake NVML's energy counters) runs F times faster than real time and the main
  thread's ``time.sleep`` returns at once, advancing it; ``# master-port: P``: a ``MASTER_PORT``
  fixed to P is a free port.
- ``# capriccio: tiny``: Capriccio-shaped local data and a tiny BERT under ``FOLDER`` (argv;
  ``# cwd: FOLDER``: run there); ``# clm: tiny``: a tiny GPT-2, text files and the names
  transformers 5 removed, under ``FOLDER`` (see ``install_clm``); ``# ipinfo: LAT,LON``:
  ``ipinfo.io`` answered locally; ``# traces: nsdi23``: Zeus's ``trace/`` folder of the NSDI '23
  traces under ``FOLDER``, copied from those ``zeus_core.data`` ships (``nsdi23 alibaba-synthetic``:
  and an Alibaba group trace of synthetic rows, see ``install_nsdi23_traces``).
- ``# before: CODE; CODE``: what a docs fragment leaves out (the page's import lines, rewritten;
  its ``# ...``). A ``...`` argument (Zeus's "your arguments here", as in
  ``Trainer(..., callbacks=[plo])``) becomes the stand-in's arguments (``__stand_in_arguments__``).
- ``# env: K=V ...``: the environment that Zeus's job file sets; ``# tensorboardX: fake``: a
  ``SummaryWriter`` that drops what it is given; ``# argv: ARGS``: the example's command line
  (small sizes, ``-j 0``).
- ``# expect: NAME``: Zeus itself ends with exception ``NAME`` on such a machine (e.g. ``get_soc()``
  without an SoC), and so must the snippet.

Nothing in the snippet's own lines is changed.
"""

from __future__ import annotations

import ast
import asyncio
import faulthandler
import inspect
import os
import signal
import sys
import tempfile
import textwrap
import time
import types
from pathlib import Path
from typing import Callable

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
    if ctrl_c_after_s > 0:  # Python's own Ctrl-C handler, even where the launcher ignored SIGINT (`cmd &`)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        threading.Timer(ctrl_c_after_s, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        if e.code not in (0, None):
            raise


def run_snippet(path: str, args: list[str]) -> None:
    """Run one snippet in this process, with the stand-ins its header asks for."""
    text = Path(path).read_text()
    meta = header(text)
    args = args or meta.get("argv", "").split()  # the command line a user would give (small sizes)
    if meta.get("capriccio") == "tiny":  # local data and model: FOLDER in the command line
        folder = zeus_standins.install_capriccio()
        args = [a.replace("FOLDER", folder) for a in args]
    if meta.get("clm") == "tiny":  # a tiny GPT-2 and text: FOLDER in the command line
        folder = zeus_standins.install_clm()
        args = [a.replace("FOLDER", folder) for a in args]
    if meta.get("traces", "").startswith("nsdi23"):  # Zeus's trace/ folder, from zeus_core.data's traces
        folder = zeus_standins.install_nsdi23_traces(alibaba="alibaba-synthetic" in meta["traces"])
    if meta.get("cwd") == "FOLDER":  # the files are where the docs' relative paths look
        os.chdir(folder)
    # Each snippet is a machine of its own (its own fake GPUs, whose UUIDs every process shares): its
    # own per-GPU settings record, shared by the ranks of one torchrun job only.
    job = os.environ["MASTER_PORT"] if "LOCAL_RANK" in os.environ else str(os.getpid())
    base = Path(os.environ.get("ZEUS_SUITE_RUN_DIR") or tempfile.gettempdir())
    run_dir = base / f"zeus-compat-{job}"
    run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.environ["ZEUS_SUITE_RUN_DIR"] = str(run_dir)
    gpus = int(meta.get("gpus", "1"))
    clock: Callable[[], float] = time.time
    if meta.get("clock"):  # accelerated FACTOR: the GPUs' time (and the fake's counters) runs faster
        kind, factor = meta["clock"].split()
        assert kind == "accelerated", meta["clock"]
        clock = zeus_standins.accelerated_clock(float(factor))
    sys.modules["pynvml"] = FakeNVML([FakeGPUSpec.a40() for _ in range(gpus)], clock=clock)  # type: ignore[assignment]
    zeus_standins.cuda_on_cpu(gpus)
    if meta.get("torchvision") == "fake":
        zeus_standins.install_fake_torchvision()
    if "pushgateway" in meta.get("services", ""):
        zeus_standins.start_pushgateway()
    for assignment in meta.get("env", "").split():  # the environment Zeus's job file (YAML) sets
        key, _, value = assignment.partition("=")
        os.environ[key] = value
    if meta.get("tensorboardX") == "fake":
        zeus_standins.install_fake_tensorboardx()
    if meta.get("bso-server"):
        zeus_standins.start_bso_server(meta["bso-server"])
    if meta.get("cuda-scale"):
        zeus_standins.scale_cuda_tensors(int(meta["cuda-scale"]))
    if meta.get("sleep-scale"):
        zeus_standins.scale_sleep(float(meta["sleep-scale"]))
    if meta.get("master-port"):
        zeus_standins.remap_master_port(meta["master-port"])
    if meta.get("ipinfo"):
        zeus_standins.start_ipinfo(meta["ipinfo"])
    if meta.get("zeusd"):
        zeus_standins.start_zeusd(meta["zeusd"].split())
    if meta.get("fsdp") == "cpu":
        zeus_standins.fsdp_on_cpu()
    if meta.get("rapl") == "fake":
        zeus_standins.fake_rapl()
    if meta.get("jax") == "fake":
        zeus_standins.install_fake_jax()
    main = types.ModuleType("__main__")  # the snippet is the program's __main__, as `python FILE` makes it
    main.__file__ = path
    sys.modules["__main__"] = main  # (typing.get_type_hints and pickle look names up there)
    namespace: dict[str, object] = main.__dict__
    if meta.get("stand-ins") == "yes":
        namespace.update(zeus_standins.names())
    if meta.get("stop-after"):  # NAME N: another thread stops client NAME after N snapshots
        name, readings = meta["stop-after"].split()
        zeus_standins.stop_after(namespace, name, int(readings))
    for line in meta.get("before", "").split(";"):  # the page's imports, or its elided `# ...` part
        exec(line.strip(), namespace)  # noqa: S102
    if path.endswith(".sh"):  # a module-style command: `python -m MODULE ARGS`, stopped by Ctrl-C
        run_command(text.split("# ---\n", 1)[1].strip(), float(meta.get("ctrl-c", "0")))
        return
    sys.argv = [path, *args]
    body = textwrap.dedent(text.split("# ---\n", 1)[1])
    tree = ast.parse(body, path)
    for node in ast.walk(
        tree
    ):  # Zeus's `Trainer(..., callbacks=[...])`: `...` stands for the reader's arguments
        if isinstance(node, ast.Call) and any(
            isinstance(a, ast.Constant) and a.value is Ellipsis for a in node.args
        ):
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


def run_batch(out_dir: Path, paths: list[str], parallel: int, timeout_s: float) -> None:
    """Run each snippet in a child forked from this process (torch and the library imported once).

    Writes ``out_dir/<name>.log`` (stdout and stderr) and ``out_dir/<name>.rc`` per snippet.
    """
    import time
    import traceback

    import torch  # noqa: F401  (imported once, before forking)

    import zeus_core.compat.metric  # noqa: F401
    import zeus_core.compat.monitor  # noqa: F401
    import zeus_core.compat.optimizer.power_limit  # noqa: F401

    out_dir.mkdir(parents=True, exist_ok=True)
    pending = list(paths)
    running: dict[int, tuple[str, float]] = {}
    while pending or running:
        while pending and len(running) < parallel:
            path = pending.pop(0)
            log = out_dir / (Path(path).stem + ".log")
            pid = os.fork()
            if pid == 0:  # the child: one snippet, then its exit hooks, as a process of its own
                fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                code = 0
                try:
                    run_snippet(path, [])
                except SystemExit as e:
                    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                except BaseException:
                    traceback.print_exc()
                    code = 1
                import atexit

                atexit._run_exitfuncs()
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
            running[pid] = (path, time.monotonic())
        done, status = os.waitpid(-1, os.WNOHANG)
        if done == 0:
            for pid, (path, started) in list(running.items()):
                if time.monotonic() - started > timeout_s:
                    os.kill(pid, 9)
            time.sleep(0.05)
            continue
        path, _ = running.pop(done)
        rc = os.waitstatus_to_exitcode(status)
        (out_dir / (Path(path).stem + ".rc")).write_text(str(rc))


def main() -> None:
    # SIGUSR1 prints every thread's stack (run_torchrun sends it to a job that hangs), here and in
    # the processes forked from here (DataLoader workers).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    if sys.argv[1] == "--batch":  # --batch OUT_DIR PARALLEL TIMEOUT_S SNIPPET...
        run_batch(Path(sys.argv[2]), sys.argv[5:], int(sys.argv[3]), float(sys.argv[4]))
        return
    path, *args = sys.argv[1:]
    run_snippet(path, args)


if __name__ == "__main__":
    main()
