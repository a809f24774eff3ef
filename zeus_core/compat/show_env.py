"""``python -m zeus.show_env`` as ``python -m zeus_core.show_env``: what Zeus Suite finds on this machine.

Prints the Python and package versions Zeus prints (Zeus Suite, PyTorch, JAX, CuPy), then the
suite's device report (``zeus-suite env``): GPUs, CPUs (RAPL), the daemon, and for each missing
kind of device why and the fix.

Example:
    >>> from zeus_core.compat.show_env import show_env
    >>> show_env()  # doctest: +SKIP
    Python version: 3.11.9
    ...
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import platform
import sys
from typing import Sequence

__all__ = ["show_env", "main"]


def _version(distribution: str, module: str) -> str:
    if importlib.util.find_spec(module) is None:
        return "not installed"
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "installed"


def show_env(argv: Sequence[str] = ()) -> int:
    """Print the environment report; returns 0 (missing devices are reported, not errors).

    Example:
        >>> from zeus_core.compat.show_env import show_env
        >>> callable(show_env)
        True
    """
    from zeus_core.device import _cli_env

    print(f"Python version: {platform.python_version()}")
    for name, distribution, module in (
        ("Zeus Suite", "zeus-suite", "zeus_core"),
        ("PyTorch", "torch", "torch"),
        ("JAX", "jax", "jax"),
        ("CuPy", "cupy", "cupy"),
    ):
        print(f"{name} version: {_version(distribution, module)}")
    print()
    parser = argparse.ArgumentParser(prog="python -m zeus_core.show_env")
    _cli_env.add_arguments(parser)
    return int(_cli_env.run(parser.parse_args(list(argv))) or 0)


def main() -> int:
    """``python -m zeus_core.show_env [zeus-suite env options]``."""
    return show_env(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
