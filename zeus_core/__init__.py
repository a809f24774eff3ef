"""Zeus Suite: measure and cut the energy of deep-learning training.

Public names are importable from here and listed once, in ``__init__.pyi``; each loads on first
use, so ``import zeus_core`` imports neither torch nor any framework.
"""

from zeus_core._lazy import attach_stub

__version__ = "0.1.0"

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__, globals(), extra=("__version__",))
