"""Learning-rate scaling rules for a changed batch size (the batch-size optimizer's companions).

When the batch-size optimizer picks another batch size than the one a learning rate was tuned
for, the rate is scaled: linearly for SGD (Goyal et al., 2017), by the square root for adaptive
optimizers such as Adam (Hoffer et al., 2017).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["LinearScaler", "SquareRootScaler"]


@dataclass(frozen=True)
class LinearScaler:
    """The learning rate grows in proportion to the batch size.

    Attributes:
        bs: The batch size ``lr`` was tuned for.
        lr: That learning rate.

    Example:
        >>> from zeus_core.optimizer.batch_size import LinearScaler
        >>> LinearScaler(bs=64, lr=0.01).compute_lr(new_bs=256)
        0.04
    """

    bs: int
    lr: float

    def compute_lr(self, new_bs: int) -> float:
        """The learning rate for batch size ``new_bs``."""
        return self.lr * new_bs / self.bs


@dataclass(frozen=True)
class SquareRootScaler:
    """The learning rate grows with the square root of the batch size.

    Attributes:
        bs: The batch size ``lr`` was tuned for.
        lr: That learning rate.

    Example:
        >>> from zeus_core.optimizer.batch_size import SquareRootScaler
        >>> SquareRootScaler(bs=32, lr=1e-3).compute_lr(new_bs=128)
        0.002
    """

    bs: int
    lr: float

    def compute_lr(self, new_bs: int) -> float:
        """The learning rate for batch size ``new_bs``."""
        return self.lr * math.sqrt(new_bs / self.bs)
